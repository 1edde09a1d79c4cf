package tests

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/status"
	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

// rateLimitWait is the Retry-After, in seconds, the Git host of
// TestRateLimitedHost gives.
const rateLimitWait = 20

// inFlightGrace is how long after a 429 a request may still arrive: one
// sent before its client had the answer.
const inFlightGrace = 500 * time.Millisecond

// limitingHost is a Git server middleware that, once armed, answers
// every request with 429 and Retry-After until the time its first 429
// gave, and records when each request arrived.
type limitingHost struct {
	mu       sync.Mutex
	armed    bool
	until    time.Time   // the time the first 429 gave
	limited  []time.Time // when each 429 was sent
	requests []time.Time
}

func (h *limitingHost) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		h.mu.Lock()
		h.requests = append(h.requests, now)
		if h.armed && h.until.IsZero() {
			h.until = now.Add(rateLimitWait * time.Second)
		}
		limit := h.armed && now.Before(h.until)
		if limit {
			h.limited = append(h.limited, now)
			secs := int(h.until.Sub(now).Seconds() + 0.999)
			w.Header().Set("Retry-After", strconv.Itoa(secs))
		}
		h.mu.Unlock()
		if limit {
			http.Error(w, "too many requests", http.StatusTooManyRequests)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (h *limitingHost) arm() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.armed = true
}

// record returns the time the first 429 gave, the 429s sent and the
// requests that arrived while the host had asked to wait (after
// inFlightGrace).
func (h *limitingHost) record() (until time.Time, limited int, early []time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.limited) == 0 {
		return h.until, 0, nil
	}
	for _, at := range h.requests {
		if at.After(h.limited[0].Add(inFlightGrace)) && at.Before(h.until) {
			early = append(early, at)
		}
	}
	return h.until, len(h.limited), early
}

// TestRateLimitedHost: five GitRepos on five repositories of one Git host,
// polling every 2 s. The host answers 429 with Retry-After: 20: no
// GitRepo asks it again before the time it gave (the worker refuses the
// requests itself), each GitRepo's `flotilla status -o json` shows that
// time as nextCheck and why, and after it all five deploy the commit made
// meanwhile.
func TestRateLimitedHost(t *testing.T) {
	start := time.Now()
	f := startFleet(t, 1, 1)
	host := &limitingHost{}
	git := testenv.NewGitServer(t, testenv.GitServerOptions{Middleware: host.middleware})
	const n = 5
	repos := make([]*testenv.GitRepo, n)
	name := func(i int) string { return fmt.Sprintf("limited-%d", i) }
	for i := range repos {
		ns := name(i) + "-ns"
		repos[i] = git.CreateRepo(t, name(i), map[string]string{"fleet.yaml": fleetYAML(ns), "cm.yaml": configMapDoc("cm", "v1")})
		f.apply(t, gitRepoDoc(name(i), repos[i].URL(), allClusters+"  pollingInterval: 2s\n"))
	}
	for i, r := range repos {
		f.waitFor(t, name(i), "first commit deployed", settledAt(r.Head(t), 1))
	}

	host.arm()
	armed := time.Now()
	second := make([]string, n)
	for i, r := range repos {
		second[i] = r.Commit(t, map[string]string{"cm.yaml": configMapDoc("cm", "v2")}, "v2")
	}

	t.Run("StatusShowsNextCheck", func(t *testing.T) {
		for i := range repos {
			st := f.waitForWithin(t, name(i), "nextCheck in status", 15*time.Second,
				func(st status.GitRepo) bool { return st.NextCheck != nil })
			until, _, _ := host.record()
			require.False(t, until.IsZero(), "the host answered 429")
			assert.WithinDuration(t, until, *st.NextCheck, 2*time.Second, "nextCheck is the time the host gave")
			assert.Contains(t, st.NextCheckReason, "429 Too Many Requests, Retry-After")
			assert.Contains(t, st.NextCheckReason, strings.TrimPrefix(git.URL(), "http://"), "names the host")
			assert.NotEqual(t, second[i], st.Commit, "not deployed while waiting")
		}
	})

	t.Run("DeployedAfterTheWait", func(t *testing.T) {
		for i := range repos {
			st := f.waitForWithin(t, name(i), "second commit deployed after the wait", 60*time.Second, settledAt(second[i], 1))
			assert.Nil(t, st.NextCheck, "nextCheck cleared by a successful check")
			cm, ok := f.configMap(t, f.clusters[0].Name, name(i)+"-ns", "cm")
			require.True(t, ok)
			assert.Equal(t, "v2", cm.Data["value"])
		}
		until, limited, early := host.record()
		assert.Empty(t, early, "requests before the time the host gave (%s)", until)
		t.Logf("armed %s; %d 429s, host asked again %s after arming (Retry-After %ds)", armed.Format(time.TimeOnly),
			limited, firstAfter(host, until).Sub(armed).Round(time.Millisecond), rateLimitWait)
	})
	t.Logf("TestRateLimitedHost took %s", time.Since(start).Round(time.Millisecond))
}

// firstAfter is when the first request at or after t arrived.
func firstAfter(h *limitingHost, t time.Time) time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, at := range h.requests {
		if !at.Before(t) {
			return at
		}
	}
	return time.Time{}
}
