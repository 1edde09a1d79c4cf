package workflows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/flotilla-gitops/flotilla/activities"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

const (
	firstCommit  = "c0ffee0000000000000000000000000000000001"
	secondCommit = "beef000000000000000000000000000000000002"
	thirdCommit  = "f00d000000000000000000000000000000000003"
)

// setCommit moves the fake remote's branch.
func (f *fakeFleet) setCommit(c string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.commit = c
}

// counts returns the renders and deploys to c1 so far.
func (f *fakeFleet) counts() (renders, deploys int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.renders, f.deploys["c1"]
}

// TestGitRepoWorkflow_UnchangedCommitNeedsNoRender: a commit that changes
// nothing under the GitRepo's paths (ResolveCommit says Unchanged against
// the Since it was given) becomes the GitRepo's commit without a render or
// a rollout; the next commit that does change something is compared with
// the commit the deployments were rendered from, and rolls out.
func TestGitRepoWorkflow_UnchangedCommitNeedsNoRender(t *testing.T) {
	env, f := gitRepoEnv()
	f.resolveHook = func(in activities.ResolveInput) (activities.ResolveResult, error) {
		res := activities.ResolveResult{Ref: "refs/heads/main", Commit: f.commit}
		res.Unchanged = f.commit == secondCommit && in.Since == firstCommit
		return res, nil
	}
	env.RegisterDelayedCallback(func() { applyUpdate(t, env, testGitRepo(true)) }, 0)
	env.RegisterDelayedCallback(func() { f.setCommit(secondCommit) }, 5*time.Second)
	env.RegisterDelayedCallback(func() {
		st := queryStatus(t, env)
		assert.Equal(t, secondCommit, st.Commit, "the commit moves")
		assert.Equal(t, firstCommit, st.RenderedCommit, "the deployments are still those rendered from the first commit")
		renders, deploys := f.counts()
		assert.Equal(t, 1, renders, "no render for a commit that changes nothing the GitRepo reads")
		assert.Equal(t, 1, deploys, "no rollout either")
		f.setCommit(thirdCommit)
	}, 40*time.Second)
	env.RegisterDelayedCallback(func() {
		st := queryStatus(t, env)
		assert.Equal(t, thirdCommit, st.Commit)
		assert.Empty(t, st.RenderedCommit, "rendered from the commit itself")
		renders, deploys := f.counts()
		assert.Equal(t, 2, renders)
		assert.Equal(t, 2, deploys)
		env.SignalWorkflow(protocol.SignalDelete, nil)
	}, 80*time.Second)
	runGitRepo(t, env)

	var sinces []string
	for _, in := range f.resolveIns {
		sinces = append(sinces, in.Since)
	}
	assert.Contains(t, sinces, firstCommit, "settled polls compare with the rendered commit")
	assert.NotContains(t, sinces, secondCommit, "never with a commit taken without a render")
}

// TestGitRepoWorkflow_RejectedCommitIsNotDeployed: a commit spec.verify
// refuses is not rendered nor deployed; the last accepted commit stays,
// status names the refused one, and a later accepted commit rolls out.
func TestGitRepoWorkflow_RejectedCommitIsNotDeployed(t *testing.T) {
	env, f := gitRepoEnv()
	f.resolveHook = func(in activities.ResolveInput) (activities.ResolveResult, error) {
		if f.commit == secondCommit {
			return activities.ResolveResult{Ref: "refs/heads/main", Commit: f.commit,
				Rejected: &activities.Rejection{Commit: f.commit, Reason: "unsigned"}}, nil
		}
		return activities.ResolveResult{Ref: "refs/heads/main", Commit: f.commit, Verified: "ssh-ed25519 SHA256:k (ci)"}, nil
	}
	env.RegisterDelayedCallback(func() { applyUpdate(t, env, testGitRepo(true)) }, 0)
	env.RegisterDelayedCallback(func() { f.setCommit(secondCommit) }, 5*time.Second)
	env.RegisterDelayedCallback(func() {
		st := queryStatus(t, env)
		assert.Equal(t, firstCommit, st.Commit)
		assert.Equal(t, firstCommit, st.LatestCommit, "a refused commit is not the latest")
		require.NotNil(t, st.Rejected)
		assert.Equal(t, status.RejectedCommit{Commit: secondCommit, Reason: "unsigned"}, *st.Rejected)
		c, _ := st.Condition(status.ConditionGitPolling)
		assert.Equal(t, status.ReasonCommitRejected, c.Reason)
		renders, deploys := f.counts()
		assert.Equal(t, 1, renders)
		assert.Equal(t, 1, deploys)
		f.setCommit(thirdCommit)
	}, 40*time.Second)
	env.RegisterDelayedCallback(func() {
		st := queryStatus(t, env)
		assert.Equal(t, thirdCommit, st.Commit)
		assert.Nil(t, st.Rejected, "an accepted commit clears the refusal")
		assert.Equal(t, "ssh-ed25519 SHA256:k (ci)", st.Verified)
		_, deploys := f.counts()
		assert.Equal(t, 2, deploys)
		env.SignalWorkflow(protocol.SignalDelete, nil)
	}, 80*time.Second)
	runGitRepo(t, env)
}

