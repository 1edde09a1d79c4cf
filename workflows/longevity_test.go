package workflows

import (
	"context"
	"log/slog"
	"maps"
	"os"
	"reflect"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/flotilla-gitops/flotilla/activities"
	"github.com/flotilla-gitops/flotilla/internal/outcome"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/rollout"
	"github.com/flotilla-gitops/flotilla/internal/status"
	"github.com/flotilla-gitops/flotilla/internal/strategy"
)

// historyMeter stands in for the history length Temporal's server keeps
// and the test environment does not: it estimates each workflow run's
// events from the commands the run issues and the messages it receives
// (an activity is scheduled, started and completed, and its completion
// takes a workflow task; a timer starts and fires; ...), always rounding
// up, and serves the estimate to the run as its
// GetInfo().GetCurrentHistoryLength(), so the run's history budget acts
// as it does on a server.
type historyMeter struct {
	interceptor.WorkerInterceptorBase
	mu sync.Mutex
	// runs are the estimates of every run of workflowType, in order.
	workflowType string
	runs         []*int
}

// Events each step adds, workflow tasks included.
const (
	eventsStart    = 4 // started, and the first workflow task
	eventsActivity = 6 // scheduled, started, completed, and a workflow task
	eventsTimer    = 5 // started, fired (or canceled), and a workflow task
	eventsSignal   = 4 // signaled, and a workflow task
	eventsSignalTo = 5 // initiated, signaled, and a workflow task
	eventsChild    = 9 // initiated, started, completed, and two workflow tasks
	eventsUpdate   = 5 // accepted, completed, and a workflow task
	eventsMarker   = 1 // a version or side effect marker, an upsert
)

func (m *historyMeter) InterceptWorkflow(ctx workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	if workflow.GetInfo(ctx).WorkflowType.Name != m.workflowType {
		return next
	}
	n := new(int)
	*n = eventsStart
	m.mu.Lock()
	m.runs = append(m.runs, n)
	m.mu.Unlock()
	return &meterInbound{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}, m: m, n: n}
}

func (m *historyMeter) add(n *int, events int) {
	m.mu.Lock()
	*n += events
	m.mu.Unlock()
}

// max is the longest run's estimate, and the number of runs.
func (m *historyMeter) max() (longest, runs int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, n := range m.runs {
		longest = max(longest, *n)
	}
	return longest, len(m.runs)
}

type meterInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	m *historyMeter
	n *int
}

func (i *meterInbound) Init(outbound interceptor.WorkflowOutboundInterceptor) error {
	return i.Next.Init(&meterOutbound{WorkflowOutboundInterceptorBase: interceptor.WorkflowOutboundInterceptorBase{Next: outbound},
		m: i.m, n: i.n, versions: map[string]bool{}})
}

func (i *meterInbound) HandleSignal(ctx workflow.Context, in *interceptor.HandleSignalInput) error {
	i.m.add(i.n, eventsSignal)
	return i.Next.HandleSignal(ctx, in)
}

func (i *meterInbound) ExecuteUpdate(ctx workflow.Context, in *interceptor.UpdateInput) (any, error) {
	i.m.add(i.n, eventsUpdate)
	return i.Next.ExecuteUpdate(ctx, in)
}

type meterOutbound struct {
	interceptor.WorkflowOutboundInterceptorBase
	m        *historyMeter
	n        *int
	versions map[string]bool
}

func (o *meterOutbound) ExecuteActivity(ctx workflow.Context, activityType string, args ...any) workflow.Future {
	o.m.add(o.n, eventsActivity)
	return o.Next.ExecuteActivity(ctx, activityType, args...)
}

func (o *meterOutbound) NewTimerWithOptions(ctx workflow.Context, d time.Duration, opts workflow.TimerOptions) workflow.Future {
	o.m.add(o.n, eventsTimer)
	return o.Next.NewTimerWithOptions(ctx, d, opts)
}

func (o *meterOutbound) NewTimer(ctx workflow.Context, d time.Duration) workflow.Future {
	o.m.add(o.n, eventsTimer)
	return o.Next.NewTimer(ctx, d)
}

func (o *meterOutbound) SignalExternalWorkflow(ctx workflow.Context, id, runID, name string, arg any) workflow.Future {
	o.m.add(o.n, eventsSignalTo)
	return o.Next.SignalExternalWorkflow(ctx, id, runID, name, arg)
}

