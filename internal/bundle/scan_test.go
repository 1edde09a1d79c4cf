package bundle_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/bundle"
)

const cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n"

func TestScan(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		paths []string
		// want are the expected bundle directories.
		want []string
		// wantErr, when set, is the sentinel the error must wrap.
		wantErr error
	}{
		{
			name:  "root with plain yaml",
			files: map[string]string{"a.yaml": cm, "README.md": "hi"},
			want:  []string{"."},
		},
		{
			name:  "yml counts too",
			files: map[string]string{"a.yml": cm},
			want:  []string{"."},
		},
		{
			name:    "no yaml at all",
			files:   map[string]string{"README.md": "hi", "x.json": "{}"},
			wantErr: bundle.ErrNoBundles,
		},
		{
			name:  "subdir with fleet.yaml only",
			files: map[string]string{"README.md": "hi", "app/fleet.yaml": "", "app/x.yaml": cm},
			want:  []string{"app"},
		},
		{
			name:  "root plain yaml next to a subdir bundle",
			files: map[string]string{"a.yaml": cm, "app/fleet.yaml": ""},
			want:  []string{".", "app"},
		},
		{
			name:  "root yaml in a plain subdir",
			files: map[string]string{"manifests/deploy/a.yaml": cm, "app/fleet.yaml": ""},
			want:  []string{".", "app"},
		},
		{
			name:  "root with fleet.yaml and nothing else",
			files: map[string]string{"fleet.yaml": "namespace: x\n"},
			want:  []string{"."},
		},
		{
			name:  "fleet.yml fallback",
			files: map[string]string{"app/fleet.yml": "", "app/x.yaml": cm},
			want:  []string{"app"},
		},
		{
			name: "nested bundles",
			files: map[string]string{
				"a/fleet.yaml": "", "a/b/fleet.yaml": "", "a/b/c/fleet.yml": "", "a/b/c/d/x.yaml": cm,
				"a/plain/y.yaml": cm,
			},
			want: []string{"a", "a/b", "a/b/c"},
		},
		{
			name: "fleetignore hides a bundle and loose yaml",
			files: map[string]string{
				".fleetignore":       "# comment\n\nignored/\n*.tmp.yaml\n",
				"ignored/fleet.yaml": "", "scratch.tmp.yaml": cm, "app/fleet.yaml": "",
			},
			want: []string{"app"},
		},
		{
			name: "fleetignore in a subdirectory applies below it",
			files: map[string]string{
				"apps/.fleetignore":   "old",
				"apps/old/fleet.yaml": "", "apps/new/fleet.yaml": "", "old/fleet.yaml": "",
			},
			want: []string{"apps/new", "old"},
		},
		{
			name:  ".git is never scanned",
			files: map[string]string{".git/fleet.yaml": "", ".git/x.yaml": cm, "app/fleet.yaml": ""},
			want:  []string{"app"},
		},
		{
			name:  "hidden yaml does not make the root a bundle",
			files: map[string]string{".github/workflows/ci.yml": "on: push\n", "app/fleet.yaml": ""},
			want:  []string{"app"},
		},
		{
			name:  "hidden directory with fleet.yaml is a bundle",
			files: map[string]string{".config/app/fleet.yaml": ""},
			want:  []string{".config/app"},
		},
		{
			name: "glob paths",
			files: map[string]string{
				"apps/a/x.yaml": cm, "apps/b/fleet.yaml": "", "apps/b/sub/fleet.yaml": "",
				"apps/README.md": "", "other/fleet.yaml": "",
			},
			paths: []string{"apps/*"},
			want:  []string{"apps/a", "apps/b", "apps/b/sub"},
		},
		{
			name:  "leading slash and ./ are ignored",
			files: map[string]string{"app/fleet.yaml": "", "lib/x.yaml": cm},
			paths: []string{"/app", "./lib/"},
			want:  []string{"app", "lib"},
		},
		{
			name:  "overlapping paths are reported once",
			files: map[string]string{"a.yaml": cm, "app/fleet.yaml": ""},
			paths: []string{".", "app", "*"},
			want:  []string{".", "app"},
		},
		{
			name:  "wildcard skips hidden directories",
			files: map[string]string{".hidden/fleet.yaml": "", "app/fleet.yaml": ""},
			paths: []string{"*"},
			want:  []string{"app"},
		},
		{
			name:    "glob matching nothing",
			files:   map[string]string{"app/fleet.yaml": ""},
			paths:   []string{"app", "missing/*"},
			wantErr: bundle.ErrNoMatch,
		},
		{
			name:    "glob matching only files",
			files:   map[string]string{"app.yaml": cm},
			paths:   []string{"*.yaml"},
			wantErr: bundle.ErrNoMatch,
		},
		{
			name:    "path leaving the repository",
			files:   map[string]string{"app/fleet.yaml": ""},
			paths:   []string{"app/../../etc"},
			wantErr: bundle.ErrOutsideRepo,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := writeTree(t, tt.files)
			got, err := bundle.Scan(root, tt.paths)
			if tt.wantErr != nil {
				require.Error(t, err)
				assert.True(t, errors.Is(err, tt.wantErr), "got %v", err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestScanErrorsNameTheGlob(t *testing.T) {
	root := writeTree(t, map[string]string{"app/fleet.yaml": ""})
	_, err := bundle.Scan(root, []string{"nothing-here/*"})
	requireValidationError(t, err, "nothing-here/*", "matches no directory")

	_, err = bundle.Scan(root, []string{"[bad"})
	requireValidationError(t, err, "[bad", "invalid glob")

	_, err = bundle.Scan(root, []string{"../sibling"})
	requireValidationError(t, err, "../sibling", "leaves the repository")

	root = writeTree(t, map[string]string{".fleetignore": "[oops\n", "app/fleet.yaml": ""})
	_, err = bundle.Scan(root, nil)
	requireValidationError(t, err, ".fleetignore", "line 1")
}

func TestScanSymlinks(t *testing.T) {
	outside := writeTree(t, map[string]string{"fleet.yaml": "", "x.yaml": cm})
	root := writeTree(t, map[string]string{
		"app/fleet.yaml":   "",
		"linked":           "->app",
		"escape":           "->" + outside,
		"apps/inner/x.yml": cm,
		"apps/link":        "->" + outside,
	})

	// A path through a link inside the repository scans the target.
	got, err := bundle.Scan(root, []string{"linked"})
	require.NoError(t, err)
	assert.Equal(t, []string{"app"}, got)

	// A link leaving the repository is an error when asked for...
	_, err = bundle.Scan(root, []string{"escape"})
	requireValidationError(t, err, "escape", "leaves the repository")
	assert.ErrorIs(t, err, bundle.ErrOutsideRepo)

	// ...and never followed while walking.
	got, err = bundle.Scan(root, []string{"apps"})
	require.NoError(t, err)
	assert.Equal(t, []string{"apps"}, got)
}

func TestScanRootErrors(t *testing.T) {
	_, err := bundle.Scan(filepath.Join(t.TempDir(), "missing"), nil)
	require.Error(t, err)

	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	_, err = bundle.Scan(file, nil)
	require.ErrorContains(t, err, "not a directory")
}

func TestScanFleetExamplesLayout(t *testing.T) {
	root := t.TempDir()
	copyTree(t, "testdata/fleet-examples", root)
	tests := []struct {
		paths []string
		want  []string
	}{
		{[]string{"simple"}, []string{"simple"}},
		{[]string{"single-cluster/*"}, []string{"single-cluster/helm", "single-cluster/helm-external", "single-cluster/manifests"}},
		// simple has no fleet.yaml, so with the root as path it is part of the
		// root bundle (as are charts/), not a bundle of its own.
		{nil, []string{".", "single-cluster/helm", "single-cluster/helm-external", "single-cluster/manifests"}},
	}
	for _, tt := range tests {
		got, err := bundle.Scan(root, tt.paths)
		require.NoError(t, err, tt.paths)
		assert.Equal(t, tt.want, got, tt.paths)
	}
}
