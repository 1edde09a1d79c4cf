package tests

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/internal/status"
	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

// gitCounter records when a Git server was asked for its references
// (GET info/refs?service=git-upload-pack: an ls-remote, or the start of a
// fetch) and sent objects (POST git-upload-pack: a fetch).
type gitCounter struct {
	mu      sync.Mutex
	refs    []time.Time
	fetches []time.Time
}

func (c *gitCounter) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		c.mu.Lock()
		switch {
		case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/info/refs") && r.URL.Query().Get("service") == "git-upload-pack":
			c.refs = append(c.refs, now)
		case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/git-upload-pack"):
			c.fetches = append(c.fetches, now)
		}
		c.mu.Unlock()
		next.ServeHTTP(w, r)
	})
}

// since counts the requests of each kind from t on.
func (c *gitCounter) since(t time.Time) (refs, fetches int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	count := func(ts []time.Time) int {
		n := 0
		for _, at := range ts {
			if !at.Before(t) {
				n++
			}
		}
		return n
	}
	return count(c.refs), count(c.fetches)
}

// monorepo is n GitRepos on one repository of a counting Git server, each
// with its own path apps/app-<i> holding one ConfigMap bundle.
type monorepo struct {
	f     *fleet
	repo  *testenv.GitRepo
	count *gitCounter
	n     int
}

// stillName is a GitRepo of TestMonorepo that does not poll: it learns
// of new commits only from the others' checks (protocol.SignalCheck).
const (
	stillName = "mono-still"
	stillPath = "apps/still"
)

func monoName(i int) string { return fmt.Sprintf("mono-%d", i) }
func monoNS(i int) string   { return fmt.Sprintf("mono-%d-ns", i) }
func monoPath(i int) string { return fmt.Sprintf("apps/app-%d", i) }

// startMonorepo starts a one-cluster fleet and applies the n GitRepos,
// polling every interval, and waits until each deployed the first commit.
func startMonorepo(t testing.TB, n int, interval time.Duration) *monorepo {
	t.Helper()
	m := &monorepo{f: startFleet(t, 1, 1), count: &gitCounter{}, n: n}
	git := testenv.NewGitServer(t, testenv.GitServerOptions{Middleware: m.count.middleware})
	files := map[string]string{"README.md": "monorepo", stillPath + "/fleet.yaml": fleetYAML(stillName + "-ns"),
		stillPath + "/cm.yaml": configMapDoc("cm", "v0")}
	docs := make([]string, n)
	for i := range n {
		files[monoPath(i)+"/fleet.yaml"] = fleetYAML(monoNS(i))
		files[monoPath(i)+"/cm.yaml"] = configMapDoc("cm", "v0")
	}
	m.repo = git.CreateRepo(t, "mono", files)
	for i := range n {
		docs[i] = gitRepoDoc(monoName(i), m.repo.URL(),
			fmt.Sprintf("%s  pollingInterval: %s\n  paths:\n  - %s\n", allClusters, interval, monoPath(i)))
	}
	m.f.apply(t, strings.Join(docs, "---\n"))
	head := m.repo.Head(t)
	for i := range n {
		m.f.waitForWithin(t, monoName(i), "first commit deployed", 3*time.Minute, settledAt(head, 1))
	}
	return m
}

// touch commits a new value of GitRepo i's ConfigMap.
func (m *monorepo) touch(t testing.TB, i int, value string) string {
	t.Helper()
	return m.repo.Commit(t, map[string]string{monoPath(i) + "/cm.yaml": configMapDoc("cm", value)}, "touch "+monoPath(i))
}

// renders counts each GitRepo's renders ("Rendered bundles" lines of the
// controller's log), by name.
func (m *monorepo) renders(t testing.TB) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, l := range logLines(t, "Rendered bundles", m.f.logs) {
		if ref, ok := l["gitrepo"].(string); ok {
			out[strings.TrimPrefix(ref, "fleet-default/")]++
		}
	}
	return out
}

// helmRevisions counts the Helm release records in GitRepo i's namespace:
// one per install or upgrade.
func (m *monorepo) helmRevisions(t testing.TB, i int) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := m.f.clusters[0].Clientset(t).CoreV1().Secrets(monoNS(i)).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm"})
	require.NoError(t, err)
	return len(list.Items)
}

