package workflows

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/flotilla-gitops/flotilla/activities"
	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/outcome"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/rollout"
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
	// Repair: a sync started the rollout; releases that drifted at the
	// deployment ID they should run are restored (rollout.MarkRepairs).
	Repair bool `json:"repair,omitempty"`
	// ReportTo is the workflow ID of the GitRepo that started the rollout
	// and outlives it across continue-as-new: the rollout signals it its
	// planned inventory and its result (signalRolloutReport), and returns
	// a result with only Reported set.
	ReportTo string `json:"reportTo,omitempty"`
	// Approvals are the partitions approved in an earlier rollout of the
	// same commit; those that deploy the same are approved again.
	Approvals []rollout.Approval `json:"approvals,omitempty"`
	// ApprovedDeletions are uninstalls the deletion guard held that
	// `flotilla approve --deletions` let go.
	ApprovedDeletions []rollout.ReleaseRef `json:"approvedDeletions,omitempty"`
}

// RolloutReport is a rollout's report to its GitRepo: its planned
// inventory, or its result.
type RolloutReport struct {
	ID      string           `json:"id"`
	Planned []InventoryEntry `json:"planned,omitempty"`
	Result  *RolloutResult   `json:"result,omitempty"`
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
	// Warnings are what reading the commit's bundles ignored (unknown
	// fleet.yaml keys, skipped raw YAML files), at most
	// status.MaxWarnings of them.
	Warnings []string `json:"warnings,omitempty"`
	// Reported: the result was signalled to RolloutInput.ReportTo.
	Reported bool `json:"reported,omitempty"`
	// Approvals are the partitions approved when the rollout ended.
	Approvals []rollout.Approval `json:"approvals,omitempty"`
	// Guarded are the uninstalls the deletion guard held.
	Guarded []rollout.ReleaseRef `json:"guarded,omitempty"`
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
	r := &rolloutRun{in: in, id: workflow.GetInfo(ctx).WorkflowExecution.ID,
		st: status.Rollout{Commit: in.Commit, Generation: in.Generation, Phase: phaseRendering}}
	r.st.ID = r.id
	if err := workflow.SetQueryHandler(ctx, protocol.QueryStatus, func() (status.Rollout, error) { return r.st, nil }); err != nil {
		return RolloutResult{}, err
	}
	if err := workflow.SetQueryHandler(ctx, protocol.QueryPlan, r.planQuery); err != nil {
		return RolloutResult{}, err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, protocol.UpdateApprove, r.approve,
		workflow.UpdateHandlerOptions{Validator: r.validateApproval}); err != nil {
		return RolloutResult{}, err
	}
	stopCtx, stop := workflow.WithCancel(ctx)
	workflow.Go(ctx, func(ctx workflow.Context) {
		ch := workflow.GetSignalChannel(ctx, protocol.SignalSupersede)
		ch.Receive(ctx, nil)
		r.superseded = true
		if r.s != nil {
			r.s.Supersede()
		}
		r.changed++
		stop()
		for {
			r.dropRemoved(ctx)
			// Another supersede (a later cluster change) looks again.
			ch.Receive(ctx, nil)
		}
	})
	res, err := r.run(ctx, stopCtx)
	if err != nil || in.ReportTo == "" {
		return res, err
	}
	// The GitRepo's current run takes the result; the run that started
	// this rollout may have continued as new since.
	if r.report(ctx, RolloutReport{Result: &res}) {
		return RolloutResult{Commit: res.Commit, Generation: res.Generation, Reported: true}, nil
	}
	return res, nil
}

// report signals the GitRepo that started the rollout (RolloutInput.
// ReportTo); false when it could not be told (it is gone).
func (r *rolloutRun) report(ctx workflow.Context, rep RolloutReport) bool {
	rep.ID = r.id
	err := workflow.SignalExternalWorkflow(ctx, r.in.ReportTo, "", signalRolloutReport, rep).Get(ctx, nil)
	if err != nil {
		workflow.GetLogger(ctx).Warn("GitRepo not told", "gitrepo", r.in.ReportTo, "error", err)
	}
	return err == nil
}

