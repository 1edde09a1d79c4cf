package workflows

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/flotilla-gitops/flotilla/activities"
	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

// Pause keeps polling but rolls nothing out (deployments show OutOfSync);
// resume rolls out the commit that arrived meanwhile.
func TestGitRepoWorkflow_PauseAndResume(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	f := newFakeFleet()
	f.register(env)
	const next = "beef000000000000000000000000000000000002"
	start := env.Now()
	env.RegisterDelayedCallback(func() { applyUpdate(t, env, testGitRepo(false)) }, 0)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(protocol.SignalPause, nil)
		f.mu.Lock()
		f.commit = next
		f.mu.Unlock()
	}, 5*time.Second)
	env.RegisterDelayedCallback(func() {
		st := queryStatus(t, env)
		assert.True(t, st.Paused)
		assert.Equal(t, next, st.LatestCommit, "a paused GitRepo still polls")
		if assert.NotNil(t, st.LatestCommitSeen) {
			// The commit appeared at 5 s; the first poll after it (15 s
			// ±10 % apart) saw it, and the later polls, which saw it
			// again up to 60 s, do not move the time.
			seen := st.LatestCommitSeen.Sub(start)
			assert.GreaterOrEqual(t, seen, 5*time.Second, "when a poll first saw the new commit (workflow time)")
			assert.LessOrEqual(t, seen, 5*time.Second+api.DefaultPollingInterval*11/10, "the first poll that saw it, not a later one")
		}
		assert.NotEqual(t, next, st.Commit, "but rolls nothing out")
		for _, d := range st.Deployments {
			assert.Equal(t, status.OutOfSync, d.State)
		}
		assert.Equal(t, 1, f.deploys["c1"])
		env.SignalWorkflow(protocol.SignalResume, nil)
	}, 60*time.Second)
	env.RegisterDelayedCallback(func() {
		st := queryStatus(t, env)
		assert.False(t, st.Paused)
		assert.Equal(t, next, st.Commit)
		assert.Equal(t, status.Ready, st.Summary.State)
		env.SignalWorkflow(protocol.SignalDelete, nil)
	}, 70*time.Second)
	env.ExecuteWorkflow(GitRepoWorkflow, appInput)
	require.NoError(t, env.GetWorkflowError())
	assert.Equal(t, 2, f.deploys["c1"])
}

// A long-lived GitRepo continues as new before its history grows large,
// carrying its spec, commit and inventory.
func TestGitRepoWorkflow_ContinuesAsNewWithInventory(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	f := newFakeFleet()
	f.register(env)
	env.RegisterDelayedCallback(func() { applyUpdate(t, env, testGitRepo(false)) }, 0)
	// After the first rollout, pretend the history has grown long.
	env.RegisterDelayedCallback(func() { env.SetCurrentHistoryLength(historyLimit + 1) }, 20*time.Second)
	env.ExecuteWorkflow(GitRepoWorkflow, appInput)

	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(env.GetWorkflowError(), &can), "got %v", env.GetWorkflowError())
	var next GitRepoInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	require.NotNil(t, next.State)
	assert.Equal(t, f.commit, next.State.Commit)
	assert.Len(t, next.State.Inventory, 2, "the inventory survives continue-as-new")
	assert.NotNil(t, next.State.GitRepo)
	assert.Positive(t, next.State.Polls, "the poll count (jitter seed) is carried too")
}

// A commit that cannot be rendered is reported once and not re-rendered
// on every poll; the previous deployments stay.
func TestGitRepoWorkflow_BrokenCommitIsNotRetriedByPolling(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	f := newFakeFleet()
	renders := failRender(env, -1, temporal.NewNonRetryableApplicationError(
		"GitRepo fleet-default/app: bundle app: fleet.yaml: helm.releaseName: invalid", activities.ErrTypeInvalidBundle, nil))
	f.register(env)
	env.RegisterDelayedCallback(func() { applyUpdate(t, env, testGitRepo(false)) }, 0)
	env.RegisterDelayedCallback(func() {
		st := queryStatus(t, env)
		assert.Contains(t, st.Error, "helm.releaseName")
		assert.True(t, st.Settled)
		env.SignalWorkflow(protocol.SignalDelete, nil)
	}, 2*time.Minute)
	env.ExecuteWorkflow(GitRepoWorkflow, appInput)
	require.NoError(t, env.GetWorkflowError())
	assert.Equal(t, 1, *renders, "eight polls, one render")
}