// TestMonorepo: ten GitRepos follow one repository and branch, each with
// its own path, polling every 2 s. Together they ask the Git server for
// its references about once per polling interval (the controller's
// shared answers), and a commit under one path re-renders and rolls out
// that GitRepo alone: the other nine take the commit without a render, a
// Helm upgrade or a rollout ("no change under paths": renderedCommit
// stays the commit they were rendered from), after one fetch of the
// commit for all ten. An eleventh GitRepo of the repository that does not
// poll takes the commit too, told by the check that saw it.
func TestMonorepo(t *testing.T) {
	start := time.Now()
	const (
		n        = 10
		interval = 2 * time.Second
		touched  = 3
	)
	m := startMonorepo(t, n, interval)
	first := m.repo.Head(t)
	m.f.apply(t, gitRepoDoc(stillName, m.repo.URL(), allClusters+"  disablePolling: true\n  paths:\n  - "+stillPath+"\n"))
	m.f.waitFor(t, stillName, "first commit deployed", settledAt(first, 1))

	t.Run("OneRefsRequestPerInterval", func(t *testing.T) {
		const intervals = 5
		from := time.Now()
		time.Sleep(intervals * interval)
		refs, fetches := m.count.since(from)
		// Each ask is answered for every GitRepo until it is one interval
		// old, so asks are at least one interval apart: at most one per
		// interval, plus one for an ask at the window's start. Ten GitRepos
		// asking on their own would send about fifty.
		assert.LessOrEqual(t, refs, intervals+1, "ls-remote requests in %d polling intervals of %d GitRepos", intervals, n)
		assert.Positive(t, refs, "the GitRepos still poll")
		assert.Zero(t, fetches, "nothing new to fetch")
		t.Logf("%d GitRepos, %d polling intervals of %s: %d ls-remote requests", n, intervals, interval, refs)
	})

	t.Run("CommitUnderOnePathRollsOutOneGitRepo", func(t *testing.T) {
		before := m.renders(t)
		lastRollout := map[string]string{}
		for i := range n {
			lastRollout[monoName(i)] = m.f.status(t, monoName(i)).LastRollout
		}
		stillRollout := m.f.status(t, stillName).LastRollout
		committed := time.Now()
		second := m.touch(t, touched, "v1")

		m.f.waitFor(t, monoName(touched), "the touched GitRepo rolled out", settledAt(second, 1))
		cm, ok := m.f.configMap(t, m.f.clusters[0].Name, monoNS(touched), "cm")
		require.True(t, ok)
		assert.Equal(t, "v1", cm.Data["value"])
		t.Logf("commit → touched GitRepo settled in %s", time.Since(committed).Round(time.Millisecond))
		for i := range n {
			if i == touched {
				continue
			}
			st := m.f.waitFor(t, monoName(i), "the commit taken without a rollout", func(st status.GitRepo) bool {
				return st.Commit == second
			})
			assert.Equal(t, first, st.RenderedCommit, "%s: rendered from the first commit", monoName(i))
			assert.Equal(t, lastRollout[monoName(i)], st.LastRollout, "%s: no rollout", monoName(i))
			assert.Empty(t, st.Rollout, "%s: no rollout running", monoName(i))
			assert.Equal(t, 1, m.helmRevisions(t, i), "%s: no Helm upgrade", monoName(i))
		}
		assert.Equal(t, 2, m.helmRevisions(t, touched), "the touched GitRepo upgraded once")
		st := m.f.waitForWithin(t, stillName, "the commit taken by a GitRepo that does not poll", 10*time.Second,
			func(st status.GitRepo) bool { return st.Commit == second })
		assert.Equal(t, first, st.RenderedCommit)
		assert.Equal(t, stillRollout, st.LastRollout, "no rollout")
		after := m.renders(t)
		for i := range n {
			want := 0
			if i == touched {
				want = 1
			}
			assert.Equal(t, want, after[monoName(i)]-before[monoName(i)], "renders of %s", monoName(i))
		}
		_, fetches := m.count.since(committed)
		// One fetch of the new commit into the controller's clone serves
		// the ten comparisons and the render; a second round may follow
		// when go-git negotiates again.
		assert.LessOrEqual(t, fetches, 2, "fetches of the commit for %d GitRepos", n)
		assert.Positive(t, fetches)
	})
	t.Logf("TestMonorepo took %s", time.Since(start).Round(time.Millisecond))
}
