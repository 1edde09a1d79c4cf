package workflows

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/flotilla-gitops/flotilla/activities"
	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/plan"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/status"
	"github.com/flotilla-gitops/flotilla/internal/strategy"
)

// The tests of this file drive RolloutWorkflow through its rollout
// strategy with mocked activities. Cluster activities take simulated
// time (mock .After, on the workflow clock), and a rig records, in
// workflow time since the start, when each one started and ended, so the
// tests can assert order and concurrency.

// stratT0 is the workflow start time of every test.
var stratT0 = time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)

// stratCall is one cluster activity as the rig saw it.
type stratCall struct {
	kind     string // Deploy, WaitReady, Rollback
	wf       string // the workflow that ran it (a rollout or a batch)
	cluster  string
	bundles  []string
	timeout  time.Duration // WaitReady's Timeout
	rollback []activities.RollbackRelease
	// start and end are workflow time since stratT0; end is -1 while the
	// activity runs.
	start, end time.Duration
}

// stratRig answers the activities of a rollout of bundles to clusters.
type stratRig struct {
	t   *testing.T
	env *testsuite.TestWorkflowEnvironment

	bundles    []activities.Bundle
	clusters   []string
	strategies []activities.BundleStrategy
	inventory  []InventoryEntry
	// onCluster, when set, lists the bundles a cluster gets (default:
	// every bundle).
	onCluster func(cluster string) []string

	// deployState is what Deploy reports for a bundle on a cluster
	// (default Ready); readyState what WaitReady reports (default Ready).
	deployState, readyState func(bundle, cluster string) status.State
	// deployDelay and readyDelay are how long the activities take on a
	// cluster (default 10 s and 20 s).
	deployDelay, readyDelay func(cluster string) time.Duration

	mu          sync.Mutex
	calls       []*stratCall
	byID        map[string]*stratCall
	inflight    int // Deploy activities running
	maxInflight int
	children    []BatchInput
	// signals counts the signals workflows sent, by name.
	signals *signalCounter
	// planWorkflow stands in for the PlanWorkflow of partitions waiting
	// for approval (default: a plan of nothing).
	planWorkflow func(workflow.Context, plan.Request) (plan.Result, error)
}

// signalCounter counts the signals workflows send to other workflows.
type signalCounter struct {
	interceptor.WorkerInterceptorBase
	mu   sync.Mutex
	sent map[string]int
}

func (c *signalCounter) InterceptWorkflow(ctx workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &signalCounterInbound{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}, c: c}
}

type signalCounterInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	c *signalCounter
}

func (i *signalCounterInbound) Init(outbound interceptor.WorkflowOutboundInterceptor) error {
	return i.Next.Init(&signalCounterOutbound{WorkflowOutboundInterceptorBase: interceptor.WorkflowOutboundInterceptorBase{Next: outbound}, c: i.c})
}

type signalCounterOutbound struct {
	interceptor.WorkflowOutboundInterceptorBase
	c *signalCounter
}

func (o *signalCounterOutbound) SignalExternalWorkflow(ctx workflow.Context, id, runID, name string, arg any) workflow.Future {
	if !workflow.IsReplaying(ctx) {
		o.c.mu.Lock()
		o.c.sent[name]++
		o.c.mu.Unlock()
	}
	return o.Next.SignalExternalWorkflow(ctx, id, runID, name, arg)
}

func (c *signalCounter) count(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sent[name]
}

func newRig(t *testing.T, clusters []string, bs ...activities.Bundle) *stratRig {
	var suite testsuite.WorkflowTestSuite
	// Warnings and errors only: a fan-out's debug log is thousands of lines.
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	r := &stratRig{t: t, env: suite.NewTestWorkflowEnvironment(), bundles: bs, clusters: clusters, byID: map[string]*stratCall{}}
	r.env.SetStartTime(stratT0)
	// The logic is deterministic in workflow time; a loaded machine (race
	// detector, parallel builds) must not trip the 1 s deadlock detector.
	r.signals = &signalCounter{sent: map[string]int{}}
	r.env.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: 20 * time.Second,
		Interceptors: []interceptor.WorkerInterceptor{r.signals}})
	r.env.SetTestTimeout(time.Minute)
	// A rollout that never ends fails its test in workflow time.
	r.env.SetWorkflowRunTimeout(72 * time.Hour)
	return r
}

// bundleAt is a rendered bundle whose new deployment ID is id.
func bundleAt(name, id string) activities.Bundle {
	return activities.Bundle{Name: name, Release: name, Namespace: "default", DeploymentID: id, Resources: 1}
}

// nClusters returns c1..cn.
func nClusters(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("c%d", i+1)
	}
	return out
}

// onePartition is a plan with a single partition holding clusters.
func onePartition(maxUnavailable int, clusters []string) strategy.Plan {
	cs := append([]string(nil), clusters...)
	sort.Strings(cs)
	return strategy.Plan{MaxUnavailable: maxUnavailable, FailureThreshold: strategy.NoFailureThreshold,
		ReadyTimeout: time.Minute,
		Partitions:   []strategy.Partition{{Name: strategy.AllName, MaxUnavailable: len(cs), Clusters: cs}}}
}

func (r *stratRig) deployStateOf(b, c string) status.State {
	if r.deployState != nil {
		return r.deployState(b, c)
	}
	return status.Ready
}

func (r *stratRig) readyStateOf(b, c string) status.State {
	if r.readyState != nil {
		return r.readyState(b, c)
	}
	return status.Ready
}

func (r *stratRig) prevID(bundle, cluster string) string {
	for _, e := range r.inventory {
		if e.Bundle == bundle && e.Cluster == cluster {
			return e.DeploymentID
		}
	}
	return ""
}

func (r *stratRig) deployment(b activities.Bundle, cluster string, st status.State) status.Deployment {
	d := status.Deployment{Bundle: b.Name, Cluster: cluster, Release: b.Release, Namespace: b.Namespace,
		DeploymentID: b.DeploymentID, AppliedDeploymentID: b.DeploymentID, State: st, Resources: 1}
	switch st {
	case status.Ready:
		d.ReadyResources = 1
	case status.NotReady:
		d.Message = "cluster " + cluster + ": Deployment default/" + b.Name + " not ready"
	case status.ErrApplied:
		// As the deploy activity reports an invalid release: nothing
		// applied, the release runs what it ran.
		d.AppliedDeploymentID = r.prevID(b.Name, cluster)
		d.Message = "cluster " + cluster + ": bundle " + b.Name + ": invalid release"
	}
	return d
}

