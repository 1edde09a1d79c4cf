package bundle_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/bundle"
)

// writeTree creates files (slash path → content) under a new temporary
// directory and returns it. A content starting with "->" makes a symbolic
// link to the rest of the string instead.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	addFiles(t, root, files)
	return root
}

func addFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		if target, ok := strings.CutPrefix(content, "->"); ok {
			require.NoError(t, os.Symlink(target, p))
			continue
		}
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
}

// copyTree copies the directory src (a testdata fixture) into dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
	require.NoError(t, err)
}

// requireValidationError checks that err is a *bundle.ValidationError
// whose message contains every string in want.
func requireValidationError(t *testing.T, err error, want ...string) {
	t.Helper()
	require.Error(t, err)
	var ve *bundle.ValidationError
	require.True(t, errors.As(err, &ve), "want a *ValidationError, got %T: %v", err, err)
	for _, w := range want {
		assert.Contains(t, err.Error(), w)
	}
}

// resourceNames returns the names of the manifest's resources.
func resourceNames(m bundle.Manifest) []string {
	var names []string
	for _, r := range m.Resources {
		names = append(names, r.Name)
	}
	return names
}
