package main

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flotilla-gitops/flotilla/internal/webhook"
)

// webhookMetrics count deliveries by provider and answer, and time them,
// on the worker's /metrics.
type webhookMetrics struct {
	deliveries *prometheus.CounterVec
	duration   *prometheus.HistogramVec
}

func newWebhookMetrics(reg prometheus.Registerer) *webhookMetrics {
	m := &webhookMetrics{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flotilla_webhook_deliveries_total",
			Help: "Git webhook deliveries received, by provider and HTTP status code.",
		}, []string{"provider", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "flotilla_webhook_duration_seconds",
			Help:    "Time from a webhook delivery's arrival to its answer (GitRepos found and signalled).",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"provider"}),
	}
	reg.MustRegister(m.deliveries, m.duration)
	return m
}

// wrap records every delivery h answers. The provider label is the one in
// the path or detected from the headers, "unknown" otherwise, so a flood
// of junk cannot create label values.
func (m *webhookMetrics) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		h.ServeHTTP(rec, r)
		p := providerLabel(r)
		m.deliveries.WithLabelValues(p, strconv.Itoa(rec.code)).Inc()
		m.duration.WithLabelValues(p).Observe(time.Since(start).Seconds())
	})
}

func providerLabel(r *http.Request) string {
	name, ok := strings.CutPrefix(strings.TrimSuffix(r.URL.Path, "/"), "/webhooks/")
	p := webhook.Provider(name)
	if !ok {
		p = webhook.Detect(r.Header)
	}
	if _, known := webhook.Known(string(p)); known {
		return string(p)
	}
	return "unknown"
}

type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.code = code
	s.ResponseWriter.WriteHeader(code)
}
