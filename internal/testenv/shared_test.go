package testenv_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

// outcomeTB records what SharedDir does to a test instead of doing it.
type outcomeTB struct {
	testing.TB
	skipped, failed string
}

func (o *outcomeTB) Helper()                           {}
func (o *outcomeTB) Skipf(format string, args ...any)  { o.skipped = fmt.Sprintf(format, args...) }
func (o *outcomeTB) Fatalf(format string, args ...any) { o.failed = fmt.Sprintf(format, args...) }

func TestSharedDir(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(testenv.SharedEnv, dir)
	missing := filepath.Join(dir, "fleet-examples")

	t.Run("present", func(t *testing.T) {
		t.Setenv("CI", "true")
		o := &outcomeTB{TB: t}
		assert.Equal(t, dir, testenv.SharedDir(o))
		assert.Empty(t, o.skipped+o.failed)
	})
	t.Run("default is shared beside the repository root", func(t *testing.T) {
		t.Setenv(testenv.SharedEnv, "")
		t.Setenv("CI", "")
		want, err := filepath.Abs(filepath.Join("..", "..", "..", "shared"))
		require.NoError(t, err)
		o := &outcomeTB{TB: t}
		if got := testenv.SharedDir(o); got != want {
			assert.Contains(t, o.skipped, want)
		}
	})
	for _, tc := range []struct {
		name, ci string
		fail     bool // fail rather than skip
	}{{"missing in CI fails", "true", true}, {"missing elsewhere skips loudly", "", false}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("CI", tc.ci)
			o := &outcomeTB{TB: t}
			assert.Empty(t, testenv.SharedDir(o, "fleet-examples"))
			said, other := o.skipped, o.failed
			if tc.fail {
				said, other = o.failed, o.skipped
			} else {
				assert.Contains(t, said, "SKIPPED")
				assert.Contains(t, said, "did not run")
			}
			assert.Empty(t, other)
			assert.Contains(t, said, missing)
		})
	}
}