type rolloutRun struct {
	in         RolloutInput
	id         string
	st         status.Rollout
	superseded bool
	inventory  []InventoryEntry
	// s is the rollout's state once the plan is made: deployments,
	// inventory, and what may start next (rollout.State).
	s *rollout.State
	// changed counts state changes; the orchestration loop wakes on it.
	changed int
	// batching: cluster work runs in RolloutBatchWorkflow children.
	batching bool
	// typed: deploys report an outcome per bundle (versionTypedOutcomes).
	typed bool
	ctx   workflow.Context
	// state and shown are the last State search attribute and current
	// details written.
	state, shown string
	// warnings are the rendered bundles' warnings.
	warnings []string
	// pickup is the controller's cluster pickup timeout
	// (versionPickupTimeout; zero before it).
	pickup time.Duration
	// scopes are the clusters' contexts of the rollout's own cluster
	// work; disp hands work out, to batches when batching; agentNames
	// are the planned clusters served by agents, sorted.
	// guarded are the uninstalls the deletion guard held.
	guarded    []rollout.ReleaseRef
	scopes     *clusterScopes
	disp       *dispatcher
	agentNames []string
	// plans are the plans of partitions that waited for approval
	// (versionApprovalPlan); events emits ApprovalWaiting.
	plans  approvalPlans
	events notifier
}

func (r *rolloutRun) result() RolloutResult {
	if r.s != nil {
		r.inventory, r.st.Deployments = r.s.Inventory(), r.s.Deployments()
	}
	res := RolloutResult{Commit: r.in.Commit, Generation: r.in.Generation, Inventory: r.inventory,
		Deployments: r.st.Deployments, Superseded: r.superseded, Error: r.st.Error,
		Halts: r.st.Halts, Waits: r.st.Waits, Warnings: r.warnings}
	if r.s != nil {
		res.Approvals = r.s.Approvals()
		if kept := r.s.Kept(); len(kept) > 0 {
			// Shown where the user looks: the GitRepo's warnings.
			res.Warnings = status.LimitWarnings(append(slices.Clone(r.warnings), kept...))
		}
	}
	res.Guarded = r.guarded
	return res
}

func (r *rolloutRun) run(ctx, stopCtx workflow.Context) (RolloutResult, error) {
	r.inventory = r.in.Inventory
	// Step 1: render the commit (skipped when deleting: nothing is wanted).
	bundles, failed := r.render(ctx)
	if failed != nil {
		return *failed, nil
	}
	// The warnings go to the result only, not to every cluster's work.
	var warnings []string
	for i := range bundles {
		warnings = append(warnings, bundles[i].Warnings...)
		bundles[i].Warnings = nil
	}
	r.warnings = status.LimitWarnings(warnings)
	// Step 2: resolve targets. A deleted GitRepo still needs the list of
	// registered clusters to know which it can clean.
	r.st.Phase = phaseTargeting
	targets, err := r.resolveTargets(ctx, bundles)
	if err != nil {
		r.st.Error, r.st.Phase = activityMessage(err), phaseDone
		return r.result(), nil
	}
	// Step 3: plan (pure).
	p := r.plan(ctx, targets, bundles)
	// Step 4: work the clusters as the rollout strategy allows.
	r.st.Phase = phaseDeploying
	r.work(ctx, stopCtx, p, targets)
	r.st.Phase = phaseDone
	r.upsertState(ctx)
	r.details(ctx)
	return r.result(), nil
}

