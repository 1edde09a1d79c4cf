package gitsource

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

// throttle is a GitServer middleware that counts requests and answers
// those limit picks with 429 and Retry-After.
type throttle struct {
	requests atomic.Int32
	mu       sync.Mutex
	limit    func(*http.Request) bool
}

func (th *throttle) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		th.requests.Add(1)
		th.mu.Lock()
		limit := th.limit != nil && th.limit(r)
		th.mu.Unlock()
		if limit {
			w.Header().Set("Retry-After", "30")
			http.Error(w, "slow down", http.StatusTooManyRequests)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (th *throttle) set(limit func(*http.Request) bool) {
	th.mu.Lock()
	defer th.mu.Unlock()
	th.limit = limit
}

func TestResolve_HostAskedToWait(t *testing.T) {
	th := &throttle{}
	srv := testenv.NewGitServer(t, testenv.GitServerOptions{Middleware: th.middleware})
	a := srv.CreateRepo(t, "a", map[string]string{"f": "1"})
	b := srv.CreateRepo(t, "b", map[string]string{"f": "1"})
	now := time.Now()
	limiter := &HostLimiter{Now: func() time.Time { return now }}
	ctx := WithHostLimiter(t.Context(), limiter)
	host := strings.TrimPrefix(srv.URL(), "http://")

	th.set(func(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/a.git") })
	_, err := Resolve(ctx, Remote{URL: a.URL()}, "master", "")
	var rl *RateLimitedError
	require.ErrorAs(t, err, &rl)
	assert.Equal(t, host, rl.Host)
	assert.Equal(t, now.Add(30*time.Second), rl.RetryAt)
	assert.Contains(t, rl.Reason, "429 Too Many Requests, Retry-After 30s")
	assert.Equal(t, int32(1), th.requests.Load())

	// Another repository of the host: refused without a request.
	_, err = Resolve(ctx, Remote{URL: b.URL()}, "master", "")
	require.ErrorAs(t, err, &rl)
	assert.Equal(t, now.Add(30*time.Second), rl.RetryAt)
	_, _, err = NewCache(t.TempDir()).Checkout(ctx, Remote{URL: b.URL()}, Ref{Name: "refs/heads/master", Commit: b.Head(t)})
	require.ErrorAs(t, err, &rl, "a fetch waits too, and is not taken for a missing commit")
	assert.Equal(t, int32(1), th.requests.Load(), "no request before RetryAt")

	// Other contexts use the process's own record, not this one.
	_, err = Resolve(t.Context(), Remote{URL: b.URL()}, "master", "")
	require.NoError(t, err)
	assert.Equal(t, int32(2), th.requests.Load())

	now = now.Add(30 * time.Second)
	ref, err := Resolve(ctx, Remote{URL: b.URL()}, "master", "")
	require.NoError(t, err, "asked again at RetryAt")
	assert.Equal(t, b.Head(t), ref.Commit)
}

// TestCache_FetchAskedToWait: a 429 to the pack request of a fetch (after
// the references were listed) is a RateLimitedError, although go-git
// wraps it in an error that does not unwrap.
func TestCache_FetchAskedToWait(t *testing.T) {
	th := &throttle{}
	srv := testenv.NewGitServer(t, testenv.GitServerOptions{Middleware: th.middleware})
	repo := srv.CreateRepo(t, "a", map[string]string{"f": "1"})
	ctx := WithHostLimiter(t.Context(), &HostLimiter{})
	th.set(func(r *http.Request) bool { return r.Method == http.MethodPost })

	_, _, err := NewCache(t.TempDir()).Checkout(ctx, Remote{URL: repo.URL()}, Ref{Name: "refs/heads/master", Commit: repo.Head(t)})
	var rl *RateLimitedError
	require.ErrorAs(t, err, &rl)
	assert.Equal(t, int32(2), th.requests.Load(), "references listed, pack refused")
}

// TestResolve_TLSOptionsThroughLimiter: the CA bundle and insecure-TLS
// options still apply with requests going through the limiter.
func TestResolve_TLSOptionsThroughLimiter(t *testing.T) {
	th := &throttle{}
	srv := testenv.NewGitServer(t, testenv.GitServerOptions{TLS: true, Middleware: th.middleware})
	repo := srv.CreateRepo(t, "a", map[string]string{"f": "1"})
	ctx := WithHostLimiter(t.Context(), &HostLimiter{})

	_, err := Resolve(ctx, Remote{URL: repo.URL()}, "master", "")
	var certErr *url.Error
	require.ErrorAs(t, err, &certErr, "untrusted certificate")
	assert.Equal(t, int32(0), th.requests.Load())

	for _, r := range []Remote{{URL: repo.URL(), CABundle: srv.CAPEM()}, {URL: repo.URL(), InsecureSkipTLSVerify: true}} {
		ref, err := Resolve(ctx, r, "master", "")
		require.NoError(t, err)
		assert.Equal(t, repo.Head(t), ref.Commit)
	}

	th.set(func(*http.Request) bool { return true })
	_, err = Resolve(ctx, Remote{URL: repo.URL(), CABundle: srv.CAPEM()}, "master", "")
	var rl *RateLimitedError
	require.ErrorAs(t, err, &rl, "limited over https too")
}

func TestHostKey(t *testing.T) {
	for in, want := range map[string]string{
		"https://GitHub.com/org/repo.git":     "github.com",
		"https://github.com:443/org/repo.git": "github.com",
		"http://git.example:80/r.git":         "git.example",
		"http://127.0.0.1:8080/r.git":         "127.0.0.1:8080",
		"https://[::1]:8443/r.git":            "[::1]:8443",
		"https://[::1]/r.git":                 "[::1]",
	} {
		u, err := url.Parse(in)
		require.NoError(t, err)
		assert.Equal(t, want, hostKey(u), in)
	}
}

func TestLimitTransport(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Header().Set("X-RateLimit-Remaining", "0")
		w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10))
		http.Error(w, "API rate limit exceeded", http.StatusForbidden)
	}))
	t.Cleanup(srv.Close)
	client := &http.Client{Transport: LimitTransport(http.DefaultTransport)}
	ctx := WithHostLimiter(t.Context(), &HostLimiter{})
	for range 2 {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/app/installations/1/access_tokens", http.NoBody)
		require.NoError(t, err)
		resp, err := client.Do(req)
		if resp != nil {
			_ = resp.Body.Close()
		}
		var rl *RateLimitedError
		require.ErrorAs(t, err, &rl)
		assert.Contains(t, rl.Reason, "403 Forbidden, X-RateLimit-Remaining 0")
	}
	assert.Equal(t, int32(1), requests.Load(), "the second request is not sent")
}
