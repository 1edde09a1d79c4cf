package workflows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/status"
	"github.com/flotilla-gitops/flotilla/internal/temporalx"
)

const pushed = "beef000000000000000000000000000000000002"

func (f *fakeFleet) set(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn()
}

func (f *fakeFleet) resolveCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.resolves
}

// A push signal checks the remote at once and rolls out the new commit,
// long before the next poll; a push of the commit already applied costs
// nothing, not even an ls-remote. Polling relaxes to 1h once webhooks
// arrive, and a webhook still deploys with polling disabled (Fleet
// #2969, #3067: webhook commits fetched but never deployed).
func TestGitRepoWorkflow_Push(t *testing.T) {
	for _, disablePolling := range []bool{false, true} {
		t.Run(map[bool]string{false: "polling", true: "disablePolling"}[disablePolling], func(t *testing.T) {
			env, f := gitRepoEnv()
			repo := testGitRepo(true)
			repo.Spec.DisablePolling = disablePolling
			env.RegisterDelayedCallback(func() { applyUpdate(t, env, repo) }, 0)
			var before int
			env.RegisterDelayedCallback(func() {
				st := queryStatus(t, env)
				require.Equal(t, f.commit, st.Commit)
				assert.Empty(t, st.WebhookCommit)
				if disablePolling {
					assert.Empty(t, st.PollingInterval)
				} else {
					assert.Equal(t, "15s", st.PollingInterval)
				}
				f.set(func() { f.commit = pushed })
				before = f.resolveCount()
				env.SignalWorkflow(protocol.SignalPush, protocol.Push{Provider: "github", Ref: "refs/heads/main", Commit: pushed, Authenticated: true})
			}, 5*time.Second)
			env.RegisterDelayedCallback(func() {
				st := queryStatus(t, env)
				assert.Equal(t, pushed, st.Commit, "deployed 1s after the push, no poll in between")
				assert.Equal(t, before+1, f.resolveCount(), "one ls-remote for the push")
				assert.Equal(t, pushed, st.WebhookCommit)
				require.NotNil(t, st.LastWebhookTime)
				assert.Equal(t, env.Now().Add(-time.Second).UTC().Truncate(time.Second), st.LastWebhookTime.Truncate(time.Second))
				if !disablePolling {
					assert.Equal(t, "1h0m0s", st.PollingInterval, "webhooks relax polling")
				}
				before = f.resolveCount()
				// Redelivered: the commit is known, nothing to check.
				env.SignalWorkflow(protocol.SignalPush, protocol.Push{Provider: "github", Ref: "refs/heads/main", Commit: pushed, Authenticated: true})
			}, 6*time.Second)
			env.RegisterDelayedCallback(func() {
				assert.Equal(t, before, f.resolveCount(), "a known commit is ignored")
				assert.Equal(t, 2, f.deploys["c1"], "one deploy per commit")
				env.SignalWorkflow(protocol.SignalDelete, nil)
			}, 30*time.Minute)
			runGitRepo(t, env)
			// 30 minutes: with 15s polling that would be ~120 ls-remotes.
			assert.LessOrEqual(t, before, 3)
		})
	}
}

// An interval set in the spec is kept when webhooks arrive, and a GitRepo
// pinned to a revision ignores pushes.
func TestGitRepoWorkflow_PushKeepsUserIntervalAndSkipsPinned(t *testing.T) {
	env, f := gitRepoEnv()
	repo := testGitRepo(true)
	repo.Spec.PollingInterval = &metav1.Duration{Duration: time.Minute}
	env.RegisterDelayedCallback(func() { applyUpdate(t, env, repo) }, 0)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(protocol.SignalPush, protocol.Push{Provider: "gitlab", Ref: "refs/heads/main", Commit: pushed, Authenticated: true})
	}, 5*time.Second)
	env.RegisterDelayedCallback(func() {
		st := queryStatus(t, env)
		assert.Equal(t, "1m0s", st.PollingInterval)
		assert.Equal(t, pushed, st.WebhookCommit)
		pinned := repo
		pinned.Spec.Revision = "v1"
		applyUpdateID(t, env, "apply-pinned", pinned)
	}, 10*time.Second)
	var before int
	env.RegisterDelayedCallback(func() {
		before = f.resolveCount()
		env.SignalWorkflow(protocol.SignalPush, protocol.Push{Provider: "gitlab", Ref: "refs/heads/main", Commit: "cafe000000000000000000000000000000000003"})
	}, 20*time.Second)
	env.RegisterDelayedCallback(func() {
		assert.Equal(t, before, f.resolveCount(), "pinned GitRepos ignore pushes")
		assert.Equal(t, pushed, queryStatus(t, env).WebhookCommit)
		env.SignalWorkflow(protocol.SignalDelete, nil)
	}, 21*time.Second)
	runGitRepo(t, env)
}