// render renders the commit's bundles. A commit that cannot be rendered
// changes nothing (never clean up because a fleet.yaml is broken): the
// rollout ends with the result failed.
func (r *rolloutRun) render(ctx workflow.Context) ([]activities.Bundle, *RolloutResult) {
	if r.in.Delete {
		return nil, nil
	}
	var a *activities.Activities
	var rendered activities.RenderResult
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, renderOptions), a.Render,
		activities.RenderInput{GitRepo: r.in.GitRepo, Spec: r.in.Spec, Commit: r.in.Commit}).Get(ctx, &rendered)
	if err == nil {
		return rendered.Bundles, nil
	}
	r.st.Error, r.st.Phase = activityMessage(err), phaseDone
	workflow.GetLogger(ctx).Warn("Rollout not started: render failed", "error", r.st.Error)
	res := r.result()
	var ae *temporal.ApplicationError
	res.Permanent = errors.As(err, &ae) && ae.NonRetryable()
	return nil, &res
}

// resolveTargets finds the clusters each bundle goes to, with their
// options (nothing is wanted anywhere when deleting).
func (r *rolloutRun) resolveTargets(ctx workflow.Context, bundles []activities.Bundle) (activities.TargetsResult, error) {
	var a *activities.Activities
	var targets activities.TargetsResult
	targetList := r.in.Spec.EffectiveTargets()
	if r.in.Delete {
		targetList = nil
	}
	if workflow.GetVersion(ctx, versionPerClusterOptions, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		// Rollouts started before per-cluster options: one deployment per
		// bundle everywhere.
		if err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, registryOptions), a.ListTargets,
			activities.TargetsInput{Targets: targetList}).Get(ctx, &targets); err != nil {
			return targets, err
		}
		for i := range targets.Matched {
			targets.Matched[i].Bundles = bundles
		}
	} else if err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, registryOptions), a.TargetBundles,
		activities.BundleTargetsInput{GitRepo: r.in.GitRepo, Spec: r.in.Spec, Commit: r.in.Commit, Bundles: bundles}).Get(ctx, &targets); err != nil {
		return activities.TargetsResult{}, err
	}
	if r.in.Delete {
		targets.Matched, targets.Errors = nil, nil
	}
	return targets, nil
}

// plan decides what to deploy and clean where, and starts tracking it.
func (r *rolloutRun) plan(ctx workflow.Context, targets activities.TargetsResult, bundles []activities.Bundle) rollout.Plan {
	r.typed = workflow.GetVersion(ctx, versionTypedOutcomes, workflow.DefaultVersion, 1) == 1
	if r.in.Repair {
		rollout.MarkRepairs(&targets, r.inventory)
	}
	opts := rollout.PlanOptions{KeepAll: r.in.Delete && r.in.Spec.KeepResources, Name: r.in.GitRepo.Name}
	if !r.in.Delete {
		// Deleting the GitRepo is explicit: it is not guarded.
		opts.Guard = targets.DeletionGuard
		opts.Bundles = make([]string, 0, len(bundles))
		for _, b := range bundles {
			opts.Bundles = append(opts.Bundles, b.Name)
		}
		opts.Approved = make(map[rollout.ReleaseRef]bool, len(r.in.ApprovedDeletions))
		for _, ref := range r.in.ApprovedDeletions {
			opts.Approved[ref] = true
		}
	}
	p := rollout.MakePlan(targets, r.inventory, opts)
	for _, e := range p.Guarded {
		r.guarded = append(r.guarded, e.Ref())
	}
	if len(p.Guarded) > 0 {
		workflow.GetLogger(ctx).Warn("Deletion guard holds uninstalls", "count", len(p.Guarded), "guard", targets.DeletionGuard.String())
	}
	r.s = rollout.NewState(p, targets.Backoff)
	if r.superseded {
		r.s.Supersede() // while it rendered
	}
	r.inventory, r.st.Deployments = p.Inventory, p.Deployments
	if r.in.ReportTo != "" {
		// Known to the GitRepo before anything changes on a cluster: a
		// rollout that is terminated mid-way forgets nothing.
		r.report(ctx, RolloutReport{Planned: p.Inventory})
	}
	for _, e := range p.Dropped {
		workflow.GetLogger(ctx).Info("Cluster not registered; leaving its release alone", "bundle", e.Bundle, "cluster", e.Cluster, "release", e.Release)
	}
	// Large rollouts list their clusters on their batches instead (the
	// attribute is limited to 2 KiB).
	if clusters := rollout.ClustersOf(p.Deployments); fitsClusterAttr(clusters) {
		_ = workflow.UpsertTypedSearchAttributes(ctx, temporalx.KeyCluster.ValueSet(clusters))
	}
	return p
}