// register sets up the mocks and listeners; call it after any mock that
// must win over the rig's (the first matching mock wins).
func (r *stratRig) register() {
	var a *activities.Activities
	var ca *activities.ClusterActivities
	env := r.env
	env.RegisterWorkflow(RolloutWorkflow)
	env.RegisterWorkflow(RolloutBatchWorkflow)
	registerPlan(env, r.planWorkflow)
	env.OnActivity(a.Render, mock.Anything, mock.Anything).Return(activities.RenderResult{Bundles: r.bundles}, nil)
	env.OnActivity(a.TargetBundles, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.BundleTargetsInput) (activities.TargetsResult, error) {
			res := activities.TargetsResult{Registered: r.clusters, Strategies: r.strategies}
			for _, c := range r.clusters {
				tc := activities.TargetCluster{Name: c}
				for _, b := range in.Bundles {
					if r.onCluster == nil || hasString(r.onCluster(c), b.Name) {
						tc.Bundles = append(tc.Bundles, b)
					}
				}
				res.Matched = append(res.Matched, tc)
			}
			return res, nil
		})
	deploy := func(_ context.Context, in activities.DeployInput) (activities.DeployResult, error) {
		var res activities.DeployResult
		for _, b := range in.Bundles {
			res.Deployments = append(res.Deployments, r.deployment(b, in.Cluster, r.deployStateOf(b.Name, in.Cluster)))
		}
		return res, nil
	}
	waitReady := func(_ context.Context, in activities.WaitReadyInput) (activities.DeployResult, error) {
		var res activities.DeployResult
		for _, b := range in.Bundles {
			res.Deployments = append(res.Deployments, r.deployment(b, in.Cluster, r.readyStateOf(b.Name, in.Cluster)))
		}
		return res, nil
	}
	// One mock per cluster only where delays differ by cluster: matching
	// a call against many mocks is slow.
	if r.deployDelay == nil {
		env.OnActivity(ca.Deploy, mock.Anything, mock.Anything).Return(deploy).After(10 * time.Second)
	} else {
		for _, c := range r.clusters {
			env.OnActivity(ca.Deploy, mock.Anything, mock.MatchedBy(func(in activities.DeployInput) bool { return in.Cluster == c })).
				Return(deploy).After(r.deployDelay(c))
		}
	}
	if r.readyDelay == nil {
		env.OnActivity(ca.WaitReady, mock.Anything, mock.Anything).Return(waitReady).After(20 * time.Second)
	} else {
		for _, c := range r.clusters {
			env.OnActivity(ca.WaitReady, mock.Anything, mock.MatchedBy(func(in activities.WaitReadyInput) bool { return in.Cluster == c })).
				Return(waitReady).After(r.readyDelay(c))
		}
	}
	env.OnActivity(ca.Rollback, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.RollbackInput) (activities.DeployResult, error) {
			var res activities.DeployResult
			for _, rb := range in.Releases {
				res.Deployments = append(res.Deployments, status.Deployment{Bundle: rb.Bundle, Cluster: in.Cluster,
					Release: rb.Release, Namespace: rb.Namespace, DeploymentID: rb.From, AppliedDeploymentID: rb.To,
					State: status.OutOfSync, Message: "rolled back to " + rb.To + " on cluster " + in.Cluster + ": rollout halted"})
			}
			return res, nil
		}).After(time.Second)
	env.OnActivity(ca.Cleanup, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.CleanupInput) (activities.CleanupResult, error) {
			var res activities.CleanupResult
			for _, rel := range in.Releases {
				res.Removed = append(res.Removed, rel.Namespace+"/"+rel.Release)
			}
			return res, nil
		})

	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, args converter.EncodedValues) {
		c := &stratCall{kind: info.ActivityType.Name, wf: info.WorkflowExecution.ID, start: env.Now().Sub(stratT0), end: -1}
		switch c.kind {
		case "Deploy":
			var in activities.DeployInput
			assert.NoError(r.t, args.Get(&in))
			c.cluster, c.bundles = in.Cluster, bundleNames(in.Bundles)
		case "WaitReady":
			var in activities.WaitReadyInput
			assert.NoError(r.t, args.Get(&in))
			c.cluster, c.bundles, c.timeout = in.Cluster, bundleNames(in.Bundles), in.Timeout
		case "Rollback":
			var in activities.RollbackInput
			assert.NoError(r.t, args.Get(&in))
			c.cluster, c.rollback = in.Cluster, in.Releases
		default:
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		r.calls = append(r.calls, c)
		r.byID[c.wf+"/"+info.ActivityID] = c
		if c.kind == "Deploy" {
			r.inflight++
			r.maxInflight = max(r.maxInflight, r.inflight)
		}
	})
	ended := func(info *activity.Info) {
		r.mu.Lock()
		defer r.mu.Unlock()
		c, ok := r.byID[info.WorkflowExecution.ID+"/"+info.ActivityID]
		if !ok || c.end >= 0 {
			return
		}
		c.end = env.Now().Sub(stratT0)
		if c.kind == "Deploy" {
			r.inflight--
		}
	}
	env.SetOnActivityCompletedListener(func(info *activity.Info, _ converter.EncodedValue, _ error) { ended(info) })
	env.SetOnActivityCanceledListener(func(info *activity.Info) { ended(info) })
	env.SetOnChildWorkflowStartedListener(func(info *workflow.Info, _ workflow.Context, args converter.EncodedValues) {
		if info.WorkflowType.Name == plan.WorkflowName {
			return
		}
		var in BatchInput
		assert.NoError(r.t, args.Get(&in))
		r.mu.Lock()
		defer r.mu.Unlock()
		r.children = append(r.children, in)
	})
}

