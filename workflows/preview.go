package workflows

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/flotilla-gitops/flotilla/activities"
	"github.com/flotilla-gitops/flotilla/internal/plan"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
)

// previewReportOptions: the Git host's API (commit statuses, comments).
// A refused request is not retried (the workflow goes on with the next
// step); a rate limit waits as long as the host says.
func previewReportOptions() workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: 2 * time.Second, MaximumInterval: time.Minute, MaximumAttempts: 5,
			NonRetryableErrorTypes: []string{activities.ErrTypeGitHostRefused, activities.ErrTypeSecretNotFound}},
	}
}

// previewPlanTimeout bounds one plan of a head.
const previewPlanTimeout = 15 * time.Minute

// PreviewWorkflow previews one pull request for one GitRepo
// (protocol.PreviewID). Each head it is signalled (protocol.SignalPreview)
// is planned once: the commit status goes pending, the PlanWorkflow runs
// as a child, the plan is posted as the PR comment (the same comment,
// updated, on every head) and the status ends success or failure. Heads
// arriving while a plan runs are coalesced: only the newest is planned
// next. A close event ends the workflow. Reports that fail (the host
// refuses the token) are logged and do not stop the preview.
func PreviewWorkflow(ctx workflow.Context, in protocol.PreviewStart) (protocol.PreviewState, error) {
	p := &preview{in: in, s: in.State}
	if err := workflow.SetQueryHandler(ctx, protocol.QueryPreview, func() (protocol.PreviewState, error) { return p.s, nil }); err != nil {
		return p.s, err
	}
	ch := workflow.GetSignalChannel(ctx, protocol.SignalPreview)
	for {
		p.drain(ch)
		if p.closed {
			workflow.GetLogger(ctx).Info("Pull request closed: preview ends", "gitrepo", p.gitRepo(), "pr", in.Number)
			return p.s, nil
		}
		head := p.s.Pending
		p.s.Pending = nil
		if head != nil && head.Commit != p.s.Planned {
			p.run(ctx, *head)
			continue
		}
		if historyFull(ctx) {
			in.State = p.s
			return p.s, workflow.NewContinueAsNewError(ctx, PreviewWorkflow, in)
		}
		var h protocol.PreviewHead
		ch.Receive(ctx, &h)
		p.take(h)
	}
}

// preview is a PreviewWorkflow's state.
type preview struct {
	in     protocol.PreviewStart
	s      protocol.PreviewState
	closed bool
}

func (p *preview) gitRepo() string { return p.in.Namespace + "/" + p.in.Name }

// take records a pull request event: the newest head replaces any head
// not planned yet.
func (p *preview) take(h protocol.PreviewHead) {
	if h.Action == protocol.PreviewClose {
		p.closed = true
		return
	}
	if h.Commit == "" {
		return
	}
	cfg := h
	cfg.Action, cfg.Commit, cfg.Ref, cfg.Delivery = "", "", "", ""
	p.s.Config = cfg
	p.s.Pending = &h
}

// drain takes every signal already received, without blocking.
func (p *preview) drain(ch workflow.ReceiveChannel) {
	for {
		var h protocol.PreviewHead
		if !ch.ReceiveAsync(&h) {
			return
		}
		p.take(h)
	}
}

// target is where reports go, from the newest event's settings.
func (p *preview) target() activities.PreviewTarget {
	c := p.s.Config
	provider := c.Previews.Provider
	if provider == "" {
		provider = c.Provider
	}
	return activities.PreviewTarget{Namespace: p.in.Namespace, GitRepo: p.in.Name, Number: p.in.Number, Provider: provider,
		RepoURL: c.RepoURL, APIURL: c.Previews.APIURL, SecretName: c.Previews.SecretName}
}

