package workflows

import (
	"context"
	"errors"
	"fmt"
	"sync"
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
	"github.com/flotilla-gitops/flotilla/internal/history"
	"github.com/flotilla-gitops/flotilla/internal/notify"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

// eventLog records the events a workflow emitted, as signals to
// notifications/<ns>.
type eventLog struct {
	mu     sync.Mutex
	events []notify.Event
}

func (l *eventLog) mock(env *testsuite.TestWorkflowEnvironment) {
	env.OnSignalExternalWorkflow(mock.Anything, notify.WorkflowID("fleet-default"), "", notify.SignalEvent, mock.Anything).Return(
		func(_, _, _, _ string, arg any) error {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.events = append(l.events, arg.(notify.Event))
			return nil
		})
}

func (l *eventLog) count(t notify.Type) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, e := range l.events {
		if e.Type == t {
			n++
		}
	}
	return n
}

// historyEnv is gitRepoEnv with the events recorded and FindCommit
// answering full hashes of the fake remote's commits.
func historyEnv(commits ...string) (*testsuite.TestWorkflowEnvironment, *fakeFleet, *eventLog) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	log := &eventLog{}
	log.mock(env) // before the fleet's ignoreEvents: the first matching expectation answers
	f := newFakeFleet()
	f.register(env)
	var a *activities.Activities
	env.OnActivity(a.FindCommit, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.FindCommitInput) (activities.FindCommitResult, error) {
			for _, c := range commits {
				if len(in.Commit) >= 4 && c[:len(in.Commit)] == in.Commit {
					return activities.FindCommitResult{Commit: c}, nil
				}
			}
			return activities.FindCommitResult{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("commit %q not found", in.Commit), activities.ErrTypeRefNotFound, nil)
		})
	return env, f, log
}

func queryHistory(t *testing.T, env *testsuite.TestWorkflowEnvironment) []history.Entry {
	t.Helper()
	v, err := env.QueryWorkflow(protocol.QueryHistory)
	require.NoError(t, err)
	var h []history.Entry
	require.NoError(t, v.Get(&h))
	return h
}

func rollbackUpdate(t *testing.T, env *testsuite.TestWorkflowEnvironment, rb protocol.Rollback, done func(protocol.RollbackResult, error)) {
	env.UpdateWorkflow(protocol.UpdateRollback, "rollback-"+rb.Commit, &testsuite.TestUpdateCallback{
		OnReject: func(err error) { done(protocol.RollbackResult{}, err) },
		OnAccept: func() {},
		OnComplete: func(v any, err error) {
			res, _ := v.(protocol.RollbackResult)
			done(res, err)
		},
	}, rb)
}

