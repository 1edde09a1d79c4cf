package workflows

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/flotilla-gitops/flotilla/activities"
	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/rollout"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

// fakeFleet answers the activities of a GitRepo with two clusters and
// records what was deployed and cleaned.
type fakeFleet struct {
	mu       sync.Mutex
	commit   string
	matched  []string
	deploys  map[string]int // cluster → deploy calls
	cleanups map[string][]string
	// resolves counts ls-remotes; while gitDown is set they fail.
	resolves int
	gitDown  bool
	// notReady makes deploys report NotReady.
	notReady bool
	// targetings counts TargetBundles calls: one per rollout.
	targetings int
	// guard is the controller's deletion guard.
	guard rollout.DeletionGuard
	// policies answer CheckPolicy; targetSpecs are the specs the
	// rollouts targeted with.
	policies    *fakePolicies
	targetSpecs []api.GitRepoSpec
	// resolveHook, when set, answers ResolveCommit (after gitDown);
	// resolveIns and resolveTimes record each call, renders counts
	// Render calls.
	resolveHook  func(activities.ResolveInput) (activities.ResolveResult, error)
	resolveIns   []activities.ResolveInput
	resolveTimes []time.Time
	renders      int
}

func newFakeFleet() *fakeFleet {
	return &fakeFleet{commit: "c0ffee0000000000000000000000000000000001", matched: []string{"c1", "c2"},
		deploys: map[string]int{}, cleanups: map[string][]string{}}
}

func (f *fakeFleet) register(env *testsuite.TestWorkflowEnvironment) {
	var a *activities.Activities
	var ca *activities.ClusterActivities
	env.RegisterWorkflow(RolloutWorkflow)
	f.policies = allowPolicies(env)
	env.OnActivity(a.ResolveCommit, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.ResolveInput) (activities.ResolveResult, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.resolves++
			f.resolveIns, f.resolveTimes = append(f.resolveIns, in), append(f.resolveTimes, env.Now())
			if f.gitDown {
				return activities.ResolveResult{}, temporal.NewNonRetryableApplicationError("connection refused", "Git", nil)
			}
			if f.resolveHook != nil {
				return f.resolveHook(in)
			}
			return activities.ResolveResult{Ref: "refs/heads/main", Commit: f.commit}, nil
		})
	env.OnActivity(a.Render, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.RenderInput) (activities.RenderResult, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.renders++
			return appBundles(in.Commit), nil
		})
	env.OnActivity(a.TargetBundles, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.BundleTargetsInput) (activities.TargetsResult, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.targetings++
			f.targetSpecs = append(f.targetSpecs, in.Spec)
			res := activities.TargetsResult{Registered: []string{"c1", "c2"}, DeletionGuard: f.guard}
			for _, c := range f.matched {
				res.Matched = append(res.Matched, activities.TargetCluster{Name: c, Bundles: in.Bundles})
			}
			return res, nil
		})
	env.OnActivity(ca.Deploy, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.DeployInput) (activities.DeployResult, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.deploys[in.Cluster]++
			var res activities.DeployResult
			for _, b := range in.Bundles {
				res.Deployments = append(res.Deployments, status.Deployment{Bundle: b.Name, Cluster: in.Cluster,
					Release: b.Release, Namespace: b.Namespace, DeploymentID: b.DeploymentID,
					AppliedDeploymentID: b.DeploymentID, State: status.Ready, Resources: 1, ReadyResources: 1})
				if f.notReady {
					d := &res.Deployments[len(res.Deployments)-1]
					d.State, d.ReadyResources = status.NotReady, 0
				}
			}
			return res, nil
		})
	env.OnActivity(a.SendWatchSets, mock.Anything, mock.Anything).Return(activities.WatchSetsResult{}, nil)
	env.OnActivity(ca.Cleanup, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.CleanupInput) (activities.CleanupResult, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			var res activities.CleanupResult
			for _, r := range in.Releases {
				f.cleanups[in.Cluster] = append(f.cleanups[in.Cluster], r.Release)
				res.Removed = append(res.Removed, r.Namespace+"/"+r.Release)
			}
			return res, nil
		})
}

// appInput starts the test GitRepo's workflow as the CLI does.
var appInput = GitRepoInput{GitRepoStart: protocol.GitRepoStart{Namespace: "fleet-default", Name: "app"}}

func testGitRepo(keep bool) api.GitRepo {
	return api.GitRepo{Metadata: api.ObjectMeta{Name: "app", Namespace: "fleet-default"},
		Spec: api.GitRepoSpec{Repo: "https://git.example/app.git", KeepResources: keep}}
}

func applyUpdate(t *testing.T, env *testsuite.TestWorkflowEnvironment, repo api.GitRepo) {
	applyUpdateID(t, env, "apply-"+repo.Metadata.Name, repo)
}

