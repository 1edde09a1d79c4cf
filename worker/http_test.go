package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/flotilla-gitops/flotilla/internal/httpserver"
)

// Every server the worker runs has all of its timeouts.
func TestServerTimeouts(t *testing.T) {
	assert.NoError(t, healthTimeouts().Validate(), "--http-listen")
	assert.NoError(t, webhookTimeouts().Validate(), "--webhook-listen")
}

// A CPU profile longer than the server's write timeout is still served
// whole (net/http/pprof extends its own deadline), so the --http-listen
// server's short Write does not break --pprof.
func TestServe_ProfileOutlastsWriteTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	to := healthTimeouts()
	to.Write = 500 * time.Millisecond
	serve(ctx, ln, mux, to, "test server", zap.NewNop())

	c := &http.Client{Timeout: 20 * time.Second}
	start := time.Now()
	resp, err := c.Get("http://" + ln.Addr().String() + "/debug/pprof/profile?seconds=2")
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err, "the response was not cut off")
	assert.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	assert.NotEmpty(t, body)
	assert.GreaterOrEqual(t, time.Since(start), 2*time.Second, "the profile ran for its duration")
}

// A server without its timeouts is not started, and says why.
func TestServe_RefusesMissingTimeouts(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	core, logs := observer.New(zap.InfoLevel)
	serve(ctx, ln, http.NotFoundHandler(), httpserver.Timeouts{}, "Broken server", zap.New(core))
	assert.Equal(t, 1, logs.FilterMessage("Broken server not started").Len())
	_, err = net.DialTimeout("tcp", ln.Addr().String(), time.Second)
	assert.Error(t, err, "nothing listens")
}
