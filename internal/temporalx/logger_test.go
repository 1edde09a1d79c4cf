package temporalx_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/flotilla-gitops/flotilla/internal/temporalx"
)

func TestLogger_KeyvalsBecomeFields(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	l := temporalx.NewLogger(zap.New(core)).With("workflowID", "w1")
	l.Info("Deployed bundle", "cluster", "c1", "revision", 2, "err", errors.New("boom"), "dangling")

	require.Equal(t, 1, logs.Len())
	e := logs.All()[0]
	assert.Equal(t, "Deployed bundle", e.Message)
	assert.Equal(t, map[string]any{
		"workflowID": "w1", "cluster": "c1", "revision": int64(2), "err": "boom", "dangling": "(MISSING)",
	}, e.ContextMap())
}

func TestLogger_Levels(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	l := temporalx.NewLogger(zap.New(core))
	l.Debug("d")
	l.Info("i")
	l.Warn("w")
	l.Error("e")
	var msgs []string
	for _, e := range logs.All() {
		msgs = append(msgs, e.Message)
	}
	assert.Equal(t, []string{"w", "e"}, msgs)
}

func TestSearchAttributes_FitSQLiteBudget(t *testing.T) {
	attrs := temporalx.SearchAttributes()
	assert.Len(t, attrs, 5)
	assert.Contains(t, attrs, temporalx.SearchAttrCluster)
}