func hasString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// run executes the rollout and returns its result.
func (r *stratRig) run() RolloutResult {
	r.t.Helper()
	r.env.ExecuteWorkflow(RolloutWorkflow, RolloutInput{GitRepo: activities.GitRepoRef{Namespace: "ns", Name: "app"},
		Spec: api.GitRepoSpec{Repo: "https://git.example/app.git"}, Commit: "c0ffee0000000000000000000000000000000001",
		Generation: 1, Inventory: r.inventory})
	require.True(r.t, r.env.IsWorkflowCompleted())
	require.NoError(r.t, r.env.GetWorkflowError())
	var res RolloutResult
	require.NoError(r.t, r.env.GetWorkflowResult(&res))
	return res
}

// at runs f at workflow time d after the start.
func (r *stratRig) at(d time.Duration, f func()) { r.env.RegisterDelayedCallback(f, d) }

// query returns the rollout's status.
func (r *stratRig) query() status.Rollout {
	r.t.Helper()
	v, err := r.env.QueryWorkflow(protocol.QueryStatus)
	require.NoError(r.t, err)
	var st status.Rollout
	require.NoError(r.t, v.Get(&st))
	return st
}

// callsOf returns the recorded calls of kind (and bundle, when not
// empty), in start order.
func (r *stratRig) callsOf(kind, bundle string) []stratCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []stratCall
	for _, c := range r.calls {
		if c.kind == kind && (bundle == "" || hasString(c.bundles, bundle)) {
			out = append(out, *c)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].start != out[j].start {
			return out[i].start < out[j].start
		}
		return out[i].cluster < out[j].cluster
	})
	return out
}

// deployStarts maps each cluster deployed with bundle to when its (only)
// deploy started; it fails the test on a second deploy.
func (r *stratRig) deployStarts(bundle string) map[string]time.Duration {
	out := map[string]time.Duration{}
	for _, c := range r.callsOf("Deploy", bundle) {
		_, dup := out[c.cluster]
		assert.False(r.t, dup, "bundle %s deployed twice on %s", bundle, c.cluster)
		out[c.cluster] = c.start
	}
	return out
}

func waitsOf(ws []status.Wait, kind string) []status.Wait {
	var out []status.Wait
	for _, w := range ws {
		if w.Kind == kind {
			out = append(out, w)
		}
	}
	return out
}

func statesOf(deps []status.Deployment, bundle string) map[string]status.State {
	out := map[string]status.State{}
	for _, d := range deps {
		if bundle == "" || d.Bundle == bundle {
			out[d.Cluster] = d.State
		}
	}
	return out
}

func allStates(clusters []string, st status.State) map[string]status.State {
	out := map[string]status.State{}
	for _, c := range clusters {
		out[c] = st
	}
	return out
}

// 1. maxUnavailable bounds the clusters updating at once; the others wait
// with a MaxUnavailable wait that names them.
func TestRolloutStrategy_MaxUnavailable(t *testing.T) {
	cs := nClusters(6)
	r := newRig(t, cs, bundleAt("app", "m:o1"))
	r.strategies = []activities.BundleStrategy{{Bundle: "app", Plan: onePartition(2, cs)}}
	r.register()
	r.at(5*time.Second, func() {
		st := r.query()
		ws := waitsOf(st.Waits, status.WaitMaxUnavailable)
		if assert.Len(t, ws, 1, "waits: %+v", st.Waits) {
			assert.Equal(t, "app", ws[0].Bundle)
			assert.Equal(t, []string{"c3", "c4", "c5", "c6"}, ws[0].Clusters)
			assert.Contains(t, ws[0].Message, "maxUnavailable 2")
		}
		if assert.Len(t, st.Partitions, 1) {
			assert.Equal(t, 2, st.Partitions[0].Unavailable)
			assert.Equal(t, status.PartitionRolling, st.Partitions[0].Phase)
		}
		assert.Equal(t, map[string]status.State{"c1": status.WaitApplied, "c2": status.WaitApplied,
			"c3": status.Pending, "c4": status.Pending, "c5": status.Pending, "c6": status.Pending}, statesOf(st.Deployments, "app"))
	})
	res := r.run()

	assert.Equal(t, 2, r.maxInflight, "at most maxUnavailable deploys at once, and that many")
	assert.Equal(t, map[string]time.Duration{"c1": 0, "c2": 0, "c3": 10 * time.Second, "c4": 10 * time.Second,
		"c5": 20 * time.Second, "c6": 20 * time.Second}, r.deployStarts("app"))
	assert.Equal(t, allStates(cs, status.Ready), statesOf(res.Deployments, "app"))
	assert.Empty(t, res.Waits)
	assert.Empty(t, res.Halts)
	for _, e := range res.Inventory {
		assert.Equal(t, "m:o1", e.DeploymentID, e.Cluster)
	}
}

func twoPartitions(p2Approval bool) strategy.Plan {
	return strategy.Plan{MaxUnavailable: 10, MaxUnavailablePartitions: 0, FailureThreshold: strategy.NoFailureThreshold,
		ReadyTimeout: 2 * time.Minute, Partitions: []strategy.Partition{
			{Name: "p1", MaxUnavailable: 1, Clusters: []string{"c1"}},
			{Name: "p2", MaxUnavailable: 2, RequireApproval: p2Approval, Clusters: []string{"c2", "c3"}},
		}}
}

// 2. With maxUnavailablePartitions 0 a partition starts only once the one
// before it is updated and Ready.
func TestRolloutStrategy_PartitionWaitsForPreviousReady(t *testing.T) {
	cs := nClusters(3)
	r := newRig(t, cs, bundleAt("app", "m:o1"))
	r.strategies = []activities.BundleStrategy{{Bundle: "app", Plan: twoPartitions(false)}}
	// c1 is NotReady after its deploy (10 s) and Ready 20 s later.
	r.deployState = func(_, c string) status.State {
		if c == "c1" {
			return status.NotReady
		}
		return status.Ready
	}
	r.register()
	r.at(15*time.Second, func() {
		st := r.query()
		ws := waitsOf(st.Waits, status.WaitMaxUnavailablePartitions)
		if assert.Len(t, ws, 1, "waits: %+v", st.Waits) {
			assert.Equal(t, "p2", ws[0].Partition)
		}
		assert.Equal(t, status.NotReady, statesOf(st.Deployments, "app")["c1"])
	})
	res := r.run()

	waits := r.callsOf("WaitReady", "app")
	require.Len(t, waits, 1)
	assert.Equal(t, "c1", waits[0].cluster)
	assert.Equal(t, 2*time.Minute, waits[0].timeout, "the plan's ready timeout bounds the wait")
	c1Ready := waits[0].end
	assert.Equal(t, 30*time.Second, c1Ready)
	starts := r.deployStarts("app")
	assert.Equal(t, time.Duration(0), starts["c1"])
	assert.Equal(t, c1Ready, starts["c2"], "p2 starts as soon as c1 is Ready")
	assert.Equal(t, c1Ready, starts["c3"], "p2 starts as soon as c1 is Ready")
	assert.Equal(t, allStates(cs, status.Ready), statesOf(res.Deployments, "app"))
	assert.Empty(t, res.Waits)
}

