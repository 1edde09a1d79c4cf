package workflows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/rollout"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

// approveDeletionsUpdate sends the approve-deletions update with arg
// (nil: as CLIs before identities); done gets its result or its refusal.
func approveDeletionsUpdate(env *testsuite.TestWorkflowEnvironment, id string, arg any, done func(protocol.ApproveResult, error)) {
	env.UpdateWorkflow(protocol.UpdateApproveDeletions, id, &testsuite.TestUpdateCallback{
		OnReject: func(err error) { done(protocol.ApproveResult{}, err) },
		OnComplete: func(v any, err error) {
			res, _ := v.(protocol.ApproveResult)
			done(res, err)
		},
	}, arg)
}

// The deletion guard holds an untargeting; the approval lets exactly
// that uninstall go in a new rollout, is forgotten once done, and a
// second approval is refused.
func TestGitRepoWorkflow_ApproveDeletions(t *testing.T) {
	env, f := gitRepoEnv()
	f.guard = rollout.DeletionGuard{On: true, Percent: 0, Min: 1} // any uninstall needs approval
	alice := protocol.Identity{User: "alice@laptop", Via: "cli"}

	env.RegisterDelayedCallback(func() { applyUpdate(t, env, testGitRepo(false)) }, 0)
	env.RegisterDelayedCallback(func() {
		require.Equal(t, 2, queryStatus(t, env).Summary.Ready)
		approveDeletionsUpdate(env, "too-early", nil, func(_ protocol.ApproveResult, err error) {
			assert.ErrorContains(t, err, "the deletion guard holds no uninstall")
		})
		f.mu.Lock()
		f.matched = []string{"c1"}
		f.mu.Unlock()
		env.SignalWorkflow(protocol.SignalClustersChanged, nil)
	}, 5*time.Second)
	env.RegisterDelayedCallback(func() {
		st := queryStatus(t, env)
		c, _ := st.Condition(status.ConditionDeletionHeld)
		assert.Equal(t, status.ConditionTrue, c.Status, "held: %+v", c)
		assert.Equal(t, status.ReasonDeletionGuard, c.Reason)
		assert.Contains(t, c.Message, "1 of 2 release(s)")
		assert.Contains(t, c.Message, "cluster untargeted")
		f.mu.Lock()
		assert.Empty(t, f.cleanups["c2"], "nothing uninstalled before the approval")
		f.mu.Unlock()
		approveDeletionsUpdate(env, "approve", protocol.Approve{Identity: alice}, func(res protocol.ApproveResult, err error) {
			assert.NoError(t, err)
			assert.Equal(t, []string{"app on c2 (release default/app)"}, res.Approved)
			assert.Equal(t, alice, res.By, "who approved is recorded")
		})
	}, 10*time.Second)
	env.RegisterDelayedCallback(func() {
		st := queryStatus(t, env)
		c, _ := st.Condition(status.ConditionDeletionHeld)
		assert.Equal(t, status.ConditionFalse, c.Status)
		assert.Equal(t, 1, st.Summary.Desired)
		f.mu.Lock()
		assert.Equal(t, []string{"app"}, f.cleanups["c2"], "the approved uninstall ran once")
		f.mu.Unlock()
		approveDeletionsUpdate(env, "again", nil, func(_ protocol.ApproveResult, err error) {
			assert.ErrorContains(t, err, "the deletion guard holds no uninstall")
		})
		env.SignalWorkflow(protocol.SignalDelete, nil)
	}, 20*time.Second)

	runGitRepo(t, env)
	assert.Equal(t, []string{"app"}, f.cleanups["c1"], "deleting the GitRepo is not guarded")
}
