package temporalx

import (
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

// Error logs at error level.
func (l *Logger) Error(msg string, keyvals ...any) { l.z.Error(msg, fields(keyvals)...) }

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