// 2b. A partition that never becomes Ready holds the next one for good;
// the result says why.
func TestRolloutStrategy_PartitionNeverReadyHoldsTheNext(t *testing.T) {
	cs := nClusters(3)
	r := newRig(t, cs, bundleAt("app", "m:o1"))
	r.strategies = []activities.BundleStrategy{{Bundle: "app", Plan: twoPartitions(false)}}
	r.deployState = func(string, string) status.State { return status.NotReady }
	r.readyState = func(string, string) status.State { return status.NotReady }
	r.readyDelay = func(string) time.Duration { return 2 * time.Minute }
	r.register()
	res := r.run()

	assert.Equal(t, []string{"c1"}, startedClusters(r.deployStarts("app")), "p2 never starts")
	ws := waitsOf(res.Waits, status.WaitMaxUnavailablePartitions)
	if assert.Len(t, ws, 1, "waits: %+v", res.Waits) {
		assert.Equal(t, "app", ws[0].Bundle)
		assert.Equal(t, "p2", ws[0].Partition)
		assert.Contains(t, ws[0].Message, "maxUnavailablePartitions 0")
	}
	assert.Equal(t, map[string]status.State{"c1": status.NotReady, "c2": status.Pending, "c3": status.Pending},
		statesOf(res.Deployments, "app"))
	assert.Empty(t, res.Halts, "failureThreshold -1 never halts")
}

func startedClusters(m map[string]time.Duration) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// 3. A partition that requires approval waits for the approve update;
// an approval for an unknown partition is rejected.
func TestRolloutStrategy_Approval(t *testing.T) {
	cs := nClusters(3)
	r := newRig(t, cs, bundleAt("app", "m:o1"))
	r.strategies = []activities.BundleStrategy{{Bundle: "app", Plan: twoPartitions(true)}}
	r.register()
	var rejected error
	var approved any
	r.at(time.Minute, func() {
		st := r.query()
		ws := waitsOf(st.Waits, status.WaitApproval)
		if assert.Len(t, ws, 1, "waits: %+v", st.Waits) {
			assert.Equal(t, "app", ws[0].Bundle)
			assert.Equal(t, "p2", ws[0].Partition)
		}
		phases := map[string]string{}
		for _, p := range st.Partitions {
			phases[p.Name] = p.Phase
		}
		assert.Equal(t, map[string]string{"p1": status.PartitionDone, "p2": status.PartitionWaitingForApproval}, phases)
		r.env.UpdateWorkflow(protocol.UpdateApprove, "approve-p9", &testsuite.TestUpdateCallback{
			OnReject:   func(err error) { rejected = err },
			OnAccept:   func() { t.Error("approval of an unknown partition accepted") },
			OnComplete: func(any, error) {},
		}, protocol.Approve{Partition: "p9"})
	})
	r.at(2*time.Minute, func() {
		assert.Len(t, r.callsOf("Deploy", "app"), 1, "p2 waits for its approval")
		r.env.UpdateWorkflow(protocol.UpdateApprove, "approve-p2", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { t.Errorf("approval rejected: %v", err) },
			OnAccept: func() {},
			OnComplete: func(v any, err error) {
				assert.NoError(t, err)
				approved = v
			},
		}, protocol.Approve{Partition: "p2"})
	})
	res := r.run()

	require.Error(t, rejected)
	assert.Contains(t, rejected.Error(), "no partition p9 requires approval")
	require.IsType(t, protocol.ApproveResult{}, approved)
	assert.Equal(t, []string{"app/p2"}, approved.(protocol.ApproveResult).Approved)
	assert.Equal(t, map[string]time.Duration{"c1": 0, "c2": 2 * time.Minute, "c3": 2 * time.Minute}, r.deployStarts("app"))
	assert.Equal(t, allStates(cs, status.Ready), statesOf(res.Deployments, "app"))
	assert.Empty(t, res.Waits)
}

// 4. A strategy with deployment windows deploys only inside one.
func TestRolloutStrategy_Window(t *testing.T) {
	cs := nClusters(2)
	r := newRig(t, cs, bundleAt("app", "m:o1"))
	open := stratT0.Add(2 * time.Hour)
	r.strategies = []activities.BundleStrategy{{Bundle: "app", Plan: onePartition(10, cs),
		Windows: []strategy.Interval{{Start: open, End: open.Add(time.Hour)}}}}
	r.register()
	r.at(time.Hour, func() {
		st := r.query()
		ws := waitsOf(st.Waits, status.WaitWindow)
		if assert.Len(t, ws, 1, "waits: %+v", st.Waits) {
			assert.Equal(t, open.Format(time.RFC3339), ws[0].Until)
			assert.Equal(t, strategy.AllName, ws[0].Partition)
		}
		if assert.Len(t, st.Partitions, 1) {
			assert.Equal(t, status.PartitionWaitingForWindow, st.Partitions[0].Phase)
		}
		assert.Empty(t, r.callsOf("Deploy", ""), "nothing deploys before the window")
	})
	res := r.run()

	assert.Equal(t, map[string]time.Duration{"c1": 2 * time.Hour, "c2": 2 * time.Hour}, r.deployStarts("app"))
	assert.Equal(t, allStates(cs, status.Ready), statesOf(res.Deployments, "app"))
	assert.Empty(t, res.Waits)
}

