package workflows

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

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
	// Halts are the bundles whose rollout halted on failures; polling
	// does not retry the commit (a new commit, spec or sync does).
	Halts []status.Halt `json:"halts,omitempty"`
	// Waits are what still held deployments back when the rollout ended.
	Waits []status.Wait `json:"waits,omitempty"`
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
	if err := workflow.SetUpdateHandlerWithOptions(ctx, protocol.UpdateApprove, r.approve,
		workflow.UpdateHandlerOptions{Validator: r.validateApproval}); err != nil {
		return RolloutResult{}, err
	}
	stopCtx, stop := workflow.WithCancel(ctx)
	workflow.Go(ctx, func(ctx workflow.Context) {
		workflow.GetSignalChannel(ctx, protocol.SignalSupersede).Receive(ctx, nil)
		r.superseded = true
		r.changed++
		stop()
	})
	return r.run(ctx, stopCtx)
}

type rollout struct {
	// offline are the clusters whose agent stopped heartbeating when the
	// rollout resolved its targets: their deploys wait in their queues.
	offline    map[string]bool
	in         RolloutInput
	id         string
	st         status.Rollout
	superseded bool
	inventory  []InventoryEntry
	// byKey indexes st.Deployments by bundle@cluster; invAt indexes
	// inventory by bundle@cluster/namespace/release.
	byKey map[string]int
	invAt map[string]int
	sched *scheduler
	// changed counts state changes; the orchestration loop wakes on it.
	changed int
	// batching: cluster work runs in RolloutBatchWorkflow children.
	batching bool
	ctx      workflow.Context
	// state and shown are the last State search attribute and current
	// details written.
	state, shown string
}

func (r *rollout) result() RolloutResult {
	return RolloutResult{Commit: r.in.Commit, Generation: r.in.Generation, Inventory: r.inventory,
		Deployments: r.st.Deployments, Superseded: r.superseded, Error: r.st.Error,
		Halts: r.st.Halts, Waits: r.st.Waits}
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

	// Step 3: plan (pure), then work the clusters as the rollout strategy
	// allows.
	p := makePlan(targets, r.inventory, r.in.Delete && r.in.Spec.KeepResources)
	r.inventory, r.st.Deployments = p.Inventory, p.Deployments
	r.index()
	for _, e := range p.Dropped {
		logger.Info("Cluster not registered; leaving its release alone", "bundle", e.Bundle, "cluster", e.Cluster, "release", e.Release)
	}
	// Large rollouts list their clusters on their batches instead (the
	// attribute is limited to 2 KiB).
	if clusters := clustersOf(p.Deployments); fitsClusterAttr(clusters) {
		_ = workflow.UpsertTypedSearchAttributes(ctx, temporalx.KeyCluster.ValueSet(clusters))
	}
	r.st.Phase = phaseDeploying
	if workflow.GetVersion(ctx, versionRolloutStrategy, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		// Rollouts started before rollout strategies: every cluster at once.
		wg := workflow.NewWaitGroup(ctx)
		run := r.runner(stopCtx)
		for _, w := range p.Work {
			wg.Add(1)
			workflow.Go(ctx, func(ctx workflow.Context) {
				defer wg.Done()
				run.run(ctx, w)
			})
		}
		wg.Wait(ctx)
	} else {
		r.orchestrate(ctx, stopCtx, p, targets)
	}
	r.st.Phase = phaseDone
	r.upsertState(ctx)
	r.details(ctx)
	return r.result(), nil
}

// runner returns the runner of this rollout's own cluster work.
func (r *rollout) runner(stopCtx workflow.Context) *runner {
	return &runner{gitRepo: r.in.GitRepo, commit: r.in.Commit, workflowID: r.id, stopCtx: stopCtx,
		superseded: func() bool { return r.superseded },
		report:     func(_ workflow.Context, rep clusterReport) { r.fold(rep) },
		mark:       r.mark}
}

// index maps deployment keys to their place in r.st.Deployments.
func (r *rollout) index() {
	r.byKey = make(map[string]int, len(r.st.Deployments))
	for i, d := range r.st.Deployments {
		r.byKey[d.Key()] = i
	}
	r.indexInventory()
}