// Each rollout is one history entry with its trigger (spec, webhook
// delivery, sync with identity, poll, rollback, resume); a rollback pins
// the GitRepo: a new commit is recorded, not rolled out, until resume;
// every rollout emits RolloutStarted and RolloutSucceeded once, and each
// entry one History event.
func TestGitRepoWorkflow_HistoryTriggersAndPin(t *testing.T) {
	first, second, third := "c0ffee0000000000000000000000000000000001", "beef000000000000000000000000000000000002",
		"d00d000000000000000000000000000000000003"
	env, f, log := historyEnv(first, second, third)
	alice, bob := protocol.Identity{User: "alice@laptop"}, protocol.Identity{User: "bob@host", Subject: "CN=bob"}
	setCommit := func(c string) { f.set(func() { f.commit = c }) }
	env.RegisterDelayedCallback(func() { applyUpdate(t, env, testGitRepo(false)) }, 0)
	env.RegisterDelayedCallback(func() {
		setCommit(second)
		env.SignalWorkflow(protocol.SignalPush, protocol.Push{Provider: "github", Delivery: "7f3a9c01-delivery", Commit: second})
	}, 3*time.Second)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(protocol.SignalSync, protocol.Sync{Identity: alice}) }, 6*time.Second)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(protocol.SignalSync, nil) }, 9*time.Second) // an older CLI
	env.RegisterDelayedCallback(func() { setCommit(third) }, 11*time.Second)                            // the poll at ~15 s finds it
	var pinned protocol.RollbackResult
	env.RegisterDelayedCallback(func() {
		rollbackUpdate(t, env, protocol.Rollback{Commit: first[:7], Identity: bob}, func(r protocol.RollbackResult, err error) {
			require.NoError(t, err)
			pinned = r
		})
	}, 40*time.Second)
	var missing error
	env.RegisterDelayedCallback(func() {
		rollbackUpdate(t, env, protocol.Rollback{Commit: "abcdef12"}, func(_ protocol.RollbackResult, err error) { missing = err })
		rollbackUpdate(t, env, protocol.Rollback{Commit: "main"}, func(_ protocol.RollbackResult, err error) {
			assert.ErrorContains(t, err, `commit "main" is not a commit hash`)
		})
	}, 45*time.Second)
	env.RegisterDelayedCallback(func() {
		setCommit("e0e0000000000000000000000000000000000004")
		env.SignalWorkflow(protocol.SignalSync, protocol.Sync{Identity: alice})
	}, 50*time.Second)
	env.RegisterDelayedCallback(func() {
		st := queryStatus(t, env)
		assert.Equal(t, first, st.Commit, "pinned: the new commit is not rolled out, a sync rolls the pin out again")
		assert.Equal(t, "e0e0000000000000000000000000000000000004", st.LatestCommit, "the remote's newest is recorded")
		require.NotNil(t, st.Pinned)
		assert.Equal(t, first, st.Pinned.Commit)
		assert.Equal(t, "bob@host (cert CN=bob)", st.Pinned.By)
		env.SignalWorkflow(protocol.SignalResume, nil)
	}, 80*time.Second)
	var h []history.Entry
	env.RegisterDelayedCallback(func() {
		st := queryStatus(t, env)
		assert.Equal(t, "e0e0000000000000000000000000000000000004", st.Commit, "resume follows the branch again")
		assert.Nil(t, st.Pinned)
		h = queryHistory(t, env)
		env.SignalWorkflow(protocol.SignalDelete, nil)
	}, 90*time.Second)
	runGitRepo(t, env)

	assert.Equal(t, first, pinned.Commit, "the abbreviation resolved to the full hash")
	assert.Equal(t, protocol.RolloutID("fleet-default", "app", first, 1), pinned.Rollout)
	require.ErrorContains(t, missing, `commit "abcdef12" not found`)
	type row struct {
		kind    history.Kind
		commit  string
		trigger string
	}
	var got []row
	for i, e := range h {
		assert.Equal(t, int64(i+1), e.Seq)
		assert.Equal(t, history.Succeeded, e.Outcome, "entry %d", e.Seq)
		assert.False(t, e.Start.IsZero() || e.End.Before(e.Start), "entry %d: start and end", e.Seq)
		got = append(got, row{e.Kind, e.Commit[:4], e.Trigger.String()})
	}
	assert.Equal(t, []row{
		{history.KindRollout, "c0ff", "spec"},
		{history.KindRollout, "beef", "webhook 7f3a9c01…"},
		{history.KindRollout, "beef", "sync by alice@laptop"},
		{history.KindRollout, "beef", "sync"},
		{history.KindRollout, "d00d", "poll"},
		{history.KindRollback, "c0ff", "rollback by bob@host (cert CN=bob)"},
		{history.KindRollout, "c0ff", "sync by alice@laptop"},
		{history.KindRollout, "e0e0", "resume"},
	}, got)
	require.NotEmpty(t, h)
	assert.Len(t, h[0].Clusters, 2, "the first rollout changed both clusters")
	assert.Empty(t, h[2].Clusters, "a sync of the same commit changed nothing")
	assert.Equal(t, history.Counts{OK: 2}, h[2].Counts)
	assert.Equal(t, len(h), log.count(notify.RolloutStarted), "one RolloutStarted per rollout")
	assert.Equal(t, len(h), log.count(notify.RolloutSucceeded), "one RolloutSucceeded per rollout")
	assert.Equal(t, len(h), log.count(notify.History), "one History event per entry")
	assert.Equal(t, 1, log.count(notify.RolloutRolledBack), "the rollback's rollout, once (not the sync of the pin)")
}

