package workflows

import (
	"errors"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/flotilla-gitops/flotilla/activities"
	"github.com/flotilla-gitops/flotilla/internal/history"
	"github.com/flotilla-gitops/flotilla/internal/loop"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/rollout"
	"github.com/flotilla-gitops/flotilla/internal/status"
	"github.com/flotilla-gitops/flotilla/internal/temporalx"
	"github.com/flotilla-gitops/flotilla/internal/webhook"
)

func (g *gitRepo) loop(ctx workflow.Context, in GitRepoInput) error {
	for {
		if err := workflow.Await(ctx, func() bool { return loop.Decide(g.loopState(ctx)) != loop.Wait }); err != nil {
			return err
		}
		done, err := g.step(ctx, in, loop.Decide(g.loopState(ctx)))
		if done || err != nil {
			return err
		}
	}
}

// loopState describes the workflow to loop.Decide.
func (g *gitRepo) loopState(ctx workflow.Context) loop.State {
	return loop.State{
		Applied:      g.s.GitRepo != nil,
		Deleting:     g.s.Deleting,
		Paused:       g.s.Paused,
		ResolveDue:   g.s.ResolveDue,
		Changed:      g.s.Dirty,
		RetryDue:     g.s.RetryDue,
		CommitKnown:  g.s.LatestCommit != "",
		Rollout:      loop.Rollout{Running: g.running != "", Started: g.started, Superseding: g.superseding},
		HistoryFull:  g.historyFull(ctx),
		CarryRollout: g.longLived,
	}
}

// step does what loop.Decide chose; done reports that the workflow ends
// (deleted, or continued as new with err).
func (g *gitRepo) step(ctx workflow.Context, in GitRepoInput, action loop.Action) (done bool, err error) {
	logger := workflow.GetLogger(ctx)
	switch action {
	case loop.End:
		return true, nil
	case loop.Resolve:
		if g.refused(ctx) {
			g.s.ResolveDue = false
			g.resolved++ // the poller waits for a check of the remote
			break
		}
		g.resolve(ctx)
	case loop.Supersede:
		g.superseding = true
		logger.Info("Superseding rollout", "rollout", g.running)
		_ = workflow.SignalExternalWorkflow(ctx, g.running, "", protocol.SignalSupersede, nil).Get(ctx, nil)
	case loop.Delete:
		g.s.ResolveDue = false
		g.startRollout(ctx, true)
		if err := g.done.Get(ctx, nil); err != nil {
			return true, err
		}
		logger.Info("GitRepo deleted", "gitrepo", g.ref.String())
		return true, nil
	case loop.Start:
		if g.refused(ctx) {
			g.hold(ctx)
			break
		}
		g.startRollout(ctx, false)
	case loop.ContinueAsNew:
		return g.continueAsNew(ctx, in)
	}
	return false, nil
}

// continueAsNew ends the run and carries its state, and the rollout in
// flight if any, to a new run; it acts on signals that arrived meanwhile
// first.
func (g *gitRepo) continueAsNew(ctx workflow.Context, in GitRepoInput) (bool, error) {
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return true, err
	}
	if g.drain(ctx) {
		return false, nil // act on them first; continue as new when due again
	}
	if g.gathering != 0 {
		// Cluster changes gathered while the rollout runs: the new run
		// supersedes it for them at once.
		g.gathering = 0
		g.s.Dirty = true
	}
	if g.running != "" && g.reported != nil && g.finishReported {
		// The rollout reported its result; this run waits only for it
		// to close. The next run would wait for a report that came
		// here: finish it now, and continue as new when due again.
		g.finish(ctx, g.running, *g.reported, nil)
		return false, nil
	}
	if g.running != "" {
		r := g.cur
		r.ID, r.Superseding = g.running, g.superseding
		g.s.Running = &r
		workflow.GetLogger(ctx).Info("Continuing as new while a rollout runs; it reports to the new run", "rollout", g.running)
	}
	// A cluster out of contact that runs nothing of the GitRepo's any more
	// is not carried: its workflow tells again should that change.
	g.s.OutOfContact = slices.DeleteFunc(g.s.OutOfContact, func(c status.ClusterContact) bool {
		return !slices.ContainsFunc(g.s.Deployments, func(d status.Deployment) bool { return d.Cluster == c.Cluster })
	})
	in.State = &g.s
	if g.helmOp() {
		return true, workflow.NewContinueAsNewError(ctx, HelmOpWorkflow, in)
	}
	return true, workflow.NewContinueAsNewError(ctx, GitRepoWorkflow, in)
}