// A failing remote is polled with exponential backoff (15s, 30s, 60s, …
// up to 5m); the failure count shows in status and resets on success.
func TestGitRepoWorkflow_PollBackoff(t *testing.T) {
	env, f := gitRepoEnv()
	env.RegisterDelayedCallback(func() { applyUpdate(t, env, testGitRepo(true)) }, 0)
	var start int
	env.RegisterDelayedCallback(func() {
		f.set(func() { f.gitDown = true })
		start = f.resolveCount()
	}, 5*time.Second)
	env.RegisterDelayedCallback(func() {
		// Failures at ~15s, 30s, 60s, 120s, 240s, 300s, 300s … after the
		// first: about 8 polls in 20 minutes instead of 80.
		polls := f.resolveCount() - start
		assert.GreaterOrEqual(t, polls, 6)
		assert.LessOrEqual(t, polls, 9)
		st := queryStatus(t, env)
		assert.Equal(t, polls, st.PollFailures)
		assert.Contains(t, st.Error, "connection refused")
		assert.Equal(t, "5m0s", st.PollingInterval)
		f.set(func() { f.gitDown = false })
	}, 20*time.Minute)
	env.RegisterDelayedCallback(func() {
		st := queryStatus(t, env)
		assert.Zero(t, st.PollFailures)
		assert.Empty(t, st.Error)
		assert.Equal(t, "15s", st.PollingInterval)
		env.SignalWorkflow(protocol.SignalDelete, nil)
	}, 26*time.Minute)
	runGitRepo(t, env)
}

// The receiver asks each GitRepo what it follows.
func TestGitRepoWorkflow_WebhookTarget(t *testing.T) {
	env, _ := gitRepoEnv()
	repo := testGitRepo(true)
	repo.Spec.Branch, repo.Spec.WebhookSecret = "main", "hooks"
	env.RegisterDelayedCallback(func() { applyUpdate(t, env, repo) }, 0)
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(protocol.QueryWebhookTarget)
		require.NoError(t, err)
		var got protocol.WebhookTarget
		require.NoError(t, v.Get(&got))
		assert.Equal(t, protocol.WebhookTarget{Branch: "main", WebhookSecret: "hooks"}, got)
		env.SignalWorkflow(protocol.SignalDelete, nil)
	}, time.Second)
	runGitRepo(t, env)
}

// FlotillaRepoURL, which the receiver searches, holds the normalised key
// once the remote was checked, and follows a change of the spec's repo.
func TestGitRepoWorkflow_RepoKeySearchAttribute(t *testing.T) {
	env, _ := gitRepoEnv()
	var keys []string
	firstHadState := false
	env.OnUpsertTypedSearchAttributes(mock.Anything).Return().Run(func(args mock.Arguments) {
		sa := args.Get(0).(temporal.SearchAttributes)
		if k, ok := sa.GetKeyword(temporalx.KeyRepoURL); ok {
			if len(keys) == 0 {
				_, firstHadState = sa.GetKeyword(temporalx.KeyState)
			}
			keys = append(keys, k)
		}
	})
	repo := testGitRepo(true)
	repo.Spec.Repo = "https://Git.Example/Team/App.git"
	env.RegisterDelayedCallback(func() { applyUpdate(t, env, repo) }, 0)
	env.RegisterDelayedCallback(func() {
		moved := repo
		moved.Spec.Repo = "http://git.example:8080/team/app-v2"
		applyUpdateID(t, env, "apply-moved", moved)
	}, 5*time.Second)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(protocol.SignalDelete, nil) }, 10*time.Second)
	runGitRepo(t, env)
	require.NotEmpty(t, keys)
	assert.Equal(t, "git.example/team/app", keys[0])
	assert.False(t, firstHadState, "written by the first check of the remote, before any rollout ended")
	assert.Equal(t, "git.example/team/app-v2", keys[len(keys)-1])
}

