package activities

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/gitsource"
	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

// TestUnchanged: a commit under another path is unchanged for the
// GitRepo, one under its path is not, a comparison that cannot be made
// counts as a change, and a comparison made once is not made again.
func TestUnchanged(t *testing.T) {
	srv := testenv.NewGitServer(t, testenv.GitServerOptions{})
	repo := srv.CreateRepo(t, "mono", map[string]string{"a/cm.yaml": "a: 1", "b/cm.yaml": "b: 1"})
	first := repo.Head(t)
	second := repo.Commit(t, map[string]string{"b/cm.yaml": "b: 2"}, "b")
	a := &Activities{Git: gitsource.NewCache(t.TempDir()), Logger: zap.NewNop()}
	r := gitsource.Remote{URL: repo.URL()}
	in := func(paths ...string) ResolveInput {
		return ResolveInput{Spec: api.GitRepoSpec{Repo: repo.URL(), Paths: paths}, Since: first}
	}

	got, err := a.unchanged(t.Context(), r, in("a"), second)
	require.NoError(t, err)
	assert.True(t, got, "a change under b only")
	got, err = a.unchanged(t.Context(), r, in("b"), second)
	require.NoError(t, err)
	assert.False(t, got)
	got, err = a.unchanged(t.Context(), r, in("a"), "ffffffffffffffffffffffffffffffffffffffff")
	require.NoError(t, err)
	assert.False(t, got, "a commit the remote does not have: rendered as before")

	// Kept: answered again without the clone, through a remote that
	// cannot be reached.
	a.Git = gitsource.NewCache(t.TempDir())
	got, err = a.unchanged(t.Context(), gitsource.Remote{URL: "http://127.0.0.1:1/mono.git"}, in("a"), second)
	require.NoError(t, err)
	assert.True(t, got)
}
