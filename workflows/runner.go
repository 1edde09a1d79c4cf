package workflows

import (
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/flotilla-gitops/flotilla/activities"
	"github.com/flotilla-gitops/flotilla/internal/outcome"
	"github.com/flotilla-gitops/flotilla/internal/rollout"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

// clusterReport is the outcome of one clusterWork, folded into the
// rollout's state (rollout.Report; batches signal it).
type clusterReport = rollout.Report

// runner runs clusterWork: deploy (retrying an unreachable cluster),
// wait for readiness, clean up, roll back. It is shared by the rollout,
// which runs small rollouts itself, and by batch workflows.
type runner struct {
	gitRepo    activities.GitRepoRef
	commit     string
	workflowID string
	// stopCtx is canceled when a newer change supersedes the rollout:
	// timers and waits end, in-flight deploys finish.
	stopCtx    workflow.Context
	superseded func() bool
	// report receives every outcome; marks live progress (WaitApplied
	// with a message) when not nil.
	report func(ctx workflow.Context, r clusterReport)
	mark   func(cluster string, bundles []string, st status.State, class outcome.Class, msg string)
	// typed: deploys report an outcome per bundle (versionTypedOutcomes):
	// a bundle's failure or missing content never holds the others back.
	typed bool
	// pickup bounds how long a cluster may leave its work unanswered
	// before the runner gives it up for this rollout (versionPickupTimeout;
	// zero: the limits of rollouts recorded before it).
	pickup time.Duration
	// scopes, when set, are the clusters' own contexts: the work of a
	// cluster removed while it waited is dropped (versionDropRemoved).
	scopes *clusterScopes
}

// on returns ctx with opts for an activity on w's cluster (onCluster):
// with a pickup timeout, an agent that does not take the task up in
// time fails it on ScheduleToStart instead of holding the rollout.
func (r *runner) on(ctx workflow.Context, w clusterWork, opts workflow.ActivityOptions) workflow.Context {
	ctx = onCluster(ctx, w.Cluster, w.Agent, opts)
	if w.Agent && r.pickup > 0 {
		opts = workflow.GetActivityOptions(ctx)
		opts.ScheduleToStartTimeout = r.pickup
		ctx = workflow.WithActivityOptions(ctx, opts)
	}
	return ctx
}

// late reports whether the pickup timeout passed since start.
func (r *runner) late(ctx workflow.Context, start time.Time) bool {
	return r.pickup > 0 && workflow.Now(ctx).Sub(start) >= r.pickup
}

// runAll runs every cluster's work at once and returns when all is done.
func (r *runner) runAll(ctx workflow.Context, works []clusterWork) {
	wg := workflow.NewWaitGroup(ctx)
	for _, w := range works {
		wg.Add(1)
		workflow.Go(ctx, func(ctx workflow.Context) {
			defer wg.Done()
			r.run(ctx, w)
		})
	}
	wg.Wait(ctx)
}

func (r *runner) run(ctx workflow.Context, w clusterWork) {
	defer r.scopes.begin(w)()
	if len(w.Rollback) > 0 {
		r.rollback(ctx, w)
		return
	}
	deploy := r.deploy
	if r.typed {
		deploy = r.deployEach
	}
	if len(w.Deploy) > 0 && !deploy(ctx, w) {
		return // the cluster is not reachable: cleanups wait too
	}
	if len(w.Cleanup) > 0 {
		r.cleanup(ctx, w)
	}
}

// deploy deploys and waits for readiness; false when it gave the cluster
// up.
func (r *runner) deploy(ctx workflow.Context, w clusterWork) bool {
	var ca *activities.ClusterActivities
	in := activities.DeployInput{Cluster: w.Cluster, GitRepo: r.gitRepo, Commit: r.commit, WorkflowID: r.workflowID, Bundles: w.Deploy}
	names := bundleNames(w.Deploy)
	gaveUp := clusterReport{Cluster: w.Cluster, GaveUp: true, Final: true, Bundles: names}
	var res activities.DeployResult
	for attempt := 0; ; attempt++ {
		if r.superseded() || attempt == maxClusterAttempts {
			// Give the cluster up for this rollout (its deployments stay
			// WaitApplied); the GitRepo's next poll starts a fresh one, so
			// no history grows without bound.
			r.report(ctx, gaveUp)
			return false
		}
		r.setMark(w.Cluster, nil, status.WaitApplied, outcome.OK, "")
		res = activities.DeployResult{}
		opts := withSummary(clusterOptions, "deploy "+strings.Join(names, ", ")+" to "+w.Cluster)
		err := workflow.ExecuteActivity(onCluster(r.scoped(ctx, w.Cluster), w.Cluster, w.Agent, opts), ca.Deploy, in).Get(ctx, &res)
		if err == nil && !res.Retry {
			break
		}
		msg := res.Message
		if err != nil {
			msg = clusterError(w.Cluster, w.Agent, err)
		}
		gaveUp.Message = msg
		r.setMark(w.Cluster, nil, status.StateOf(outcome.Unreachable), outcome.Unreachable, msg)
		// The timer belongs to stopCtx (a newer change cancels it) but is
		// waited on in this goroutine's own context.
		if workflow.NewTimer(r.stopCtx, retryBackoff(attempt)).Get(ctx, nil) != nil {
			r.report(ctx, gaveUp)
			return false
		}
	}
	r.awaitReady(ctx, w, res.Deployments)
	return true
}

// awaitReady reports deployments and waits for those NotReady to become
// Ready (a newer change cancels the wait), then reports them again.
func (r *runner) awaitReady(ctx workflow.Context, w clusterWork, deps []status.Deployment) {
	notReady := notReadyOf(deps)
	if len(notReady) == 0 || r.superseded() {
		r.report(ctx, clusterReport{Cluster: w.Cluster, Deployments: deps, Final: true})
		return
	}
	r.report(ctx, clusterReport{Cluster: w.Cluster, Deployments: deps})
	r.waitReady(ctx, w, notReady)
}

// waitReady waits for NotReady deployments to become Ready and reports
// them, final.
func (r *runner) waitReady(ctx workflow.Context, w clusterWork, notReady []status.Deployment) {
	var ca *activities.ClusterActivities
	var bundles []activities.Bundle
	for _, d := range notReady {
		for _, b := range w.Deploy {
			if b.Name == d.Bundle {
				bundles = append(bundles, b)
			}
		}
	}
	timeout := w.ReadyTimeout
	if timeout <= 0 {
		timeout = defaultReadyTimeout
	}
	opts := withSummary(waitReadyOptions, "wait for "+strings.Join(bundleNames(bundles), ", ")+" on "+w.Cluster+" to be Ready")
	opts.StartToCloseTimeout = timeout + waitReadyGrace
	in := activities.DeployInput{Cluster: w.Cluster, GitRepo: r.gitRepo, Commit: r.commit, WorkflowID: r.workflowID, Bundles: bundles}
	var ready activities.DeployResult
	err := workflow.ExecuteActivity(r.on(r.stopCtx, w, opts), ca.WaitReady,
		activities.WaitReadyInput{DeployInput: in, Timeout: timeout}).Get(ctx, &ready)
	if err != nil {
		// What the deploy saw stands; the ready wait did not end well.
		ready.Deployments = nil
		for _, d := range notReady {
			d.Message = clusterError(w.Cluster, w.Agent, err)
			ready.Deployments = append(ready.Deployments, d)
		}
	}
	r.report(ctx, clusterReport{Cluster: w.Cluster, Deployments: ready.Deployments, Final: true})
}

// deployEach deploys the cluster's bundles, each on its own: bundles
// whose deploy could not be tried (the cluster or the content store did
// not answer) are retried with a short backoff while the others go on to
// their readiness wait. A bundle that failed, or a cluster that refused
// the credentials, is reported as it is: the GitRepo retries it with the
// failure backoff. It returns false when the cluster was not reached.
func (r *runner) deployEach(ctx workflow.Context, w clusterWork) bool {
	pending := w.Deploy
	var notReady []status.Deployment
	reached := true
	msg := ""
	start := workflow.Now(ctx)
	for attempt := 0; len(pending) > 0; attempt++ {
		if r.gone(w.Cluster) {
			msg = removedMessage(w.Cluster)
		}
		if r.superseded() || r.gone(w.Cluster) || attempt == maxClusterAttempts || (attempt > 0 && r.late(ctx, start)) {
			// Give the bundles up for this rollout: they stay WaitApplied
			// and are tried again on the failure backoff (and the cluster
			// stops holding the rollout after the pickup timeout).
			r.report(ctx, clusterReport{Cluster: w.Cluster, GaveUp: true, Final: true, Bundles: bundleNames(pending), Message: msg})
			return false
		}
		if attempt == 0 {
			r.setMark(w.Cluster, bundleNames(pending), status.WaitApplied, outcome.OK, "")
		}
		var settled []status.Deployment
		pending, settled, msg = r.tryDeploy(ctx, w, pending, msg)
		if len(settled) > 0 {
			// Settled deployments are reported once, as they are: final
			// unless they wait for readiness.
			r.report(ctx, clusterReport{Cluster: w.Cluster, Deployments: settled, Final: !hasNotReady(settled)})
			notReady = append(notReady, notReadyOf(settled)...)
			reached = reached && !clusterWide(settled)
		}
		if len(pending) == 0 {
			break
		}
		if r.gone(w.Cluster) {
			continue // given up at once, without a backoff
		}
		if workflow.NewTimer(r.stopCtx, retryBackoff(attempt)).Get(ctx, nil) != nil {
			r.report(ctx, clusterReport{Cluster: w.Cluster, GaveUp: true, Final: true, Bundles: bundleNames(pending), Message: msg})
			return false
		}
	}
	if len(notReady) > 0 && !r.superseded() {
		r.waitReady(ctx, w, notReady)
	} else if len(notReady) > 0 {
		r.report(ctx, clusterReport{Cluster: w.Cluster, Deployments: notReady, Final: true})
	}
	return reached
}

// tryDeploy deploys the pending bundles once. It returns the bundles to
// try again, the settled deployments, and the last transient failure's
// message (msg when there was none); waiting bundles are marked with why.
func (r *runner) tryDeploy(ctx workflow.Context, w clusterWork, pending []activities.Bundle, msg string) ([]activities.Bundle, []status.Deployment, string) {
	var ca *activities.ClusterActivities
	names := bundleNames(pending)
	in := activities.DeployInput{Cluster: w.Cluster, GitRepo: r.gitRepo, Commit: r.commit, WorkflowID: r.workflowID, Bundles: pending}
	var res activities.DeployResult
	opts := withSummary(clusterOptions, "deploy "+strings.Join(names, ", ")+" to "+w.Cluster)
	err := workflow.ExecuteActivity(r.on(r.scoped(ctx, w.Cluster), w, opts), ca.Deploy, in).Get(ctx, &res)
	if err != nil || res.Retry {
		// The cluster (or a worker for it) did not answer: every pending
		// bundle waits for it.
		msg, class := res.Message, res.Class
		if err != nil {
			msg = clusterError(w.Cluster, w.Agent, err)
		}
		if err != nil || class == outcome.OK {
			class = outcome.Unreachable // no answer, or a result from before classes
		}
		r.setMark(w.Cluster, names, status.StateOf(class), class, msg)
		return pending, nil, msg
	}
	pending, settled, again := splitTransient(pending, res.Deployments)
	for _, d := range again {
		msg = d.Message
		r.setMark(w.Cluster, []string{d.Bundle}, status.StateOf(d.Outcome), d.Outcome, d.Message)
	}
	return pending, settled, msg
}

func notReadyOf(deps []status.Deployment) []status.Deployment {
	var out []status.Deployment
	for _, d := range deps {
		if d.State == status.NotReady {
			out = append(out, d)
		}
	}
	return out
}

func hasNotReady(deps []status.Deployment) bool { return len(notReadyOf(deps)) > 0 }

// splitTransient splits a deploy's results into the bundles to try again
// (their deploy could not be tried: their class's policy is RetrySoon),
// the settled deployments, and the transient ones (why they are tried
// again).
func splitTransient(tried []activities.Bundle, deps []status.Deployment) (pending []activities.Bundle, settled, transient []status.Deployment) {
	again := map[string]bool{}
	for _, d := range deps {
		if d.Outcome.Transient() {
			again[d.Bundle] = true
			transient = append(transient, d)
		} else {
			settled = append(settled, d)
		}
	}
	for _, b := range tried {
		if again[b.Name] {
			pending = append(pending, b)
		}
	}
	return pending, settled, transient
}

// clusterWide reports whether a deployment failed because of its cluster
// (it refused the credentials), not its bundle: the cluster's other work
// waits too.
func clusterWide(deps []status.Deployment) bool {
	for _, d := range deps {
		if d.Outcome.Policy().ClusterWide {
			return true
		}
	}
	return false
}

func (r *runner) cleanup(ctx workflow.Context, w clusterWork) {
	var ca *activities.ClusterActivities
	in := activities.CleanupInput{Cluster: w.Cluster, GitRepo: r.gitRepo, WorkflowID: r.workflowID}
	var names []string
	for _, e := range w.Cleanup {
		in.Releases = append(in.Releases, e.Removal())
		names = append(names, e.Bundle)
	}
	opts := withSummary(clusterOptions, "remove "+strings.Join(names, ", ")+" from "+w.Cluster)
	start := workflow.Now(ctx)
	for attempt := 0; attempt < maxClusterAttempts; attempt++ {
		if r.superseded() || r.gone(w.Cluster) || (attempt > 0 && r.late(ctx, start)) {
			return // the inventory keeps the releases: the next rollout cleans them
		}
		var res activities.CleanupResult
		err := workflow.ExecuteActivity(r.on(r.scoped(ctx, w.Cluster), w, opts), ca.Cleanup, in).Get(ctx, &res)
		if len(res.Removed) > 0 || len(res.Kept) > 0 {
			r.report(ctx, clusterReport{Cluster: w.Cluster, Removed: res.Removed, Kept: res.Kept})
		}
		if err == nil && !res.Retry || r.gone(w.Cluster) {
			return
		}
		msg := res.Message
		if err != nil {
			msg = clusterError(w.Cluster, w.Agent, err)
		}
		workflow.GetLogger(ctx).Warn("Cleanup incomplete; retrying", "cluster", w.Cluster, "class", res.Class, "error", msg)
		if workflow.NewTimer(r.stopCtx, retryBackoff(attempt)).Get(ctx, nil) != nil {
			return
		}
	}
}

func (r *runner) rollback(ctx workflow.Context, w clusterWork) {
	var ca *activities.ClusterActivities
	in := activities.RollbackInput{Cluster: w.Cluster, GitRepo: r.gitRepo, WorkflowID: r.workflowID, Releases: w.Rollback}
	var names []string
	for _, rb := range w.Rollback {
		names = append(names, rb.Bundle)
	}
	opts := withSummary(clusterOptions, "roll back "+strings.Join(names, ", ")+" on "+w.Cluster)
	var res activities.DeployResult
	err := workflow.ExecuteActivity(r.on(r.scoped(ctx, w.Cluster), w, opts), ca.Rollback, in).Get(ctx, &res)
	rep := clusterReport{Cluster: w.Cluster, Deployments: res.Deployments, Final: true}
	for i, d := range rep.Deployments {
		// The release runs what it was rolled back to, or still what the
		// halted rollout deployed: the applied ID tells which.
		rep.Deployments[i].Rollback = outcome.RollbackFailed
		for _, rb := range w.Rollback {
			if rb.Bundle == d.Bundle && d.AppliedDeploymentID == rb.To {
				rep.Deployments[i].Rollback = outcome.RolledBack
			}
		}
	}
	if err != nil {
		rep.Message = clusterError(w.Cluster, w.Agent, err)
		// The activity reported nothing: every release's rollback failed,
		// and each still runs what the halted rollout deployed.
		rep.Deployments = nil
		for _, rb := range w.Rollback {
			rep.Deployments = append(rep.Deployments, status.Deployment{Bundle: rb.Bundle, Cluster: w.Cluster,
				Release: rb.Release, Namespace: rb.Namespace, DeploymentID: rb.From, AppliedDeploymentID: rb.From,
				State: status.OutOfSync, Rollback: outcome.RollbackFailed, Message: "rollback failed: bundle " + rb.Bundle + ": " + rep.Message})
		}
	}
	r.report(ctx, rep)
}

func (r *runner) setMark(cluster string, bundles []string, st status.State, class outcome.Class, msg string) {
	if r.mark != nil {
		r.mark(cluster, bundles, st, class, msg)
	}
}

func bundleNames(bs []activities.Bundle) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = b.Name
	}
	return out
}

