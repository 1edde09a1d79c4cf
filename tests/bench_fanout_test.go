package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/cluster"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/status"
	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

// BenchmarkFanout rolls one GitRepo out to many clusters at once, at
// several sizes (a sub-benchmark each, on servers of its own): 100, 300
// and 1,000 virtual clusters, and 5,000 with FANOUT_MAX=5000
// (FLOTILLA_FANOUT_CLUSTERS=N runs N only). Virtual clusters vc-0000 …
// are each registered with the kubeconfig of real kube-apiserver i%3 and
// the label fanout=yes. The bundle's fleet.yaml has one targetCustomization per
// cluster that forces the namespace to the cluster's name, so the 333
// virtual clusters sharing an API server install 333 releases side by
// side. The bundle is one ConfigMap (FLOTILLA_FANOUT_WORKLOAD=deployment:
// one Deployment, with the API servers in sim mode).
//
// Same namespace: one more round, at 300 clusters (or the headline size
// when 300 is not run), gives every virtual cluster the same namespace
// (fanout-shared) and release name, as a bundle without per-cluster
// customizations has on real clusters; FLOTILLA_FANOUT_SAME_NAMESPACE=1
// runs every round so and =0 none. Helm's lock is per API server URL and
// release, so these releases must be on distinct clusters: 300 API servers
// do not fit on 2 cores and 24 GiB (about 280 MiB and a share of CPU each),
// so each virtual cluster is a URL of its own
// (https://127.0.0.1:P/vc/vc-0042) on a namespace proxy in this process
// (testenv.NamespaceProxy, one per API server), which stores its
// fanout-shared in a namespace of its own (fanout-000042) and shows it as
// fanout-shared. fanout.json then has same_namespace_total_s (and
// same_namespace_clusters, _p95_cluster_ms, _worker_cpu_s,
// _helm_revisions_max), next to it same_namespace_baseline_total_s, the
// per-namespace round of the same size, and same_namespace_ratio (goal:
// at most 1.2). The proxy's TLS and copying, in the benchmark process,
// are part of the same-namespace figure, and so is a client per cluster:
// the worker caches API clients (discovery included) per server URL and
// credentials, which the per-namespace round's virtual clusters share,
// 100 to an API server. So a control round runs first, a namespace per
// cluster but a URL per cluster on the same proxies (FLOTILLA_FANOUT_PROXY=1
// runs every round so): proxied_total_s, and same_namespace_proxied_ratio
// is the shared namespace's own cost.
//
// Registration is set-up, not measured: the first clusters are added with
// `flotilla cluster add`; if that pace would take more than 2 minutes for
// all of them, the rest are registered from this process exactly as the
// CLI does it (kubeconfig into <state-dir>/clusters, then the cluster
// workflow's apply update), in parallel.
//
// Output (bench/out/fanout.json): the fields below for the 1,000-cluster
// round (or the largest), "curve" (per size: clusters, total_s,
// p50/p95_cluster_ms, max_events_per_run, max_pending_activities,
// worker/temporal RSS and CPU, helm_revisions_max, register_s and
// TargetBundles' time) and noop_resync_s: `flotilla sync` of the
// 1,000 clusters, everything already at its deployment ID, until the
// GitRepo is settled again. The sync is sent in the steady state, once
// every cluster's drift watch has reported (status "watched"); how long
// that took after the rollout settled is watch_settle_s. When they have
// not all reported within 5 minutes, watched_after_5m says how many had
// and no re-sync is measured. helm_revisions_max is the newest Helm revision
// of any release after it (1: nothing was deployed twice).
//
// Per round:
//   - total_s: `flotilla apply -f` of the GitRepo until its status (the
//     query `flotilla status` shows; confirmed with the CLI once at the end)
//     is settled with every deployment Ready.
//   - p50_cluster_ms: median over clusters of rollout start (the
//     RolloutWorkflow's WorkflowExecutionStarted event) → the close of the
//     first activity whose result reports the cluster's deployment Ready
//     (deploy, or the readiness wait), read from the Temporal histories of
//     the rollout and of every child workflow whose ID starts with its ID.
//     p95_cluster_ms and max_cluster_ms alike.
//   - max_events_per_run: the longest history (DescribeWorkflowExecution's
//     HistoryLength) over every run listed by WorkflowId STARTS_WITH
//     "rollout/": rollouts, their continued-as-new runs and their children.
//   - max_pending_activities: DescribeWorkflowExecution's
//     PendingActivities of every running rollout run, sampled every 200 ms
//     during the rollout; the maximum over any single run.
//   - worker_rss_mb: the worker process's VmHWM. With the default embedded
//     server (`flotilla-worker --dev`) that process runs Temporal too and
//     temporal_rss_mb is the same figure (temporal_separate 0). With
//     FLOTILLA_FANOUT_TEMPORAL=separate the Temporal dev server runs in a
//     second flotilla-worker --dev process serving an unused task queue and
//     temporal_rss_mb is its VmHWM (temporal_separate 1).
//   - worker_cpu_s, temporal_cpu_s, apiserver_cpu_s, etcd_cpu_s: CPU
//     seconds during the rollout.
//
// The fleet.yaml has no rolloutStrategy, so the product's default applies:
// from 200 clusters on, four automatic partitions rolled out one after the
// other (FLOTILLA_FANOUT_PARTITIONS=off turns them off).
//
// The goal (60 s for 1,000 clusters) is reported, not enforced: the
// benchmark fails only when something breaks, the GitRepo reports an
// error for a minute, or the rollout does not settle within
// FLOTILLA_FANOUT_TIMEOUT (20m); it writes the JSON first (completed 0).
// Every progress line also goes to bench/out/fanout.log, since go test
// keeps only a benchmark's first log lines without -v.
//
// Other knobs: FLOTILLA_FANOUT_APISERVERS (3), FLOTILLA_FANOUT_CLI_PROBE
// (10 clusters timed with the CLI), FLOTILLA_FANOUT_WORKER_ARGS (extra
// worker flags, e.g. "--max-concurrent-activities 400"),
// FLOTILLA_FANOUT_TEMPORAL_ARGS (extra flags of the separate Temporal
// process, e.g. "--http-listen 127.0.0.1:16061 --pprof" to profile it).
func BenchmarkFanout(b *testing.B) {
	if testing.Short() {
		b.Skip("starts kube-apiservers, a Temporal dev server and a Git server")
	}
	cfg := loadFanoutConfig(b)
	lg := newBenchLog(b, "fanout")
	headline := cfg.headline()
	out := map[string]any{}
	var curve []map[string]float64
	for _, n := range cfg.sizes {
		// A sub-benchmark per size, so that each size's servers are
		// stopped before the next starts.
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			lg.b = b
			res := fanoutRound(b, cfg, lg, n, n == headline)
			curve = append(curve, curvePoint(res))
			if n == headline {
				for k, v := range res {
					out[k] = v
				}
			}
		})
		lg.b = b
	}
	if n := cfg.sameNamespaceAt; n > 0 {
		control := cfg
		control.proxied = true
		b.Run(strconv.Itoa(n)+"-proxied", func(b *testing.B) {
			lg.b = b
			res := fanoutRound(b, control, lg, n, false)
			out["proxied_clusters"], out["proxied_total_s"], out["proxied_worker_cpu_s"] = res["clusters"], res["total_s"], res["worker_cpu_s"]
		})
		same := cfg
		same.sameNamespace = true
		b.Run(strconv.Itoa(n)+"-same-namespace", func(b *testing.B) {
			lg.b = b
			res := fanoutRound(b, same, lg, n, false)
			sameNamespaceFigures(lg, out, res, curve)
		})
		lg.b = b
	} else if cfg.sameNamespace {
		sameNamespaceFigures(lg, out, nil, nil)
	}
	out["curve"] = curve
	writeBenchJSON(b, "fanout", out)
	lg.logf("cost curve: %s", curveSummary(curve))
}

