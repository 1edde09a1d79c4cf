package workflows

import (
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/temporalx"
	"github.com/flotilla-gitops/flotilla/internal/webhook"
)

func (g *gitRepo) loop(ctx workflow.Context, in GitRepoInput) error {
	for {
		if err := workflow.Await(ctx, func() bool { return g.due(ctx) }); err != nil {
			return err
		}
		done, err := g.step(ctx, in)
		if done || err != nil {
			return err
		}
	}
}

// due reports whether the loop has something to do.
func (g *gitRepo) due(ctx workflow.Context) bool {
	if g.s.GitRepo == nil {
		return g.s.Deleting
	}
	idle := g.running == ""
	return g.s.ResolveDue ||
		(idle && g.s.Deleting) ||
		(idle && g.rolloutDue()) ||
		(!idle && g.started && !g.superseding && (g.s.Deleting || (g.s.Dirty && !g.s.Paused))) ||
		(idle && g.continueAsNew(ctx))
}

// rolloutDue: a change waits to be rolled out and may be.
func (g *gitRepo) rolloutDue() bool { return g.s.Dirty && !g.s.Paused && g.s.LatestCommit != "" }

// step does the one thing due, most urgent first; done reports that the
// workflow ends (deleted, or continued as new with err).
func (g *gitRepo) step(ctx workflow.Context, in GitRepoInput) (done bool, err error) {
	logger := workflow.GetLogger(ctx)
	switch {
	case g.s.GitRepo == nil && g.s.Deleting:
		return true, nil
	case g.s.ResolveDue && !g.s.Deleting:
		g.resolve(ctx)
	case g.running != "" && g.started && !g.superseding:
		g.superseding = true
		logger.Info("Superseding rollout", "rollout", g.running)
		_ = workflow.SignalExternalWorkflow(ctx, g.running, "", protocol.SignalSupersede, nil).Get(ctx, nil)
	case g.running == "" && g.s.Deleting:
		g.s.ResolveDue = false
		g.startRollout(ctx, true)
		if err := g.done.Get(ctx, nil); err != nil {
			return true, err
		}
		logger.Info("GitRepo deleted", "gitrepo", g.ref.String())
		return true, nil
	case g.running == "" && g.rolloutDue():
		g.startRollout(ctx, false)
	case g.running == "" && g.continueAsNew(ctx):
		if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
			return true, err
		}
		if g.drain(ctx) {
			return false, nil // act on them first; continue as new when idle again
		}
		in.State = &g.s
		if g.helmOp() {
			return true, workflow.NewContinueAsNewError(ctx, HelmOpWorkflow, in)
		}
		return true, workflow.NewContinueAsNewError(ctx, GitRepoWorkflow, in)
	default:
		g.s.ResolveDue = false
	}
	return false, nil
}

func (g *gitRepo) continueAsNew(ctx workflow.Context) bool {
	info := workflow.GetInfo(ctx)
	return info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() > historyLimit
}

func (g *gitRepo) startRollout(ctx workflow.Context, del bool) {
	commit := g.s.LatestCommit
	in := RolloutInput{GitRepo: g.ref, Spec: g.s.GitRepo.Spec, Commit: commit, Generation: g.s.Generation,
		Inventory: g.s.Inventory, Delete: del, Repair: g.s.Repair}
	g.s.Dirty, g.s.Repair = false, false
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
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:            id,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		StaticSummary:         summary,
		TypedSearchAttributes: temporal.NewSearchAttributes(
			temporalx.KeyGitRepo.ValueSet(g.ref.String()),
			temporalx.KeyCommit.ValueSet(commit),
			temporalx.KeyRepoURL.ValueSet(webhook.SearchKey(g.s.GitRepo.Spec.Repo)),
			temporalx.KeyState.ValueSet("Rolling"),
		),
	})
	g.running, g.superseding, g.started = id, false, false
	g.runningCommit, g.runningGeneration = commit, g.s.Generation
	child := workflow.ExecuteChildWorkflow(cctx, RolloutWorkflow, in)
	future, settle := workflow.NewFuture(ctx)
	g.done = future
	workflow.Go(ctx, func(ctx workflow.Context) {
		_ = child.GetChildWorkflowExecution().Get(ctx, nil) // a failed start shows in child.Get
		g.started = true
		var res RolloutResult
		err := child.Get(ctx, &res)
		g.finish(ctx, id, res, err)
		settle.Set(nil, err)
	})
}

func (g *gitRepo) finish(ctx workflow.Context, id string, res RolloutResult, err error) {
	g.running, g.superseding, g.s.LastRollout = "", false, id
	g.finished++
	if g.gathering != 0 {
		// Cluster changes gathered during the rollout: the next one
		// takes them now.
		g.gathering = 0
		g.s.Dirty = true
	}
	switch {
	case err != nil:
		g.s.Error = "rollout " + id + ": " + activityMessage(err)
		g.s.Dirty = true
	case res.Error != "":
		g.s.Error = res.Error
		if res.Permanent {
			// Polling will not retry it; a new commit, spec or sync will.
			g.s.FailedCommit, g.s.FailedGeneration = res.Commit, res.Generation
		}
	default:
		g.s.Error = ""
		prev := g.s.Inventory
		g.s.Inventory, g.s.Deployments = res.Inventory, res.Deployments
		g.keepLive(prev)
		defer g.sendWatch(ctx)
		g.s.Halts, g.s.Waits, g.s.Warnings = res.Halts, res.Waits, res.Warnings
		if len(res.Halts) > 0 && !res.Superseded {
			// Polling does not redeploy what just failed and was rolled
			// back; a new commit, spec or sync does.
			g.s.FailedCommit, g.s.FailedGeneration = res.Commit, res.Generation
		}
		if !res.Superseded {
			g.s.Commit, g.s.ObservedGeneration = res.Commit, res.Generation
		} else {
			g.s.Dirty = true
		}
		if g.refreshDue() && g.s.Webhooks > 0 {
			g.pollReset++ // back from the webhook pace to refresh them
		}
	}
	g.upsert(ctx)
}
