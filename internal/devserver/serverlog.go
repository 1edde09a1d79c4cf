package devserver

import (
	"context"
	"errors"

	"go.temporal.io/server/common/api"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/log/tag"
	"go.temporal.io/server/common/rpc/interceptor"
	"go.temporal.io/server/service/history/shard"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// serverLogger is the embedded Temporal server's logger: Temporal's zap
// adapter, except that two conditions every start passes through are not
// logged at error level: the errors the frontend answers while it warms up
// (debug), and a history shard's "status unknown" (warn).
//
// Until the frontend has joined the membership ring it answers every
// WorkflowService and OperatorService call with Unavailable "Frontend is not
// healthy yet", and logs each as "service failures" at error level. Its
// callers (the server's own system workers, the SDK's dial) retry; nothing
// is wrong, and a red ERROR on every start of `flotilla-worker --dev` only
// teaches users to ignore errors.
//
// Until a history shard has acquired its lock in the database, its queue
// readers get shard.ErrShardStatusUnknown and log "Queue reader unable to
// retrieve tasks" at error level, then retry with backoff. At start this
// is a window of milliseconds that a read can fall into (it failed CI);
// the same error later means the database cannot be reached, so it stays
// visible, at warn, and the persistence errors that cause it keep theirs.
// Every other error, Unavailable ones included, keeps its level.
type serverLogger struct {
	log.Logger
	// warmup is the frontend's "not healthy yet" error value. The frontend
	// returns this very value, so a log call carrying it is recognised by
	// identity, not by its message. shardUnknown likewise.
	warmup, shardUnknown error
}

var _ log.WithLogger = serverLogger{}

// newServerLogger returns the server's logger writing to zl.
func newServerLogger(zl *zap.Logger) serverLogger {
	return serverLogger{Logger: log.NewZapLogger(zl), warmup: frontendWarmupError(), shardUnknown: shard.ErrShardStatusUnknown}
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

// Error logs msg at error level, at debug level when it reports the
// frontend's warm-up error, or at warn level when it reports a shard whose
// lock is not acquired yet.
func (l serverLogger) Error(msg string, tags ...tag.Tag) {
	switch {
	case carries(tags, l.warmup):
		l.Debug(msg, tags...)
	case carries(tags, l.shardUnknown):
		l.Warn(msg, tags...)
	default:
		l.Logger.Error(msg, tags...)
	}
}

// With returns the logger with tags prepended, keeping the warm-up filter.
func (l serverLogger) With(tags ...tag.Tag) log.Logger {
	return serverLogger{Logger: log.With(l.Logger, tags...), warmup: l.warmup, shardUnknown: l.shardUnknown}
}

// carries reports whether one of tags is an error tag carrying target
// (compared by identity, through wrapping).
func carries(tags []tag.Tag, target error) bool {
	if target == nil {
		return false
	}
	for _, t := range tags {
		zt, ok := t.(tag.ZapTag)
		if !ok {
			continue
		}
		if err, ok := zt.Field().Interface.(error); ok && errors.Is(err, target) {
			return true
		}
	}
	return false
}