// work deploys and cleans up as the plan says.
func (r *rolloutRun) work(ctx, stopCtx workflow.Context, p rollout.Plan, targets activities.TargetsResult) {
	if workflow.GetVersion(ctx, versionRolloutStrategy, workflow.DefaultVersion, 1) != workflow.DefaultVersion {
		r.orchestrate(ctx, stopCtx, p, targets)
		return
	}
	// Rollouts started before rollout strategies: every cluster at once.
	r.runner(ctx, stopCtx).runAll(ctx, p.Work)
}

// runner returns the runner of this rollout's own cluster work; ctx is
// the rollout's root context.
func (r *rolloutRun) runner(ctx, stopCtx workflow.Context) *runner {
	r.scopes = newClusterScopes(ctx)
	return &runner{gitRepo: r.in.GitRepo, commit: r.in.Commit, workflowID: r.id, stopCtx: stopCtx, pickup: r.pickup,
		superseded: func() bool { return r.superseded },
		report:     r.fold, typed: r.typed,
		mark: r.mark, scopes: r.scopes}
}

// dropRemoved cancels the work of the agent clusters this superseded
// rollout still waits for that were removed meanwhile (`flotilla cluster
// remove` of an offline cluster): a deploy in the queue of an agent that
// will never take it up would otherwise hold the rollout, and the next
// one, until the pickup timeout. Work on clusters still registered
// finishes, as always when a rollout is superseded.
func (r *rolloutRun) dropRemoved(ctx workflow.Context) {
	waiting := r.waitingAgents()
	if len(waiting) == 0 || workflow.GetVersion(ctx, versionDropRemoved, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return
	}
	var a *activities.Activities
	var reg activities.TargetsResult
	if err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, registryOptions), a.ListTargets,
		activities.TargetsInput{}).Get(ctx, &reg); err != nil {
		workflow.GetLogger(ctx).Warn("Cannot tell which clusters were removed; their work waits for the pickup timeout", "error", err)
		return
	}
	registered := make(map[string]bool, len(reg.Registered))
	for _, c := range reg.Registered {
		registered[c] = true
	}
	var gone []string
	for _, c := range waiting {
		if !registered[c] {
			gone = append(gone, c)
		}
	}
	if len(gone) == 0 {
		return
	}
	workflow.GetLogger(ctx).Info("Canceled the work of removed clusters", "clusters", gone)
	r.scopes.drop(gone)
	if r.batching {
		r.disp.dropInBatches(ctx, gone)
	}
}

// waitingAgents lists, sorted, the agent clusters whose work may still
// wait: those with work running, or when batching, every agent cluster
// while a batch runs.
func (r *rolloutRun) waitingAgents() []string {
	switch {
	case r.disp == nil:
		return nil
	case r.batching && len(r.disp.children) > 0:
		return r.agentNames
	case r.batching:
		return nil
	}
	return r.scopes.busyAgents()
}

// fold applies a cluster's report to the rollout's state.
func (r *rolloutRun) fold(ctx workflow.Context, rep clusterReport) {
	r.changed++
	for _, h := range r.s.Report(rep, workflow.Now(ctx)) {
		workflow.GetLogger(ctx).Warn("Rollout halted", "bundle", h.Bundle, "reason", h.Message)
	}
}