func (o *meterOutbound) ExecuteChildWorkflow(ctx workflow.Context, childWorkflowType string, args ...any) workflow.ChildWorkflowFuture {
	o.m.add(o.n, eventsChild)
	return o.Next.ExecuteChildWorkflow(ctx, childWorkflowType, args...)
}

func (o *meterOutbound) UpsertTypedSearchAttributes(ctx workflow.Context, attrs ...temporal.SearchAttributeUpdate) error {
	o.m.add(o.n, eventsMarker)
	return o.Next.UpsertTypedSearchAttributes(ctx, attrs...)
}

func (o *meterOutbound) GetVersion(ctx workflow.Context, changeID string, minSupported, maxSupported workflow.Version) workflow.Version {
	if !o.versions[changeID] {
		o.versions[changeID] = true
		o.m.add(o.n, eventsMarker)
	}
	return o.Next.GetVersion(ctx, changeID, minSupported, maxSupported)
}

// GetInfo serves the run its estimated history length.
//
//workflowcheck:ignore test harness: sets one field of a copy, the same on every replay
func (o *meterOutbound) GetInfo(ctx workflow.Context) *workflow.Info {
	info := *o.Next.GetInfo(ctx)
	o.m.mu.Lock()
	n := *o.n
	o.m.mu.Unlock()
	f := reflect.ValueOf(&info).Elem().FieldByName("currentHistoryLength")
	reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().SetInt(int64(n))
	return &info
}

// entityDriver runs a GitRepo's workflow as its child, as a server runs
// it: the test environment follows a child's continue-as-new (a new run
// under the same ID) but ends the test at the root's.
func entityDriver(ctx workflow.Context, in GitRepoInput) error {
	ctx = workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{WorkflowID: protocol.GitRepoID(in.Namespace, in.Name)})
	return workflow.ExecuteChildWorkflow(ctx, GitRepoWorkflow, in).Get(ctx, nil)
}

// runEntityDriver runs the test GitRepo under entityDriver to its end,
// which must be clean.
func runEntityDriver(t *testing.T, env *testsuite.TestWorkflowEnvironment) {
	t.Helper()
	env.ExecuteWorkflow(entityDriver, GitRepoInput{GitRepoStart: protocol.GitRepoStart{Namespace: "fleet-default", Name: "app"}})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
}

// longFleet answers a GitRepo of one bundle on two clusters: c1 in
// partition p1, whose deployment never becomes Ready, and c2 in p2, which
// requires approval.
type longFleet struct {
	mu sync.Mutex
	// revisions counts, per cluster, deploys that changed the deployment
	// ID the cluster runs (Helm revisions); deploys counts every deploy.
	revisions, deploys map[string]int
	running            map[string]string
	rollouts           int
	// commit is what the remote answers; plan how the bundle rolls out
	// over clusters.
	commit   string
	clusters []string
	plan     strategy.Plan
	// notReady are the clusters whose deployment is not Ready; a ready
	// wait takes readyAfter.
	notReady   map[string]bool
	readyAfter time.Duration
	// unreachable are the clusters whose deploys cannot reach them.
	unreachable map[string]bool
}

// newLongFleet is a fleet of c1 (p1) and c2 (p2, approval required),
// where c1's deployment never becomes Ready and a partition may start
// while one before it is unavailable.
func newLongFleet() *longFleet {
	return &longFleet{revisions: map[string]int{}, deploys: map[string]int{}, running: map[string]string{},
		commit: appCommit, clusters: []string{"c1", "c2"}, notReady: map[string]bool{"c1": true},
		plan: strategy.Plan{MaxUnavailable: 10, MaxUnavailablePartitions: 1, FailureThreshold: strategy.NoFailureThreshold,
			ReadyTimeout: 10 * time.Second, Partitions: []strategy.Partition{
				{Name: "p1", MaxUnavailable: 1, Clusters: []string{"c1"}},
				{Name: "p2", MaxUnavailable: 1, RequireApproval: true, Clusters: []string{"c2"}},
			}}}
}

