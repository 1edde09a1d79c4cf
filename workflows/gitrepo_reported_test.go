package workflows

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"github.com/flotilla-gitops/flotilla/internal/protocol"
)

// closesLate is the rollout, which reports its result to the GitRepo
// as it ends, and then stays open for a while before it closes.
func closesLate(ctx workflow.Context, in RolloutInput) (RolloutResult, error) {
	res, err := RolloutWorkflow(ctx, in)
	_ = workflow.Sleep(ctx, 10*time.Minute)
	return res, err
}

// A run that continues as new after its rollout reported its result,
// but before the rollout closed, finishes the rollout itself. Before,
// it carried the rollout to the next run, which waited for a report
// that had come to this one: the GitRepo rolled out nothing new (a new
// commit superseded a rollout that was gone) until its adoption check
// found the rollout closed and counted it as failed. A 1,000-commit
// monorepo benchmark stalled on this at its 628th commit.
func TestGitRepoWorkflow_ReportedRolloutFinishedBeforeContinueAsNew(t *testing.T) {
	env, f, _ := historyEnv()
	env.OnWorkflow(RolloutWorkflow, mock.Anything, mock.Anything).Return(closesLate)
	env.RegisterDelayedCallback(func() { applyUpdate(t, env, testGitRepo(false)) }, 0)
	env.RegisterDelayedCallback(func() {
		st := queryStatus(t, env)
		require.NotEmpty(t, st.Rollout, "the rollout reported but has not closed")
		env.SetCurrentHistoryLength(historyLimit + 1) // the next poll continues as new
	}, 2*time.Minute)
	env.ExecuteWorkflow(GitRepoWorkflow, appInput)

	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(env.GetWorkflowError(), &can), "got %v", env.GetWorkflowError())
	var next GitRepoInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	assert.Nil(t, next.State.Running, "the next run must not wait for a report that came to this one")
	assert.Equal(t, protocol.RolloutID("fleet-default", "app", f.commit, 1), next.State.LastRollout)
	assert.Equal(t, f.commit, next.State.Commit, "the rollout's commit is the GitRepo's")
}