// orchestrate runs the plan's cleanups at once and its deployments as the
// scheduler releases them, until nothing more can start without an
// approval, a window or a newer change; halted bundles with
// rollbackOnFailure are then rolled back.
func (r *rolloutRun) orchestrate(ctx, stopCtx workflow.Context, p rollout.Plan, targets activities.TargetsResult) {
	agents := r.prepare(ctx, p, targets)
	d := r.newDispatcher(ctx, stopCtx)
	var cleanups []clusterWork
	for _, w := range p.Work {
		if len(w.Cleanup) > 0 {
			cleanups = append(cleanups, clusterWork{Cluster: w.Cluster, Agent: agents[w.Cluster], Cleanup: w.Cleanup})
		}
	}
	d.dispatch(cleanups)
	windows := &windowTimer{stopCtx: stopCtx, cancel: func() {}}
	defer func() { windows.cancel() }()
	for {
		step := r.s.Next(workflow.Now(ctx))
		dec, vouched := step.Decision, step.Vouched
		r.st.Waits, r.st.Partitions, r.st.Halts = dec.Waits, dec.Partitions, step.Halts
		r.st.Waits = r.watchApprovals(ctx, r.st.Waits)
		if vouched {
			r.changed++
		}
		for _, h := range step.Halted {
			workflow.GetLogger(ctx).Warn("Rollout halted", "bundle", h.Bundle, "reason", h.Message)
		}
		d.dispatch(r.works(step.Start, agents))
		r.upsertState(ctx)
		r.details(ctx)
		if r.superseded {
			break
		}
		if vouched {
			continue // settled at once: later partitions may start now
		}
		if !r.s.Busy() && d.inflight == 0 {
			// Bundles that halted since the last rollback are rolled back
			// once nothing runs.
			if works := r.rollbackWorks(agents); len(works) > 0 {
				d.dispatch(works)
				continue
			}
			if !waitsForEvent(dec.Waits) {
				break
			}
		}
		seen := r.changed
		windows.set(ctx, dec.Wake)
		_ = workflow.Await(ctx, func() bool { return r.changed != seen || r.superseded || windows.ready() })
		windows.fired()
	}
	d.wait(ctx)
	r.st.Halts = r.s.Halts()
}

// prepare builds the scheduler of a plan, shows the units held back,
// and, for large rollouts, starts taking their batches' reports. It
// returns the clusters served by agents.
func (r *rolloutRun) prepare(ctx workflow.Context, p rollout.Plan, targets activities.TargetsResult) map[string]bool {
	r.ctx = ctx
	st := rollout.Strategy{Strategies: targets.Strategies, Approvals: r.in.Approvals, Offline: targets.Offline, Inventory: r.inventory}
	st.GateEveryStart = workflow.GetVersion(ctx, versionWindowsGateEveryStart, workflow.DefaultVersion, 1) == 1
	if workflow.GetVersion(ctx, versionPickupTimeout, workflow.DefaultVersion, 1) == 1 {
		r.pickup = cmp.Or(targets.PickupTimeout, rollout.DefaultPickupTimeout)
		st.RetryUnreachable, st.Pickup = true, r.pickup
	}
	st.Vouch = workflow.GetVersion(ctx, versionVouchedNoop, workflow.DefaultVersion, 1) == 1
	if kept := r.s.Schedule(p, st, workflow.Now(ctx)); len(kept) > 0 {
		workflow.GetLogger(ctx).Info("Approvals kept from the rollout this one replaces", "partitions", kept)
	}
	agents := map[string]bool{}
	for _, a := range targets.Agents {
		agents[a] = true
	}
	r.agentNames = sortedKeys(agents)
	r.batching = len(p.Work) > inlineClusterLimit
	if r.batching {
		// Batches of older code signal each outcome; newer ones what they
		// gathered (see reportOutbox).
		one := workflow.GetSignalChannel(ctx, signalClusterReport)
		many := workflow.GetSignalChannel(ctx, signalClusterReports)
		workflow.Go(ctx, func(ctx workflow.Context) {
			for {
				var rep clusterReport
				one.Receive(ctx, &rep)
				r.fold(ctx, rep)
			}
		})
		workflow.Go(ctx, func(ctx workflow.Context) {
			for {
				var reps []clusterReport
				many.Receive(ctx, &reps)
				for _, rep := range reps {
					r.fold(ctx, rep)
				}
			}
		})
	}
	return agents
}