// TestGitRepoWorkflow_RateLimitedHostIsNotAskedEarly: a Git host that
// asked to wait (ErrTypeGitRateLimited with RetryAt) is not asked again
// before that time, status shows when and why, and checks go on after.
func TestGitRepoWorkflow_RateLimitedHostIsNotAskedEarly(t *testing.T) {
	env, f := gitRepoEnv()
	var retryAt time.Time
	limited := false
	f.resolveHook = func(activities.ResolveInput) (activities.ResolveResult, error) {
		if !limited && env.Now().After(retryAt) && !retryAt.IsZero() {
			return activities.ResolveResult{Ref: "refs/heads/main", Commit: f.commit}, nil
		}
		if limited {
			limited = false
			return activities.ResolveResult{}, temporal.NewNonRetryableApplicationError("git.example asked to wait",
				activities.ErrTypeGitRateLimited, nil, activities.RateLimit{Host: "git.example", RetryAt: retryAt, Reason: "429 Too Many Requests"})
		}
		return activities.ResolveResult{Ref: "refs/heads/main", Commit: f.commit}, nil
	}
	env.RegisterDelayedCallback(func() { applyUpdate(t, env, testGitRepo(true)) }, 0)
	env.RegisterDelayedCallback(func() {
		f.mu.Lock()
		limited, retryAt = true, env.Now().Add(3*time.Minute)
		f.mu.Unlock()
	}, 5*time.Second)
	env.RegisterDelayedCallback(func() {
		st := queryStatus(t, env)
		require.NotNil(t, st.NextCheck)
		assert.True(t, st.NextCheck.Equal(retryAt), "next check %s, want %s", st.NextCheck, retryAt)
		assert.Equal(t, "git.example: 429 Too Many Requests", st.NextCheckReason)
		c, _ := st.Condition(status.ConditionGitPolling)
		assert.Equal(t, status.ReasonRateLimited, c.Reason)
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		st := queryStatus(t, env)
		assert.Nil(t, st.NextCheck, "cleared by the first check after the wait")
		env.SignalWorkflow(protocol.SignalDelete, nil)
	}, 5*time.Minute)
	runGitRepo(t, env)

	f.mu.Lock()
	defer f.mu.Unlock()
	var refusedAt time.Time
	for i, at := range f.resolveTimes {
		if refusedAt.IsZero() && at.After(retryAt.Add(-3*time.Minute)) {
			refusedAt = at
			continue
		}
		if !refusedAt.IsZero() {
			assert.False(t, at.Before(retryAt), "check %d at %s, before the host's %s", i, at, retryAt)
		}
	}
	require.False(t, refusedAt.IsZero())
	assert.True(t, f.resolveTimes[len(f.resolveTimes)-1].After(retryAt), "checks go on after the wait")
}

// TestGitRepoWorkflow_UnchangedCommitFollowsRunningRollout: a commit that
// changes nothing the GitRepo reads since the commit its running rollout
// rolls out does not supersede that rollout (no second render or deploy);
// it is the GitRepo's commit, rendered from the first, once the rollout
// ends.
func TestGitRepoWorkflow_UnchangedCommitFollowsRunningRollout(t *testing.T) {
	env, f := gitRepoEnv()
	// Deploys report NotReady and readiness takes 30 s: the rollout runs.
	readyAfter(env, 30*time.Second)
	f.notReady = true
	f.resolveHook = func(in activities.ResolveInput) (activities.ResolveResult, error) {
		res := activities.ResolveResult{Ref: "refs/heads/main", Commit: f.commit}
		res.Unchanged = f.commit == secondCommit && in.Since == firstCommit
		return res, nil
	}
	env.RegisterDelayedCallback(func() { applyUpdate(t, env, testGitRepo(true)) }, 0)
	env.RegisterDelayedCallback(func() { f.setCommit(secondCommit) }, 2*time.Second)
	env.RegisterDelayedCallback(func() {
		st := queryStatus(t, env)
		assert.False(t, st.Settled, "the first rollout still runs")
		assert.Equal(t, secondCommit, st.LatestCommit, "the poll saw the second commit")
		f.set(func() {
			assert.Equal(t, 1, f.renders, "the running rollout is not superseded")
			assert.Equal(t, 1, f.targetings)
		})
	}, 25*time.Second)
	env.RegisterDelayedCallback(func() {
		f.set(func() { f.notReady = false })
		st := queryStatus(t, env)
		assert.True(t, st.Settled)
		assert.Equal(t, secondCommit, st.Commit, "the commit taken while the rollout ran")
		assert.Equal(t, firstCommit, st.RenderedCommit, "rendered from the rollout's commit")
		renders, deploys := f.counts()
		assert.Equal(t, 1, renders, "one render for both commits")
		assert.Equal(t, 1, deploys)
		f.setCommit(thirdCommit)
	}, 60*time.Second)
	env.RegisterDelayedCallback(func() {
		st := queryStatus(t, env)
		assert.Equal(t, thirdCommit, st.Commit, "a commit that changes something rolls out")
		assert.Empty(t, st.RenderedCommit)
		renders, _ := f.counts()
		assert.Equal(t, 2, renders)
		env.SignalWorkflow(protocol.SignalDelete, nil)
	}, 120*time.Second)
	runGitRepo(t, env)
}
