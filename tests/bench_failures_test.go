package tests

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/status"
)

// Time scale of BenchmarkFailures. The worker runs with --retry-backoff=1s
// and --retry-backoff-max=20s instead of the defaults 30s and 10m: every
// wait between attempts is 1/30 of production's, so benchFailuresWall of
// wall time stands for 30 times as long in production (90 s → 45 min,
// more than the 10 minutes asked for; the first 10 simulated minutes are
// the first 20 s).
const (
	benchFailuresWall  = 90 * time.Second
	benchFailuresScale = 30
)

// BenchmarkFailures: one bundle is denied by an admission policy on all
// three clusters while a second bundle of the same GitRepo is healthy, for
// benchFailuresWall. It reports how the failing releases grow (Helm
// revision and records kept; goal: no more than maxHistory, 10, records),
// the attempts status counts, whether the healthy bundle stayed Ready
// (goal: never not Ready once Ready) and the "Deployed bundle" lines about
// the failed bundle (goal 0). Output: bench/out/failures.json.
func BenchmarkFailures(b *testing.B) {
	const ns, bad, good = "bench-ns", "bench-bad", "bench-good"
	const denial = "flotilla-bench: bench-denied is not allowed"
	f := startFailureFleet(b, "--retry-backoff", "1s", "--retry-backoff-max", "20s")
	clusters := []string{"cluster-1", "cluster-2", "cluster-3"}
	for _, c := range clusters {
		admissionPolicy(b, f.cluster(c), "bench-denied", denial)
	}
	mark := f.mark()
	repo := f.git.CreateRepo(b, "bench", twoBundles(ns, map[string]string{
		"fleet.yaml": fleetYAML(ns),
		"cm.yaml":    configMapDoc("bench-allowed", "x") + "---\n" + configMapDoc("bench-denied", "x"),
	}))
	b.ResetTimer()
	start := time.Now()
	f.apply(b, gitRepoDoc("bench", repo.URL(), allClusters))
	head := repo.Head(b)

	// Watch the status (every 100 ms): once the healthy bundle was Ready
	// on a cluster, count every observation where it is not.
	var goodKeys []status.Key
	for _, c := range clusters {
		goodKeys = append(goodKeys, status.Key{Bundle: good, Cluster: c})
	}
	samples := 0
	st, flaps := f.watchReady(b, "bench", goodKeys, benchFailuresWall+time.Minute, func(status.GitRepo) bool {
		samples++
		return time.Since(start) >= benchFailuresWall
	})
	wall := time.Since(start)
	b.StopTimer()
	require.Equal(b, head, st.Commit, "the GitRepo never reported the commit")

	var maxRevs, maxRecords, maxAttempts, notReady int
	minAttempts := -1
	for _, c := range clusters {
		d := dep(b, st, bad, c)
		require.Equal(b, status.ErrApplied, d.State, "%s on %s: %s", bad, c, d.Message)
		require.Contains(b, d.Message, denial)
		revs, records := helmRevisions(b, f.cluster(c), ns, bad), helmRecordCount(b, f.cluster(c), ns, bad)
		b.Logf("%s on %s: attempts %d, Helm revision %d, %d records", bad, c, d.Attempts, revs, records)
		maxRevs, maxRecords, maxAttempts = max(maxRevs, revs), max(maxRecords, records), max(maxAttempts, d.Attempts)
		if minAttempts < 0 || d.Attempts < minAttempts {
			minAttempts = d.Attempts
		}
		if !is(st, good, c, status.Ready) {
			notReady++
		}
	}
	failedLines := f.since(mark, logBundleFailed, "bundle", bad)
	deployedForFailed := f.since(mark, logDeployed, "bundle", bad)
	// One deploy of the healthy bundle per cluster, never repeated.
	deployedOther := f.since(mark, logDeployed, "bundle", good)
	b.Logf("%d samples, %d %q lines, %d %q lines about %s", samples, len(failedLines), logBundleFailed, len(deployedForFailed), logDeployed, bad)
	writeBenchResult(b, "failures", map[string]float64{
		"wall_seconds":                   wall.Seconds(),
		"simulated_minutes":              wall.Minutes() * benchFailuresScale,
		"helm_revisions_per_release":     float64(maxRevs),
		"helm_records_per_release":       float64(maxRecords),
		"attempts":                       float64(maxAttempts),
		"attempts_min":                   float64(minAttempts),
		"bundle_failed_logs":             float64(len(failedLines)),
		"other_bundles_not_ready":        float64(notReady),
		"other_bundle_not_ready_samples": float64(len(flaps)),
		"status_samples":                 float64(samples),
		"deployed_logs_for_failed":       float64(len(deployedForFailed)),
		"deployed_logs_for_other":        float64(len(deployedOther)),
	})
	b.Logf("failures: %d attempts in %s (≈ %.0f simulated minutes)", maxAttempts, wall.Round(time.Second), wall.Minutes()*benchFailuresScale)
}
