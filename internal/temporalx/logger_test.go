package temporalx_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
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

func TestLogger_CancellationIsNotAnError(t *testing.T) {
	tests := []struct {
		name    string
		keyvals []any
		want    zapcore.Level
	}{
		{"activity cancelled", []any{"ActivityType", "Watch", "Error", context.Canceled}, zapcore.InfoLevel},
		{"wrapped cancellation", []any{"Error", fmt.Errorf("watch cluster demo: %w", context.Canceled)}, zapcore.InfoLevel},
		{"deadline", []any{"Error", context.DeadlineExceeded}, zapcore.ErrorLevel},
		{"failure", []any{"Error", errors.New("connection refused")}, zapcore.ErrorLevel},
		// Only values count: a key is never an error.
		{"no error", []any{"ActivityType", "Deploy"}, zapcore.ErrorLevel},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			core, logs := observer.New(zap.DebugLevel)
			temporalx.NewLogger(zap.New(core)).Error("Activity error.", tt.keyvals...)
			require.Equal(t, 1, logs.Len())
			assert.Equal(t, tt.want, logs.All()[0].Level)
		})
	}
}

func TestSearchAttributes_FitSQLiteBudget(t *testing.T) {
	attrs := temporalx.SearchAttributes()
	assert.Len(t, attrs, 5)
	assert.Contains(t, attrs, temporalx.SearchAttrCluster)
}
