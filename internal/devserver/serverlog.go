package devserver

import (
	"context"
	"errors"

	"go.temporal.io/server/common/api"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/log/tag"
	"go.temporal.io/server/common/rpc/interceptor"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// serverLogger is the embedded Temporal server's logger: Temporal's zap
// adapter, except that the errors the frontend answers while it warms up
// are logged at debug instead of error.
//
// Until the frontend has joined the membership ring it answers every
// WorkflowService and OperatorService call with Unavailable "Frontend is not
// healthy yet", and logs each as "service failures" at error level. Its
// callers (the server's own system workers, the SDK's dial) retry; nothing
// is wrong, and a red ERROR on every start of `flotilla-worker --dev` only
// teaches users to ignore errors. Every other error, Unavailable ones
// included, keeps its level.
type serverLogger struct {
	log.Logger
	// warmup is the frontend's "not healthy yet" error value. The frontend
	// returns this very value, so a log call carrying it is recognised by
	// identity, not by its message.
	warmup error
}

var _ log.WithLogger = serverLogger{}

// newServerLogger returns the server's logger writing to zl.
func newServerLogger(zl *zap.Logger) serverLogger {
	return serverLogger{Logger: log.NewZapLogger(zl), warmup: frontendWarmupError()}
}

// frontendWarmupError returns the error the frontend's health interceptor
// answers with before the frontend is healthy, asked of a new interceptor,
// which starts unhealthy.
func frontendWarmupError() error {
	info := &grpc.UnaryServerInfo{FullMethod: api.WorkflowServicePrefix + "GetSystemInfo"}
	noHandler := func(context.Context, any) (any, error) { return nil, nil }
	_, err := interceptor.NewHealthInterceptor().Intercept(context.Background(), nil, info, noHandler)
	return err
}

// Error logs msg at error level, or at debug level when it reports the
// frontend's warm-up error.
func (l serverLogger) Error(msg string, tags ...tag.Tag) {
	if l.isWarmup(tags) {
		l.Debug(msg, tags...)
		return
	}
	l.Logger.Error(msg, tags...)
}

// With returns the logger with tags prepended, keeping the warm-up filter.
func (l serverLogger) With(tags ...tag.Tag) log.Logger {
	return serverLogger{Logger: log.With(l.Logger, tags...), warmup: l.warmup}
}

// isWarmup reports whether one of tags is the error tag carrying the
// frontend's warm-up error.
func (l serverLogger) isWarmup(tags []tag.Tag) bool {
	if l.warmup == nil {
		return false
	}
	for _, t := range tags {
		zt, ok := t.(tag.ZapTag)
		if !ok {
			continue
		}
		if err, ok := zt.Field().Interface.(error); ok && errors.Is(err, l.warmup) {
			return true
		}
	}
	return false
}
