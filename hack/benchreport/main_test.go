package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReport(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "fanout.json"), []byte(`{
  "total_s": 58.5, "worker_rss_mb": 412, "deploy_p50_ms": 830.25,
  "curve": [{"clusters": 1000, "total_s": 58.5}, {"clusters": 100, "total_s": 7}, {"clusters": 300, "total_s": 19}],
  "per_cluster_ms": [10, 12, 11, 50, 13]
}`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "drift.json"), []byte(`{"detect_p50_ms": 1116.61, "false_positives": 0}`), 0o644))
	benches, err := load(dir)
	require.NoError(t, err)
	require.Len(t, benches, 2)
	assert.Equal(t, "drift", benches[0].Name)

	fan := benches[1]
	assert.Equal(t, []scalar{{"deploy_p50_ms", 830.25}}, fan.Latencies)
	require.Len(t, fan.Curves, 1)
	assert.Equal(t, curve{"total_s", [][2]float64{{100, 7}, {300, 19}, {1000, 58.5}}}, fan.Curves[0], "sorted by clusters")
	require.Len(t, fan.Samples, 1)
	assert.Equal(t, "per_cluster_ms", fan.Samples[0].Key)

	var out bytes.Buffer
	require.NoError(t, render(&out, benches))
	html := out.String()
	for _, want := range []string{`id="fanout"`, "total_s by clusters", "<polyline", "per_cluster_ms (5 samples)",
		"p95 50", "830.25", "1116.61", `<td class="n">0</td>`} {
		assert.Contains(t, html, want)
	}
	assert.NotContains(t, html, "http", "self-contained: nothing is fetched")
	assert.Equal(t, 1, strings.Count(html, "<polyline"))
}

func TestReportRejectsBadJSON(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "x.json"), []byte(`{`), 0o644))
	_, err := load(dir)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "x.json")
}
