package gitsource

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

// worktrees returns the names under the cache's worktrees directory.
func worktrees(t *testing.T, c *Cache) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(c.dir, worktreesDir))
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestCache_BoundsWorktrees(t *testing.T) {
	srv := testenv.NewGitServer(t, testenv.GitServerOptions{})
	repo := srv.CreateRepo(t, "app", map[string]string{"a": "0\n"})
	remote := Remote{URL: repo.URL()}
	cache := NewCache(t.TempDir())
	cache.MaxWorktrees = 3

	var last string
	for i := range 10 {
		c := repo.Commit(t, map[string]string{"a": strconv.Itoa(i) + "\n"}, "c")
		dir, release, err := cache.Checkout(t.Context(), remote, Ref{Commit: c})
		require.NoError(t, err)
		assert.Equal(t, map[string]string{"a": strconv.Itoa(i) + "\n"}, readTree(t, dir))
		release()
		assert.LessOrEqual(t, len(worktrees(t, cache)), 3, "after commit %d", i)
		last = c
	}
	assert.Contains(t, worktrees(t, cache), last, "the newest is kept")
}

// A worktree handed out and not yet released survives any prune, however
// old, while other checkouts and prunes run; released, it goes.
func TestCache_PruneKeepsWorktreesInUse(t *testing.T) {
	srv := testenv.NewGitServer(t, testenv.GitServerOptions{})
	repo := srv.CreateRepo(t, "app", map[string]string{"a": "held\n"})
	remote := Remote{URL: repo.URL()}
	cache := NewCache(t.TempDir())
	cache.MaxWorktrees = 1
	commits := []string{repo.Head(t)}
	for i := range 6 {
		commits = append(commits, repo.Commit(t, map[string]string{"a": strconv.Itoa(i) + "\n"}, "c"))
	}

	held, release, err := cache.Checkout(t.Context(), remote, Ref{Commit: commits[0]})
	require.NoError(t, err)
	old := time.Now().Add(-time.Hour)
	require.NoError(t, os.Chtimes(held, old, old)) // the least recently used

	var wg sync.WaitGroup
	for _, c := range commits[1:] {
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, rel, err := cache.Checkout(t.Context(), remote, Ref{Commit: c})
			if assert.NoError(t, err) {
				rel()
			}
		}()
		go func() {
			defer wg.Done()
			assert.NoError(t, cache.Prune(0))
		}()
	}
	for range 20 {
		assert.Equal(t, map[string]string{"a": "held\n"}, readTree(t, held))
	}
	wg.Wait()
	require.NoError(t, cache.Prune(0))
	assert.Equal(t, map[string]string{"a": "held\n"}, readTree(t, held))
	assert.Equal(t, []string{commits[0]}, worktrees(t, cache), "only the held worktree is left")

	release()
	release() // a second call does nothing
	require.NoError(t, cache.Prune(0))
	assert.NoDirExists(t, held)
}

func TestCache_PrunesIdleClones(t *testing.T) {
	srv := testenv.NewGitServer(t, testenv.GitServerOptions{})
	idle := srv.CreateRepo(t, "idle", map[string]string{"a": "1\n"})
	busy := srv.CreateRepo(t, "busy", map[string]string{"b": "1\n"})
	now := time.Now()
	cache := NewCache(t.TempDir())
	cache.CloneTTL = time.Hour
	cache.now = func() time.Time { return now }
	checkout := func(r *testenv.GitRepo) {
		t.Helper()
		_, release, err := cache.Checkout(t.Context(), Remote{URL: r.URL()}, Ref{Commit: r.Head(t)})
		require.NoError(t, err)
		release()
	}
	checkout(idle)
	checkout(busy)
	idleClone, busyClone := cache.clonePath(idle.URL()), cache.clonePath(busy.URL())

	now = now.Add(59 * time.Minute)
	require.NoError(t, cache.Prune(DefaultMaxWorktrees))
	assert.DirExists(t, idleClone, "used within the TTL")
	checkout(busy) // a use restarts its TTL

	now = now.Add(2 * time.Minute)
	unlock, err := cache.lock(t.Context(), idle.URL()) // in use, however idle before
	require.NoError(t, err)
	require.NoError(t, cache.Prune(DefaultMaxWorktrees))
	assert.DirExists(t, idleClone, "in use")
	unlock()

	now = now.Add(2 * time.Hour)
	checkout(busy)
	// busy's Checkout built nothing new, so prune explicitly.
	require.NoError(t, cache.Prune(DefaultMaxWorktrees))
	assert.NoDirExists(t, idleClone)
	assert.DirExists(t, busyClone)
	entries, err := os.ReadDir(filepath.Join(cache.dir, reposDir))
	require.NoError(t, err)
	assert.Len(t, entries, 1, "nothing left behind")

	// A later use clones again.
	idle.Commit(t, map[string]string{"a": "2\n"}, "2")
	dir, release, err := cache.Checkout(t.Context(), Remote{URL: idle.URL()}, Ref{Commit: idle.Head(t)})
	require.NoError(t, err)
	defer release()
	assert.Equal(t, map[string]string{"a": "2\n"}, readTree(t, dir))
	assert.DirExists(t, idleClone)
}

// A clone directory a crash left half-created (openClone's temporary one)
// is removed once it is old; a fresh one may be another clone's being made.
func TestCache_PrunesStaleTemporaryClones(t *testing.T) {
	cache := NewCache(t.TempDir())
	parent := filepath.Join(cache.dir, reposDir)
	stale, fresh := filepath.Join(parent, tmpPrefix+"crashed"), filepath.Join(parent, tmpPrefix+"creating")
	for _, dir := range []string{stale, fresh} {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "objects"), 0o700))
	}
	old := time.Now().Add(-2 * staleClone)
	require.NoError(t, os.Chtimes(stale, old, old))

	require.NoError(t, cache.Prune(DefaultMaxWorktrees))
	assert.NoDirExists(t, stale)
	assert.DirExists(t, fresh)
}

// PruneEvery times out idle clones although no Checkout builds a worktree
// (a controller whose GitRepos stopped changing), and stops with its
// context.
func TestCache_PruneEvery(t *testing.T) {
	srv := testenv.NewGitServer(t, testenv.GitServerOptions{})
	idle := srv.CreateRepo(t, "idle", map[string]string{"a": "1\n"})
	cache := NewCache(t.TempDir())
	cache.CloneTTL = time.Hour
	var mu sync.Mutex
	now := time.Now()
	cache.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	_, release, err := cache.Checkout(t.Context(), Remote{URL: idle.URL()}, Ref{Commit: idle.Head(t)})
	require.NoError(t, err)
	release()
	clone := cache.clonePath(idle.URL())

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { cache.PruneEvery(ctx, 10*time.Millisecond); close(done) }()
	time.Sleep(50 * time.Millisecond)
	assert.DirExists(t, clone, "used within the TTL")

	mu.Lock()
	now = now.Add(2 * time.Hour)
	mu.Unlock()
	assert.Eventually(t, func() bool {
		_, err := os.Stat(clone)
		return os.IsNotExist(err)
	}, 10*time.Second, 10*time.Millisecond, "an idle clone is removed without a new checkout")
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("PruneEvery did not return after its context ended")
	}
}
