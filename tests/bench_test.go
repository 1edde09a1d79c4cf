package tests

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/flotilla-gitops/flotilla/internal/devserver"
	"github.com/flotilla-gitops/flotilla/internal/temporalx"
)

// writeBenchResult writes fields as bench/out/<name>.json (the directory
// comes from FLOTILLA_BENCH_OUT, set by `make bench`) and reports each
// numeric field as a benchmark metric.
func writeBenchResult(b *testing.B, name string, fields map[string]float64) {
	b.Helper()
	all := make(map[string]any, len(fields))
	for k, v := range fields {
		all[k] = v
	}
	writeBenchJSON(b, name, all)
}

// writeBenchJSON is writeBenchResult for results that are not all
// numbers (a curve: a list of objects); the numeric top-level fields are
// reported as metrics.
func writeBenchJSON(b *testing.B, name string, fields map[string]any) {
	b.Helper()
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		if v, ok := fields[k].(float64); ok {
			b.ReportMetric(v, k)
		}
	}
	dir := os.Getenv("FLOTILLA_BENCH_OUT")
	if dir == "" {
		return
	}
	out, err := json.MarshalIndent(fields, "", "  ")
	require.NoError(b, err)
	require.NoError(b, os.MkdirAll(dir, 0o755))
	require.NoError(b, os.WriteFile(filepath.Join(dir, name+".json"), append(out, '\n'), 0o644))
}

func percentile(ms []float64, p float64) float64 {
	s := append([]float64(nil), ms...)
	sort.Float64s(s)
	return s[int(p*float64(len(s)-1)+0.5)]
}

// BenchmarkDevServer measures the embedded Temporal server: cold start on a
// new state dir (schema creation included) and warm restart on an existing
// one, each until the frontend, namespace, search attributes and Web UI all
// answer. Output: bench/out/devserver.json.
func BenchmarkDevServer(b *testing.B) {
	const rounds = 5
	var cold, warm []float64
	for range rounds {
		dir := b.TempDir()
		for _, series := range []*[]float64{&cold, &warm} {
			start := time.Now()
			srv, err := devserver.Start(context.Background(), devserver.Options{
				StateDir: dir, Listen: "127.0.0.1:0", UIListen: "127.0.0.1:0",
				SearchAttributes: temporalx.SearchAttributes(), Logger: zap.NewNop(),
			})
			require.NoError(b, err)
			elapsed := float64(time.Since(start).Microseconds()) / 1000
			*series = append(*series, elapsed)
			srv.Stop()
		}
	}
	writeBenchResult(b, "devserver", map[string]float64{
		"cold_start_p50_ms":   percentile(cold, 0.5),
		"warm_restart_p50_ms": percentile(warm, 0.5),
		"rounds":              rounds,
	})
}