// indexInventory maps inventory entries to their place in r.inventory,
// so recording a result does not scan the whole inventory.
func (r *rollout) indexInventory() {
	r.invAt = make(map[string]int, len(r.inventory))
	for i, e := range r.inventory {
		r.invAt[inventoryKey(e.key(), e.Namespace, e.Release)] = i
	}
}

func inventoryKey(key, namespace, release string) string {
	return key + "/" + namespace + "/" + release
}

// stateOf is a deployment's current state in this rollout.
func (r *rollout) stateOf(bundle, cluster string) (status.State, bool) {
	i, ok := r.byKey[bundle+"@"+cluster]
	if !ok {
		return "", false
	}
	return r.st.Deployments[i].State, true
}

// fold applies a cluster's report to the rollout's state.
func (r *rollout) fold(rep clusterReport) {
	r.changed++
	r.record(rep.Deployments)
	r.forget(rep.Cluster, rep.Removed)
	if r.sched == nil {
		return
	}
	for _, d := range rep.Deployments {
		if d.State == status.OutOfSync && strings.HasPrefix(d.Message, rolledBackPrefix) {
			continue // a rollback's report
		}
		r.sched.finish(d, rep.Final)
	}
	if rep.GaveUp {
		for _, b := range rep.Bundles {
			r.sched.giveUp(b, rep.Cluster)
		}
	}
	if r.superseded {
		// A newer change cut the work short (ready waits canceled,
		// clusters given up): no failure to halt on, and the newer
		// rollout decides what happens next.
		return
	}
	for _, bs := range r.sched.checkFailures() {
		workflow.GetLogger(r.ctx).Warn("Rollout halted", "bundle", bs.name, "reason", bs.halted.Message)
	}
}

// orchestrate runs the plan's cleanups at once and its deployments as the
// scheduler releases them, until nothing more can start without an
// approval, a window or a newer change; halted bundles with
// rollbackOnFailure are then rolled back.
func (r *rollout) orchestrate(ctx, stopCtx workflow.Context, p plan, targets activities.TargetsResult) {
	r.ctx = ctx
	r.sched = newScheduler(p, targets.Strategies, r.inventory)
	for _, u := range r.sched.units {
		if u.held != "" {
			r.setState(u.bundle.Name, u.cluster, status.OutOfSync, u.held)
		}
	}
	agents := map[string]bool{}
	for _, a := range targets.Agents {
		agents[a] = true
	}
	r.offline = map[string]bool{}
	for _, c := range targets.Offline {
		r.offline[c] = true
	}
	r.batching = len(p.Work) > inlineClusterLimit
	if r.batching {
		reports := workflow.GetSignalChannel(ctx, signalClusterReport)
		workflow.Go(ctx, func(ctx workflow.Context) {
			for {
				var rep clusterReport
				reports.Receive(ctx, &rep)
				r.fold(rep)
			}
		})
	}
	d := r.newDispatcher(ctx, stopCtx)
	var cleanups []clusterWork
	for _, w := range p.Work {
		if len(w.Cleanup) > 0 {
			cleanups = append(cleanups, clusterWork{Cluster: w.Cluster, Agent: agents[w.Cluster], Cleanup: w.Cleanup})
		}
	}
	d.dispatch(cleanups)
	// timer wakes the loop when the next window opens, at timerAt; it is
	// replaced only when that time changes, so waking on other events
	// adds no timers to the history.
	var timer workflow.Future
	var timerAt time.Time
	cancelTimer := func() {}
	defer func() { cancelTimer() }()
	for {
		dec := r.sched.next(workflow.Now(ctx), r.stateOf)
		r.st.Waits, r.st.Partitions = dec.waits, dec.partitions
		r.st.Halts = r.halts()
		d.dispatch(r.works(dec.start, agents))
		r.upsertState(ctx)
		r.details(ctx)
		if r.superseded {
			break
		}
		if !r.sched.busy() && d.inflight == 0 {
			// Bundles that halted since the last rollback are rolled back
			// once nothing runs.
			if works := r.rollbackWorks(agents); len(works) > 0 {
				d.dispatch(works)
				continue
			}
			if !waitsForEvent(dec.waits) {
				break
			}
		}
		seen := r.changed
		if !dec.wake.Equal(timerAt) {
			cancelTimer()
			timer, timerAt, cancelTimer = nil, dec.wake, func() {}
			if !dec.wake.IsZero() {
				timerCtx, cancel := workflow.WithCancel(stopCtx)
				timer, cancelTimer = workflow.NewTimerWithOptions(timerCtx, dec.wake.Sub(workflow.Now(ctx)),
					workflow.TimerOptions{Summary: "wait for deployment window"}), cancel
			}
		}
		_ = workflow.Await(ctx, func() bool {
			return r.changed != seen || r.superseded || (timer != nil && timer.IsReady())
		})
		if timer != nil && timer.IsReady() {
			timer, timerAt = nil, time.Time{}
		}
	}
	d.wait(ctx)
	r.st.Halts = r.halts()
}