// 5. More failures than failureThreshold halt the bundle; with
// rollbackOnFailure the clusters it deployed return to their previous
// deployment.
func TestRolloutStrategy_FailureThresholdHaltsAndRollsBack(t *testing.T) {
	cs := nClusters(4)
	r := newRig(t, cs, bundleAt("app", "m:o1"))
	plan := onePartition(1, cs)
	plan.FailureThreshold, plan.RollbackOnFailure = 1, true
	r.strategies = []activities.BundleStrategy{{Bundle: "app", Plan: plan}}
	for _, c := range cs {
		r.inventory = append(r.inventory, InventoryEntry{Bundle: "app", Cluster: c, Release: "app", Namespace: "default", DeploymentID: "m:old"})
	}
	r.deployState = func(_, c string) status.State {
		if c == "c1" || c == "c4" {
			return status.Ready
		}
		return status.ErrApplied
	}
	r.register()
	res := r.run()

	deploys := r.callsOf("Deploy", "app")
	assert.Equal(t, map[string]time.Duration{"c1": 0, "c2": 10 * time.Second, "c3": 20 * time.Second}, r.deployStarts("app"),
		"sequential; c4 never deployed")
	require.Len(t, deploys, 3)
	halted := deploys[2].end

	rbs := r.callsOf("Rollback", "")
	got := map[string][]activities.RollbackRelease{}
	for _, c := range rbs {
		assert.GreaterOrEqual(t, c.start, halted, "rollback after the halt")
		got[c.cluster] = append(got[c.cluster], c.rollback...)
	}
	want := map[string][]activities.RollbackRelease{}
	for _, c := range []string{"c1", "c2", "c3"} {
		want[c] = []activities.RollbackRelease{{Bundle: "app", Release: "app", Namespace: "default", From: "m:o1", To: "m:old"}}
	}
	assert.Equal(t, want, got, "every cluster this rollout deployed to is rolled back, once")

	if assert.Len(t, res.Halts, 1) {
		h := res.Halts[0]
		assert.Equal(t, "app", h.Bundle)
		assert.Equal(t, 1, h.Threshold)
		assert.Equal(t, []string{"c2", "c3"}, h.Failed)
		assert.Equal(t, []string{"c1", "c2", "c3"}, h.RolledBack)
		assert.Empty(t, h.RollbackErrors)
		assert.Contains(t, h.Message, "2 cluster(s) failed (failureThreshold 1)")
	}
	states := statesOf(res.Deployments, "app")
	assert.Equal(t, map[string]status.State{"c1": status.OutOfSync, "c2": status.OutOfSync, "c3": status.OutOfSync,
		"c4": status.Pending}, states)
	for _, d := range res.Deployments {
		if d.Cluster != "c4" {
			assert.Contains(t, d.Message, "rolled back to m:old", d.Cluster)
		}
	}
	inv := map[string]string{}
	for _, e := range res.Inventory {
		inv[e.Cluster] = e.DeploymentID
	}
	assert.Equal(t, map[string]string{"c1": "m:old", "c2": "m:old", "c3": "m:old", "c4": "m:old"}, inv)
}

// 6. A bundle that depends on another deploys on a cluster once the other
// is Ready on that cluster.
func TestRolloutStrategy_DependsOn(t *testing.T) {
	cs := nClusters(2)
	r := newRig(t, cs, bundleAt("app", "m:a1"), bundleAt("db", "m:d1"))
	r.strategies = []activities.BundleStrategy{
		{Bundle: "app", Plan: onePartition(10, cs), DependsOn: []activities.Dependency{{Describe: "db", Bundles: []string{"db"}}}},
		{Bundle: "db", Plan: onePartition(10, cs)},
	}
	// db on c1 is NotReady after its deploy and Ready after WaitReady
	// (10 s + 20 s); on c2 it is Ready at once (5 s).
	r.deployState = func(b, c string) status.State {
		if b == "db" && c == "c1" {
			return status.NotReady
		}
		return status.Ready
	}
	r.deployDelay = func(c string) time.Duration {
		if c == "c2" {
			return 5 * time.Second
		}
		return 10 * time.Second
	}
	r.register()
	r.at(7*time.Second, func() {
		st := r.query()
		ws := waitsOf(st.Waits, status.WaitDependsOn)
		if assert.Len(t, ws, 1, "waits: %+v", st.Waits) {
			assert.Equal(t, "app", ws[0].Bundle)
			assert.Equal(t, []string{"c1"}, ws[0].Clusters)
			assert.Contains(t, ws[0].Message, "db")
		}
	})
	res := r.run()

	for _, c := range r.callsOf("Deploy", "") {
		assert.Len(t, c.bundles, 1, "db and app deploy separately: %+v", c)
	}
	db := map[string]stratCall{}
	for _, c := range r.callsOf("Deploy", "db") {
		db[c.cluster] = c
	}
	app := r.deployStarts("app")
	require.Len(t, app, 2)
	// c2: db Ready when its deploy ended.
	assert.GreaterOrEqual(t, app["c2"], db["c2"].end)
	assert.LessOrEqual(t, app["c2"]-db["c2"].end, time.Second)
	// c1: db Ready only when its ready wait ended; app starts then, not
	// when db's deploy ended.
	waits := r.callsOf("WaitReady", "db")
	require.Len(t, waits, 1)
	assert.Equal(t, "c1", waits[0].cluster)
	assert.Greater(t, waits[0].end, db["c1"].end)
	assert.GreaterOrEqual(t, app["c1"], waits[0].end, "app waits for db to be Ready on c1")
	assert.LessOrEqual(t, app["c1"]-waits[0].end, time.Second, "app starts right after db is Ready on c1")
	assert.Less(t, app["c2"], app["c1"], "each cluster waits only for its own db")
	assert.Equal(t, allStates(cs, status.Ready), statesOf(res.Deployments, ""))
	assert.Empty(t, res.Waits)
}

