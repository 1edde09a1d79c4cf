package workflows

import (
	"errors"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/flotilla-gitops/flotilla/activities"
	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/status"
	"github.com/flotilla-gitops/flotilla/internal/temporalx"
)

// RolloutInput is one change of a GitRepo to roll out.
type RolloutInput struct {
	GitRepo    activities.GitRepoRef `json:"gitRepo"`
	Spec       api.GitRepoSpec       `json:"spec"`
	Commit     string                `json:"commit"`
	Generation int64                 `json:"generation"`
	// Inventory is what the GitRepo may have deployed so far.
	Inventory []InventoryEntry `json:"inventory,omitempty"`
	// Delete removes everything in the inventory (the GitRepo is deleted).
	Delete bool `json:"delete,omitempty"`
}

// RolloutResult is what the rollout did.
type RolloutResult struct {
	Commit      string              `json:"commit"`
	Generation  int64               `json:"generation"`
	Inventory   []InventoryEntry    `json:"inventory,omitempty"`
	Deployments []status.Deployment `json:"deployments,omitempty"`
	// Superseded is set when a newer change stopped this rollout early;
	// in-flight steps finished, none was started after.
	Superseded bool `json:"superseded,omitempty"`
	// Error is why nothing was rolled out (the commit cannot be rendered);
	// the previous deployments stay.
	Error string `json:"error,omitempty"`
	// Permanent is set when Error will not go away by retrying the same
	// commit and spec (a bad fleet.yaml, refused credentials).
	Permanent bool `json:"permanent,omitempty"`
}

// Rollout phases, reported by the status query.
const (
	phaseRendering = "Rendering"
	phaseTargeting = "Targeting"
	phaseDeploying = "Deploying"
	phaseDone      = "Done"
)

// RolloutWorkflow renders a GitRepo at one commit, deploys every bundle to
// every targeted cluster and removes what is no longer wanted: releases on
// clusters no longer targeted and bundles gone from Git. Each cluster is
// worked independently, so one unreachable cluster delays only itself.
func RolloutWorkflow(ctx workflow.Context, in RolloutInput) (RolloutResult, error) {
	r := &rollout{in: in, id: workflow.GetInfo(ctx).WorkflowExecution.ID,
		st: status.Rollout{Commit: in.Commit, Generation: in.Generation, Phase: phaseRendering}}
	r.st.ID = r.id
	if err := workflow.SetQueryHandler(ctx, protocol.QueryStatus, func() (status.Rollout, error) { return r.st, nil }); err != nil {
		return RolloutResult{}, err
	}
	stopCtx, stop := workflow.WithCancel(ctx)
	workflow.Go(ctx, func(ctx workflow.Context) {
		workflow.GetSignalChannel(ctx, protocol.SignalSupersede).Receive(ctx, nil)
		r.superseded = true
		stop()
	})
	return r.run(ctx, stopCtx)
}

type rollout struct {
	in         RolloutInput
	id         string
	st         status.Rollout
	superseded bool
	inventory  []InventoryEntry
}

func (r *rollout) result() RolloutResult {
	return RolloutResult{Commit: r.in.Commit, Generation: r.in.Generation, Inventory: r.inventory,
		Deployments: r.st.Deployments, Superseded: r.superseded, Error: r.st.Error}
}