// historyFull reports whether the run's history reached its budget (or
// Temporal suggests continuing as new).
func (g *gitRepo) historyFull(ctx workflow.Context) bool {
	info := workflow.GetInfo(ctx)
	return info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() > g.budget
}

func (g *gitRepo) startRollout(ctx workflow.Context, del bool) {
	commit := g.target()
	in := RolloutInput{GitRepo: g.ref, Spec: g.spec(), Commit: commit, Generation: g.s.Generation,
		Inventory: g.s.Inventory, Delete: del, Repair: g.s.Repair}
	g.s.Dirty, g.s.Repair, g.s.RetryDue = false, false, false
	if g.s.ApprovalsCommit == commit {
		in.Approvals = g.s.Approvals
	}
	if !del {
		in.ApprovedDeletions = g.s.DeletionsApproved
	}
	id, opts := g.rolloutOptions(commit, del)
	if g.longLived {
		// The rollout outlives this run when it continues as new: it
		// reports its plan and its result to the GitRepo's current run.
		opts.ParentClosePolicy = enumspb.PARENT_CLOSE_POLICY_ABANDON
		in.ReportTo = g.id
	}
	g.running, g.superseding, g.started = id, false, false
	g.owned, g.closed = true, false
	g.cur = RunningRollout{ID: id, Commit: commit, Generation: g.s.Generation, LiveSeq: g.s.LiveSeq, Repair: in.Repair,
		DeletionApprovals: g.s.DeletionApprovals, Kind: history.KindRollout, Trigger: g.takeTrigger(), Start: workflow.Now(ctx).UTC()}
	if g.cur.Trigger.Kind == history.TriggerRollback && !del {
		g.cur.Kind = history.KindRollback
	}
	g.await(ctx, id)
	if !del {
		g.rolloutStarted(ctx)
	}
	if !g.longLived {
		child := workflow.ExecuteChildWorkflow(workflow.WithChildOptions(ctx, opts), RolloutWorkflow, in)
		workflow.Go(ctx, func(ctx workflow.Context) {
			_ = child.GetChildWorkflowExecution().Get(ctx, nil) // a failed start shows in child.Get
			if g.running == id {
				g.started = true
			}
			var res RolloutResult
			err := child.Get(ctx, &res)
			g.finish(ctx, id, res, err)
		})
		return
	}
	g.reported = nil
	workflow.Go(ctx, func(ctx workflow.Context) { g.runChild(ctx, id, opts, in) })
}

// rolloutOptions names the rollout of commit (del: the one that removes
// everything) and returns its child workflow options.
func (g *gitRepo) rolloutOptions(commit string, del bool) (string, workflow.ChildWorkflowOptions) {
	id := protocol.RolloutID(g.ref.Namespace, g.ref.Name, commit, g.s.Generation)
	if g.helmOp() {
		id = "rollout/helmop/" + strings.TrimPrefix(id, "rollout/")
	}
	if del {
		id += "-delete"
	}
	summary := "roll out " + g.ref.String() + " at " + shortCommit(commit)
	if g.helmOp() {
		summary = "roll out " + g.ref.Title() + " at chart version " + commit
	}
	if del {
		summary = "remove everything " + g.ref.String() + " deployed"
	}
	return id, workflow.ChildWorkflowOptions{
		WorkflowID:            id,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		StaticSummary:         summary,
		TypedSearchAttributes: temporal.NewSearchAttributes(
			temporalx.KeyGitRepo.ValueSet(g.ref.String()),
			temporalx.KeyCommit.ValueSet(commit),
			temporalx.KeyRepoURL.ValueSet(webhook.SearchKey(g.s.GitRepo.Spec.Repo)),
			temporalx.KeyState.ValueSet("Rolling"),
		),
	}
}