// waitsForEvent reports whether a wait can end without a cluster changing:
// an approval or a deployment window.
func waitsForEvent(waits []status.Wait) bool {
	for _, w := range waits {
		if w.Kind == status.WaitApproval || (w.Kind == status.WaitWindow && w.Until != "") {
			return true
		}
	}
	return false
}

// works groups started units by cluster, in cluster order.
func (r *rollout) works(start []int, agents map[string]bool) []clusterWork {
	return r.groupByCluster(start, agents, func(w *clusterWork, u unit) {
		w.Deploy = append(w.Deploy, u.bundle)
		if t := r.sched.readyTimeout(u.bundle.Name); t > w.ReadyTimeout {
			w.ReadyTimeout = t
		}
		msg := ""
		if r.offline[u.cluster] {
			msg = "cluster " + u.cluster + ": agent offline; the deploy waits in task queue " + protocol.ClusterQueue(u.cluster) + " until the agent is back"
		}
		r.setState(u.bundle.Name, u.cluster, status.WaitApplied, msg)
	})
}

// groupByCluster builds one clusterWork per cluster of units, in cluster
// order, adding each unit with add.
func (r *rollout) groupByCluster(units []int, agents map[string]bool, add func(w *clusterWork, u unit)) []clusterWork {
	byCluster := map[string]*clusterWork{}
	var order []string
	for _, i := range units {
		u := r.sched.units[i]
		w, ok := byCluster[u.cluster]
		if !ok {
			w = &clusterWork{Cluster: u.cluster, Agent: agents[u.cluster]}
			byCluster[u.cluster] = w
			order = append(order, u.cluster)
		}
		add(w, u)
	}
	sort.Strings(order)
	out := make([]clusterWork, 0, len(order))
	for _, c := range order {
		out = append(out, *byCluster[c])
	}
	return out
}

// rolledBackPrefix starts the message of a deployment rolled back.
const rolledBackPrefix = "rolled back"

// rollbackWorks lists the rollbacks of halted bundles that asked for them
// and were not rolled back yet, and marks those bundles rolled back.
func (r *rollout) rollbackWorks(agents map[string]bool) []clusterWork {
	var units []int
	for _, bs := range r.sched.bundles {
		if bs.halted != nil && bs.plan.RollbackOnFailure && !bs.rolledBack {
			bs.rolledBack = true
			units = append(units, r.sched.unitsToRollBack(bs)...)
		}
	}
	return r.groupByCluster(units, agents, func(w *clusterWork, u unit) {
		w.Rollback = append(w.Rollback, activities.RollbackRelease{Bundle: u.bundle.Name, Release: u.bundle.Release,
			Namespace: u.bundle.Namespace, From: u.bundle.DeploymentID, To: u.prevID})
	})
}