func (r *rollout) run(ctx, stopCtx workflow.Context) (RolloutResult, error) {
	logger := workflow.GetLogger(ctx)
	r.inventory = r.in.Inventory
	var bundles []activities.Bundle
	var targets activities.TargetsResult
	var a *activities.Activities

	// Step 1: render the commit (skipped when deleting: nothing is wanted).
	if !r.in.Delete {
		var rendered activities.RenderResult
		err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, renderOptions), a.Render,
			activities.RenderInput{GitRepo: r.in.GitRepo, Spec: r.in.Spec, Commit: r.in.Commit}).Get(ctx, &rendered)
		if err != nil {
			// A commit that cannot be rendered changes nothing: never clean
			// up because a fleet.yaml is broken.
			r.st.Error, r.st.Phase = activityMessage(err), phaseDone
			logger.Warn("Rollout not started: render failed", "error", r.st.Error)
			res := r.result()
			var ae *temporal.ApplicationError
			res.Permanent = errors.As(err, &ae) && ae.NonRetryable()
			return res, nil
		}
		bundles = rendered.Bundles
	}

	// Step 2: resolve targets. A deleted GitRepo still needs the list of
	// registered clusters to know which it can clean.
	r.st.Phase = phaseTargeting
	targetList := r.in.Spec.EffectiveTargets()
	if r.in.Delete {
		targetList = nil
	}
	if workflow.GetVersion(ctx, versionPerClusterOptions, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		// Rollouts started before per-cluster options: one deployment per
		// bundle everywhere.
		if err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, registryOptions), a.ListTargets,
			activities.TargetsInput{Targets: targetList}).Get(ctx, &targets); err != nil {
			r.st.Error, r.st.Phase = activityMessage(err), phaseDone
			return r.result(), nil
		}
		for i := range targets.Matched {
			targets.Matched[i].Bundles = bundles
		}
	} else {
		var bt activities.TargetsResult
		if err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, registryOptions), a.TargetBundles,
			activities.BundleTargetsInput{GitRepo: r.in.GitRepo, Spec: r.in.Spec, Bundles: bundles}).Get(ctx, &bt); err != nil {
			r.st.Error, r.st.Phase = activityMessage(err), phaseDone
			return r.result(), nil
		}
		targets = bt
	}
	if r.in.Delete {
		targets.Matched, targets.Errors = nil, nil
	}

	// Step 3: plan (pure), then work every cluster in parallel.
	p := makePlan(targets, r.inventory, r.in.Delete && r.in.Spec.KeepResources)
	r.inventory, r.st.Deployments = p.Inventory, p.Deployments
	for _, e := range p.Dropped {
		logger.Info("Cluster not registered; leaving its release alone", "bundle", e.Bundle, "cluster", e.Cluster, "release", e.Release)
	}
	_ = workflow.UpsertTypedSearchAttributes(ctx, temporalx.KeyCluster.ValueSet(clustersOf(p.Deployments)))
	r.st.Phase = phaseDeploying
	wg := workflow.NewWaitGroup(ctx)
	for _, w := range p.Work {
		wg.Add(1)
		workflow.Go(ctx, func(ctx workflow.Context) {
			defer wg.Done()
			r.work(ctx, stopCtx, w)
		})
	}
	wg.Wait(ctx)
	r.st.Phase = phaseDone
	sum := status.Summarize(r.st.Deployments) //workflowcheck:ignore order-independent counts
	_ = workflow.UpsertTypedSearchAttributes(ctx, temporalx.KeyState.ValueSet(string(sum.State)))
	return r.result(), nil
}

// work deploys and cleans one cluster, retrying an unreachable cluster
// with backoff until it answers or the rollout is superseded.
func (r *rollout) work(ctx, stopCtx workflow.Context, w clusterWork) {
	if len(w.Deploy) > 0 && !r.deploy(ctx, stopCtx, w) {
		return
	}
	if len(w.Cleanup) > 0 {
		r.cleanup(ctx, stopCtx, w)
	}
}

func (r *rollout) deploy(ctx, stopCtx workflow.Context, w clusterWork) bool {
	var ca *activities.ClusterActivities
	in := activities.DeployInput{Cluster: w.Cluster, GitRepo: r.in.GitRepo, Commit: r.in.Commit, WorkflowID: r.id, Bundles: w.Deploy}
	for attempt := 0; ; attempt++ {
		if r.superseded {
			return false
		}
		if attempt == maxClusterAttempts {
			// Give the cluster up for this rollout (its deployments stay
			// WaitApplied); the GitRepo's next poll starts a fresh one, so
			// no history grows without bound.
			return false
		}
		r.mark(w.Cluster, status.WaitApplied, "")
		var res activities.DeployResult
		err := workflow.ExecuteActivity(onCluster(ctx, w.Cluster, clusterOptions), ca.Deploy, in).Get(ctx, &res)
		if err == nil && !res.Retry {
			r.record(res.Deployments)
			break
		}
		msg := res.Message
		if err != nil {
			msg = clusterError(w.Cluster, err)
		}
		r.mark(w.Cluster, status.WaitApplied, msg)
		// The timer belongs to stopCtx (a newer change cancels it) but is
		// waited on in this goroutine's own context.
		if workflow.NewTimer(stopCtx, retryBackoff(attempt)).Get(ctx, nil) != nil {
			return false
		}
	}
	// Wait for readiness; a newer change cancels the wait.
	if notReady := r.notReady(w.Cluster); len(notReady) > 0 && !r.superseded {
		var res activities.DeployResult
		in.Bundles = notReady
		err := workflow.ExecuteActivity(onCluster(stopCtx, w.Cluster, waitReadyOptions), ca.WaitReady, in).Get(ctx, &res)
		if err == nil {
			r.record(res.Deployments)
		}
	}
	return true
}

