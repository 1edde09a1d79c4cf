package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
)

func TestWebhookMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newWebhookMetrics(reg)
	h := m.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-GitHub-Event") == "" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	}))
	post := func(path string, hdr map[string]string) {
		req := httptest.NewRequest(http.MethodPost, path, strings.NewReader("{}"))
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
	post("/", map[string]string{"X-GitHub-Event": "push"})
	post("/webhooks/github", map[string]string{"X-GitHub-Event": "push"})
	post("/webhooks/gitlab", nil)
	post("/webhooks/x"+strings.Repeat("y", 100), nil) // junk: no new label value
	post("/", nil)

	assert.InDelta(t, 2, testutil.ToFloat64(m.deliveries.WithLabelValues("github", "202")), 0)
	assert.InDelta(t, 1, testutil.ToFloat64(m.deliveries.WithLabelValues("gitlab", "400")), 0)
	assert.InDelta(t, 2, testutil.ToFloat64(m.deliveries.WithLabelValues("unknown", "400")), 0)
	assert.Equal(t, 3, testutil.CollectAndCount(m.deliveries))
	assert.Equal(t, 3, testutil.CollectAndCount(m.duration))
}