// 7. A paused bundle keeps what clusters run; units already at their
// deployment ID get a no-op deploy that does not count against
// maxUnavailable.
func TestRolloutStrategy_PausedAndUpToDate(t *testing.T) {
	cs := nClusters(4)
	frozen := bundleAt("frozen", "m:f1")
	frozen.Paused = true
	r := newRig(t, cs, bundleAt("app", "m:o1"), frozen)
	r.onCluster = func(c string) []string {
		if c == "c1" {
			return []string{"app", "frozen"}
		}
		return []string{"app"}
	}
	r.strategies = []activities.BundleStrategy{{Bundle: "app", Plan: onePartition(1, cs)}, {Bundle: "frozen", Plan: onePartition(1, []string{"c1"})}}
	r.inventory = []InventoryEntry{
		{Bundle: "frozen", Cluster: "c1", Release: "frozen", Namespace: "default", DeploymentID: "m:f0"},
		{Bundle: "app", Cluster: "c1", Release: "app", Namespace: "default", DeploymentID: "m:o1"},
		{Bundle: "app", Cluster: "c2", Release: "app", Namespace: "default", DeploymentID: "m:o1"},
		{Bundle: "app", Cluster: "c3", Release: "app", Namespace: "default", DeploymentID: "m:old"},
		{Bundle: "app", Cluster: "c4", Release: "app", Namespace: "default", DeploymentID: "m:old"},
	}
	r.register()
	res := r.run()

	assert.Empty(t, r.callsOf("Deploy", "frozen"), "a paused bundle is not deployed")
	// c1 and c2 are up to date: deployed at once, beside c3 that takes
	// the only slot; c4 waits for c3.
	assert.Equal(t, map[string]time.Duration{"c1": 0, "c2": 0, "c3": 0, "c4": 10 * time.Second}, r.deployStarts("app"))
	states := statesOf(res.Deployments, "frozen")
	assert.Equal(t, map[string]status.State{"c1": status.OutOfSync}, states)
	for _, d := range res.Deployments {
		if d.Bundle == "frozen" {
			assert.Contains(t, d.Message, "paused")
		}
	}
	assert.Equal(t, allStates(cs, status.Ready), statesOf(res.Deployments, "app"))
	for _, e := range res.Inventory {
		if e.Bundle == "frozen" {
			assert.Equal(t, "m:f0", e.DeploymentID, "the paused bundle keeps its deployment")
		}
	}
	require.Len(t, res.Waits, 1, "the paused bundle says why it holds")
	assert.Equal(t, status.WaitPaused, res.Waits[0].Kind)
	assert.Equal(t, "frozen", res.Waits[0].Bundle)
	assert.Equal(t, []string{"c1"}, res.Waits[0].Clusters)
	assert.Contains(t, res.Waits[0].Message, "paused")
}

// 8. Above inlineClusterLimit clusters the work runs in batch children
// of at most batchClusters clusters.
func TestRolloutStrategy_FanOutBatches(t *testing.T) {
	cs := nClusters(120)
	r := newRig(t, cs, bundleAt("app", "m:o1"))
	r.register()
	res := r.run()

	require.Len(t, r.children, 2)
	total := 0
	for _, b := range r.children {
		assert.LessOrEqual(t, len(b.Work), batchClusters)
		total += len(b.Work)
	}
	assert.Equal(t, 120, total)
	assert.Len(t, r.deployStarts("app"), 120)
	assert.Equal(t, 120, r.maxInflight, "without a strategy every cluster deploys at once")
	assert.Equal(t, allStates(cs, status.Ready), statesOf(res.Deployments, "app"))
	// The batches send what they gathered (how much a signal carries
	// depends on the server's latency, which the test environment does not
	// have), never a signal per cluster of the older code.
	for _, b := range r.children {
		assert.True(t, b.Batched)
	}
	assert.Zero(t, r.signals.count(signalClusterReport))
	assert.Positive(t, r.signals.count(signalClusterReports))
}

// 8b. maxUnavailable holds across batches.
func TestRolloutStrategy_FanOutMaxUnavailable(t *testing.T) {
	cs := nClusters(120)
	r := newRig(t, cs, bundleAt("app", "m:o1"))
	r.strategies = []activities.BundleStrategy{{Bundle: "app", Plan: onePartition(30, cs)}}
	r.register()
	res := r.run()

	assert.NotEmpty(t, r.children)
	for _, b := range r.children {
		assert.LessOrEqual(t, len(b.Work), batchClusters)
	}
	assert.Equal(t, 30, r.maxInflight, "maxUnavailable 30 across batches")
	starts := r.deployStarts("app")
	assert.Len(t, starts, 120)
	// Each finished wave frees 30 slots; clusters released while other
	// batches still run wait up to batchCoalesce each to share a batch.
	waves := map[time.Duration]int{}
	for _, s := range starts {
		waves[s.Truncate(10*time.Second)]++
		assert.Less(t, s-s.Truncate(10*time.Second), 5*time.Second, "a start is held back briefly, never a wave")
	}
	assert.Equal(t, map[time.Duration]int{0: 30, 10 * time.Second: 30, 20 * time.Second: 30, 30 * time.Second: 30}, waves)
	assert.Less(t, len(r.children), 12, "single freed slots are gathered into shared batches")
	assert.Equal(t, allStates(cs, status.Ready), statesOf(res.Deployments, "app"))
	assert.Empty(t, res.Waits)
}

// 9. A newer change stops the rollout: in-flight deploys finish, none
// starts after.
func TestRolloutStrategy_Supersede(t *testing.T) {
	cs := nClusters(4)
	r := newRig(t, cs, bundleAt("app", "m:o1"))
	r.strategies = []activities.BundleStrategy{{Bundle: "app", Plan: onePartition(1, cs)}}
	r.register()
	r.at(15*time.Second, func() { r.env.SignalWorkflow(protocol.SignalSupersede, nil) })
	res := r.run()

	assert.True(t, res.Superseded)
	assert.Equal(t, map[string]time.Duration{"c1": 0, "c2": 10 * time.Second}, r.deployStarts("app"),
		"c2 was in flight; nothing started after the signal")
	assert.Equal(t, map[string]status.State{"c1": status.Ready, "c2": status.Ready, "c3": status.Pending, "c4": status.Pending},
		statesOf(res.Deployments, "app"))
	assert.Empty(t, res.Halts)
}

