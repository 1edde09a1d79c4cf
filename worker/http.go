package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/flotilla-gitops/flotilla/activities"
	"github.com/flotilla-gitops/flotilla/internal/codec"
	"github.com/flotilla-gitops/flotilla/internal/drift"
	"github.com/flotilla-gitops/flotilla/internal/httpserver"
	"github.com/flotilla-gitops/flotilla/internal/keyring"
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
func serveHTTP(ctx context.Context, addr string, p *probe, profiling bool, logger *zap.Logger) error {
	ln, err := listenHTTP(addr)
	if err != nil || ln == nil {
		return err
	}
	serveOn(ctx, ln, p, nil, profiling, logger)
	return nil
}

// listenHTTP opens --http-listen; "" opens nothing (a nil listener). The
// controller opens it before anything else, so that --dev can point the
// UI at the codec endpoint's real address.
func listenHTTP(addr string) (net.Listener, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--http-listen: %w", err)
	}
	return ln, nil
}

// serveOn serves what serveHTTP does, cr (when not nil) under /codec/
// and, with profiling (--pprof), Go's profiles under /debug/pprof/, on ln
// until ctx ends.
func serveOn(ctx context.Context, ln net.Listener, p *probe, cr *codecRoute, profiling bool, logger *zap.Logger) {
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
	if cr != nil {
		mux.Handle(codecPath+"/", cr.handler)
	}
	if profiling {
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
		logger.Info("Serving Go profiles", zap.String("endpoint", "http://"+ln.Addr().String()+"/debug/pprof/"))
	}
	serve(ctx, ln, mux, healthTimeouts(), "HTTP server", logger)
	logger.Info("Serving health and metrics", zap.String("address", ln.Addr().String()))
	if cr != nil {
		logger.Info("Serving payload codec", zap.String("endpoint", "http://"+ln.Addr().String()+codecPath),
			zap.String("auth", cr.auth), zap.Strings("corsOrigins", cr.origins))
	}
}

// codecPath is where the payload codec endpoint is served: POST
// /codec/encode and /codec/decode.
const codecPath = "/codec"

// codecRoute is the payload codec endpoint and, for the log, who may
// call it.
type codecRoute struct {
	handler http.Handler
	auth    string
	origins []string
}

// newCodecRoute returns the payload codec endpoint of --payload-keys, or
// nil when there is none. uiOrigin is the embedded UI's URL ("" without
// one): it may call the endpoint, and without --codec-token-file it needs
// no token (it cannot send one) when calling from loopback.
func newCodecRoute(o *options, uiOrigin string) (*codecRoute, error) {
	if o.Temporal.PayloadKeys == "" || o.HTTPListen == "" {
		return nil, nil
	}
	ring, err := keyring.LoadDir(o.Temporal.PayloadKeys)
	if err != nil {
		return nil, fmt.Errorf("--payload-keys: %w", err)
	}
	c, err := codec.New(ring)
	if err != nil {
		return nil, fmt.Errorf("--payload-keys %s: %w", o.Temporal.PayloadKeys, err)
	}
	opts := codec.HandlerOptions{AllowedOrigins: o.Codec.CORSOrigins}
	if uiOrigin != "" {
		opts.AllowedOrigins = append(slices.Clone(opts.AllowedOrigins), uiOrigin)
	}
	r := &codecRoute{origins: opts.AllowedOrigins}
	switch {
	case o.Codec.TokenFile != "":
		b, err := os.ReadFile(o.Codec.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("--codec-token-file: %w", err)
		}
		if opts.Token = strings.TrimSpace(string(b)); opts.Token == "" {
			return nil, fmt.Errorf("--codec-token-file %s is empty", o.Codec.TokenFile)
		}
		r.auth = "bearer token of " + o.Codec.TokenFile
	case uiOrigin != "":
		opts.TokenlessOrigin = uiOrigin
		r.auth = "none for the embedded UI on loopback; nobody else"
	default:
		return nil, nil // nobody could call it: no token, no embedded UI
	}
	r.handler = codec.Handler(c, opts)
	return r, nil
}

// devCodecEndpoint is the codec endpoint the embedded UI should decode
// with: on ln, when payloads are encrypted and the UI can call it without
// a token. It logs why the UI cannot when that is so.
func devCodecEndpoint(o *options, ln net.Listener, logger *zap.Logger) string {
	switch {
	case o.Temporal.PayloadKeys == "" || o.DevSrv.UIListen == "":
		return ""
	case ln == nil:
		logger.Warn("Temporal UI shows payloads encrypted: set --http-listen to serve the payload codec endpoint it decodes with")
		return ""
	case o.Codec.TokenFile != "":
		logger.Warn("Temporal UI shows payloads encrypted: it cannot send the --codec-token-file token to the payload codec endpoint")
		return ""
	}
	addr := ln.Addr().(*net.TCPAddr)
	host := addr.IP.String()
	if addr.IP.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, strconv.Itoa(addr.Port)) + codecPath
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

// healthTimeouts are the timeouts of the --http-listen server. Its
// handlers answer at once except the payload codec endpoint (a request of
// a few MiB) and, with --pprof, the CPU profile and trace, which run for
// their ?seconds= (30 s and 1 s by default): net/http/pprof moves the
// write deadline of such a request past its duration itself, so Write
// stays short. Prometheus keeps its scrape connection open between
// scrapes (often 30–60 s apart), hence Idle.
func healthTimeouts() httpserver.Timeouts {
	return httpserver.Timeouts{ReadHeader: 5 * time.Second, Read: 30 * time.Second, Write: 30 * time.Second, Idle: 2 * time.Minute}
}

// serve runs h on ln with the timeouts t until ctx ends, then shuts it
// down gracefully (5 s at most). A failure to build or run the server is
// logged under what.
func serve(ctx context.Context, ln net.Listener, h http.Handler, t httpserver.Timeouts, what string, logger *zap.Logger) {
	srv, err := httpserver.New(h, t)
	if err != nil {
		_ = ln.Close() // nothing will serve it
		logger.Error(what+" not started", zap.Error(err))
		return
	}
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