// runChild starts rollout id as an abandoned child and finishes it when
// both its result (a signal, sent before it ends) and its end are known:
// a rollout of the same ID never starts while this one is still open.
// A start refused because a rollout of that ID still runs (one a
// previous run of this GitRepo adopted and that reported, but has not
// closed yet) is tried again a second later.
func (g *gitRepo) runChild(ctx workflow.Context, id string, opts workflow.ChildWorkflowOptions, in RolloutInput) {
	for {
		child := workflow.ExecuteChildWorkflow(workflow.WithChildOptions(ctx, opts), RolloutWorkflow, in)
		err := child.GetChildWorkflowExecution().Get(ctx, nil)
		var running *temporal.ChildWorkflowExecutionAlreadyStartedError
		if errors.As(err, &running) && g.running == id {
			_ = workflow.NewTimerWithOptions(ctx, time.Second, workflow.TimerOptions{Summary: "wait for " + id + " to close"}).Get(ctx, nil)
			continue
		}
		if g.running == id {
			g.started = true
		}
		var res RolloutResult
		err = child.Get(ctx, &res)
		if g.running != id {
			return
		}
		switch {
		case err != nil:
			g.finish(ctx, id, res, err)
		case !res.Reported:
			g.finish(ctx, id, res, nil) // it could not signal its result
		case g.reported != nil:
			g.finish(ctx, id, *g.reported, nil)
		default:
			// The signal is in the history before the end: its handler
			// finishes the rollout once it runs.
			g.closed = true
		}
		return
	}
}

// await makes g.done the future of rollout id's end.
func (g *gitRepo) await(ctx workflow.Context, id string) {
	future, settle := workflow.NewFuture(ctx)
	g.done, g.settle = future, func(err error) {
		if !future.IsReady() {
			settle.Set(nil, err)
		}
	}
}

// adopt takes over the rollout a previous run started and carried over:
// it reports to this run, which also checks that it still runs (it may
// be terminated, or fail, while no run waits for its end).
func (g *gitRepo) adopt(ctx workflow.Context) {
	r := g.s.Running
	g.s.Running = nil
	if r == nil {
		return
	}
	g.owned, g.closed, g.reported = false, false, nil
	g.running, g.started, g.superseding = r.ID, true, r.Superseding
	g.cur = *r
	g.await(ctx, r.ID)
	workflow.Go(ctx, func(ctx workflow.Context) { g.checkRollout(ctx, r.ID) })
}

// checkRollout asks every rolloutCheckInterval whether an adopted
// rollout still runs, until it reported; one that ended without a report
// (terminated, failed, timed out) ends as failed.
func (g *gitRepo) checkRollout(ctx workflow.Context, id string) {
	var a *activities.Activities
	for g.running == id {
		timerCtx, cancel := workflow.WithCancel(ctx)
		timer := workflow.NewTimerWithOptions(timerCtx, rolloutCheckInterval, workflow.TimerOptions{Summary: "check that " + id + " runs"})
		_ = workflow.Await(ctx, func() bool { return timer.IsReady() || g.running != id })
		cancel()
		if g.running != id {
			return
		}
		var res activities.WorkflowRunResult
		err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, registryOptions), a.WorkflowRun,
			activities.WorkflowRunInput{WorkflowID: id}).Get(ctx, &res)
		if err != nil || res.Running || g.running != id {
			continue
		}
		g.finish(ctx, id, RolloutResult{}, temporal.NewApplicationError("ended without reporting its result ("+res.Status+")", "RolloutLost"))
	}
}

