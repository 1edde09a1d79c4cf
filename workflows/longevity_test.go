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
}

func (f *longFleet) register(env *testsuite.TestWorkflowEnvironment) {
	var a *activities.Activities
	var ca *activities.ClusterActivities
	env.RegisterWorkflow(GitRepoWorkflow)
	env.RegisterWorkflow(RolloutWorkflow)
	env.OnActivity(a.ResolveCommit, mock.Anything, mock.Anything).Return(activities.ResolveResult{Ref: "refs/heads/main", Commit: appCommit}, nil)
	env.OnActivity(a.Render, mock.Anything, mock.Anything).Return(appBundles(appCommit), nil)
	env.OnActivity(a.TargetBundles, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.BundleTargetsInput) (activities.TargetsResult, error) {
			res := activities.TargetsResult{Registered: []string{"c1", "c2"}, Strategies: []rollout.BundleStrategy{{Bundle: "app",
				Plan: strategy.Plan{MaxUnavailable: 10, MaxUnavailablePartitions: 1, FailureThreshold: strategy.NoFailureThreshold,
					ReadyTimeout: 10 * time.Second, Partitions: []strategy.Partition{
						{Name: "p1", MaxUnavailable: 1, Clusters: []string{"c1"}},
						{Name: "p2", MaxUnavailable: 1, RequireApproval: true, Clusters: []string{"c2"}},
					}}}}}
			for _, c := range []string{"c1", "c2"} {
				res.Matched = append(res.Matched, activities.TargetCluster{Name: c, Bundles: in.Bundles})
			}
			return res, nil
		})
	result := func(in activities.DeployInput) activities.DeployResult {
		var res activities.DeployResult
		for _, b := range in.Bundles {
			d := status.Deployment{Bundle: b.Name, Cluster: in.Cluster, Release: b.Release, Namespace: b.Namespace,
				DeploymentID: b.DeploymentID, AppliedDeploymentID: b.DeploymentID, State: status.Ready, Resources: 2, ReadyResources: 2}
			if in.Cluster == "c1" {
				d.State, d.ReadyResources = status.NotReady, 1
			}
			res.Deployments = append(res.Deployments, d)
		}
		return res
	}
	env.OnActivity(ca.Deploy, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.DeployInput) (activities.DeployResult, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.deploys[in.Cluster]++
			for _, b := range in.Bundles {
				if f.running[in.Cluster] != b.DeploymentID {
					f.running[in.Cluster] = b.DeploymentID
					f.revisions[in.Cluster]++
				}
			}
			return result(in), nil
		})
	env.OnActivity(ca.WaitReady, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.WaitReadyInput) (activities.DeployResult, error) {
			return result(in.DeployInput), nil
		})
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
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	env := suite.NewTestWorkflowEnvironment()
	meter := &historyMeter{workflowType: "GitRepoWorkflow"}
	env.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: time.Minute, Interceptors: []interceptor.WorkerInterceptor{meter}})
	env.SetTestTimeout(15 * time.Minute)
	env.SetDetachedChildWait(false)
	f := &longFleet{revisions: map[string]int{}, deploys: map[string]int{}, running: map[string]string{}}
	f.register(env)
	env.RegisterWorkflow(entityDriver)

	id := protocol.GitRepoID("fleet-default", "app")
	const day = 24 * time.Hour
	statusOf := func() status.GitRepo {
		v, err := env.QueryWorkflowByID(id, protocol.QueryStatus)
		require.NoError(t, err)
		var st status.GitRepo
		require.NoError(t, v.Get(&st))
		return st
	}
	var rolloutID string
	var day1Revisions map[string]int
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflowByID(id, protocol.UpdateApply, "apply", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { t.Errorf("apply rejected: %v", err) }, OnAccept: func() {}, OnComplete: func(any, error) {},
		}, protocol.GitRepoApply{GitRepo: testGitRepo(false)})
	}, time.Second)
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
		env.UpdateWorkflowByID(rolloutID, protocol.UpdateApprove, "approve-p2", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { t.Errorf("approval refused: %v", err) }, OnAccept: func() {}, OnComplete: func(any, error) {},
		}, protocol.Approve{Partition: "p2"})
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
	env.ExecuteWorkflow(entityDriver, GitRepoInput{GitRepoStart: protocol.GitRepoStart{Namespace: "fleet-default", Name: "app"}})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	longest, runs := meter.max()
	t.Logf("%d GitRepo runs, the longest about %d events", runs, longest)
	assert.LessOrEqual(t, longest, 10_000, "no run grows past 10,000 events")
	assert.Greater(t, runs, 20, "the runs continued as new")
}