// 9b. A ready wait cut short by a newer change is not a failure: the
// superseded rollout does not halt (or roll back) the bundle.
func TestRolloutStrategy_SupersedeDuringReadyWaitDoesNotHalt(t *testing.T) {
	cs := nClusters(2)
	r := newRig(t, cs, bundleAt("app", "m:o1"))
	plan := onePartition(2, cs)
	plan.FailureThreshold, plan.RollbackOnFailure = 0, true
	r.strategies = []activities.BundleStrategy{{Bundle: "app", Plan: plan}}
	for _, c := range cs {
		r.inventory = append(r.inventory, InventoryEntry{Bundle: "app", Cluster: c, Release: "app", Namespace: "default", DeploymentID: "m:old"})
	}
	r.deployState = func(string, string) status.State { return status.NotReady }
	r.readyDelay = func(string) time.Duration { return 50 * time.Second }
	r.register()
	r.at(20*time.Second, func() { r.env.SignalWorkflow(protocol.SignalSupersede, nil) })
	res := r.run()

	assert.True(t, res.Superseded)
	assert.Len(t, r.callsOf("WaitReady", "app"), 2)
	for _, c := range r.callsOf("WaitReady", "app") {
		assert.LessOrEqual(t, c.end, 21*time.Second, "the ready wait ends with the supersede")
	}
	assert.Empty(t, res.Halts, "a canceled ready wait is no failure")
	assert.Empty(t, r.callsOf("Rollback", ""))
}

// 5b. A rollback that fails as an activity (the cluster's queue is not
// served) is reported in the halt, and the inventory keeps what the
// cluster runs.
func TestRolloutStrategy_RollbackActivityFailureIsReported(t *testing.T) {
	cs := nClusters(3)
	r := newRig(t, cs, bundleAt("app", "m:o1"))
	plan := onePartition(3, cs)
	plan.FailureThreshold, plan.RollbackOnFailure = 0, true
	r.strategies = []activities.BundleStrategy{{Bundle: "app", Plan: plan}}
	for _, c := range cs {
		r.inventory = append(r.inventory, InventoryEntry{Bundle: "app", Cluster: c, Release: "app", Namespace: "default", DeploymentID: "m:old"})
	}
	r.deployState = func(_, c string) status.State {
		if c == "c3" {
			return status.ErrApplied
		}
		return status.Ready
	}
	var ca *activities.ClusterActivities
	r.env.OnActivity(ca.Rollback, mock.Anything, mock.MatchedBy(func(in activities.RollbackInput) bool { return in.Cluster == "c1" })).
		Return(activities.DeployResult{}, temporal.NewNonRetryableApplicationError("agent gone", "Unreachable", nil))
	r.register()
	res := r.run()

	require.Len(t, res.Halts, 1)
	h := res.Halts[0]
	assert.Equal(t, []string{"c3"}, h.Failed)
	assert.Equal(t, []string{"c2", "c3"}, h.RolledBack)
	if assert.Len(t, h.RollbackErrors, 1) {
		assert.Contains(t, h.RollbackErrors[0], "cluster c1")
		assert.Contains(t, h.RollbackErrors[0], "agent gone")
	}
	inv := map[string]string{}
	for _, e := range res.Inventory {
		inv[e.Cluster] = e.DeploymentID
	}
	assert.Equal(t, map[string]string{"c1": "m:o1", "c2": "m:old", "c3": "m:old"}, inv, "c1 still runs the new deployment")
}

// 4b. Waiting for a window while other bundles roll keeps one durable
// timer, not one per state change (each would stay in history).
func TestRolloutStrategy_WindowWaitKeepsOneTimer(t *testing.T) {
	cs := nClusters(8)
	r := newRig(t, cs, bundleAt("app", "m:o1"), bundleAt("web", "m:w1"))
	open := stratT0.Add(2 * time.Hour)
	r.strategies = []activities.BundleStrategy{
		{Bundle: "app", Plan: onePartition(10, cs), Windows: []strategy.Interval{{Start: open, End: open.Add(time.Hour)}}},
		{Bundle: "web", Plan: onePartition(1, cs)},
	}
	r.register()
	var timers []time.Duration
	r.env.SetOnTimerScheduledListener(func(_ string, d time.Duration) {
		r.mu.Lock()
		defer r.mu.Unlock()
		timers = append(timers, d)
	})
	res := r.run()

	web := r.deployStarts("web")
	assert.Len(t, web, 8)
	assert.Equal(t, 70*time.Second, web["c8"], "web rolls one cluster at a time meanwhile")
	for c, at := range r.deployStarts("app") {
		assert.Equal(t, 2*time.Hour, at, c)
	}
	assert.Equal(t, []time.Duration{2 * time.Hour}, timers, "one timer for the window")
	assert.Equal(t, allStates(cs, status.Ready), statesOf(res.Deployments, "app"))
	assert.Equal(t, allStates(cs, status.Ready), statesOf(res.Deployments, "web"))
}

// 5c. A bundle that halts after the rollout waited once (here for an
// approval) is still rolled back.
func TestRolloutStrategy_HaltAfterApprovalRollsBack(t *testing.T) {
	cs := nClusters(3)
	r := newRig(t, cs, bundleAt("app", "m:o1"))
	plan := twoPartitions(true)
	plan.FailureThreshold, plan.RollbackOnFailure = 0, true
	r.strategies = []activities.BundleStrategy{{Bundle: "app", Plan: plan}}
	for _, c := range cs {
		r.inventory = append(r.inventory, InventoryEntry{Bundle: "app", Cluster: c, Release: "app", Namespace: "default", DeploymentID: "m:old"})
	}
	r.deployState = func(_, c string) status.State {
		if c == "c2" {
			return status.ErrApplied
		}
		return status.Ready
	}
	r.register()
	r.at(time.Minute, func() {
		r.env.UpdateWorkflow(protocol.UpdateApprove, "approve", &testsuite.TestUpdateCallback{
			OnReject:   func(err error) { t.Errorf("approval rejected: %v", err) },
			OnAccept:   func() {},
			OnComplete: func(any, error) {},
		}, protocol.Approve{})
	})
	res := r.run()

	assert.Equal(t, map[string]time.Duration{"c1": 0, "c2": time.Minute, "c3": time.Minute}, r.deployStarts("app"))
	rolled := map[string]bool{}
	for _, c := range r.callsOf("Rollback", "") {
		assert.GreaterOrEqual(t, c.start, time.Minute+10*time.Second)
		rolled[c.cluster] = true
	}
	assert.Equal(t, map[string]bool{"c1": true, "c2": true, "c3": true}, rolled)
	if assert.Len(t, res.Halts, 1) {
		assert.Equal(t, []string{"c2"}, res.Halts[0].Failed)
		assert.Equal(t, []string{"c1", "c2", "c3"}, res.Halts[0].RolledBack)
	}
}

