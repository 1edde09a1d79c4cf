package devtemporal

import (
	"context"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/flotilla-gitops/flotilla/internal/devserver"
	"github.com/flotilla-gitops/flotilla/internal/temporalx"
)

// Options tune Start. The zero value is what most tests want.
type Options struct {
	// StateDir reuses a state directory, e.g. to restart a server on the
	// same SQLite file. Optional: default a fresh t.TempDir().
	StateDir string
	// UI starts the Web UI on a free port. Optional: default false.
	UI bool
}

// Server is a running test server and a client connected to it.
type Server struct {
	*devserver.Server
	// Client is connected to the server's "default" namespace.
	Client client.Client
}

// Start starts a server for t, with Flotilla's search attributes, and a
// client. Both are stopped in t.Cleanup.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	if opts.StateDir == "" {
		opts.StateDir = t.TempDir()
	}
	logger := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	so := devserver.Options{
		StateDir:         opts.StateDir,
		Listen:           "127.0.0.1:0",
		SearchAttributes: temporalx.SearchAttributes(),
		Logger:           logger,
		ServerLogLevel:   "error",
	}
	if opts.UI {
		so.UIListen = "127.0.0.1:0"
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := devserver.Start(ctx, so)
	if err != nil {
		t.Fatalf("start Temporal dev server: %v", err)
	}
	t.Cleanup(srv.Stop)

	c, err := temporalx.ClientOptions{Address: srv.FrontendAddress(), Namespace: srv.Namespace()}.Dial(ctx, logger)
	if err != nil {
		t.Fatalf("connect to Temporal dev server: %v", err)
	}
	t.Cleanup(c.Close)
	return &Server{Server: srv, Client: c}
}