// windowTimer wakes the rollout when the next deployment window opens;
// it is replaced only when that time changes, so waking on other events
// adds no timers to the history.
type windowTimer struct {
	stopCtx workflow.Context
	timer   workflow.Future
	at      time.Time
	cancel  func()
}

// set makes the timer fire at wake (zero: never).
func (t *windowTimer) set(ctx workflow.Context, wake time.Time) {
	if t.cancel == nil {
		t.cancel = func() {}
	}
	if wake.Equal(t.at) {
		return
	}
	t.cancel()
	t.timer, t.at, t.cancel = nil, wake, func() {}
	if !wake.IsZero() {
		timerCtx, cancel := workflow.WithCancel(t.stopCtx)
		t.timer, t.cancel = workflow.NewTimerWithOptions(timerCtx, wake.Sub(workflow.Now(ctx)),
			workflow.TimerOptions{Summary: "wait for deployment window"}), cancel
	}
}

func (t *windowTimer) ready() bool { return t.timer != nil && t.timer.IsReady() }

// fired forgets a timer that fired, so the next window sets a new one.
func (t *windowTimer) fired() {
	if t.ready() {
		t.timer, t.at = nil, time.Time{}
	}
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

// works groups started units by cluster, in cluster order, and marks
// them started.
func (r *rolloutRun) works(start []rollout.Unit, agents map[string]bool) []clusterWork {
	return groupByCluster(start, agents, func(w *clusterWork, u rollout.Unit) {
		w.Deploy = append(w.Deploy, u.Bundle)
		if t := r.s.ReadyTimeout(u.Bundle.Name); t > w.ReadyTimeout {
			w.ReadyTimeout = t
		}
		r.s.Start(u)
	})
}

// groupByCluster builds one clusterWork per cluster of units, in cluster
// order, adding each unit with add.
func groupByCluster(units []rollout.Unit, agents map[string]bool, add func(w *clusterWork, u rollout.Unit)) []clusterWork {
	byCluster := map[string]*clusterWork{}
	var order []string
	for _, u := range units {
		w, ok := byCluster[u.Cluster]
		if !ok {
			w = &clusterWork{Cluster: u.Cluster, Agent: agents[u.Cluster]}
			byCluster[u.Cluster] = w
			order = append(order, u.Cluster)
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

// rollbackWorks lists the rollbacks of halted bundles that asked for them
// and were not rolled back yet.
func (r *rolloutRun) rollbackWorks(agents map[string]bool) []clusterWork {
	return groupByCluster(r.s.Rollbacks(workflow.Now(r.ctx)), agents, func(w *clusterWork, u rollout.Unit) {
		w.Rollback = append(w.Rollback, activities.RollbackRelease{Bundle: u.Bundle.Name, Release: u.Bundle.Release,
			Namespace: u.Bundle.Namespace, From: u.Bundle.DeploymentID, To: u.PrevID})
	})
}

// upsertState keeps the rollout's State search attribute current:
// Rolling, WaitingForApproval, Halted while running, then the summary
// state.
func (r *rolloutRun) upsertState(ctx workflow.Context) {
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

// details shows the rollout's progress in the Temporal UI, and what
// approving each partition waiting for approval would do.
func (r *rolloutRun) details(ctx workflow.Context) {
	r.st.Progress = status.Progress(r.st.Deployments, r.st.Partitions, r.st.Waits)
	if shown := r.st.Progress + r.approvalDetails(); shown != r.shown {
		r.shown = shown
		workflow.SetCurrentDetails(ctx, shown)
	}
}

// mark sets the state of cluster's deployments in flight (every bundle's,
// or those named).
func (r *rolloutRun) mark(cluster string, bundles []string, st status.State, class outcome.Class, msg string) {
	r.s.Mark(cluster, bundles, st, class, msg)
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
	var terminated *temporal.TerminatedError
	if errors.As(err, &terminated) {
		return "terminated; what it had deployed stays known and the next rollout goes on from there"
	}
	if temporal.IsCanceledError(err) {
		return "canceled"
	}
	return err.Error()
}