// rolloutReported takes a rollout's report: its plan (every release it
// may deploy or remove, kept until its result comes) or its result.
func (g *gitRepo) rolloutReported(ctx workflow.Context, rep RolloutReport) {
	if rep.ID != g.running {
		return // a rollout that already ended
	}
	if rep.Result == nil {
		g.s.Inflight = rep.Planned
		return
	}
	if g.owned && !g.closed {
		// A child of this run: finished when it has closed, so that the
		// next rollout of the same ID can start.
		g.reported = rep.Result
		return
	}
	g.finish(ctx, rep.ID, *rep.Result, nil)
}

func (g *gitRepo) finish(ctx workflow.Context, id string, res RolloutResult, err error) {
	if g.running != id {
		return // reported already
	}
	since := int64(-1) // keep every report: no repair, or a run before versionLongLived
	if g.longLived && g.cur.Repair {
		since = g.cur.LiveSeq
	}
	g.running, g.superseding, g.s.LastRollout = "", false, id
	g.finished++
	prev, guarded := g.s.Deployments, len(g.s.Guarded)
	defer func() { g.rolloutEnded(ctx, res, err, prev, guarded) }()
	inflight, follow := g.s.Inflight, g.s.Follow
	g.s.Inflight, g.s.Follow = nil, nil
	if g.gathering != 0 {
		// Cluster changes gathered during the rollout: the next one
		// takes them now.
		g.gathering = 0
		g.s.Dirty = true
	}
	defer g.settle(err)
	switch {
	case err != nil:
		g.s.Error = "rollout " + id + ": " + activityMessage(err)
		g.s.Dirty = true
		// What the rollout may have deployed or removed stays known: the
		// next plan removes what is no longer wanted.
		g.s.Inventory = rollout.MergeInventory(g.s.Inventory, inflight)
	case res.Error != "":
		g.s.Error = res.Error
		if res.Permanent {
			// Polling will not retry it; a new commit, spec or sync will.
			g.s.FailedCommit, g.s.FailedGeneration = res.Commit, res.Generation
		}
	default:
		g.took(res, since)
		defer g.sendWatch(ctx)
	}
	g.takeFollow(follow, res, err)
	g.upsert(ctx)
}

// takeFollow makes the commit taken while the rollout ran (f) the
// GitRepo's commit, rendered from the rollout's, when the rollout rolled
// out the commit f was compared with and ended as it should. Otherwise f's
// commit is rolled out, as it would have been had it superseded the
// rollout.
func (g *gitRepo) takeFollow(f *FollowCommit, res RolloutResult, err error) {
	if f == nil {
		return
	}
	if err == nil && res.Error == "" && !res.Superseded && len(res.Halts) == 0 &&
		res.Commit == f.Since && res.Generation == f.Generation && g.s.Commit == f.Since {
		g.s.Commit, g.s.RenderedCommit = f.Commit, f.Since
		return
	}
	g.s.Dirty = true
}

// took takes the result of a rollout that ended without an error: what it
// deployed, where it stopped, and the commit it rolled out (unless
// superseded). since is the live report sequence to keep (keepLive).
func (g *gitRepo) took(res RolloutResult, since int64) {
	g.s.Error = ""
	if res.Commit != g.s.ApprovalsCommit || len(res.Approvals) > 0 {
		g.s.Approvals, g.s.ApprovalsCommit = res.Approvals, res.Commit
	}
	prev := g.s.Inventory
	g.s.Inventory, g.s.Deployments = res.Inventory, res.Deployments
	g.keepLive(prev, since)
	g.s.Halts, g.s.Waits, g.s.Warnings = res.Halts, res.Waits, res.Warnings
	g.deletionsDone(res)
	if len(res.Halts) > 0 && !res.Superseded {
		// Polling does not redeploy what just failed and was rolled
		// back; a new commit, spec or sync does.
		g.s.FailedCommit, g.s.FailedGeneration = res.Commit, res.Generation
	}
	if !res.Superseded {
		g.s.Commit, g.s.ObservedGeneration, g.s.RenderedCommit = res.Commit, res.Generation, ""
	} else {
		g.s.Dirty = true
	}
	if g.refreshDue() && g.s.Webhooks > 0 {
		g.pollReset++ // back from the webhook pace to refresh them
	}
}
