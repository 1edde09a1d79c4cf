package tests

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/status"
	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

// Phases of BenchmarkDrift; DRIFT_IDLE and DRIFT_CHURN (Go durations)
// shorten or lengthen the idle and churn windows.
const (
	benchDriftIdleWindow  = 5 * time.Minute
	benchDriftChurn       = 2 * time.Minute
	benchDriftChurnWarmup = 30 * time.Second
	// benchDriftRounds edits per measurement, spread over the clusters.
	benchDriftRounds = 9
	// benchDriftObjects is the ConfigMaps per cluster of the watch-memory
	// phase.
	benchDriftObjects = 1000
)

// BenchmarkDrift measures drift detection and correction (issue 15) on
// three push-mode clusters whose Deployments become ready (Sim):
//   - false_positives: over DRIFT_IDLE (5 min) of nobody touching anything,
//     the times a bundle of Deployments, HPAs, Services and ConfigMaps (with
//     correctDrift on) is seen not Ready, plus "Corrected drift" lines about
//     it (goal 0);
//   - detect_p50_ms: a hand edit of a ConfigMap until the status query
//     (the GitRepo workflow's, as `flotilla status` reads it) shows the
//     bundle Modified on that cluster (goal ≤ 2,000);
//   - correct_p50_ms: a hand edit until the ConfigMap holds Git's value
//     again, with correctDrift (goal ≤ 2,000);
//   - watch_rss_mib_per_1000_objects: the worker's RSS growth when a
//     release of 1,000 ConfigMaps per cluster is deployed and watched,
//     per 1,000 objects (an upper bound: it includes what the deploys
//     left in the heap);
//   - history_events_per_hour: the GitRepo and cluster workflows' history
//     growth under one edit per second of a watched object, after the
//     report budget's burst is spent, per hour.
//
// Output: bench/out/drift.json.
func BenchmarkDrift(b *testing.B) {
	idle, churn := envDuration(b, "DRIFT_IDLE", benchDriftIdleWindow), envDuration(b, "DRIFT_CHURN", benchDriftChurn)
	f := &failureFleet{fleet: startFleetWith(b, 3, 3, testenv.Options{Sim: true})}
	c := f.w.client(b)
	clusters := []string{"cluster-1", "cluster-2", "cluster-3"}
	b.ResetTimer()

	res := map[string]float64{"clusters": 3, "rounds": benchDriftRounds, "idle_s": idle.Seconds(), "churn_s": churn.Seconds()}
	res["false_positives"] = float64(benchDriftIdle(b, f, clusters, idle))
	res["detect_p50_ms"], res["detect_max_ms"] = benchDriftDetect(b, f, clusters)
	res["correct_p50_ms"], res["correct_max_ms"] = benchDriftCorrect(b, f, clusters)
	res["watch_rss_mib_per_1000_objects"] = benchDriftWatchMemory(b, f, clusters)
	res["history_events_per_hour"], res["gitrepo_events_per_hour"] = benchDriftChurnHistory(b, f, c, churn)
	b.StopTimer()
	writeBenchResult(b, "drift", res)
}

// envDuration reads a duration from env, or returns def.
func envDuration(b *testing.B, env string, def time.Duration) time.Duration {
	v := os.Getenv(env)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	require.NoError(b, err, env)
	return d
}

// benchDriftIdle deploys Deployments with HPAs, Services and ConfigMaps
// with correctDrift to every cluster and watches the status, untouched,
// for idle; it returns the not-Ready observations and corrections.
func benchDriftIdle(b *testing.B, f *failureFleet, clusters []string, idle time.Duration) int {
	const ns, name = "bench-idle", "bench-idle"
	bundle := name + "-web"
	files := map[string]string{
		"web/fleet.yaml": fleetYAML(ns) + "correctDrift:\n  enabled: true\n",
		"web/web.yaml":   webDoc + "---\n" + serviceDoc("web") + "---\n" + configMapDoc("settings", "v1"),
	}
	repo := f.git.CreateRepo(b, name, files)
	f.apply(b, gitRepoDoc(name, repo.URL(), clusterTarget(clusters...)))
	f.waitFor(b, name, "Ready everywhere", func(st status.GitRepo) bool { return allIs(st, bundle, clusters, status.Ready) })
	settle()
	mark := f.mark()
	var keys []status.Key
	for _, cl := range clusters {
		keys = append(keys, status.Key{Bundle: bundle, Cluster: cl})
	}
	start := time.Now()
	_, flaps := f.watchReady(b, name, keys, idle+time.Minute, func(status.GitRepo) bool { return time.Since(start) >= idle })
	corrected := f.since(mark, logCorrected, "bundle", bundle)
	b.Logf("idle %s: %d not-Ready observations, %d corrections", idle, len(flaps), len(corrected))
	return len(flaps) + len(corrected)
}

