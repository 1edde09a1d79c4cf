package gitsource

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-git/go-billy/v5/memfs"
	"github.com/go-git/go-billy/v5/util"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/memory"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// commitFS commits regular files, executables (path ending in ".sh") and
// symlinks to an in-memory repository.
func commitFS(t *testing.T, files, links map[string]string) (*git.Repository, *object.Commit) {
	t.Helper()
	fs := memfs.New()
	repo, err := git.Init(memory.NewStorage(), fs)
	require.NoError(t, err)
	wt, err := repo.Worktree()
	require.NoError(t, err)
	for p, content := range files {
		mode := os.FileMode(0o644)
		if filepath.Ext(p) == ".sh" {
			mode = 0o755
		}
		require.NoError(t, util.WriteFile(fs, p, []byte(content), mode))
	}
	for p, target := range links {
		require.NoError(t, fs.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, fs.Symlink(target, p))
	}
	require.NoError(t, wt.AddGlob("."))
	sig := &object.Signature{Name: "t", Email: "t@example.com", When: time.Unix(1700000000, 0)}
	h, err := wt.Commit("c", &git.CommitOptions{Author: sig, Committer: sig})
	require.NoError(t, err)
	c, err := repo.CommitObject(h)
	require.NoError(t, err)
	return repo, c
}

func TestWriteTree(t *testing.T) {
	tests := []struct {
		name    string
		files   map[string]string
		links   map[string]string
		wantErr string // substring; empty: no error
	}{
		{
			name:  "files, executables and links inside",
			files: map[string]string{"a/b/c.yaml": "c\n", "run.sh": "#!/bin/sh\n", "common/values.yaml": "v\n"},
			links: map[string]string{"a/values.yaml": "../common/values.yaml", "dangling": "nowhere", "up": "a/.."},
		},
		{
			name:    "absolute link",
			files:   map[string]string{"a": "a\n"},
			links:   map[string]string{"passwd": "/etc/passwd"},
			wantErr: `symlink passwd: target "/etc/passwd" is not a relative path`,
		},
		{
			name:    "link leaving the tree",
			files:   map[string]string{"a": "a\n"},
			links:   map[string]string{"out": "../../.."},
			wantErr: "symlink out points outside the repository",
		},
		{
			name:    "links that only leave the tree together",
			files:   map[string]string{"a": "a\n"},
			links:   map[string]string{"l": ".", "z": "l/.."},
			wantErr: "symlink z points outside the repository",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			repo, commit := commitFS(t, tt.files, tt.links)
			root := t.TempDir()
			err := writeTree(t.Context(), repo.Storer, commit, root)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			for p, content := range tt.files {
				b, err := os.ReadFile(filepath.Join(root, p))
				require.NoError(t, err)
				assert.Equal(t, content, string(b))
			}
			info, err := os.Stat(filepath.Join(root, "run.sh"))
			require.NoError(t, err)
			assert.Equal(t, os.FileMode(0o755), info.Mode().Perm())
			b, err := os.ReadFile(filepath.Join(root, "a/values.yaml"))
			require.NoError(t, err)
			assert.Equal(t, "v\n", string(b))
		})
	}
}

func TestCheckTreePath(t *testing.T) {
	for _, p := range []string{"a/b", "a.git", ".gitignore", "x/.github/y"} {
		assert.NoError(t, checkTreePath(p), p)
	}
	for _, p := range []string{"..", "a/../b", ".git", "a/.GIT/config", "a//b", "./a", `a\b`} {
		assert.Error(t, checkTreePath(p), p)
	}
}
