package status_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/flotilla-gitops/flotilla/internal/outcome"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

// TestStateOf pins the state each class shows, typed, and checks that
// outcome's table (which spells states as strings) names only states
// this package has.
func TestStateOf(t *testing.T) {
	want := map[outcome.Class]status.State{
		outcome.OK:                 "",
		outcome.Unreachable:        status.WaitApplied,
		outcome.Unauthorized:       status.WaitApplied,
		outcome.BundleFailed:       status.ErrApplied,
		outcome.Invalid:            status.ErrApplied,
		outcome.ContentUnavailable: status.WaitApplied,
		outcome.Refused:            status.ErrApplied,
		"FromANewerWorker":         status.ErrApplied,
	}
	for _, c := range outcome.All {
		assert.Contains(t, want, c, "class %q has an expected state here", c)
	}
	for c, st := range want {
		assert.Equal(t, st, status.StateOf(c), "class %q", c)
		if st != "" {
			assert.True(t, slices.Contains(status.States, status.StateOf(c)), "class %q shows a state status knows", c)
		}
	}
	assert.True(t, slices.Contains(status.States, status.State(outcome.Unclassified.State)))
}
