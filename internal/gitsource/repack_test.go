package gitsource

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

// A clone fetched at every commit keeps at most maxPacks+1 packs (each
// fetch adds one; the next open merges), and the merge keeps every object:
// every commit, including one no branch holds any more, is still read from
// the clone without a fetch.
func TestCache_ConsolidatesPacks(t *testing.T) {
	srv := testenv.NewGitServer(t, testenv.GitServerOptions{})
	repo := srv.CreateRepo(t, "mono", map[string]string{"a/x": "0\n", "b/y": "0\n"})
	remote := Remote{URL: repo.URL()}
	cache := NewCache(t.TempDir())
	var pruneErrs []error
	cache.OnPruneError = func(err error) { pruneErrs = append(pruneErrs, err) }
	commits := []string{repo.Head(t)}
	repo.Branch(t, "feature")
	commits = append(commits, repo.CommitTo(t, "feature", map[string]string{"f": "only on feature\n"}, "f"))
	_, release, err := cache.Checkout(t.Context(), remote, Ref{Commit: commits[1]})
	require.NoError(t, err)
	release()

	most := 0
	for i := range 3 * maxPacks {
		c := repo.Commit(t, map[string]string{"a/x": strconv.Itoa(i) + "\n"}, "c")
		dir, release, err := cache.Checkout(t.Context(), remote, Ref{Commit: c})
		require.NoError(t, err)
		assert.Equal(t, strconv.Itoa(i)+"\n", readTree(t, dir)["a/x"])
		release()
		commits = append(commits, c)
		_, packs := packFiles(t, cache.clonePath(remote.URL))
		most = max(most, len(packs))
	}
	t.Logf("%d fetches, at most %d packs", 3*maxPacks+1, most)
	assert.LessOrEqual(t, most, maxPacks+1, "packs are merged")
	assert.Empty(t, pruneErrs)

	// The feature branch goes; its commit stays in the clone.
	require.NoError(t, os.Remove(filepath.Join(repo.Dir(), "refs", "heads", "feature")))
	repo.Commit(t, map[string]string{"b/y": "1\n"}, "after the branch went")
	for range maxPacks {
		repo.Commit(t, map[string]string{"b/y": "2\n"}, "c")
		_, release, err := cache.Checkout(t.Context(), remote, Ref{Commit: repo.Head(t)})
		require.NoError(t, err)
		release()
	}
	clone, err := openBare(cache.clonePath(remote.URL))
	require.NoError(t, err)
	for _, c := range commits {
		_, err := peel(clone, plumbing.NewHash(c))
		assert.NoError(t, err, "commit %s is in the clone", c)
	}
}