// The history keeps its newest history.Limit entries, also across
// continue-as-new, which carries it with the state.
func TestGitRepoWorkflow_HistoryBoundedAcrossContinueAsNew(t *testing.T) {
	env, _, _ := historyEnv()
	repo := testGitRepo(false)
	state := &GitRepoState{GitRepo: &repo, Generation: 1, HistorySeq: history.Limit}
	for i := 1; i <= history.Limit; i++ {
		state.History = append(state.History, history.Entry{Seq: int64(i), Kind: history.KindRollout, Outcome: history.Succeeded})
	}
	in := appInput
	in.State = state
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(protocol.SignalSync, protocol.Sync{Identity: protocol.Identity{User: "alice"}})
	}, time.Second)
	env.RegisterDelayedCallback(func() { env.SetCurrentHistoryLength(historyLimit + 1) }, 10*time.Second)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(protocol.SignalSync, nil) }, 11*time.Second)
	env.ExecuteWorkflow(GitRepoWorkflow, in)

	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(env.GetWorkflowError(), &can), "got %v", env.GetWorkflowError())
	var next GitRepoInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	h := next.State.History
	require.Len(t, h, history.Limit)
	assert.Equal(t, int64(2), h[0].Seq, "the oldest entry made room")
	last := h[len(h)-1]
	assert.Equal(t, int64(history.Limit+1), last.Seq)
	assert.Equal(t, "sync by alice", last.Trigger.String())
	assert.Equal(t, int64(history.Limit+1), next.State.HistorySeq)
}

// Drift is told once per occurrence and batch: a report of drift emits
// one DriftDetected for every cluster of the batch, the same drift
// reported again none; a correction (correctDrift) emits DriftCorrected
// and is a "correction" entry with trigger drift; a correction that
// fails emits DriftConflict once.
func TestGitRepoWorkflow_DriftEventsOncePerOccurrence(t *testing.T) {
	env, f, log := historyEnv()
	id := appBundles(f.commit).Bundles[0].DeploymentID
	report := func(modified, corrections int, err string) status.LiveReport {
		return status.LiveReport{Bundle: "app", Release: "app", Namespace: "default", DeploymentID: id, Resources: 2,
			Ready: 2, Modified: modified, Corrections: corrections, Error: err}
	}
	batch := func(r status.LiveReport) status.LiveSignal {
		return status.LiveSignal{Cluster: "c1", Reports: []status.LiveReport{r},
			More: []status.LiveSignal{{Cluster: "c2", Reports: []status.LiveReport{r}}}}
	}
	env.RegisterDelayedCallback(func() { applyUpdate(t, env, testGitRepo(false)) }, 0)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(protocol.SignalLive, batch(report(1, 0, ""))) }, 5*time.Second)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(protocol.SignalLive, batch(report(1, 0, ""))) }, 6*time.Second)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(protocol.SignalLive, batch(report(0, 1, ""))) }, 7*time.Second)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(protocol.SignalLive, batch(report(1, 1, "conflict"))) }, 8*time.Second)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(protocol.SignalLive, batch(report(1, 1, "conflict"))) }, 9*time.Second)
	var h []history.Entry
	env.RegisterDelayedCallback(func() {
		h = queryHistory(t, env)
		env.SignalWorkflow(protocol.SignalDelete, nil)
	}, 10*time.Second)
	runGitRepo(t, env)

	assert.Equal(t, 2, log.count(notify.DriftDetected), "once at 5 s, once again at 8 s (drift after the correction)")
	assert.Equal(t, 1, log.count(notify.DriftCorrected))
	assert.Equal(t, 1, log.count(notify.DriftConflict))
	log.mu.Lock()
	for _, e := range log.events {
		if e.Type == notify.DriftDetected {
			assert.Equal(t, []string{"c1", "c2"}, e.Clusters, "one event for the batch")
			assert.Equal(t, notify.Warning, e.Severity)
		}
	}
	log.mu.Unlock()
	require.Len(t, h, 2)
	assert.Equal(t, history.KindCorrection, h[1].Kind)
	assert.Equal(t, history.TriggerDrift, h[1].Trigger.Kind)
	assert.Equal(t, []string{"c1", "c2"}, rowClusters(h[1].Clusters))
	assert.Equal(t, id, h[1].Clusters[0].DeploymentID)
}
