package workflows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/flotilla-gitops/flotilla/internal/history"
	"github.com/flotilla-gitops/flotilla/internal/notify"
	"github.com/flotilla-gitops/flotilla/internal/outcome"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

// retryingFleet is newFailingFleet with the events recorded: the log's
// expectation comes before allowPolicies' ignoreEvents, as the first
// matching expectation answers.
func retryingFleet(fail func(bundle, cluster string, tried int) (status.State, outcome.Class)) (
	*testsuite.TestWorkflowEnvironment, *failingFleet, *eventLog) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	log := &eventLog{}
	log.mock(env)
	f := failingFleetIn(env, fail)
	return env, f, log
}

// A commit whose every deployment fails is retried by the failure backoff;
// the retries that fail as it did fold into its history entry (Retries)
// and tell nobody: one RolloutStarted, one RolloutFailed, one History
// event for the failing commit. The retry that succeeds is an entry of
// its own, with trigger retry, and emits RolloutSucceeded.
func TestGitRepoWorkflow_FailingRetriesFoldIntoHistoryEntry(t *testing.T) {
	const failures = 3 // the first rollout and two retries fail
	env, f, log := retryingFleet(func(_, _ string, tried int) (status.State, outcome.Class) {
		if tried < failures {
			return status.ErrApplied, outcome.BundleFailed
		}
		return status.Ready, outcome.OK
	})
	env.RegisterDelayedCallback(func() { applyUpdate(t, env, testGitRepo(false)) }, 0)
	var h []history.Entry
	env.RegisterDelayedCallback(func() {
		h = queryHistory(t, env)
		env.SignalWorkflow(protocol.SignalDelete, nil)
	}, 30*time.Minute)
	runGitRepo(t, env)

	f.mu.Lock()
	rollouts := len(f.calls) // every rollout deploys on c1: each has a failed bundle there, or is the last
	f.mu.Unlock()
	require.Equal(t, failures+1, rollouts, "three failing rollouts, then the one that succeeds; nothing after it")
	require.Len(t, f.triesOf("app", "c2"), failures+1)
	require.Len(t, h, 2, "the failing retries are folded into the first entry: %+v", h)
	failed, ok := h[0], h[1]
	assert.Equal(t, history.Failed, failed.Outcome)
	assert.Equal(t, history.TriggerSpec, failed.Trigger.Kind, "keeps what started it")
	assert.Equal(t, failures-1, failed.Retries, "one per failing retry")
	assert.Equal(t, history.Counts{Failed: 4}, failed.Counts)
	assert.Equal(t, int64(1), failed.Seq)
	assert.Equal(t, history.Succeeded, ok.Outcome)
	assert.Equal(t, history.TriggerRetry, ok.Trigger.Kind)
	assert.Zero(t, ok.Retries)
	assert.Len(t, ok.Clusters, 4, "the recovery names what it fixed (Ready at the deployment IDs that failed)")
	assert.Equal(t, int64(2), ok.Seq)
	assert.Equal(t, failed.Commit, ok.Commit)
	assert.True(t, failed.End.After(failed.Start.Add(time.Minute)), "ends with the last failing retry: %v..%v",
		failed.Start, failed.End)
	assert.False(t, ok.Start.Before(failed.End))

	assert.Equal(t, 1, log.count(notify.RolloutStarted), "the first rollout only: backoff retries start silently")
	assert.Equal(t, 1, log.count(notify.RolloutFailed), "once, not once per failing retry")
	assert.Equal(t, 1, log.count(notify.RolloutSucceeded))
	assert.Equal(t, len(h), log.count(notify.History), "one History event per entry")
}