// halts reports the halted bundles, with what their rollback did.
func (r *rollout) halts() []status.Halt {
	var out []status.Halt
	for _, bs := range r.sched.bundles {
		if bs.halted == nil {
			continue
		}
		h := *bs.halted
		h.RolledBack, h.RollbackErrors = nil, nil
		for _, i := range bs.units {
			u := r.sched.units[i]
			if st, ok := r.stateOf(bs.name, u.cluster); ok && st == status.OutOfSync {
				d := r.st.Deployments[r.byKey[bs.name+"@"+u.cluster]]
				if strings.HasPrefix(d.Message, rolledBackPrefix) {
					h.RolledBack = append(h.RolledBack, u.cluster)
				} else if strings.HasPrefix(d.Message, rollbackFailedPrefix) {
					h.RollbackErrors = append(h.RollbackErrors, d.Message)
				}
			}
		}
		out = append(out, h)
	}
	return out
}

// rollbackFailedPrefix starts the message of a failed rollback.
const rollbackFailedPrefix = "rollback failed"

// setState sets one deployment's state and message.
func (r *rollout) setState(bundle, cluster string, st status.State, msg string) {
	if i, ok := r.byKey[bundle+"@"+cluster]; ok {
		r.st.Deployments[i].State, r.st.Deployments[i].Message = st, msg
	}
}

// upsertState keeps the rollout's State search attribute current:
// Rolling, WaitingForApproval, Halted while running, then the summary
// state.
func (r *rollout) upsertState(ctx workflow.Context) {
	state := "Rolling"
	switch {
	case len(r.st.Halts) > 0:
		state = "Halted"
	case waitsFor(r.st.Waits, status.WaitApproval):
		state = "WaitingForApproval"
	case r.st.Phase == phaseDone:
		state = string(status.Summarize(r.st.Deployments).State) //workflowcheck:ignore order-independent counts
	}
	if state == r.state {
		return
	}
	r.state = state
	_ = workflow.UpsertTypedSearchAttributes(ctx, temporalx.KeyState.ValueSet(state))
}

func waitsFor(waits []status.Wait, kind string) bool {
	for _, w := range waits {
		if w.Kind == kind {
			return true
		}
	}
	return false
}

// details shows the rollout's progress in the Temporal UI.
func (r *rollout) details(ctx workflow.Context) {
	r.st.Progress = status.Progress(r.st.Deployments, r.st.Partitions, r.st.Waits)
	if r.st.Progress != r.shown {
		r.shown = r.st.Progress
		workflow.SetCurrentDetails(ctx, r.st.Progress)
	}
}

// mark sets the state of every deployment on cluster that is not final.
func (r *rollout) mark(cluster string, st status.State, msg string) {
	for i := range r.st.Deployments {
		d := &r.st.Deployments[i]
		if d.Cluster == cluster && d.State != status.OutOfSync && (r.sched == nil || r.sched.running(d.Bundle, cluster)) {
			d.State, d.Message = st, msg
		}
	}
}

// record stores deployment results and the applied IDs in the inventory.
func (r *rollout) record(results []status.Deployment) {
	for _, res := range results {
		if i, ok := r.byKey[res.Key()]; ok {
			r.st.Deployments[i] = res
		}
		if i, ok := r.invAt[inventoryKey(res.Key(), res.Namespace, res.Release)]; ok && res.AppliedDeploymentID != "" {
			r.inventory[i].DeploymentID = res.AppliedDeploymentID
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
	r.indexInventory()
}

// wanted reports whether the rollout deploys e (so a cleanup of an older
// entry with the same release must not drop it).
func (r *rollout) wanted(e InventoryEntry) bool {
	i, ok := r.byKey[e.key()]
	return ok && r.st.Deployments[i].Release == e.Release && r.st.Deployments[i].Namespace == e.Namespace
}

// clusterError turns an activity failure on a cluster into a message that
// names the cluster.
func clusterError(cluster string, agent bool, err error) string {
	var te *temporal.TimeoutError
	if errors.As(err, &te) && te.TimeoutType() == enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START {
		if agent {
			return fmt.Sprintf("cluster %s: no agent serves task queue %s (agent offline)", cluster, protocol.ClusterQueue(cluster))
		}
		return fmt.Sprintf("cluster %s: no controller worker picked up the deploy (workers busy or stopped)", cluster)
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