// sameNamespaceFigures adds the same-namespace round's figures to out:
// same_namespace_clusters, same_namespace_total_s (and its p95, CPU and
// Helm revisions), and next to them the per-namespace round of that size
// from curve: same_namespace_baseline_total_s and same_namespace_ratio
// (the goal: at most 1.2). With res nil every round was a same-namespace
// one, and out's own fields are its figures.
func sameNamespaceFigures(lg *benchLog, out map[string]any, res map[string]float64, curve []map[string]float64) {
	if res == nil {
		out["same_namespace_clusters"], out["same_namespace_total_s"] = out["clusters"], out["total_s"]
		return
	}
	for _, k := range []string{"clusters", "completed", "total_s", "p95_cluster_ms", "worker_cpu_s", "helm_revisions_max"} {
		if v, ok := res[k]; ok {
			out["same_namespace_"+k] = v
		}
	}
	for _, pt := range curve {
		if pt["clusters"] == res["clusters"] && pt["total_s"] > 0 {
			out["same_namespace_baseline_total_s"] = pt["total_s"]
			out["same_namespace_ratio"] = res["total_s"] / pt["total_s"]
			lg.logf("%.0f clusters: %.1f s with one namespace and release name on every cluster, %.1f s with a namespace each (×%.2f; goal: ≤ 1.2)",
				res["clusters"], res["total_s"], pt["total_s"], res["total_s"]/pt["total_s"])
		}
	}
	if p, ok := out["proxied_total_s"].(float64); ok && p > 0 {
		out["same_namespace_proxied_ratio"] = res["total_s"] / p
		lg.logf("with a namespace each on the same proxies: %.1f s (same namespace ×%.2f of it)", p, res["total_s"]/p)
	}
}

