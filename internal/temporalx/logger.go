package temporalx

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/sdk/log"
	"go.uber.org/zap"
)

// Logger adapts a *zap.Logger to the Temporal SDK's log.Logger, so that the
// SDK, workflows (through workflow.GetLogger) and activities (through
// activity.GetLogger) all write through the one logger built in main.
type Logger struct {
	z *zap.Logger
}

var (
	_ log.Logger          = (*Logger)(nil)
	_ log.WithLogger      = (*Logger)(nil)
	_ log.WithSkipCallers = (*Logger)(nil)
)

// NewLogger returns an SDK logger writing to z. A nil z discards everything.
func NewLogger(z *zap.Logger) *Logger {
	if z == nil {
		z = zap.NewNop()
	}
	// One extra frame: the adapter's own method.
	return &Logger{z: z.WithOptions(zap.AddCallerSkip(1))}
}

// Debug logs at debug level.
func (l *Logger) Debug(msg string, keyvals ...any) { l.z.Debug(msg, fields(keyvals)...) }

// Info logs at info level.
func (l *Logger) Info(msg string, keyvals ...any) { l.z.Info(msg, fields(keyvals)...) }

// Warn logs at warn level.
func (l *Logger) Warn(msg string, keyvals ...any) { l.z.Warn(msg, fields(keyvals)...) }

// Error logs at error level, except an entry carrying a cancellation
// (an error that is context.Canceled), which it logs at info: the SDK
// reports an activity that ended because its workflow cancelled it (a
// cluster's drift watch restarted for a new set of releases) or because the
// worker is stopping as "Activity error.", yet nothing failed.
func (l *Logger) Error(msg string, keyvals ...any) {
	if canceled(keyvals) {
		l.z.Info(msg, fields(keyvals)...)
		return
	}
	l.z.Error(msg, fields(keyvals)...)
}

// canceled reports whether a value of keyvals is an error that is
// context.Canceled.
func canceled(keyvals []any) bool {
	for i := 1; i < len(keyvals); i += 2 {
		if err, ok := keyvals[i].(error); ok && errors.Is(err, context.Canceled) {
			return true
		}
	}
	return false
}

// With returns a logger that adds keyvals to every entry.
func (l *Logger) With(keyvals ...any) log.Logger {
	return &Logger{z: l.z.With(fields(keyvals)...)}
}

// WithCallerSkip returns a logger that skips depth more stack frames when
// reporting the caller.
func (l *Logger) WithCallerSkip(depth int) log.Logger {
	return &Logger{z: l.z.WithOptions(zap.AddCallerSkip(depth))}
}

// fields turns the SDK's alternating key/value list into zap fields. A key
// that is not a string is printed with %v; a missing last value is recorded
// as "(MISSING)" rather than dropped, so a malformed call stays visible.
func fields(keyvals []any) []zap.Field {
	out := make([]zap.Field, 0, (len(keyvals)+1)/2)
	for i := 0; i < len(keyvals); i += 2 {
		key, ok := keyvals[i].(string)
		if !ok {
			key = fmt.Sprint(keyvals[i])
		}
		if i+1 >= len(keyvals) {
			out = append(out, zap.String(key, "(MISSING)"))
			break
		}
		if err, ok := keyvals[i+1].(error); ok {
			out = append(out, zap.NamedError(key, err))
			continue
		}
		out = append(out, zap.Any(key, keyvals[i+1]))
	}
	return out
}
