package gitsource

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-billy/v5/memfs"
	"github.com/go-git/go-billy/v5/util"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/memory"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/sizelimit"
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
			err := writeTree(t.Context(), repo.Storer, commit, root, sizelimit.NewBudget(sizelimit.Limit{}))
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

// TestWriteTreeSize checks the checkout limit: files that add up to more
// are refused, by their declared size before they are read, naming the
// file at which the sum went over, the limit and the flag.
func TestWriteTreeSize(t *testing.T) {
	files := map[string]string{"a.yaml": strings.Repeat("a", 400), "b/c.yaml": strings.Repeat("c", 400)}
	tests := []struct {
		name    string
		max     int64
		wantErr string // empty: fits
	}{
		{name: "fits", max: 800},
		{name: "no limit", max: 0},
		{name: "one file too many", max: 799, wantErr: "the commit's files together, up to b/c.yaml: over the limit of 799"},
		{name: "the first file alone", max: 100, wantErr: "up to a.yaml: over"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			repo, commit := commitFS(t, files, nil)
			size := sizelimit.NewBudget(sizelimit.Limit{Max: tt.max, Flag: sizelimit.CheckoutFlag})
			err := writeTree(t.Context(), repo.Storer, commit, t.TempDir(), size)
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			var se *sizelimit.Error
			require.ErrorAs(t, err, &se)
			assert.ErrorContains(t, err, tt.wantErr)
			assert.ErrorContains(t, err, "--max-checkout-size")
			assert.LessOrEqual(t, size.Used(), tt.max, "a blob over the limit is not read")
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
