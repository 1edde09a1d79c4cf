package gitsource

import (
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

// lsRemoteCounter counts the ls-remote requests (ref advertisements for
// git-upload-pack) a GitServer receives; hold, when set, is waited on
// before each is answered.
type lsRemoteCounter struct {
	n    atomic.Int64
	hold chan struct{}
}

func (c *lsRemoteCounter) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/info/refs") && r.URL.Query().Get("service") == "git-upload-pack" {
			c.n.Add(1)
			if c.hold != nil {
				<-c.hold
			}
		}
		next.ServeHTTP(w, r)
	})
}

// fakeClock is a settable clock for Answers.Now.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func TestAnswers_ReuseWithinMaxAge(t *testing.T) {
	var count lsRemoteCounter
	srv := testenv.NewGitServer(t, testenv.GitServerOptions{Middleware: count.middleware})
	repo := srv.CreateRepo(t, "mono", map[string]string{"a/x.yaml": "a: 1"})
	first := repo.Head(t)
	clock := &fakeClock{t: time.Unix(1000, 0)}
	answers := &Answers{Now: clock.now}
	r := Remote{URL: repo.URL()}

	got, err := answers.Resolve(t.Context(), r, "master", "", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, first, got.Commit)
	assert.False(t, got.Moved, "the first answer has nothing to move from")
	assert.EqualValues(t, 1, count.n.Load())

	second := repo.Commit(t, map[string]string{"a/x.yaml": "a: 2"}, "second")
	clock.add(59 * time.Second)
	got, err = answers.Resolve(t.Context(), r, "master", "", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, first, got.Commit, "an answer younger than maxAge is reused")
	assert.EqualValues(t, 1, count.n.Load())

	got, err = answers.Resolve(t.Context(), r, "master", "", 0)
	require.NoError(t, err)
	assert.Equal(t, second, got.Commit, "maxAge 0 always asks")
	assert.True(t, got.Moved)
	assert.EqualValues(t, 2, count.n.Load())

	got, err = answers.Resolve(t.Context(), r, "", "master", 30*time.Second)
	require.NoError(t, err)
	assert.Equal(t, second, got.Commit, "a revision is answered from the same list")
	assert.False(t, got.Moved, "a reused answer never reports a move")
	assert.EqualValues(t, 2, count.n.Load())

	clock.add(time.Minute)
	got, err = answers.Resolve(t.Context(), r, "master", "", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, second, got.Commit)
	assert.False(t, got.Moved, "asked again, but the branch did not move")
	assert.EqualValues(t, 3, count.n.Load(), "an answer as old as maxAge is not reused")

	got, err = answers.Resolve(t.Context(), r, "", hashOf('a'), time.Minute)
	require.NoError(t, err)
	assert.Equal(t, hashOf('a'), got.Commit, "a full hash names its commit")
	assert.EqualValues(t, 3, count.n.Load(), "the fresh answer proves the credentials")
	got, err = answers.Resolve(t.Context(), r, "", hashOf('a'), 0)
	require.NoError(t, err)
	assert.Equal(t, hashOf('a'), got.Commit)
	assert.EqualValues(t, 4, count.n.Load(), "a full hash still asks the remote: it proves the credentials read it")
}

func TestAnswers_CredentialsAreNotShared(t *testing.T) {
	var count lsRemoteCounter
	const secret = "s3cret-token"
	srv := testenv.NewGitServer(t, testenv.GitServerOptions{Username: "alice", Password: secret, Middleware: count.middleware})
	repo := srv.CreateRepo(t, "private", map[string]string{"x.yaml": "x: 1"})
	var answers Answers

	_, err := answers.Resolve(t.Context(), Remote{URL: repo.URL(), Auth: &Auth{Username: "alice", Password: secret}}, "", "", time.Hour)
	require.NoError(t, err)
	for _, r := range []Remote{
		{URL: repo.URL()},
		{URL: repo.URL(), Auth: &Auth{Username: "alice", Password: "wrong"}},
		{URL: repo.URL(), Auth: &Auth{Username: "alice", Password: secret}, InsecureSkipTLSVerify: true},
	} {
		_, err = answers.Resolve(t.Context(), r, "", "", time.Hour)
		if r.InsecureSkipTLSVerify {
			require.NoError(t, err)
			continue
		}
		require.ErrorIs(t, err, ErrAuth, "%#v must not reuse the answer the right credentials got", r)
	}
	assert.EqualValues(t, 4, count.n.Load())
	assert.NotContains(t, answerKey(Remote{URL: repo.URL(), Auth: &Auth{Password: secret}}), secret)
}

func TestAnswers_ConcurrentCallersShareRequests(t *testing.T) {
	count := lsRemoteCounter{hold: make(chan struct{})}
	srv := testenv.NewGitServer(t, testenv.GitServerOptions{Middleware: count.middleware})
	repo := srv.CreateRepo(t, "mono", map[string]string{"x.yaml": "x: 1"})
	var answers Answers
	r := Remote{URL: repo.URL()}

	const callers = 10
	var wg sync.WaitGroup
	var moved atomic.Int64
	errs := make([]error, callers)
	for i := range callers {
		wg.Go(func() {
			var ans Answer
			ans, errs[i] = answers.Resolve(t.Context(), r, "", "", 0)
			if ans.Moved {
				moved.Add(1)
			}
		})
	}
	// The first request is held until every caller waits: those that came
	// after it was sent need another, which they share.
	require.Eventually(t, func() bool { return count.n.Load() == 1 }, 5*time.Second, time.Millisecond)
	time.Sleep(100 * time.Millisecond)
	close(count.hold)
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	assert.LessOrEqual(t, count.n.Load(), int64(2), "10 callers asking at once")
	assert.Zero(t, moved.Load())
}

func TestAnswers_Bounded(t *testing.T) {
	var count lsRemoteCounter
	srv := testenv.NewGitServer(t, testenv.GitServerOptions{Middleware: count.middleware})
	clock := &fakeClock{t: time.Unix(1000, 0)}
	answers := &Answers{MaxEntries: 2, Now: clock.now}
	var remotes []Remote
	for _, name := range []string{"a", "b", "c"} {
		remotes = append(remotes, Remote{URL: srv.CreateRepo(t, name, map[string]string{"x.yaml": "x: 1"}).URL()})
	}
	ask := func(r Remote) {
		t.Helper()
		clock.add(time.Second)
		_, err := answers.Resolve(t.Context(), r, "", "", time.Hour)
		require.NoError(t, err)
	}
	ask(remotes[0])
	ask(remotes[1])
	ask(remotes[0]) // a is now more recently used than b
	assert.EqualValues(t, 2, count.n.Load())
	ask(remotes[2]) // evicts b
	assert.Len(t, answers.entries, 2)
	ask(remotes[0])
	assert.EqualValues(t, 3, count.n.Load(), "a was kept")
	ask(remotes[1])
	assert.EqualValues(t, 4, count.n.Load(), "b was evicted")
}