// withSummary returns opts with the one-line summary the Temporal UI shows
// for the activity.
func withSummary(opts workflow.ActivityOptions, summary string) workflow.ActivityOptions {
	if len(summary) > 200 {
		summary = summary[:197] + "..."
	}
	opts.Summary = summary
	return opts
}

// clusterScopes gives each cluster's activities a context of their own,
// derived from the workflow's root context, so that one cluster's work
// can be canceled alone (dropped) while the work of the others goes on.
// Activities are scheduled in a scope but waited for in the calling
// goroutine's own context. A scope is canceled only when its cluster is
// dropped, so keeping them changes no command before that.
type clusterScopes struct {
	root    workflow.Context
	ctxs    map[string]workflow.Context
	cancels map[string]workflow.CancelFunc
	dropped map[string]bool
	// running counts each cluster's work in progress; agents are the
	// clusters among them served by an agent.
	running map[string]int
	agents  map[string]bool
}

func newClusterScopes(root workflow.Context) *clusterScopes {
	return &clusterScopes{root: root, ctxs: map[string]workflow.Context{}, cancels: map[string]workflow.CancelFunc{},
		dropped: map[string]bool{}, running: map[string]int{}, agents: map[string]bool{}}
}

// of returns cluster's scope; a dropped cluster's is canceled.
func (s *clusterScopes) of(cluster string) workflow.Context {
	if ctx, ok := s.ctxs[cluster]; ok {
		return ctx
	}
	ctx, cancel := workflow.WithCancel(s.root)
	s.ctxs[cluster], s.cancels[cluster] = ctx, cancel
	if s.dropped[cluster] {
		cancel()
	}
	return ctx
}