// A render that fails for a transient reason (Git down) is retried by the
// next poll; only a permanent failure parks the commit.
func TestGitRepoWorkflow_TransientRenderFailureIsRetried(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	f := newFakeFleet()
	failRender(env, 5, temporal.NewApplicationError("git server unreachable", "Git")) // all attempts of the first rollout
	f.register(env)
	env.RegisterDelayedCallback(func() { applyUpdate(t, env, testGitRepo(false)) }, 0)
	env.RegisterDelayedCallback(func() {
		st := queryStatus(t, env)
		assert.Equal(t, f.commit, st.Commit, "the next poll rolled the commit out")
		assert.Empty(t, st.Error)
		env.SignalWorkflow(protocol.SignalDelete, nil)
	}, 2*time.Minute)
	env.ExecuteWorkflow(GitRepoWorkflow, appInput)
	require.NoError(t, env.GetWorkflowError())
}

// Applying the same cluster spec twice is not a change: no new generation,
// no GitRepo notified.
func TestClusterWorkflow_SameApplyIsNoChange(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	var a *activities.Activities
	notified := 0
	env.OnActivity(a.NotifyGitRepos, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.NotifyInput) error { notified++; return nil })
	var gens []int64
	apply := func(id string) {
		env.UpdateWorkflow(protocol.UpdateApply, id, &testsuite.TestUpdateCallback{
			OnReject: func(err error) { t.Error(err) },
			OnComplete: func(v any, err error) {
				require.NoError(t, err)
				gens = append(gens, v.(protocol.ClusterRecord).Generation)
			},
		}, protocol.ClusterApply{Labels: map[string]string{"env": "dev"}, SetLabels: true})
	}
	env.RegisterDelayedCallback(func() { apply("1") }, time.Second)
	env.RegisterDelayedCallback(func() { apply("2") }, 2*time.Second)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(protocol.SignalDelete, nil) }, 3*time.Second)
	env.ExecuteWorkflow(ClusterWorkflow, ClusterInput{ClusterStart: protocol.ClusterStart{Record: protocol.ClusterRecord{Name: "c1"}}})
	require.NoError(t, env.GetWorkflowError())
	assert.Equal(t, []int64{1, 1}, gens)
	assert.Equal(t, 3, notified, "registration, the one real change, and the removal")
}

// failRender makes Render fail the first n times (every time for n < 0)
// with err, then succeed with the app bundle; it returns the call count.
// Register it before fakeFleet.register: the first matching mock wins.
func failRender(env *testsuite.TestWorkflowEnvironment, n int, err error) *int {
	var a *activities.Activities
	calls := new(int)
	env.OnActivity(a.Render, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.RenderInput) (activities.RenderResult, error) {
			*calls++
			if n < 0 || *calls <= n {
				return activities.RenderResult{}, err
			}
			return appBundles(in.Commit), nil
		})
	return calls
}

// A cluster keeps its record as targeting reads it in its memo, and each
// notification waits for visibility to show the generation it announces:
// the registration's (listed), the change's, the removal's.
func TestClusterWorkflow_TargetingMemo(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	var a *activities.Activities
	var notes []activities.NotifyInput
	env.OnActivity(a.NotifyGitRepos, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.NotifyInput) error { notes = append(notes, in); return nil })
	var memos []protocol.ClusterRecord
	env.OnUpsertMemo(mock.Anything).Run(func(args mock.Arguments) {
		memos = append(memos, args.Get(0).(map[string]any)[protocol.MemoTargeting].(protocol.ClusterRecord))
	}).Return()
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(protocol.UpdateApply, "1", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { t.Error(err) }, OnComplete: func(any, error) {},
		}, protocol.ClusterApply{Labels: map[string]string{"env": "dev"}, SetLabels: true})
	}, time.Second)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(protocol.SignalDelete, nil) }, 2*time.Second)
	seen := time.Now()
	env.ExecuteWorkflow(ClusterWorkflow, ClusterInput{ClusterStart: protocol.ClusterStart{Record: protocol.ClusterRecord{Name: "c1",
		Agent: &protocol.AgentRecord{TokenID: "t1", LastSeen: &seen, Version: "v1"}}}})
	require.NoError(t, env.GetWorkflowError())

	require.Len(t, memos, 3)
	assert.Equal(t, &protocol.AgentRecord{}, memos[0].Agent, "no heartbeat details in the memo")
	assert.Equal(t, map[string]string{"env": "dev"}, memos[1].Labels)
	assert.Equal(t, int64(1), memos[1].Generation)
	assert.True(t, memos[2].Removed)
	assert.Equal(t, []activities.NotifyInput{
		{WaitFor: "default-test-workflow-id", Reason: "changed default-test-workflow-id"},
		{WaitFor: "default-test-workflow-id", Generation: 1, Reason: "changed default-test-workflow-id"},
		{WaitFor: "default-test-workflow-id", Generation: 2, Removed: true, Reason: "removed default-test-workflow-id"},
	}, notes)
}
