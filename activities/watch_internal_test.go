package activities

import (
	"testing"

	"github.com/flotilla-gitops/flotilla/internal/bundle"
	"github.com/flotilla-gitops/flotilla/internal/drift"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The drift watch corrects inside the windows its options carry.
func TestSettingsCarryCorrectionWindows(t *testing.T) {
	ws := []bundle.Window{{Schedule: "@daily", Duration: "1h"}}
	var tg drift.Target
	require.NoError(t, settings(&tg, bundle.Options{CorrectionWindows: ws}))
	assert.Equal(t, ws, tg.Windows)
}
