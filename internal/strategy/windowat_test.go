package strategy_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/fleetyaml"
	"github.com/flotilla-gitops/flotilla/internal/strategy"
)

func TestWindowAt(t *testing.T) {
	nightly := fleetyaml.Window{Schedule: "0 2 * * *", Duration: "2h"}
	noon := fleetyaml.Window{Schedule: "0 12 * * *", Duration: "1h"}
	never := fleetyaml.Window{Schedule: "0 0 30 2 *", Duration: "1h"}
	tests := []struct {
		name    string
		windows []fleetyaml.Window
		now     time.Time
		want    strategy.WindowState
	}{
		{"no windows: open", nil, at(10, 1, 0), strategy.WindowState{Open: true, Window: -1}},
		{"inside", []fleetyaml.Window{nightly}, at(10, 3, 0), strategy.WindowState{Open: true, Window: -1}},
		{"inside the second listed", []fleetyaml.Window{nightly, noon}, at(10, 12, 30), strategy.WindowState{Open: true, Window: -1}},
		{"before the first", []fleetyaml.Window{nightly, noon}, at(10, 1, 0), strategy.WindowState{Next: at(10, 2, 0), Window: 0}},
		{"before the second", []fleetyaml.Window{nightly, noon}, at(10, 5, 0), strategy.WindowState{Next: at(10, 12, 0), Window: 1}},
		{"at a closing: the next opening", []fleetyaml.Window{noon, nightly}, at(10, 4, 0), strategy.WindowState{Next: at(10, 12, 0), Window: 0}},
		{"tie: the first listed", []fleetyaml.Window{noon, {Schedule: "0 12 * * *", Duration: "3h"}}, at(10, 11, 0),
			strategy.WindowState{Next: at(10, 12, 0), Window: 0}},
		{"never opens", []fleetyaml.Window{never}, at(10, 1, 0), strategy.WindowState{Window: -1}},
		{"one that never opens beside one that does", []fleetyaml.Window{never, noon}, at(10, 1, 0),
			strategy.WindowState{Next: at(10, 12, 0), Window: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := strategy.WindowAt(tt.windows, tt.now)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestWindowAtError(t *testing.T) {
	_, err := strategy.WindowAt([]fleetyaml.Window{{Schedule: "@daily", Duration: "1h"}, {Schedule: "61 * * * *", Duration: "1h"}}, at(10, 0, 0))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "windows[1]: schedule:")
}