// A deploy that reports one bundle NotReady and another neither Ready nor
// NotReady (the release runs another deployment) waits only for the first;
// the second is settled, and the rollout ends.
func TestRolloutStrategy_MixedDeployResultSettles(t *testing.T) {
	cs := []string{"c1"}
	r := newRig(t, cs, bundleAt("a", "m:a1"), bundleAt("b", "m:b1"))
	r.deployState = func(b, _ string) status.State {
		if b == "a" {
			return status.NotReady
		}
		return status.WaitApplied
	}
	r.register()
	res := r.run()

	deploys := r.callsOf("Deploy", "")
	require.Len(t, deploys, 1)
	assert.Equal(t, []string{"a", "b"}, deploys[0].bundles, "both bundles of the cluster in one deploy")
	waits := r.callsOf("WaitReady", "")
	require.Len(t, waits, 1)
	assert.Equal(t, []string{"a"}, waits[0].bundles)
	assert.Equal(t, map[string]status.State{"a@c1": status.Ready, "b@c1": status.WaitApplied}, func() map[string]status.State {
		out := map[string]status.State{}
		for _, d := range res.Deployments {
			out[d.Key().String()] = d.State
		}
		return out
	}())
	assert.Less(t, r.env.Now().Sub(stratT0), time.Minute, "the rollout ended when a was Ready")
}

// 9c. A newer change reaches the batches of a large rollout: their ready
// waits end, and no deploy starts after it.
func TestRolloutStrategy_SupersedeFanOut(t *testing.T) {
	cs := nClusters(60)
	r := newRig(t, cs, bundleAt("app", "m:o1"))
	r.strategies = []activities.BundleStrategy{{Bundle: "app", Plan: onePartition(40, cs)}}
	r.deployState = func(string, string) status.State { return status.NotReady }
	r.readyDelay = func(string) time.Duration { return time.Hour }
	r.register()
	r.at(15*time.Second, func() { r.env.SignalWorkflow(protocol.SignalSupersede, nil) })
	res := r.run()

	assert.True(t, res.Superseded)
	assert.NotEmpty(t, r.children)
	starts := r.deployStarts("app")
	assert.Len(t, starts, 40, "only the first 40 clusters started")
	waits := r.callsOf("WaitReady", "app")
	assert.Len(t, waits, 40)
	for _, c := range waits {
		assert.LessOrEqual(t, c.end, 16*time.Second, "ready wait on %s ends with the supersede", c.cluster)
	}
	assert.Empty(t, res.Halts)
}

// 5d. A large rollout halts and rolls back through its batches.
func TestRolloutStrategy_FanOutHaltRollsBack(t *testing.T) {
	cs := nClusters(60)
	r := newRig(t, cs, bundleAt("app", "m:o1"))
	plan := onePartition(60, cs)
	plan.FailureThreshold, plan.RollbackOnFailure = 0, true
	r.strategies = []activities.BundleStrategy{{Bundle: "app", Plan: plan}}
	for _, c := range cs {
		r.inventory = append(r.inventory, InventoryEntry{Bundle: "app", Cluster: c, Release: "app", Namespace: "default", DeploymentID: "m:old"})
	}
	r.deployState = func(_, c string) status.State {
		if c == "c7" {
			return status.ErrApplied
		}
		return status.Ready
	}
	r.register()
	res := r.run()

	rolled := map[string]int{}
	for _, c := range r.callsOf("Rollback", "") {
		assert.NotEqual(t, "default-test-workflow-id", c.wf, "rollbacks run in batches")
		rolled[c.cluster]++
	}
	assert.Len(t, rolled, 60)
	for c, n := range rolled {
		assert.Equal(t, 1, n, c)
	}
	require.Len(t, res.Halts, 1)
	assert.Equal(t, []string{"c7"}, res.Halts[0].Failed)
	assert.Len(t, res.Halts[0].RolledBack, 60)
	for _, e := range res.Inventory {
		assert.Equal(t, "m:old", e.DeploymentID, e.Cluster)
	}
}

// outboxWorkflow adds n reports in one workflow task, then closes its
// outbox: what a batch does when many deploys end at once.
func outboxWorkflow(ctx workflow.Context, n int) error {
	out := &reportOutbox{rollout: "rollout/x"}
	sent := out.start(ctx)
	for i := range n {
		out.add(ctx, clusterReport{Cluster: fmt.Sprintf("c%d", i), Final: true})
	}
	out.close(ctx, sent)
	return nil
}

// Outcomes gathered while no signal is in flight go in one signal, at
// most maxReportsPerSignal each, in order, and none is lost.
func TestReportOutbox_GathersOutcomes(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(outboxWorkflow)
	var sizes []int
	var clusters []string
	env.OnSignalExternalWorkflow(mock.Anything, "rollout/x", "", signalClusterReports, mock.Anything).Return(
		func(_, _, _, _ string, arg any) error {
			reps := arg.([]clusterReport)
			sizes = append(sizes, len(reps))
			for _, r := range reps {
				clusters = append(clusters, r.Cluster)
			}
			return nil
		})
	env.ExecuteWorkflow(outboxWorkflow, 120)
	require.NoError(t, env.GetWorkflowError())
	assert.Equal(t, []int{maxReportsPerSignal, maxReportsPerSignal, 120 - 2*maxReportsPerSignal}, sizes)
	require.Len(t, clusters, 120)
	assert.Equal(t, "c0", clusters[0])
	assert.Equal(t, "c119", clusters[119])
}