// begin counts w as running until the returned function is called.
func (s *clusterScopes) begin(w clusterWork) func() {
	if s == nil {
		return func() {}
	}
	s.running[w.Cluster]++
	if w.Agent {
		s.agents[w.Cluster] = true
	}
	return func() {
		if s.running[w.Cluster]--; s.running[w.Cluster] == 0 {
			delete(s.running, w.Cluster)
		}
	}
}

// busyAgents lists, sorted, the agent clusters with work running.
func (s *clusterScopes) busyAgents() []string {
	var out []string
	if s == nil {
		return out
	}
	//workflowcheck:ignore deterministic: sorted below
	for c := range s.running {
		if s.agents[c] {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return out
}

// drop cancels the clusters' work, running and to come: what was
// scheduled ends at once with a canceled error (a task still in a queue
// is removed from it), and nothing more starts.
func (s *clusterScopes) drop(clusters []string) {
	for _, c := range clusters {
		s.dropped[c] = true
		if cancel, ok := s.cancels[c]; ok {
			cancel()
		}
	}
}

// scoped returns the context to schedule an activity on cluster in: its
// scope, or ctx when the runner keeps none.
func (r *runner) scoped(ctx workflow.Context, cluster string) workflow.Context {
	if r.scopes == nil {
		return ctx
	}
	return r.scopes.of(cluster)
}

// gone reports whether cluster's work was dropped.
func (r *runner) gone(cluster string) bool { return r.scopes != nil && r.scopes.dropped[cluster] }

// removedMessage says why a dropped cluster's deployments were not made.
func removedMessage(cluster string) string {
	return "cluster " + cluster + " was removed; its work was canceled"
}