func (f *longFleet) register(env *testsuite.TestWorkflowEnvironment) {
	var a *activities.Activities
	var ca *activities.ClusterActivities
	env.RegisterWorkflow(GitRepoWorkflow)
	env.RegisterWorkflow(RolloutWorkflow)
	registerPlan(env, nil)
	allowPolicies(env)
	env.OnActivity(a.ResolveCommit, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.ResolveInput) (activities.ResolveResult, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			return activities.ResolveResult{Ref: "refs/heads/main", Commit: f.commit}, nil
		})
	env.OnActivity(a.Render, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.RenderInput) (activities.RenderResult, error) {
			return appBundles(in.Commit), nil
		})
	env.OnActivity(a.TargetBundles, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.BundleTargetsInput) (activities.TargetsResult, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			res := activities.TargetsResult{Registered: f.clusters, Strategies: []rollout.BundleStrategy{{Bundle: "app", Plan: f.plan}}}
			for _, c := range f.clusters {
				res.Matched = append(res.Matched, activities.TargetCluster{Name: c, Bundles: in.Bundles})
			}
			return res, nil
		})
	result := func(in activities.DeployInput) activities.DeployResult {
		var res activities.DeployResult
		for _, b := range in.Bundles {
			d := status.Deployment{Bundle: b.Name, Cluster: in.Cluster, Release: b.Release, Namespace: b.Namespace,
				DeploymentID: b.DeploymentID, AppliedDeploymentID: b.DeploymentID, State: status.Ready, Resources: 2, ReadyResources: 2}
			f.mu.Lock()
			if f.notReady[in.Cluster] {
				d.State, d.ReadyResources = status.NotReady, 1
			}
			f.mu.Unlock()
			res.Deployments = append(res.Deployments, d)
		}
		return res
	}
	env.OnActivity(ca.Deploy, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.DeployInput) (activities.DeployResult, error) {
			f.mu.Lock()
			f.deploys[in.Cluster]++
			if f.unreachable[in.Cluster] {
				f.mu.Unlock()
				return activities.DeployResult{Retry: true, Class: outcome.Unreachable, Message: "cluster " + in.Cluster + ": connection refused"}, nil
			}
			for _, b := range in.Bundles {
				if f.running[in.Cluster] != b.DeploymentID {
					f.running[in.Cluster] = b.DeploymentID
					f.revisions[in.Cluster]++
				}
			}
			f.mu.Unlock()
			return result(in), nil
		})
	env.OnActivity(ca.WaitReady, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.WaitReadyInput) (activities.DeployResult, error) {
			return result(in.DeployInput), nil
		}).After(f.readyAfter)
	env.OnActivity(ca.Cleanup, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.CleanupInput) (activities.CleanupResult, error) {
			var res activities.CleanupResult
			for _, r := range in.Releases {
				res.Removed = append(res.Removed, r.Namespace+"/"+r.Release)
			}
			return res, nil
		})
	env.OnActivity(a.SendWatchSets, mock.Anything, mock.Anything).Return(activities.WatchSetsResult{}, nil)
	env.OnActivity(a.WorkflowRun, mock.Anything, mock.Anything).Return(activities.WorkflowRunResult{Running: true, Status: "Running"}, nil)
	env.SetOnChildWorkflowStartedListener(func(info *workflow.Info, _ workflow.Context, _ converter.EncodedValues) {
		if info.WorkflowType.Name == "RolloutWorkflow" {
			f.mu.Lock()
			f.rollouts++
			f.mu.Unlock()
		}
	})
}

func (f *longFleet) counts() (revisions, deploys map[string]int, rollouts int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.revisions), maps.Clone(f.deploys), f.rollouts
}

const appCommit = "c0ffee0000000000000000000000000000000001"

// longEnv is a test environment for a GitRepo's workflow run under
// entityDriver, with a historyMeter and a longFleet.
func longEnv(t *testing.T, configure ...func(*longFleet)) (*testsuite.TestWorkflowEnvironment, *longFleet, *historyMeter) {
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	env := suite.NewTestWorkflowEnvironment()
	meter := &historyMeter{workflowType: "GitRepoWorkflow"}
	env.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: time.Minute, Interceptors: []interceptor.WorkerInterceptor{meter}})
	env.SetTestTimeout(15 * time.Minute)
	env.SetDetachedChildWait(false)
	f := newLongFleet()
	for _, c := range configure {
		c(f)
	}
	f.register(env)
	env.RegisterWorkflow(entityDriver)
	return env, f, meter
}

func queryByID[T any](t *testing.T, env *testsuite.TestWorkflowEnvironment, id string) T {
	t.Helper()
	var out T
	v, err := env.QueryWorkflowByID(id, protocol.QueryStatus)
	require.NoError(t, err)
	require.NoError(t, v.Get(&out))
	return out
}

