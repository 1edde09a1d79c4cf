package tests

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/chartfetch"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/status"
	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

// benchHelmOpRounds is the number of versions published.
const benchHelmOpRounds = 10

// BenchmarkHelmOp measures HelmOps (issue 17) on three push-mode clusters:
//   - publish_to_deployed_p50_ms: a new chart version in the repository,
//     then a `flotilla sync` (the signal it sends), until the HelmOp's
//     status shows that version Ready on all three clusters (goal
//     ≤ 1,500);
//   - poll_cost_ms: one resolve of the HelmOp's constraint against the
//     repository's index.yaml, as a poll does it (fresh, no cache).
//
// Output: bench/out/helmop.json.
func BenchmarkHelmOp(b *testing.B) {
	f := startFleetArgs(b, 3, 3, testenv.Options{})
	repo := newChartRepo(b, "bench", "", "")
	repo.publish(b, "1.0.0")
	// Polled hourly: each round's sync, not a poll, finds the version.
	doc := helmOpDoc("bench", repo.URL, "bench", ">=1.0.0", "helmop-bench", "")
	f.apply(b, strings.Replace(doc, "pollingInterval: 2s", "pollingInterval: 1h", 1))
	f.waitFor(b, "helmop/bench", "1.0.0 deployed", helmOpAt("1.0.0", 3))
	c := f.w.client(b)
	id := protocol.HelmOpID("fleet-default", "bench")
	ctx := context.Background()
	b.ResetTimer()

	var deployed []float64
	for i := 1; i <= benchHelmOpRounds; i++ {
		version := fmt.Sprintf("1.0.%d", i)
		start := time.Now()
		repo.publish(b, version)
		require.NoError(b, c.SignalWorkflow(ctx, id, "", protocol.SignalSync, nil))
		for {
			var st status.GitRepo
			v, err := c.QueryWorkflow(ctx, id, "", protocol.QueryStatus)
			require.NoError(b, err)
			require.NoError(b, v.Get(&st))
			if helmOpAt(version, 3)(st) {
				break
			}
			require.Less(b, time.Since(start), 2*time.Minute, "version %s not deployed: %+v", version, st)
			time.Sleep(20 * time.Millisecond)
		}
		deployed = append(deployed, float64(time.Since(start).Microseconds())/1000)
	}

	fetcher := &chartfetch.Fetcher{IndexTTL: -1}
	var polls []float64
	for range 20 {
		start := time.Now()
		_, err := fetcher.ResolveVersion(ctx, chartfetch.Source{Chart: "bench", Repo: repo.URL, Version: ">=1.0.0"})
		require.NoError(b, err)
		polls = append(polls, float64(time.Since(start).Microseconds())/1000)
	}
	writeBenchResult(b, "helmop", map[string]float64{
		"clusters":                   3,
		"rounds":                     benchHelmOpRounds,
		"publish_to_deployed_p50_ms": percentile(deployed, 0.5),
		"publish_to_deployed_max_ms": percentile(deployed, 1),
		"poll_cost_ms":               percentile(polls, 0.5),
	})
}
