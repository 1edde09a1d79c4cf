package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/flotilla-gitops/flotilla/activities"
	"github.com/flotilla-gitops/flotilla/internal/drift"
	"github.com/flotilla-gitops/flotilla/internal/temporalx"
)

// probe is the worker's health state, served on --http-listen.
type probe struct {
	ready atomic.Bool
	// reason says why the worker is not ready (shown by /readyz).
	reason atomic.Value
}

func (p *probe) setReady(ok bool, reason string) {
	p.ready.Store(ok)
	p.reason.Store(reason)
}

// serveHTTP serves /healthz (the process runs), /readyz (the worker
// polls; an agent also heartbeats) and /metrics (Prometheus) on addr
// until ctx ends. An empty addr serves nothing.
func serveHTTP(ctx context.Context, addr string, p *probe, logger *zap.Logger) error {
	if addr == "" {
		return nil
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !p.ready.Load() {
			reason, _ := p.reason.Load().(string)
			http.Error(w, "not ready: "+reason, http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	registerDriftMetrics()
	mux.Handle("GET /metrics", promhttp.Handler())
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	serve(ctx, ln, &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}, "HTTP server", logger)
	logger.Info("Serving health and metrics", zap.String("address", ln.Addr().String()))
	return nil
}

// exportSDKMetrics makes the Temporal client that o dials report the SDK's
// metrics (polls, task and activity latencies, slots, requests) on
// /metrics, when addr serves it.
func exportSDKMetrics(addr string, o *temporalx.ClientOptions) error {
	if addr == "" {
		return nil
	}
	// One collector per registry: the SDK's collector describes nothing,
	// so a second registration would go unnoticed and fail every scrape.
	sdkMetrics.once.Do(func() {
		sdkMetrics.handler, sdkMetrics.err = temporalx.NewPrometheusMetrics(prometheus.DefaultRegisterer)
	})
	if sdkMetrics.err != nil {
		return fmt.Errorf("export the Temporal SDK metrics: %w", sdkMetrics.err)
	}
	o.Metrics = sdkMetrics.handler
	return nil
}

// sdkMetrics is the process's SDK metrics handler on the default registry.
var sdkMetrics struct {
	once    sync.Once
	handler client.MetricsHandler
	err     error
}

// signaller signals workflows through c (Watch's drift reports).
func signaller(c client.Client) activities.Signaller {
	return func(ctx context.Context, workflowID, signal string, arg any) error {
		return c.SignalWorkflow(ctx, workflowID, "", signal, arg)
	}
}

// registerDriftMetrics puts the drift corrections counter on /metrics.
func registerDriftMetrics() {
	driftMetrics.Do(func() { prometheus.MustRegister(drift.Corrections) })
}

var driftMetrics sync.Once

// serve runs srv on ln until ctx ends, then shuts it down gracefully
// (5 s at most). A failure to serve is logged under what.
func serve(ctx context.Context, ln net.Listener, srv *http.Server, what string, logger *zap.Logger) {
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error(what+" stopped", zap.Error(err))
		}
	}()
}