func applyByID(t *testing.T, env *testsuite.TestWorkflowEnvironment, id string) {
	require.NoError(t, env.UpdateWorkflowByID(id, protocol.UpdateApply, "apply", &testsuite.TestUpdateCallback{
		OnReject: func(err error) { t.Errorf("apply rejected: %v", err) }, OnAccept: func() {}, OnComplete: func(any, error) {},
	}, protocol.GitRepoApply{GitRepo: testGitRepo(false)}))
}

func approveByID(t *testing.T, env *testsuite.TestWorkflowEnvironment, rolloutID, partition string) {
	err := env.UpdateWorkflowByID(rolloutID, protocol.UpdateApprove, "approve-"+partition, &testsuite.TestUpdateCallback{
		OnReject: func(err error) { t.Errorf("approval of %s refused: %v", partition, err) }, OnAccept: func() {},
		OnComplete: func(_ any, err error) { assert.NoError(t, err, "approval of %s", partition) },
	}, protocol.Approve{Partition: partition})
	require.NoError(t, err, "approval of %s", partition)
}

// approvalWaits lists the partitions a rollout waits to be approved.
func approvalWaits(st status.Rollout) []string {
	var out []string
	for _, w := range st.Waits {
		if w.Kind == status.WaitApproval {
			out = append(out, w.Partition)
		}
	}
	return out
}

// A rollout that replaces another for the same commit (a cluster change
// superseded it) keeps the approvals of partitions that deploy the same;
// a new commit needs new ones. An approval sent while a rollout renders
// waits for its plan.
func TestGitRepoWorkflow_ApprovalsSurviveSupersede(t *testing.T) {
	// p1 (c1) and p2 (c2) both need approval, and p2 starts only once p1
	// is Ready; c1 takes 5 minutes to become Ready.
	env, f, _ := longEnv(t, func(f *longFleet) {
		f.plan.Partitions[0].RequireApproval = true
		f.plan.MaxUnavailablePartitions = 0
		f.plan.ReadyTimeout = 10 * time.Minute
		f.readyAfter = 5 * time.Minute
	})
	id := protocol.GitRepoID("fleet-default", "app")
	const next = "beef000000000000000000000000000000000002"
	var first string
	env.RegisterDelayedCallback(func() { applyByID(t, env, id) }, time.Second)
	env.RegisterDelayedCallback(func() {
		first = queryByID[status.GitRepo](t, env, id).Rollout
		require.NotEmpty(t, first)
		assert.Equal(t, []string{"p1"}, approvalWaits(queryByID[status.Rollout](t, env, first)))
		approveByID(t, env, first, "p1")
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		revisions, _, _ := f.counts()
		require.Equal(t, map[string]int{"c1": 1}, revisions, "p1 approved: c1 deployed")
		approveByID(t, env, first, "p2") // approved ahead: p1 is not Ready yet
	}, 2*time.Minute)
	env.RegisterDelayedCallback(func() {
		revisions, _, _ := f.counts()
		require.Equal(t, map[string]int{"c1": 1}, revisions, "p2 waits for p1")
		// c1 is Ready now, and a cluster change supersedes the rollout:
		// the next one, of the same commit, confirms c1 and goes on to p2
		// on the approval given to the first.
		f.mu.Lock()
		f.notReady = map[string]bool{}
		f.mu.Unlock()
		require.NoError(t, env.SignalWorkflowByID(id, protocol.SignalClustersChanged, nil))
	}, 3*time.Minute)
	env.RegisterDelayedCallback(func() {
		revisions, _, rollouts := f.counts()
		require.Equal(t, 2, rollouts, "the cluster change superseded the first rollout")
		assert.Equal(t, map[string]int{"c1": 1, "c2": 1}, revisions, "p2's approval was kept")
		f.mu.Lock()
		f.commit = next
		f.mu.Unlock()
		require.NoError(t, env.SignalWorkflowByID(id, protocol.SignalPush, protocol.Push{Provider: "github", Ref: "refs/heads/main", Commit: next}))
	}, 4*time.Minute)
	env.RegisterDelayedCallback(func() {
		third := queryByID[status.GitRepo](t, env, id).Rollout
		require.NotEmpty(t, third)
		assert.Equal(t, []string{"p1"}, approvalWaits(queryByID[status.Rollout](t, env, third)), "a new commit needs new approvals")
		require.NoError(t, env.SignalWorkflowByID(id, protocol.SignalDelete, nil))
	}, 5*time.Minute)
	runEntityDriver(t, env)
}

