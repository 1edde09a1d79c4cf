package temporalx_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/temporalx"
)

func TestPrometheusMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	h, err := temporalx.NewPrometheusMetrics(reg)
	require.NoError(t, err)

	ns := h.WithTags(map[string]string{"namespace": "default"})
	// One metric tagged two ways, as the SDK does: both series carry the
	// union of the keys.
	ns.WithTags(map[string]string{"operation": "PollActivityTaskQueue"}).Counter("temporal_request").Inc(2)
	ns.WithTags(map[string]string{"operation": "PollActivityTaskQueue"}).Counter("temporal_request").Inc(1)
	ns.WithTags(map[string]string{"task_queue": "cluster/c-1"}).Counter("temporal_request").Inc(1)
	ns.Counter("temporal_request").Inc(-5) // counters never go down
	// A later tag overrides an earlier one; bad characters are replaced.
	ns.WithTags(map[string]string{"namespace": "other", "worker-type": "ActivityWorker"}).Gauge("temporal_worker_task_slots_available").Update(7)
	timer := ns.WithTags(map[string]string{"activity_type": "Deploy"}).Timer("temporal_activity_execution_latency")
	timer.Record(300 * time.Millisecond)
	timer.Record(2 * time.Second)

	want := `
# HELP temporal_request_total Temporal SDK metric temporal_request_total.
# TYPE temporal_request_total counter
temporal_request_total{namespace="default",operation="",task_queue=""} 0
temporal_request_total{namespace="default",operation="",task_queue="cluster/c-1"} 1
temporal_request_total{namespace="default",operation="PollActivityTaskQueue",task_queue=""} 3
# HELP temporal_worker_task_slots_available Temporal SDK metric temporal_worker_task_slots_available.
# TYPE temporal_worker_task_slots_available gauge
temporal_worker_task_slots_available{namespace="other",worker_type="ActivityWorker"} 7
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want),
		"temporal_request_total", "temporal_worker_task_slots_available"))

	mfs, err := reg.Gather()
	require.NoError(t, err)
	var found bool
	for _, mf := range mfs {
		if mf.GetName() != "temporal_activity_execution_latency_seconds" {
			continue
		}
		found = true
		require.Len(t, mf.Metric, 1)
		hist := mf.Metric[0].GetHistogram()
		require.Len(t, hist.Bucket, 16, "bucket bounds")
		assert.Equal(t, uint64(2), hist.GetSampleCount())
		assert.InDelta(t, 2.3, hist.GetSampleSum(), 1e-9)
		for _, b := range hist.Bucket {
			switch b.GetUpperBound() {
			case 0.25:
				assert.Equal(t, uint64(0), b.GetCumulativeCount(), "≤ 0.25 s")
			case 0.5:
				assert.Equal(t, uint64(1), b.GetCumulativeCount(), "≤ 0.5 s")
			case 2.5:
				assert.Equal(t, uint64(2), b.GetCumulativeCount(), "≤ 2.5 s")
			}
		}
		assert.Equal(t, "activity_type", mf.Metric[0].Label[0].GetName())
		assert.Equal(t, "Deploy", mf.Metric[0].Label[0].GetValue())
	}
	assert.True(t, found, "timer exported as a histogram in seconds")
}

func TestPrometheusMetrics_Concurrent(t *testing.T) {
	reg := prometheus.NewRegistry()
	h, err := temporalx.NewPrometheusMetrics(reg)
	require.NoError(t, err)
	done := make(chan struct{})
	for i := range 8 {
		go func() {
			defer func() { done <- struct{}{} }()
			tagged := h.WithTags(map[string]string{"worker": string(rune('a' + i%2))})
			for range 1000 {
				tagged.Counter("temporal_poll").Inc(1)
				tagged.Timer("temporal_latency").Record(time.Millisecond)
				_, _ = reg.Gather()
			}
		}()
	}
	for range 8 {
		<-done
	}
	want := `
# HELP temporal_poll_total Temporal SDK metric temporal_poll_total.
# TYPE temporal_poll_total counter
temporal_poll_total{worker="a"} 4000
temporal_poll_total{worker="b"} 4000
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), "temporal_poll_total"))
}

// Tags the SDK could send that Prometheus cannot take as they are never
// break the scrape: an empty value is the same series as no tag, invalid
// UTF-8 is replaced, an empty key gets a name.
func TestPrometheusMetrics_OddTags(t *testing.T) {
	reg := prometheus.NewRegistry()
	h, err := temporalx.NewPrometheusMetrics(reg)
	require.NoError(t, err)
	h.WithTags(map[string]string{"a": ""}).Counter("temporal_x").Inc(1)
	h.Counter("temporal_x").Inc(2)
	h.WithTags(map[string]string{"a": "ok\xff"}).Counter("temporal_x").Inc(4)
	h.WithTags(map[string]string{"": "v"}).Gauge("temporal_y").Update(1)

	want := `
# HELP temporal_x_total Temporal SDK metric temporal_x_total.
# TYPE temporal_x_total counter
temporal_x_total{a=""} 3
temporal_x_total{a="ok` + "\uFFFD" + `"} 4
# HELP temporal_y Temporal SDK metric temporal_y.
# TYPE temporal_y gauge
temporal_y{_="v"} 1
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), "temporal_x_total", "temporal_y"))
}