// applyUpdateID applies repo as update id; the server drops a second
// update with an ID it has seen.
func applyUpdateID(t *testing.T, env *testsuite.TestWorkflowEnvironment, id string, repo api.GitRepo) {
	env.UpdateWorkflow(protocol.UpdateApply, id, &testsuite.TestUpdateCallback{
		OnReject:   func(err error) { t.Errorf("apply rejected: %v", err) },
		OnComplete: func(any, error) {},
	}, protocol.GitRepoApply{GitRepo: repo})
}

// gitRepoEnv is a workflow test environment serving the fake fleet's
// activities.
func gitRepoEnv() (*testsuite.TestWorkflowEnvironment, *fakeFleet) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	f := newFakeFleet()
	f.register(env)
	return env, f
}

// runGitRepo runs the test GitRepo's workflow to its end, which must be
// clean.
func runGitRepo(t *testing.T, env *testsuite.TestWorkflowEnvironment) {
	t.Helper()
	env.ExecuteWorkflow(GitRepoWorkflow, appInput)
	require.NoError(t, env.GetWorkflowError())
}

func queryStatus(t *testing.T, env *testsuite.TestWorkflowEnvironment) status.GitRepo {
	v, err := env.QueryWorkflow(protocol.QueryStatus)
	require.NoError(t, err)
	var st status.GitRepo
	require.NoError(t, v.Get(&st))
	return st
}

func TestGitRepoWorkflow_RollsOutRetargetsAndDeletes(t *testing.T) {
	env, f := gitRepoEnv()

	env.RegisterDelayedCallback(func() { applyUpdate(t, env, testGitRepo(false)) }, 0)
	env.RegisterDelayedCallback(func() {
		st := queryStatus(t, env)
		assert.Equal(t, f.commit, st.Commit)
		assert.Equal(t, 2, st.Summary.Ready, "deployed on both clusters")
		assert.True(t, st.Settled)
		// Retarget to c1 only: c2 must be cleaned up.
		f.mu.Lock()
		f.matched = []string{"c1"}
		f.mu.Unlock()
		env.SignalWorkflow(protocol.SignalClustersChanged, nil)
	}, 5*time.Second)
	env.RegisterDelayedCallback(func() {
		st := queryStatus(t, env)
		assert.Equal(t, 1, st.Summary.Desired)
		f.mu.Lock()
		assert.Equal(t, []string{"app"}, f.cleanups["c2"])
		f.mu.Unlock()
		env.SignalWorkflow(protocol.SignalDelete, nil)
	}, 10*time.Second)

	env.ExecuteWorkflow(GitRepoWorkflow, appInput)
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	assert.Equal(t, []string{"app"}, f.cleanups["c1"], "delete uninstalls the remaining release")
}

// A burst of cluster changes while a rollout runs (a thousand clusters
// registering) supersedes it once, when the burst pauses, not once per
// change; a change while nothing runs is acted on at once.
func TestGitRepoWorkflow_CoalescesClusterBursts(t *testing.T) {
	env, f := gitRepoEnv()
	// Deploys report NotReady and readiness takes 30 s: the rollout runs.
	readyAfter(env, 30*time.Second)
	f.notReady = true
	repo := testGitRepo(false)
	repo.Spec.DisablePolling = true // no refreshes of the NotReady deployments
	env.RegisterDelayedCallback(func() { applyUpdate(t, env, repo) }, 0)
	for i := range 20 { // 5 s … 14.5 s
		env.RegisterDelayedCallback(func() { env.SignalWorkflow(protocol.SignalClustersChanged, nil) },
			5*time.Second+time.Duration(i)*500*time.Millisecond)
	}
	env.RegisterDelayedCallback(func() {
		f.set(func() { assert.Equal(t, 1, f.targetings, "changes still coming: the rollout goes on") })
	}, 9*time.Second)
	env.RegisterDelayedCallback(func() {
		f.set(func() { assert.Equal(t, 2, f.targetings, "superseded once, 5 s after the first change") })
	}, 14*time.Second)
	env.RegisterDelayedCallback(func() {
		f.set(func() {
			assert.Equal(t, 3, f.targetings, "the rest of the burst (10.5 s … 14.5 s): once more, at 15.5 s")
			f.notReady = false
		})
	}, 40*time.Second)
	env.RegisterDelayedCallback(func() {
		st := queryStatus(t, env)
		assert.True(t, st.Settled)
		assert.Equal(t, 2, st.Summary.Ready)
		// Idle: a change re-targets at once.
		env.SignalWorkflow(protocol.SignalClustersChanged, nil)
	}, 100*time.Second)
	env.RegisterDelayedCallback(func() {
		f.set(func() { assert.Equal(t, 4, f.targetings, "idle: at once") })
		env.SignalWorkflow(protocol.SignalDelete, nil)
	}, 100*time.Second+100*time.Millisecond)
	runGitRepo(t, env)
}