// A rollout that stopped where a partition waits for the one before it to
// become Ready goes on when a cluster's watch reports it Ready (no poll
// does it).
func TestGitRepoWorkflow_ReadyReportProceeds(t *testing.T) {
	env, f, _ := longEnv(t, func(f *longFleet) {
		f.plan.Partitions[1].RequireApproval = false
		f.plan.MaxUnavailablePartitions = 0
	})
	id := protocol.GitRepoID("fleet-default", "app")
	env.RegisterDelayedCallback(func() { applyByID(t, env, id) }, time.Second)
	env.RegisterDelayedCallback(func() {
		revisions, _, rollouts := f.counts()
		require.Equal(t, map[string]int{"c1": 1}, revisions, "p2 waits for c1 to be Ready")
		require.Equal(t, 1, rollouts)
		st := queryByID[status.GitRepo](t, env, id)
		require.Empty(t, st.Rollout, "the rollout ended: nothing can start until c1 is Ready")
		f.mu.Lock()
		f.notReady = map[string]bool{}
		f.mu.Unlock()
		ready := status.LiveReport{Bundle: "app", Release: "app", Namespace: "default", DeploymentID: appBundles(appCommit).Bundles[0].DeploymentID, Resources: 2, Ready: 2}
		require.NoError(t, env.SignalWorkflowByID(id, protocol.SignalLive, status.LiveSignal{Cluster: "c1", Reports: []status.LiveReport{ready}}))
	}, 10*time.Minute)
	env.RegisterDelayedCallback(func() {
		revisions, _, rollouts := f.counts()
		assert.Equal(t, map[string]int{"c1": 1, "c2": 1}, revisions, "p2 started")
		assert.Equal(t, 2, rollouts)
		require.NoError(t, env.SignalWorkflowByID(id, protocol.SignalDelete, nil))
	}, 11*time.Minute)
	runEntityDriver(t, env)
}

// A cluster that does not answer holds a rollout for the pickup timeout
// only: the other clusters get each commit at once, the cluster shows
// WaitApplied naming it with its retry time, and once it answers again it
// gets the newest commit, once.
func TestGitRepoWorkflow_UnreachableClusterBlocksNothing(t *testing.T) {
	env, f, _ := longEnv(t, func(f *longFleet) {
		f.plan.Partitions = []strategy.Partition{{Name: "all", MaxUnavailable: 10, Clusters: []string{"c1", "c2"}}}
		f.notReady = map[string]bool{}
		f.unreachable = map[string]bool{"c1": true}
	})
	id := protocol.GitRepoID("fleet-default", "app")
	const next = "beef000000000000000000000000000000000002"
	env.RegisterDelayedCallback(func() { applyByID(t, env, id) }, time.Second)
	env.RegisterDelayedCallback(func() {
		st := queryByID[status.GitRepo](t, env, id)
		assert.Empty(t, st.Rollout, "the rollout ended: c1 held it for the pickup timeout only")
		assert.Equal(t, status.Ready, deployment(t, st, "c2").State)
		c1 := deployment(t, st, "c1")
		assert.Equal(t, status.WaitApplied, c1.State)
		assert.Contains(t, c1.Message, "cluster c1")
		assert.NotEmpty(t, c1.NextRetry, "retried on the failure backoff")
		f.mu.Lock()
		f.commit = next
		f.mu.Unlock()
		require.NoError(t, env.SignalWorkflowByID(id, protocol.SignalPush, protocol.Push{Provider: "github", Ref: "refs/heads/main", Commit: next}))
	}, 2*time.Minute+30*time.Second)
	env.RegisterDelayedCallback(func() {
		revisions, _, _ := f.counts()
		assert.Equal(t, 2, revisions["c2"], "the new commit reached c2 at once")
		assert.Zero(t, revisions["c1"])
		f.mu.Lock()
		f.unreachable = map[string]bool{}
		f.mu.Unlock()
	}, 2*time.Minute+40*time.Second)
	env.RegisterDelayedCallback(func() {
		revisions, _, _ := f.counts()
		assert.Equal(t, map[string]int{"c1": 1, "c2": 2}, revisions, "c1 got the newest commit, once")
		st := queryByID[status.GitRepo](t, env, id)
		assert.Equal(t, status.Ready, deployment(t, st, "c1").State)
		assert.Equal(t, next, st.Commit)
		require.NoError(t, env.SignalWorkflowByID(id, protocol.SignalDelete, nil))
	}, 4*time.Minute)
	runEntityDriver(t, env)
}

