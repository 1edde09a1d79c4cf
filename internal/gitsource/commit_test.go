package gitsource

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

func TestCache_FindCommit(t *testing.T) {
	srv := testenv.NewGitServer(t, testenv.GitServerOptions{})
	repo := srv.CreateRepo(t, "app", map[string]string{"a": "1\n"})
	remote := Remote{URL: repo.URL()}
	first := resolve(t, remote, "", "").Commit
	cache := NewCache(t.TempDir())
	_, err := cache.FindCommit(t.Context(), remote, first[:7])
	require.NoError(t, err)
	second := repo.Commit(t, map[string]string{"a": "2\n"}, "second")

	tests := []struct {
		name, rev, want string
		notFound        bool
	}{
		{name: "full", rev: first, want: first},
		{name: "abbreviated", rev: first[:7], want: first},
		{name: "spaces and capitals", rev: " " + strings.ToUpper(first[:10]) + " ", want: first},
		{name: "a commit the clone has not fetched yet", rev: second[:8], want: second},
		{name: "missing", rev: hashOf('e')[:8], notFound: true},
		{name: "missing full", rev: hashOf('e'), notFound: true},
		{name: "too short", rev: first[:3], notFound: true},
		{name: "a branch name", rev: "main", notFound: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := cache.FindCommit(t.Context(), remote, tt.rev)
			if tt.notFound {
				require.ErrorIs(t, err, ErrRefNotFound)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}