// Deployments left NotReady are not deployed again by polls (the
// rollout already waited for them; the clusters' watches report how they
// settle), and while they are unsettled the remote is still checked at
// the normal 15 s pace; once a watch reports them Ready, polling relaxes
// to the webhook pace.
func TestGitRepoWorkflow_PollsNeverRedeployUnsettled(t *testing.T) {
	env, f := gitRepoEnv()
	env.RegisterDelayedCallback(func() { applyUpdate(t, env, testGitRepo(true)) }, 0)
	env.RegisterDelayedCallback(func() {
		f.set(func() { f.commit, f.notReady = pushed, true })
		env.SignalWorkflow(protocol.SignalPush, protocol.Push{Provider: "github", Ref: "refs/heads/main", Commit: pushed, Authenticated: true})
	}, 5*time.Second)
	var deploys, targetings int
	env.RegisterDelayedCallback(func() {
		st := queryStatus(t, env)
		assert.Equal(t, "15s", st.PollingInterval, "unsettled: normal pace")
		f.set(func() { deploys, targetings = f.deploys["c1"], f.targetings })
	}, 10*time.Minute)
	env.RegisterDelayedCallback(func() {
		f.set(func() {
			assert.Equal(t, deploys, f.deploys["c1"], "no deploy for a poll that found nothing new")
			assert.Equal(t, targetings, f.targetings, "no rollout for a poll that found nothing new")
		})
		id := appBundles(pushed).Bundles[0].DeploymentID
		for _, c := range []string{"c1", "c2"} {
			env.SignalWorkflow(protocol.SignalLive, status.LiveSignal{Cluster: c, Reports: []status.LiveReport{
				{Bundle: "app", Release: "app", Namespace: "default", DeploymentID: id, Resources: 1, Ready: 1}}})
		}
	}, 20*time.Minute)
	env.RegisterDelayedCallback(func() {
		st := queryStatus(t, env)
		assert.Equal(t, 2, st.Summary.Ready, "the watches' reports")
		assert.Equal(t, "1h0m0s", st.PollingInterval, "settled: webhook pace")
		env.SignalWorkflow(protocol.SignalDelete, nil)
	}, 20*time.Minute+time.Second)
	runGitRepo(t, env)
}

// An unsigned push still makes the GitRepo check its remote, but does not
// slow its polling: anyone can post one.
func TestGitRepoWorkflow_UnauthenticatedPushKeepsPace(t *testing.T) {
	env, f := gitRepoEnv()
	env.RegisterDelayedCallback(func() { applyUpdate(t, env, testGitRepo(true)) }, 0)
	env.RegisterDelayedCallback(func() {
		f.set(func() { f.commit = pushed })
		env.SignalWorkflow(protocol.SignalPush, protocol.Push{Provider: "github", Ref: "refs/heads/main", Commit: pushed})
	}, 5*time.Second)
	env.RegisterDelayedCallback(func() {
		st := queryStatus(t, env)
		assert.Equal(t, pushed, st.Commit)
		assert.Equal(t, pushed, st.WebhookCommit)
		assert.Equal(t, "15s", st.PollingInterval)
		env.SignalWorkflow(protocol.SignalDelete, nil)
	}, 6*time.Second)
	runGitRepo(t, env)
}

// A successful check (here one a push asked for) ends a backoff at once:
// the next poll comes at the normal pace, not after the backed-off timer.
func TestGitRepoWorkflow_SuccessEndsBackoff(t *testing.T) {
	env, f := gitRepoEnv()
	env.RegisterDelayedCallback(func() { applyUpdate(t, env, testGitRepo(true)) }, 0)
	env.RegisterDelayedCallback(func() { f.set(func() { f.gitDown = true }) }, 5*time.Second)
	var before int
	env.RegisterDelayedCallback(func() {
		require.Equal(t, "5m0s", queryStatus(t, env).PollingInterval)
		f.set(func() { f.gitDown = false })
		env.SignalWorkflow(protocol.SignalPush, protocol.Push{Provider: "github", Ref: "refs/heads/main", Commit: pushed})
		before = f.resolveCount()
	}, 15*time.Minute)
	env.RegisterDelayedCallback(func() {
		assert.GreaterOrEqual(t, f.resolveCount()-before, 2, "the push's check and a poll at the normal pace")
		env.SignalWorkflow(protocol.SignalDelete, nil)
	}, 15*time.Minute+40*time.Second)
	runGitRepo(t, env)
}