// curveFields are the figures of each size that the curve reports.
var curveFields = []string{"clusters", "completed", "total_s", "p50_cluster_ms", "p95_cluster_ms", "max_events_per_run",
	"max_pending_activities", "worker_rss_mb", "temporal_rss_mb", "worker_cpu_s", "temporal_cpu_s",
	"helm_revisions_max", "register_s", "activity_targetbundles_p50_ms"}

func curvePoint(res map[string]float64) map[string]float64 {
	pt := map[string]float64{}
	for _, k := range curveFields {
		if v, ok := res[k]; ok {
			pt[k] = v
		}
	}
	return pt
}

func curveSummary(curve []map[string]float64) string {
	var parts []string
	for _, pt := range curve {
		parts = append(parts, fmt.Sprintf("%.0f clusters: %.1f s, p95 %.0f ms, worker %.0f MiB / %.0f CPU-s, Temporal %.0f MiB / %.0f CPU-s",
			pt["clusters"], pt["total_s"], pt["p95_cluster_ms"], pt["worker_rss_mb"], pt["worker_cpu_s"], pt["temporal_rss_mb"], pt["temporal_cpu_s"]))
	}
	return strings.Join(parts, "; ")
}

// fanoutRound rolls the GitRepo out to n virtual clusters on servers of
// its own and returns the figures; with resync it then measures a no-op
// `flotilla sync` of all of them (noop_resync_s).
func fanoutRound(b *testing.B, cfg fanoutConfig, lg *benchLog, n int, resync bool) map[string]float64 {
	ctx := context.Background()
	k := cfg.apiservers
	lg.logf("%d virtual clusters on %d API servers, workload %s, Temporal %s, automatic partitions %s, %s", n, k, cfg.workload,
		map[bool]string{false: "embedded (--dev)", true: "separate process"}[cfg.separateTemporal],
		map[bool]string{false: "on (product default)", true: "off"}[cfg.unpartitioned],
		map[bool]string{false: "a namespace per cluster", true: "one namespace and release name on every cluster"}[cfg.sameNamespace]+
			map[bool]string{false: "", true: " (a URL per cluster on namespace proxies)"}[cfg.sameNamespace || cfg.proxied])

	// Set-up: API servers, Git server, worker.
	setup := time.Now()
	sim := cfg.workload == workloadDeployment
	apis := testenv.StartClusters(b, k, testenv.Options{Sim: sim})
	if sim {
		for _, a := range apis {
			addFakeNodes(ctx, b, a, (n+k-1)/k)
		}
	}
	git := testenv.NewGitServer(b, testenv.GitServerOptions{})
	stateDir := b.TempDir()
	w, temporalPID := startFanoutWorker(b, cfg, stateDir)
	f := &fleet{t: b, stateDir: stateDir, w: w, logs: []string{w.proc.LogPath()}, clusters: apis, git: git}
	c := w.client(b)
	workerPID := w.proc.PID()
	lg.logf("%d API servers and worker (pid %d) up in %s", k, workerPID, time.Since(setup).Round(time.Millisecond))

	// Registration.
	names := make([]string, n)
	for i := range names {
		names[i] = virtualClusterName(i)
	}
	kubeconfigs := fanoutKubeconfigs(b, apis, names, cfg.sameNamespace || cfg.proxied)
	reg := time.Now()
	probe := min(cfg.cliProbe, n)
	for i := range probe {
		out := f.cli(b, "cluster", "add", names[i], "--kubeconfig", kubeconfigs[i], "--label", "fanout=yes")
		require.Contains(b, out, "cluster/"+names[i]+" created")
	}
	direct := false
	if probe < n {
		projected := time.Duration(0)
		if probe > 0 {
			projected = time.Since(reg) / time.Duration(probe) * time.Duration(n)
		}
		if probe == 0 || projected > cfg.cliBudget {
			direct = true
			lg.logf("`flotilla cluster add` takes %s per cluster (%s for %d): registering the other %d from this process",
				(time.Since(reg) / time.Duration(max(probe, 1))).Round(time.Millisecond), projected.Round(time.Second), n, n-probe)
			key, err := cluster.CurrentKey(ctx, c)
			require.NoError(b, err)
			labels := map[string]string{"fanout": "yes"}
			// Each registration is followed by the cluster workflow's
			// notification of the GitRepos; waiting for it keeps at most
			// 8 of them in flight (see waitNotified).
			err = parallel(probe, n, 8, func(i int) error {
				rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
				defer cancel()
				if err := registerClusterDirect(rctx, c, key, names[i], kubeconfigs[i], labels); err != nil {
					return err
				}
				return waitNotified(rctx, c, names[i])
			})
			require.NoError(b, err)
		} else {
			for i := probe; i < n; i++ {
				f.cli(b, "cluster", "add", names[i], "--kubeconfig", kubeconfigs[i], "--label", "fanout=yes")
			}
		}
	}
	regTime := time.Since(reg)
	how := "all with the CLI"
	if direct {
		how = fmt.Sprintf("%d with the CLI, the rest directly", probe)
	}
	lg.logf("registered %d clusters in %s (%s)", n, regTime.Round(time.Millisecond), how)
	waitServed(b, lg, w, n)
	idle := time.Now()
	busy, err := clustersBusy(ctx, c, names)
	for err == nil && busy > 0 && time.Since(idle) < 10*time.Minute {
		time.Sleep(time.Second)
		busy, err = clustersBusy(ctx, c, names)
	}
	require.NoError(b, err)
	require.Zero(b, busy, "cluster workflows still notifying GitRepos after %s", time.Since(idle).Round(time.Second))
	lg.logf("every cluster workflow idle (no pending activity) %s after registration", time.Since(idle).Round(time.Millisecond))
	if d, ok := waitQuiet(workerPID, 0.1, 2*time.Minute); ok {
		lg.logf("worker idle (CPU < 10%%) within %s", d.Round(time.Millisecond))
	} else {
		lg.logf("worker still busy after %s; starting anyway", d.Round(time.Millisecond))
	}

	// The GitRepo: one bundle, a namespace per cluster.
	file, workload := fanoutWorkload(cfg.workload)
	repo := git.CreateRepo(b, "fanout", map[string]string{"fleet.yaml": fanoutFleetYAML(names, cfg.unpartitioned, cfg.sameNamespace), file: workload})
	commit := repo.Head(b)
	gr := api.GitRepo{TypeMeta: api.TypeMeta{APIVersion: api.Version, Kind: api.KindGitRepo},
		Metadata: api.ObjectMeta{Name: "fanout", Namespace: api.DefaultNamespace},
		Spec: api.GitRepoSpec{Repo: repo.URL(), DisablePolling: true,
			Targets: []api.TargetSelector{{ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"fanout": "yes"}}}}}}
	doc, err := yaml.Marshal(gr)
	require.NoError(b, err)
	docPath := writeTemp(b, "fanout.yaml", string(doc))

	// The rollout, sampled while it runs. Other processes on the machine
	// skew every figure: the load average says how busy it was.
	lg.logf("load average before the rollout: %s", loadAvg())
	cpuBefore := cpuByProcess()
	workerCPU0, _, _, _ := procCPU(workerPID)
	temporalCPU0, _, _, _ := procCPU(temporalPID)
	sampleCtx, stopSampling := context.WithCancel(ctx)
	sampler := &pendingSampler{}
	var bg sync.WaitGroup
	bg.Go(func() { sampler.run(sampleCtx, c, 200*time.Millisecond) })
	start := time.Now()
	bg.Go(func() { logProgress(sampleCtx, lg, c, start, workerPID, sampler) })
	f.cli(b, "apply", "-f", docPath)
	final, waitErr := waitFanout(ctx, c, n, commit, cfg.timeout)
	settled := waitErr == nil
	total := time.Since(start)
	stopSampling()
	bg.Wait()
	cpuAfter := cpuByProcess()
	workerCPU1, _, _, _ := procCPU(workerPID)
	temporalCPU1, _, _, _ := procCPU(temporalPID)
	lg.logf("%s after apply: settled=%v (%v) %d/%d Ready (%s)", total.Round(time.Millisecond), settled, waitErr,
		final.Summary.Ready, final.Summary.Desired, final.Summary.Message)
	lg.logf("CPU during the rollout: %s; load average after: %s", cpuDelta(cpuBefore, cpuAfter), loadAvg())
	if settled {
		cli := f.status(b, "fanout")
		require.Equal(b, n, cli.Summary.Ready, "flotilla status disagrees: %+v", cli.Summary)
	}

	// What Temporal recorded.
	res := map[string]float64{
		"clusters":          float64(n),
		"apiservers":        float64(k),
		"completed":         map[bool]float64{false: 0, true: 1}[settled],
		"ready_clusters":    float64(final.Summary.ReadyClusters),
		"total_s":           total.Seconds(),
		"register_s":        regTime.Seconds(),
		"register_direct":   map[bool]float64{false: 0, true: 1}[direct],
		"deployment_bundle": map[bool]float64{false: 0, true: 1}[sim],
		"temporal_separate": map[bool]float64{false: 0, true: 1}[cfg.separateTemporal],
		"unpartitioned":     map[bool]float64{false: 0, true: 1}[cfg.unpartitioned],
		"same_namespace":    map[bool]float64{false: 0, true: 1}[cfg.sameNamespace],
		"proxied":           map[bool]float64{false: 0, true: 1}[cfg.sameNamespace || cfg.proxied],
	}
	sampler.mu.Lock()
	res["max_pending_activities"] = float64(sampler.maxPending)
	res["max_running_rollout_runs"] = float64(sampler.maxRunning)
	lg.logf("pending activities: max %d (in %s) over %d samples; at most %d rollout runs at once; %d sampling errors (last: %v)",
		sampler.maxPending, sampler.maxRun, sampler.samples, sampler.maxRunning, sampler.errs, sampler.lastErr)
	sampler.mu.Unlock()
	rolloutID := final.Rollout
	if rolloutID == "" {
		rolloutID = final.LastRollout
	}
	temporalReport(ctx, b, lg, c, rolloutID, names, res)

	// Memory and CPU.
	hwm, rss, err := procMemMB(workerPID)
	require.NoError(b, err)
	res["worker_rss_mb"] = hwm
	res["worker_rss_after_mb"] = rss
	res["temporal_rss_mb"] = hwm
	if cfg.separateTemporal {
		thwm, _, err := procMemMB(temporalPID)
		require.NoError(b, err)
		res["temporal_rss_mb"] = thwm
	}
	// Embedded: one process, the same figure twice.
	res["worker_cpu_s"] = workerCPU1 - workerCPU0
	res["temporal_cpu_s"] = temporalCPU1 - temporalCPU0
	res["apiserver_cpu_s"] = cpuAfter["kube-apiserver"] - cpuBefore["kube-apiserver"]
	res["etcd_cpu_s"] = cpuAfter["etcd"] - cpuBefore["etcd"]
	res["bench_cpu_s"] = cpuAfter["bench (test process)"] - cpuBefore["bench (test process)"]
	lg.logf("total %.1fs for %d clusters (goal: 60 s for 1000), p50 per cluster %.0f ms, max history %v events, max pending %v, worker RSS %.0f MiB",
		total.Seconds(), n, res["p50_cluster_ms"], res["max_events_per_run"], res["max_pending_activities"], hwm)
	if !settled {
		b.Fatalf("the rollout to %d clusters failed: %v; summary %+v", n, waitErr, final.Summary)
	}
	if resync {
		// The steady state a sync meets: every cluster's drift watch has
		// reported on what it runs.
		watch := time.Now()
		ws, err := waitWatched(ctx, c, n, 5*time.Minute)
		if err != nil {
			// Not the steady state a sync should meet: report, do not fail.
			lg.logf("drift watches: %d of %d deployments reported within %s; no no-op re-sync measured", ws.Watched, n,
				time.Since(watch).Round(time.Second))
			res["watched_after_5m"] = float64(ws.Watched)
		} else {
			res["watch_settle_s"] = time.Since(watch).Seconds()
			lg.logf("every deployment's drift watch reported %.1f s after the rollout settled", res["watch_settle_s"])
			// Everything runs its deployment ID: a sync must redeploy nothing.
			start := time.Now()
			f.cli(b, "sync", "fanout")
			st, err := waitResynced(ctx, c, n, commit, cfg.timeout)
			res["noop_resync_s"] = time.Since(start).Seconds()
			require.NoError(b, err, "no-op re-sync: %+v", st.Summary)
			lg.logf("no-op re-sync of %d clusters: %.1f s", n, res["noop_resync_s"])
		}
	}
	revs, err := maxHelmRevision(ctx, apis)
	require.NoError(b, err)
	res["helm_revisions_max"] = float64(revs)
	lg.logf("Helm revisions per release: at most %d", revs)
	if cfg.sameNamespace {
		// Distinct clusters: each virtual cluster's release is its own.
		own, err := backedReleases(ctx, apis, n)
		require.NoError(b, err)
		lg.logf("%d of %d virtual clusters have their own Helm release behind %s", own, n, fanoutSharedNamespace)
		require.Equal(b, n, own, "virtual clusters with a Helm release of their own")
	}
	return res
}

