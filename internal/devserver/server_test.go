package devserver

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

// TestStartLogsNoError starts a server while a client calls its frontend
// from the first moment, as the server's own workers, the SDK's dial and
// the CLI do, so the frontend answers calls before it is healthy. A normal
// start logs no line at error level; the warm-up answers are logged at
// debug.
func TestStartLogsNoError(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal server")
	}
	// The warm-up lasts milliseconds: start again until a call landed in it.
	for attempt := 1; attempt <= 5; attempt++ {
		logs, warmups := startPolled(t)
		t.Logf("start %d: the frontend answered %d calls while warming up", attempt, warmups)
		if warmups == 0 {
			continue
		}
		for _, e := range logs.FilterLevelExact(zapcore.ErrorLevel).All() {
			t.Errorf("ERROR logged during a normal start: %s %v", e.Message, e.ContextMap())
		}
		assert.NotEmpty(t, logs.FilterMessage("service failures").FilterLevelExact(zapcore.DebugLevel).All(),
			"the frontend's warm-up answers are logged at debug")
		return
	}
	t.Fatal("no call landed in the frontend's warm-up in 5 starts: the test proved nothing")
}

// startPolled starts and stops a server while pollFrontend calls it, and
// returns the server's logs and how many calls were answered while the
// frontend warmed up.
func startPolled(t *testing.T) (*observer.ObservedLogs, int) {
	t.Helper()
	core, logs := observer.New(zapcore.DebugLevel)
	addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	stop := make(chan struct{})
	warmups := make(chan int, 1)
	go func() { warmups <- pollFrontend(addr, stop) }()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := Start(ctx, Options{
		StateDir: t.TempDir(), Listen: addr,
		Logger: zap.New(core), ServerLogLevel: "debug",
	})
	close(stop)
	n := <-warmups
	require.NoError(t, err)
	srv.Stop()
	return logs, n
}

// pollFrontend calls GetSystemInfo at addr, one call after the other, until
// stop is closed and returns how many calls the frontend answered Unavailable
// (warming up).
func pollFrontend(addr string, stop <-chan struct{}) int {
	// Reconnect at once after "connection refused", not after gRPC's
	// default backoff of a second, which would outlast the warm-up.
	backoffCfg := backoff.Config{BaseDelay: 2 * time.Millisecond, Multiplier: 1, MaxDelay: 2 * time.Millisecond}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoffCfg, MinConnectTimeout: time.Second}))
	if err != nil {
		return 0
	}
	defer func() { _ = conn.Close() }() // nothing to flush
	client := workflowservice.NewWorkflowServiceClient(conn)
	warmup := frontendWarmupError().Error()
	n := 0
	for {
		select {
		case <-stop:
			return n
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := client.GetSystemInfo(ctx, &workflowservice.GetSystemInfoRequest{})
		cancel()
		// Connection refused is Unavailable too: count only the
		// frontend's own answer.
		if st := status.Convert(err); st.Code() == codes.Unavailable && st.Message() == warmup {
			n++
		}
	}
}