// run plans head and reports it: Step 1 pending status, Step 2 the plan,
// Step 3 the comment, Step 4 the final status.
func (p *preview) run(ctx workflow.Context, head protocol.PreviewHead) {
	logger := workflow.GetLogger(ctx)
	t := p.target()
	p.status(ctx, t, head.Commit, activities.PreviewPending, "planning…")

	res, err := p.plan(ctx, head)
	state, desc, body := previewOutcome(res, err) //workflowcheck:ignore renders into a strings.Builder: the same text on every replay
	if err != nil {
		logger.Warn("Plan of a pull request failed", "gitrepo", p.gitRepo(), "pr", p.in.Number, "commit", head.Commit, "error", err)
	}
	var id int64
	actx := workflow.WithActivityOptions(ctx, previewReportOptions())
	cerr := workflow.ExecuteActivity(actx, (*activities.Activities).PreviewComment,
		activities.PreviewCommentInput{Target: t, CommentID: p.s.CommentID, Body: body}).Get(ctx, &id)
	if cerr != nil {
		logger.Warn("Cannot post the preview comment", "gitrepo", p.gitRepo(), "pr", p.in.Number, "error", cerr)
	} else {
		p.s.CommentID = id
	}
	p.status(ctx, t, head.Commit, state, desc)
	p.s.Planned, p.s.Summary = head.Commit, desc
	p.s.Plans++
}

// plan runs the PlanWorkflow for head as a child.
func (p *preview) plan(ctx workflow.Context, head protocol.PreviewHead) (plan.Result, error) {
	sha := head.Commit
	if len(sha) > 12 {
		sha = sha[:12]
	}
	id := plan.WorkflowIDPrefix + p.in.Namespace + "/" + p.in.Name + "/pr-" + strconv.Itoa(p.in.Number) + "-" + sha +
		"-" + strconv.Itoa(p.s.Plans+1)
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:               id,
		WorkflowExecutionTimeout: previewPlanTimeout,
		ParentClosePolicy:        enumspb.PARENT_CLOSE_POLICY_TERMINATE,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
	})
	req := plan.Request{Namespace: p.in.Namespace, Name: p.in.Name, Commit: head.Commit, Ref: head.Ref,
		Source: "pull request #" + strconv.Itoa(p.in.Number)}
	var res plan.Result
	err := workflow.ExecuteChildWorkflow(cctx, plan.WorkflowName, req).Get(ctx, &res)
	return res, err
}

// status sets a commit status; a failure is logged.
func (p *preview) status(ctx workflow.Context, t activities.PreviewTarget, commit, state, desc string) {
	actx := workflow.WithActivityOptions(ctx, previewReportOptions())
	err := workflow.ExecuteActivity(actx, (*activities.Activities).PreviewStatus,
		activities.PreviewStatusInput{Target: t, Commit: commit, State: state, Description: desc}).Get(ctx, nil)
	if err != nil {
		workflow.GetLogger(ctx).Warn("Cannot set the preview's commit status", "gitrepo", p.gitRepo(), "pr", p.in.Number,
			"state", state, "error", err)
	}
}

// previewOutcome is the status state, its description and the comment
// for a plan (or the error planning it).
func previewOutcome(res plan.Result, err error) (state, desc, body string) {
	if err != nil {
		msg := err.Error()
		var ae *temporal.ApplicationError
		if errors.As(err, &ae) && ae.Message() != "" {
			msg = ae.Message()
		}
		return activities.PreviewError, "the plan failed: " + msg,
			"### Flotilla could not plan this pull request\n\n> ❌ " + strings.Join(strings.Fields(msg), " ") + "\n"
	}
	body = plan.Markdown(res, plan.GitHubCommentLimit)
	desc = previewSummary(res)
	if res.Counts().Errors > 0 {
		return activities.PreviewFailure, desc, body
	}
	return activities.PreviewSuccess, desc, body
}

// previewSummary is the status description: "3 clusters: 2 upgrade, 1
// install", "3 clusters: no changes", with offline clusters and failures
// to plan counted.
func previewSummary(r plan.Result) string {
	n := r.Counts()
	var parts []string
	for _, c := range []struct {
		n    int
		word string
	}{{n.Upgrade, "upgrade"}, {n.Install, "install"}, {n.Uninstall, "uninstall"}, {n.Errors, "failed to plan"}} {
		if c.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c.n, c.word))
		}
	}
	what := "no changes"
	if len(parts) > 0 {
		what = strings.Join(parts, ", ")
	}
	s := fmt.Sprintf("%d clusters: %s", len(r.Clusters), what)
	if len(r.Clusters) == 1 {
		s = "1 cluster: " + what
	}
	if n.Offline > 0 {
		s += fmt.Sprintf(" (%d offline)", n.Offline)
	}
	return s
}
