package temporalx

import (
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/client"
)

// timerBuckets are the histogram buckets (seconds) of the SDK's timers:
// task and request latencies from milliseconds up to long polls (about a
// minute) and schedule-to-start waits of an agent that was away.
var timerBuckets = []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// NewPrometheusMetrics returns a handler for client.Options.MetricsHandler
// that exports the Temporal SDK's metrics (poll, task, activity and
// request counts and latencies, slot and cache gauges) through reg, so
// they appear on the worker's /metrics beside its own.
//
// Names follow Prometheus conventions: a counter gets "_total" and a
// timer becomes a histogram in seconds named "..._seconds"
// (temporal_activity_execution_latency_seconds_bucket). The SDK tags
// one metric with different tag sets in different places; every series of
// a metric is exported with the union of the tag keys its series use, a
// missing tag as an empty value, as Prometheus requires one label set per
// metric.
//
// The SDK has an adapter to Prometheus through tally
// (go.temporal.io/sdk/contrib/tally); the Go module proxy here serves only
// its 2022 release, built against an SDK 30 versions older, and it would
// add tally as a second metrics library beside client_golang.
//
// Call it once per registry: the collector describes no metric up front,
// so a second one registers without error and then every scrape fails on
// duplicate series.
func NewPrometheusMetrics(reg prometheus.Registerer) (client.MetricsHandler, error) {
	c := &sdkCollector{families: map[string]*family{}}
	if err := reg.Register(c); err != nil {
		return nil, err
	}
	return promHandler{c: c}, nil
}

// promHandler is the SDK's handler over one collector, with the tags of
// the handlers it derives from.
type promHandler struct {
	c    *sdkCollector
	tags map[string]string
}

func (h promHandler) WithTags(tags map[string]string) client.MetricsHandler {
	merged := make(map[string]string, len(h.tags)+len(tags))
	for k, v := range h.tags {
		merged[k] = v
	}
	for k, v := range tags {
		merged[sanitize(k)] = v
	}
	return promHandler{c: h.c, tags: merged}
}

func (h promHandler) Counter(name string) client.MetricsCounter {
	return h.c.series(sanitize(name)+"_total", kindCounter, h.tags)
}

func (h promHandler) Gauge(name string) client.MetricsGauge {
	return h.c.series(sanitize(name), kindGauge, h.tags)
}

func (h promHandler) Timer(name string) client.MetricsTimer {
	return h.c.series(sanitize(name)+"_seconds", kindHistogram, h.tags)
}

type kind int

const (
	kindCounter kind = iota
	kindGauge
	kindHistogram
)

// sdkCollector holds every series the SDK created. Describe sends
// nothing: the metrics are only known once the SDK reports them.
type sdkCollector struct {
	mu       sync.Mutex
	families map[string]*family
}

// family is one metric: its kind, the union of its series' label keys,
// and its series by label set.
type family struct {
	kind   kind
	keys   map[string]struct{}
	series map[string]*series
}

type series struct {
	labels map[string]string
	count  atomic.Uint64 // counter
	gauge  atomic.Uint64 // float64 bits
	mu     sync.Mutex    // histogram
	sum    float64
	n      uint64
	bucket []uint64 // cumulative counts per timerBuckets entry
}

// Inc adds d to a counter; counters never go down.
func (s *series) Inc(d int64) {
	if d > 0 {
		s.count.Add(uint64(d))
	}
}

// Update sets a gauge.
func (s *series) Update(v float64) { s.gauge.Store(math.Float64bits(v)) }

// Record observes a timer's duration.
func (s *series) Record(d time.Duration) {
	if s.bucket == nil { // a name used as another kind first (the SDK has none)
		return
	}
	v := d.Seconds()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sum += v
	s.n++
	for i, ub := range timerBuckets {
		if v <= ub {
			s.bucket[i]++
		}
	}
}

// series returns the series of name with labels, creating it. A name the
// SDK used as another kind (none does) keeps its first kind.
func (c *sdkCollector) series(name string, k kind, tags map[string]string) *series {
	// A tag with an empty value is the same series as one without it:
	// both are exported as the empty value.
	labels := make(map[string]string, len(tags))
	for k, v := range tags {
		if v != "" {
			labels[k] = strings.ToValidUTF8(v, "\uFFFD")
		}
	}
	key := labelKey(labels)
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.families[name]
	if f == nil {
		f = &family{kind: k, keys: map[string]struct{}{}, series: map[string]*series{}}
		c.families[name] = f
	}
	s := f.series[key]
	if s == nil {
		s = &series{labels: labels}
		if f.kind == kindHistogram {
			s.bucket = make([]uint64, len(timerBuckets))
		}
		f.series[key] = s
		for l := range labels {
			f.keys[l] = struct{}{}
		}
	}
	return s
}

func (c *sdkCollector) Describe(chan<- *prometheus.Desc) {}

func (c *sdkCollector) Collect(ch chan<- prometheus.Metric) {
	// Build the metrics under the lock, send them after: the SDK's calls
	// never wait for a slow scrape.
	var out []prometheus.Metric
	c.mu.Lock()
	for name, f := range c.families {
		keys := slices.Sorted(maps.Keys(f.keys))
		desc := prometheus.NewDesc(name, "Temporal SDK metric "+name+".", keys, nil)
		for _, s := range f.series {
			values := make([]string, len(keys))
			for i, k := range keys {
				values[i] = s.labels[k]
			}
			// Names and values are sanitised, so this does not fail; a
			// series that did would be left out, never fail the scrape.
			if m, err := s.metric(desc, f.kind, values); err == nil {
				out = append(out, m)
			}
		}
	}
	c.mu.Unlock()
	for _, m := range out {
		ch <- m
	}
}

func (s *series) metric(desc *prometheus.Desc, k kind, values []string) (prometheus.Metric, error) {
	switch k {
	case kindCounter:
		return prometheus.NewConstMetric(desc, prometheus.CounterValue, float64(s.count.Load()), values...)
	case kindGauge:
		return prometheus.NewConstMetric(desc, prometheus.GaugeValue, math.Float64frombits(s.gauge.Load()), values...)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	buckets := make(map[float64]uint64, len(timerBuckets))
	for i, ub := range timerBuckets {
		buckets[ub] = s.bucket[i]
	}
	return prometheus.NewConstHistogram(desc, s.n, s.sum, buckets, values...)
}

// labelKey identifies a label set whatever the map's order.
func labelKey(labels map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		b.WriteString(k)
		b.WriteByte(0)
		b.WriteString(labels[k])
		b.WriteByte(0)
	}
	return b.String()
}

// sanitize makes s a valid Prometheus metric or label name: characters
// other than letters, digits and '_' become '_', and an empty name or a
// leading digit gets a '_' before it.
func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c != '_' && (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') {
			b[i] = '_'
		}
	}
	if len(b) == 0 || b[0] >= '0' && b[0] <= '9' {
		return "_" + string(b)
	}
	return string(b)
}