// waitResynced waits until the GitRepo took a sync and settled again at
// commit with n deployments Ready.
func waitResynced(ctx context.Context, c client.Client, n int, commit string, timeout time.Duration) (status.GitRepo, error) {
	deadline := time.Now().Add(timeout)
	var st status.GitRepo
	for time.Now().Before(deadline) {
		v, err := c.QueryWorkflow(ctx, protocol.GitRepoID(api.DefaultNamespace, "fanout"), "", protocol.QueryStatus)
		if err == nil && v.Get(&st) == nil && st.Syncs > 0 && settledAt(commit, n)(st) {
			return st, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return st, fmt.Errorf("not settled after the sync within %s", timeout)
}

// waitWatched waits until the GitRepo's status counts n deployments whose
// drift watch reported on the deployment ID they run.
func waitWatched(ctx context.Context, c client.Client, n int, timeout time.Duration) (status.GitRepo, error) {
	deadline := time.Now().Add(timeout)
	var st status.GitRepo
	for time.Now().Before(deadline) {
		v, err := c.QueryWorkflow(ctx, protocol.GitRepoID(api.DefaultNamespace, "fanout"), "", protocol.QueryStatus)
		if err == nil && v.Get(&st) == nil && st.Watched >= n {
			return st, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return st, fmt.Errorf("not every drift watch reported within %s", timeout)
}

// maxHelmRevision returns the newest revision of any Helm release on
// the API servers: how many installs and upgrades the most deployed
// release had.
func maxHelmRevision(ctx context.Context, apis []*testenv.Cluster) (int, error) {
	most := 0
	err := eachHelmRecord(ctx, apis, func(s corev1.Secret) error {
		v, err := strconv.Atoi(s.Labels["version"])
		if err != nil {
			return fmt.Errorf("Helm record %s/%s: version %q", s.Namespace, s.Name, s.Labels["version"])
		}
		most = max(most, v)
		return nil
	})
	return most, err
}

// startFanoutWorker starts the worker on stateDir: `flotilla-worker --dev`
// (embedded Temporal), or with cfg.separateTemporal a Temporal-only
// `flotilla-worker --dev` (its controller serves a queue nobody uses, its
// state dir has no clusters) and the worker dialing it. It returns the
// worker and the pid of the process running Temporal.
func startFanoutWorker(b *testing.B, cfg fanoutConfig, stateDir string) (*devWorker, int) {
	b.Helper()
	extra := strings.Fields(os.Getenv("FLOTILLA_FANOUT_WORKER_ARGS"))
	if !cfg.separateTemporal {
		w := startDevWorker(b, stateDir, extra...)
		return w, w.proc.PID()
	}
	hostDir := b.TempDir()
	hostArgs := append([]string{"--task-queue", "fanout-temporal-only"}, strings.Fields(os.Getenv("FLOTILLA_FANOUT_TEMPORAL_ARGS"))...)
	host := startDevWorker(b, hostDir, hostArgs...)
	// Both controllers publish their sealing keys to the one Temporal: they
	// must hold the same ones, the key the host generated in its state dir.
	args := append([]string{"--temporal-address", host.frontend, "--state-dir", stateDir, "--webhook-listen", "127.0.0.1:0",
		"--seal-keys", filepath.Join(hostDir, "seal-keys")}, extra...)
	proc := testenv.StartProcess(b, testenv.ProcessOptions{Name: "flotilla-worker", Path: bins.worker, Args: args})
	rctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(b, proc.WaitReady(rctx, func(context.Context) error {
		if !strings.Contains(proc.LogTail(50), `"msg":"Worker started"`) {
			return fmt.Errorf("worker not started yet")
		}
		return nil
	}))
	return &devWorker{proc: proc, frontend: host.frontend, stateDir: stateDir}, host.proc.PID()
}

// waitServed waits until the worker serves every cluster's task queue.
// A worker with one Temporal worker per cluster logs "Serving cluster"
// for each; one serving all clusters on a shared queue logs none, and
// then there is nothing to wait for.
func waitServed(b *testing.B, lg *benchLog, w *devWorker, n int) {
	b.Helper()
	start := time.Now()
	for {
		got, err := countLogLines(w.proc.LogPath(), `"msg":"Serving cluster"`)
		require.NoError(b, err)
		switch {
		case got >= n:
			lg.logf("worker serves %d cluster queues (%s after registration)", got, time.Since(start).Round(time.Millisecond))
			return
		case got == 0 && time.Since(start) > 5*time.Second:
			lg.logf("worker logs no per-cluster queue: assuming one shared queue")
			return
		case time.Since(start) > 3*time.Minute:
			lg.logf("worker serves only %d of %d cluster queues after %s; starting anyway", got, n, time.Since(start).Round(time.Second))
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// waitFanout polls the GitRepo's status query (what `flotilla status`
// shows) until it is settled at commit with n deployments, all Ready. It
// gives up at the timeout, or when the GitRepo has reported an error for
// a minute on end (a rollout that fails is started again and again), and
// then returns the error.
func waitFanout(ctx context.Context, c client.Client, n int, commit string, timeout time.Duration) (status.GitRepo, error) {
	deadline := time.Now().Add(timeout)
	var st status.GitRepo
	var errSince time.Time
	for time.Now().Before(deadline) {
		qctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		v, err := c.QueryWorkflow(qctx, protocol.GitRepoID(api.DefaultNamespace, "fanout"), "", protocol.QueryStatus)
		if err == nil {
			err = v.Get(&st)
		}
		cancel()
		switch {
		case err != nil:
		case settledAt(commit, n)(st):
			return st, nil
		case st.Error == "":
			errSince = time.Time{}
		case errSince.IsZero():
			errSince = time.Now()
		case st.Settled || time.Since(errSince) > time.Minute:
			return st, fmt.Errorf("GitRepo reports an error (for %s): %s", time.Since(errSince).Round(time.Second), st.Error)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return st, fmt.Errorf("not settled with %d Ready within %s", n, timeout)
}

// logProgress logs, every 10 s, how far the rollout is.
func logProgress(ctx context.Context, lg *benchLog, c client.Client, start time.Time, workerPID int, s *pendingSampler) {
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	cpu0, _, _, _ := procCPU(workerPID)
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		var gr status.GitRepo
		var ro status.Rollout
		line := ""
		if v, err := c.QueryWorkflow(ctx, protocol.GitRepoID(api.DefaultNamespace, "fanout"), "", protocol.QueryStatus); err == nil && v.Get(&gr) == nil {
			line = fmt.Sprintf("gitrepo %d/%d Ready", gr.Summary.Ready, gr.Summary.Desired)
			if gr.Rollout != "" {
				if v, err := c.QueryWorkflow(ctx, gr.Rollout, "", protocol.QueryStatus); err == nil && v.Get(&ro) == nil {
					sum := status.Summarize(ro.Deployments)
					line += fmt.Sprintf(", rollout %s: %d/%d Ready %v", ro.Phase, sum.Ready, sum.Desired, sum.Counts)
				}
			}
		}
		_, rss, _ := procMemMB(workerPID)
		cpu, _, _, _ := procCPU(workerPID)
		s.mu.Lock()
		pend := s.maxPending
		s.mu.Unlock()
		lg.logf("+%s %s; max pending %d; worker RSS %.0f MiB, CPU %.1fs", time.Since(start).Round(time.Second), line, pend, rss, cpu-cpu0)
	}
}

// temporalReport lists every rollout run, reads their history lengths and
// histories, and adds max_events_per_run, the per-cluster times and an
// activity breakdown to res.
func temporalReport(ctx context.Context, b *testing.B, lg *benchLog, c client.Client, rolloutID string, names []string, res map[string]float64) {
	b.Helper()
	// Visibility learns of closes asynchronously.
	deadline := time.Now().Add(30 * time.Second)
	for {
		running, err := listRuns(ctx, c, rolloutPrefix, true)
		require.NoError(b, err)
		if len(running) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	runs, err := listRuns(ctx, c, rolloutPrefix, false)
	require.NoError(b, err)
	maxEvents, maxRun := int64(0), runKey{}
	var ids []string
	for _, r := range runs {
		d, err := c.DescribeWorkflowExecution(ctx, r.id, r.runID)
		require.NoError(b, err)
		if l := d.GetWorkflowExecutionInfo().GetHistoryLength(); l > maxEvents {
			maxEvents, maxRun = l, r
		}
		ids = append(ids, r.id)
	}
	sort.Strings(ids)
	res["max_events_per_run"] = float64(maxEvents)
	res["rollout_runs"] = float64(len(runs))
	lg.logf("%d workflow runs under %q; longest history %d events (%s)", len(runs), rolloutPrefix, maxEvents, maxRun)
	if len(ids) <= 20 {
		lg.logf("runs: %s", strings.Join(ids, ", "))
	}

	var mine []runKey
	for _, r := range runs {
		if rolloutID != "" && strings.HasPrefix(r.id, rolloutID) {
			mine = append(mine, r)
		}
	}
	if len(mine) < len(runs) {
		lg.logf("%d of the runs belong to other rollouts than %s", len(runs)-len(mine), rolloutID)
	}
	hist, err := readHistories(ctx, c, mine)
	require.NoError(b, err)
	var rolloutStart, rolloutEnd time.Time
	for _, r := range hist.runs {
		if r.key.id == rolloutID && (rolloutStart.IsZero() || r.started.Before(rolloutStart)) {
			rolloutStart = r.started
		}
		if r.key.id == rolloutID && r.closed.After(rolloutEnd) {
			rolloutEnd = r.closed
		}
	}
	var per []float64
	missing := 0
	for _, name := range names {
		t, ok := hist.ready[name]
		if !ok || rolloutStart.IsZero() {
			missing++
			continue
		}
		per = append(per, ms(t.Sub(rolloutStart)))
	}
	res["p50_cluster_ms"] = pct(per, 0.5)
	res["p95_cluster_ms"] = pct(per, 0.95)
	res["max_cluster_ms"] = pct(per, 1)
	if !rolloutEnd.IsZero() {
		res["rollout_workflow_s"] = rolloutEnd.Sub(rolloutStart).Seconds()
	}
	lg.logf("rollout %s ran %s; per-cluster Ready after p50 %.0f ms, p95 %.0f ms, max %.0f ms (%d clusters without a Ready result)",
		rolloutID, rolloutEnd.Sub(rolloutStart).Round(time.Millisecond), res["p50_cluster_ms"], res["p95_cluster_ms"], res["max_cluster_ms"], missing)

	// Where the rollout's time went, by activity type and workflow task.
	types := make([]string, 0, len(hist.activities))
	for t := range hist.activities {
		types = append(types, t)
	}
	sort.Strings(types)
	for _, t := range types {
		a := hist.activities[t]
		lg.logf("activity %-14s ×%-5d failed %d; queued p50 %.0f / max %.0f ms; ran p50 %.0f / p95 %.0f / max %.0f ms, %.1f s in all; first scheduled +%s, last closed +%s",
			t, a.count, a.failed, pct(a.queue, 0.5), pct(a.queue, 1), pct(a.run, 0.5), pct(a.run, 0.95), pct(a.run, 1), sum(a.run)/1000,
			a.firstSch.Sub(rolloutStart).Round(time.Millisecond), a.lastClose.Sub(rolloutStart).Round(time.Millisecond))
		key := strings.ToLower(t)
		res["activity_"+key+"_p50_ms"] = pct(a.run, 0.5)
		res["activity_"+key+"_queue_max_ms"] = pct(a.queue, 1)
	}
	var wfTasks int
	var wfTaskMs, wfQueueMs float64
	for _, r := range hist.runs {
		wfTasks += r.wfTasks
		wfTaskMs += r.wfTaskMs
		wfQueueMs += r.wfQueueMs
	}
	lg.logf("%d workflow tasks in the rollout's runs: %.1f s running, %.1f s queued in all", wfTasks, wfTaskMs/1000, wfQueueMs/1000)
	res["workflow_tasks"] = float64(wfTasks)
	for k, v := range res {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			res[k] = -1
		}
	}
	if js, err := json.Marshal(res); err == nil {
		lg.logf("%s", js)
	}
}