// A sync that supersedes a running rollout of the same commit and
// generation starts the next rollout, of the same ID, without an error.
// (On a real server the restart once looped forever: the rollout's result
// came by signal before it closed, and a child of an ID still open cannot
// start. The test environment lets it start; TestLongevity's
// TerminatedRolloutForgetsNothing, on a real server, catches that.)
func TestGitRepoWorkflow_SupersedeSameIDRestarts(t *testing.T) {
	env, f, _ := longEnv(t, func(f *longFleet) {
		f.plan.Partitions = []strategy.Partition{{Name: "all", MaxUnavailable: 10, Clusters: []string{"c1", "c2"}}}
		f.plan.ReadyTimeout = 10 * time.Minute
		f.readyAfter = 5 * time.Minute
	})
	id := protocol.GitRepoID("fleet-default", "app")
	env.RegisterDelayedCallback(func() { applyByID(t, env, id) }, time.Second)
	env.RegisterDelayedCallback(func() {
		require.NotEmpty(t, queryByID[status.GitRepo](t, env, id).Rollout, "the rollout waits for c1")
		require.NoError(t, env.SignalWorkflowByID(id, protocol.SignalSync, nil))
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		st := queryByID[status.GitRepo](t, env, id)
		_, _, rollouts := f.counts()
		assert.Equal(t, 2, rollouts, "the sync superseded the first rollout and started another")
		assert.Equal(t, int64(1), st.Syncs)
		assert.Empty(t, st.Error)
		require.NoError(t, env.SignalWorkflowByID(id, protocol.SignalDelete, nil))
	}, 2*time.Minute)
	runEntityDriver(t, env)
}

// A GitRepo polled every 15 s for 30 days, with a deployment that never
// becomes Ready and a rollout waiting for approval from day 1 to day 29:
// polls start no rollout and supersede none, the runs continue as new
// within their history budget while the rollout waits, the approval of
// day 29 reaches the rollout and starts its partition, and no cluster
// gets a Helm revision it did not need.
func TestGitRepoWorkflow_ThirtyDays(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("simulates 30 days of polling (about a minute; make test runs it without -race)")
	}
	env, f, meter := longEnv(t)
	id := protocol.GitRepoID("fleet-default", "app")
	const day = 24 * time.Hour
	statusOf := func() status.GitRepo { return queryByID[status.GitRepo](t, env, id) }
	var rolloutID string
	var day1Revisions map[string]int
	env.RegisterDelayedCallback(func() { applyByID(t, env, id) }, time.Second)
	env.RegisterDelayedCallback(func() {
		st := statusOf()
		rolloutID = st.Rollout
		require.NotEmpty(t, rolloutID, "the rollout waits for approval")
		day1Revisions, _, _ = f.counts()
		assert.Equal(t, map[string]int{"c1": 1}, day1Revisions)
	}, day)
	env.RegisterDelayedCallback(func() {
		st := statusOf()
		assert.Equal(t, rolloutID, st.Rollout, "the same rollout still waits")
		revisions, _, rollouts := f.counts()
		assert.Equal(t, day1Revisions, revisions, "no Helm revision in 28 days")
		assert.Equal(t, 1, rollouts, "no rollout started by polls: none superseded without a change")
		approveByID(t, env, rolloutID, "p2")
	}, 29*day)
	env.RegisterDelayedCallback(func() {
		revisions, _, rollouts := f.counts()
		assert.Equal(t, map[string]int{"c1": 1, "c2": 1}, revisions, "the approval started p2: c2 deployed once")
		assert.Equal(t, 1, rollouts)
		st := statusOf()
		assert.Equal(t, status.Ready, deployment(t, st, "c2").State)
		assert.Empty(t, st.Rollout, "the rollout reported its end to the current run")
		assert.Equal(t, appCommit, st.Commit)
	}, 29*day+time.Minute)
	env.RegisterDelayedCallback(func() {
		revisions, _, rollouts := f.counts()
		assert.Equal(t, map[string]int{"c1": 1, "c2": 1}, revisions)
		assert.Equal(t, 1, rollouts, "a NotReady deployment starts no rollout")
		require.NoError(t, env.SignalWorkflowByID(id, protocol.SignalDelete, nil))
	}, 30*day)
	runEntityDriver(t, env)
	longest, runs := meter.max()
	t.Logf("%d GitRepo runs, the longest about %d events", runs, longest)
	assert.LessOrEqual(t, longest, 10_000, "no run grows past 10,000 events")
	assert.Greater(t, runs, 20, "the runs continued as new")
}