// allIs reports whether bundle is in state s on every cluster.
func allIs(st status.GitRepo, bundle string, clusters []string, s status.State) bool {
	for _, cl := range clusters {
		if !is(st, bundle, cl, s) {
			return false
		}
	}
	return true
}

// deployConfigMapEverywhere deploys GitRepo name, one bundle "app" with
// fleet.yaml fy and ConfigMap cm (value v1), to clusters, waits until it is
// Ready everywhere and the watches follow it, and returns the bundle.
func deployConfigMapEverywhere(b *testing.B, f *failureFleet, name, fy string, clusters []string) string {
	bundle := name + "-app"
	repo := f.git.CreateRepo(b, name, map[string]string{"app/fleet.yaml": fy, "app/cm.yaml": configMapDoc("cm", "v1")})
	f.apply(b, gitRepoDoc(name, repo.URL(), clusterTarget(clusters...)))
	f.waitFor(b, name, "Ready everywhere", func(st status.GitRepo) bool { return allIs(st, bundle, clusters, status.Ready) })
	settle()
	return bundle
}

// benchDriftDetect edits a ConfigMap by hand, cluster after cluster, and
// measures the time until the status shows the bundle Modified there; it
// puts Git's value back after each round and waits for Ready.
func benchDriftDetect(b *testing.B, f *failureFleet, clusters []string) (p50, maxMS float64) {
	const ns, name = "bench-detect", "bench-detect"
	bundle := deployConfigMapEverywhere(b, f, name, fleetYAML(ns), clusters)
	var ms []float64
	for i := range benchDriftRounds {
		cl := clusters[i%len(clusters)]
		start := time.Now()
		f.editConfigMap(b, cl, ns, "cm", "value", fmt.Sprintf("edit-%d", i))
		f.watch(b, name, driftWait, func(st status.GitRepo) bool { return is(st, bundle, cl, status.Modified) })
		ms = append(ms, float64(time.Since(start).Microseconds())/1000)
		f.editConfigMap(b, cl, ns, "cm", "value", "v1")
		f.watch(b, name, driftWait, func(st status.GitRepo) bool { return is(st, bundle, cl, status.Ready) })
	}
	b.Logf("edit to Modified (ms): %v", ms)
	return percentile(ms, 0.5), percentile(ms, 1)
}

// benchDriftCorrect edits a ConfigMap with correctDrift, cluster after
// cluster, and measures the time until it holds Git's value again.
func benchDriftCorrect(b *testing.B, f *failureFleet, clusters []string) (p50, maxMS float64) {
	const ns, name = "bench-correct", "bench-correct"
	deployConfigMapEverywhere(b, f, name, fleetYAML(ns)+"correctDrift:\n  enabled: true\n", clusters)
	var ms []float64
	for i := range benchDriftRounds {
		cl := clusters[i%len(clusters)]
		start := time.Now()
		f.editConfigMap(b, cl, ns, "cm", "value", fmt.Sprintf("edit-%d", i))
		waitUntil(b, driftWait, "edit corrected", func() bool { return f.cmValue(b, cl, ns, "cm", "value") == "v1" })
		ms = append(ms, float64(time.Since(start).Microseconds())/1000)
		time.Sleep(time.Second)
	}
	b.Logf("edit to restored (ms): %v", ms)
	return percentile(ms, 0.5), percentile(ms, 1)
}