func (r *rollout) cleanup(ctx, stopCtx workflow.Context, w clusterWork) {
	var ca *activities.ClusterActivities
	in := activities.CleanupInput{Cluster: w.Cluster, GitRepo: r.in.GitRepo, WorkflowID: r.id}
	for _, e := range w.Cleanup {
		in.Releases = append(in.Releases, e.release())
	}
	for attempt := 0; attempt < maxClusterAttempts; attempt++ {
		if r.superseded {
			return
		}
		var res activities.CleanupResult
		err := workflow.ExecuteActivity(onCluster(ctx, w.Cluster, clusterOptions), ca.Cleanup, in).Get(ctx, &res)
		r.forget(w.Cluster, res.Removed)
		if err == nil && !res.Retry {
			return
		}
		msg := res.Message
		if err != nil {
			msg = clusterError(w.Cluster, err)
		}
		workflow.GetLogger(ctx).Warn("Cleanup incomplete; retrying", "cluster", w.Cluster, "error", msg)
		// The timer belongs to stopCtx (a newer change cancels it) but is
		// waited on in this goroutine's own context.
		if workflow.NewTimer(stopCtx, retryBackoff(attempt)).Get(ctx, nil) != nil {
			return
		}
	}
}

// mark sets the state of every deployment on cluster that is not final.
func (r *rollout) mark(cluster string, st status.State, msg string) {
	for i := range r.st.Deployments {
		d := &r.st.Deployments[i]
		if d.Cluster == cluster && d.State != status.OutOfSync {
			d.State, d.Message = st, msg
		}
	}
}

// record stores deployment results and the applied IDs in the inventory.
func (r *rollout) record(results []status.Deployment) {
	for _, res := range results {
		for i := range r.st.Deployments {
			if r.st.Deployments[i].Key() == res.Key() {
				r.st.Deployments[i] = res
			}
		}
		for i := range r.inventory {
			e := &r.inventory[i]
			if e.key() == res.Key() && e.Release == res.Release && e.Namespace == res.Namespace && res.AppliedDeploymentID != "" {
				e.DeploymentID = res.AppliedDeploymentID
			}
		}
	}
}

// forget drops cleaned releases ("<namespace>/<release>") from the inventory.
func (r *rollout) forget(cluster string, removed []string) {
	if len(removed) == 0 {
		return
	}
	gone := map[string]bool{}
	for _, rel := range removed {
		gone[rel] = true
	}
	kept := r.inventory[:0]
	for _, e := range r.inventory {
		if e.Cluster == cluster && gone[e.Namespace+"/"+e.Release] && !r.wanted(e) {
			continue
		}
		kept = append(kept, e)
	}
	r.inventory = kept
}

// wanted reports whether the rollout deploys e (so a cleanup of an older
// entry with the same release must not drop it).
func (r *rollout) wanted(e InventoryEntry) bool {
	for _, d := range r.st.Deployments {
		if d.Key() == e.key() && d.Release == e.Release && d.Namespace == e.Namespace {
			return true
		}
	}
	return false
}

func (r *rollout) notReady(cluster string) []activities.Bundle {
	var out []activities.Bundle
	for _, d := range r.st.Deployments {
		if d.Cluster == cluster && d.State == status.NotReady {
			out = append(out, activities.Bundle{Name: d.Bundle, Release: d.Release, Namespace: d.Namespace, DeploymentID: d.DeploymentID})
		}
	}
	return out
}

// clusterError turns an activity failure on a cluster into a message that
// names the cluster.
func clusterError(cluster string, err error) string {
	var te *temporal.TimeoutError
	if errors.As(err, &te) && te.TimeoutType() == enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START {
		return fmt.Sprintf("cluster %s: no worker serves task queue %s (agent offline, or its kubeconfig is not on the worker's host)",
			cluster, protocol.ClusterQueue(cluster))
	}
	return fmt.Sprintf("cluster %s: %s", cluster, activityMessage(err))
}

// activityMessage is the innermost message of an activity failure.
func activityMessage(err error) string {
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) {
		return ae.Message()
	}
	var te *temporal.TimeoutError
	if errors.As(err, &te) {
		return "timed out (" + te.TimeoutType().String() + ")"
	}
	return err.Error()
}
