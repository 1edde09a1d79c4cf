package devserver

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/log/tag"
	"go.temporal.io/server/service/history/shard"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestServerLoggerLevels(t *testing.T) {
	warmup := frontendWarmupError()
	require.Error(t, warmup)
	var unavailable *serviceerror.Unavailable
	require.ErrorAs(t, warmup, &unavailable, "the frontend answers Unavailable while it warms up")

	tests := []struct {
		name string
		// with are tags given to With before logging; the filter must
		// survive derived loggers, as the frontend's are.
		with []tag.Tag
		tags []tag.Tag
		want zapcore.Level
	}{
		{name: "warm-up error", tags: []tag.Tag{tag.Operation("GetSystemInfo"), tag.Error(warmup)}, want: zapcore.DebugLevel},
		{name: "warm-up error on a derived logger", with: []tag.Tag{tag.Service("frontend")}, tags: []tag.Tag{tag.Error(warmup)}, want: zapcore.DebugLevel},
		{name: "wrapped warm-up error", tags: []tag.Tag{tag.Error(fmt.Errorf("poll: %w", warmup))}, want: zapcore.DebugLevel},
		// The same text in another error value is another condition: the
		// filter never reads messages.
		{name: "other Unavailable with the same text", tags: []tag.Tag{tag.Error(serviceerror.NewUnavailable(warmup.Error()))}, want: zapcore.ErrorLevel},
		// A queue reader before its shard acquired the lock (at start).
		{name: "shard status unknown", tags: []tag.Tag{tag.Error(shard.ErrShardStatusUnknown)}, want: zapcore.WarnLevel},
		{name: "wrapped shard status unknown", with: []tag.Tag{tag.ShardID(1)}, tags: []tag.Tag{tag.Error(fmt.Errorf("select tasks: %w", shard.ErrShardStatusUnknown))}, want: zapcore.WarnLevel},
		{name: "other Unavailable with the shard's text", tags: []tag.Tag{tag.Error(serviceerror.NewUnavailable(shard.ErrShardStatusUnknown.Error()))}, want: zapcore.ErrorLevel},
		{name: "other Unavailable", tags: []tag.Tag{tag.Error(serviceerror.NewUnavailable("shard is not owned"))}, want: zapcore.ErrorLevel},
		{name: "other error", tags: []tag.Tag{tag.Error(errors.New("disk full"))}, want: zapcore.ErrorLevel},
		{name: "no error", tags: []tag.Tag{tag.Operation("StartWorkflowExecution")}, want: zapcore.ErrorLevel},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			core, logs := observer.New(zapcore.DebugLevel)
			var l log.Logger = newServerLogger(zap.New(core))
			if tt.with != nil {
				l = log.With(l, tt.with...)
			}
			l.Error("service failures", tt.tags...)
			entries := logs.All()
			require.Len(t, entries, 1)
			assert.Equal(t, tt.want, entries[0].Level)
			assert.Equal(t, "service failures", entries[0].Message)
		})
	}
}