// benchDriftWatchMemory deploys benchDriftObjects ConfigMaps to every
// cluster and returns the worker's RSS growth per 1,000 watched objects.
func benchDriftWatchMemory(b *testing.B, f *failureFleet, clusters []string) float64 {
	const ns, name = "bench-mass", "bench-mass"
	bundle := name + "-app"
	_, before, err := procMemMB(f.w.proc.PID())
	require.NoError(b, err)
	repo := f.git.CreateRepo(b, name, map[string]string{"app/fleet.yaml": fleetYAML(ns),
		"app/cms.yaml": manyConfigMaps("mass", benchDriftObjects)})
	f.apply(b, gitRepoDoc(name, repo.URL(), clusterTarget(clusters...)))
	f.waitForWithin(b, name, "Ready everywhere", 5*time.Minute, func(st status.GitRepo) bool { return allIs(st, bundle, clusters, status.Ready) })
	// The watches start after the rollout and list every object once.
	time.Sleep(15 * time.Second)
	_, after, err := procMemMB(f.w.proc.PID())
	require.NoError(b, err)
	objects := float64(benchDriftObjects * len(clusters))
	b.Logf("worker RSS %.0f → %.0f MiB with %.0f more objects watched", before, after, objects)
	return (after - before) * 1000 / objects
}

// benchDriftChurnHistory edits a watched ConfigMap once a second for a
// warm-up and then for churn, and returns the growth of the (not polling)
// GitRepo's and
// the cluster's workflow histories over churn, per hour (both, and the
// GitRepo's alone).
func benchDriftChurnHistory(b *testing.B, f *failureFleet, c client.Client, churn time.Duration) (total, gitRepo float64) {
	const ns, name = "bench-churn", "bench-churn"
	bundle := name + "-app"
	repo := f.git.CreateRepo(b, name, map[string]string{"app/fleet.yaml": fleetYAML(ns), "app/cm.yaml": configMapDoc("cm", "v1")})
	// No polling: the history grows by what the watch reports alone.
	f.apply(b, gitRepoDoc(name, repo.URL(), "  disablePolling: true\n"+clusterTarget("cluster-1")))
	f.waitFor(b, name, "Ready", func(st status.GitRepo) bool { return is(st, bundle, "cluster-1", status.Ready) })
	settle()
	// Every other edit puts Git's value back: each report differs from the
	// last (Modified, Ready, Modified, ...), the worst case for history.
	// Edits to other values alone would all report the same patch.
	edit := func(d time.Duration) {
		for i, end := 0, time.Now().Add(d); time.Now().Before(end); i++ {
			value := "v1"
			if i%2 == 0 {
				value = fmt.Sprintf("churn-%d", i)
			}
			f.editConfigMap(b, "cluster-1", ns, "cm", "value", value)
			time.Sleep(time.Second)
		}
	}
	edit(benchDriftChurnWarmup)
	ids := []string{protocol.GitRepoID("fleet-default", name), protocol.ClusterID("cluster-1")}
	before := historyLengths(b, c, ids, nil)
	start := time.Now()
	edit(churn)
	after := historyLengths(b, c, ids, before)
	window := time.Since(start)
	growth := func(i int) int64 { return after[i].events - before[i].events }
	perHour := func(i int) float64 { return float64(growth(i)) * float64(time.Hour) / float64(window) }
	b.Logf("history growth over %s of 1 edit/s: GitRepo %d events, cluster %d events", window.Round(time.Second), growth(0), growth(1))
	return perHour(0) + perHour(1), perHour(0)
}

// historyLengths returns the history length of each workflow's current
// run; it fails when a run changed since the lengths in prev were taken
// (a continue-as-new in the window would make the growth meaningless).
func historyLengths(b *testing.B, c client.Client, ids []string, prev []runLength) []runLength {
	out := make([]runLength, len(ids))
	for i, id := range ids {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		d, err := c.DescribeWorkflowExecution(ctx, id, "")
		cancel()
		require.NoError(b, err, id)
		info := d.WorkflowExecutionInfo
		out[i] = runLength{run: info.GetExecution().GetRunId(), events: info.GetHistoryLength()}
		if prev != nil {
			require.Equal(b, prev[i].run, out[i].run, "%s continued as new during the measurement", id)
		}
	}
	return out
}

// runLength is a run's history length.
type runLength struct {
	run    string
	events int64
}