// readyAfter makes WaitReady report every deployment Ready after d.
func readyAfter(env *testsuite.TestWorkflowEnvironment, d time.Duration) {
	var ca *activities.ClusterActivities
	env.OnActivity(ca.WaitReady, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.WaitReadyInput) (activities.DeployResult, error) {
			var res activities.DeployResult
			for _, b := range in.Bundles {
				res.Deployments = append(res.Deployments, status.Deployment{Bundle: b.Name, Cluster: in.Cluster, Release: b.Release,
					Namespace: b.Namespace, DeploymentID: b.DeploymentID, AppliedDeploymentID: b.DeploymentID, State: status.Ready})
			}
			return res, nil
		}).After(d)
}

func TestGitRepoWorkflow_InvalidSpecIsRejected(t *testing.T) {
	env, _ := gitRepoEnv()
	bad := testGitRepo(false)
	bad.Spec.Targets = []api.TargetSelector{{ClusterName: "Not_A_Name"}}
	var rejected error
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(protocol.UpdateApply, "bad", &testsuite.TestUpdateCallback{
			OnReject:   func(err error) { rejected = err },
			OnAccept:   func() { t.Error("invalid spec accepted") },
			OnComplete: func(any, error) {},
		}, protocol.GitRepoApply{GitRepo: bad})
	}, 0)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(protocol.SignalDelete, nil) }, time.Second)
	env.ExecuteWorkflow(GitRepoWorkflow, appInput)
	require.Error(t, rejected)
	assert.Contains(t, rejected.Error(), "spec.targets[0].clusterName")
}

func TestGitRepoWorkflow_NewCommitSupersedesAndUpgrades(t *testing.T) {
	env, f := gitRepoEnv()
	env.RegisterDelayedCallback(func() { applyUpdate(t, env, testGitRepo(true)) }, 0)
	env.RegisterDelayedCallback(func() {
		f.mu.Lock()
		f.commit = "beef000000000000000000000000000000000002"
		f.mu.Unlock()
	}, 5*time.Second)
	// The default 15 s poll finds the new commit.
	env.RegisterDelayedCallback(func() {
		st := queryStatus(t, env)
		assert.Equal(t, "beef000000000000000000000000000000000002", st.Commit)
		for _, d := range st.Deployments {
			assert.Equal(t, "s-beef00:h", d.AppliedDeploymentID)
		}
		env.SignalWorkflow(protocol.SignalDelete, nil)
	}, 40*time.Second)
	runGitRepo(t, env)
	assert.Equal(t, 2, f.deploys["c1"], "one deploy per commit")
}

// An unreachable cluster is retried with backoff inside the rollout; the
// other clusters deploy meanwhile, and the rollout converges when it
// answers. (Regression: the backoff once blocked on the wrong context and
// panicked the workflow task.)
func TestRolloutWorkflow_RetriesUnreachableCluster(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	f := newFakeFleet()
	var ca *activities.ClusterActivities
	calls := 0
	env.OnActivity(ca.Deploy, mock.Anything, mock.MatchedBy(func(in activities.DeployInput) bool { return in.Cluster == "c2" })).
		Return(func(_ context.Context, in activities.DeployInput) (activities.DeployResult, error) {
			calls++
			if calls < 3 {
				return activities.DeployResult{Retry: true, Message: "cluster c2: API server unreachable"}, nil
			}
			b := in.Bundles[0]
			return activities.DeployResult{Deployments: []status.Deployment{{Bundle: b.Name, Cluster: "c2", Release: b.Release,
				Namespace: b.Namespace, DeploymentID: b.DeploymentID, AppliedDeploymentID: b.DeploymentID, State: status.Ready}}}, nil
		})
	f.register(env) // after the c2 mock: the first matching mock wins
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(protocol.QueryStatus)
		require.NoError(t, err)
		var st status.Rollout
		require.NoError(t, v.Get(&st))
		states := map[string]status.State{}
		for _, d := range st.Deployments {
			states[d.Cluster] = d.State
			if d.Cluster == "c2" {
				assert.Contains(t, d.Message, "cluster c2")
			}
		}
		assert.Equal(t, map[string]status.State{"c1": status.Ready, "c2": status.WaitApplied}, states)
	}, 1500*time.Millisecond)
	env.ExecuteWorkflow(RolloutWorkflow, RolloutInput{GitRepo: activities.GitRepoRef{Namespace: "ns", Name: "app"},
		Spec: api.GitRepoSpec{Repo: "https://git.example/app.git"}, Commit: "c0ffee0000000000000000000000000000000001", Generation: 1})
	require.NoError(t, env.GetWorkflowError())
	var res RolloutResult
	require.NoError(t, env.GetWorkflowResult(&res))
	assert.Equal(t, 3, calls)
	for _, d := range res.Deployments {
		assert.Equal(t, status.Ready, d.State, d.Cluster)
	}
}

// appBundles is the render of the test GitRepo at commit: one bundle.
func appBundles(commit string) activities.RenderResult {
	return activities.RenderResult{Bundles: []activities.Bundle{{Name: "app", Release: "app", Namespace: "default",
		DeploymentID: "s-" + commit[:6] + ":h", Resources: 1}}}
}
