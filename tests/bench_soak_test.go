package tests

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/flotilla-gitops/flotilla/internal/status"
)

// BenchmarkSoak's defaults; FLOTILLA_SOAK_DURATION (a Go duration) and
// FLOTILLA_SOAK_HISTORY_BUDGET (events) override them.
const (
	soakDuration = 10 * time.Minute
	soakBudget   = 300
	// soakReadyTimeout (seconds) ends each rollout's ready wait well
	// within the run, so the GitRepo also spends time idle with
	// deployments that never become Ready.
	soakReadyTimeout = 60
	soakProgress     = 30 * time.Second
)

// BenchmarkSoak runs one GitRepo for FLOTILLA_SOAK_DURATION (10 min): one
// bundle of a Deployment that never becomes available and a ConfigMap on 3
// clusters, polled every 2 s, one commit at half time, and a history budget
// (FLOTILLA_SOAK_HISTORY_BUDGET, 300) so low that the GitRepo's runs must
// continue as new, also while a rollout runs. Output: bench/out/soak.json:
//   - rollouts_started: RolloutWorkflow runs of the GitRepo (goal 2: one
//     per commit);
//   - rollouts_superseded_without_change: rollout runs beyond one per
//     distinct commit and spec generation (the rollout ID), i.e. started
//     while nothing changed (must be 0);
//   - max_events_per_run: the longest history of any run of the GitRepo
//     workflow, its rollouts and their children (must be ≤ 10,000);
//   - gitrepo_runs: the GitRepo workflow's runs (> 1: it continued as new);
//   - helm_revisions_max: the most Helm revisions of the release on any
//     cluster (goal 2);
//   - worker_cpu_s_per_hour: the worker process's CPU seconds (embedded
//     Temporal server included) from the apply to the end, per hour;
//   - events_per_hour: all events of those runs, per hour.
func BenchmarkSoak(b *testing.B) {
	duration := envDuration(b, "FLOTILLA_SOAK_DURATION", soakDuration)
	budget := soakBudget
	if v := os.Getenv("FLOTILLA_SOAK_HISTORY_BUDGET"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(b, err, "FLOTILLA_SOAK_HISTORY_BUDGET")
		budget = n
	}
	// The CLI passes it to the GitRepo workflow it starts.
	b.Setenv("FLOTILLA_HISTORY_BUDGET", strconv.Itoa(budget))

	const name, ns, release = "soak", "soak-ns", "soak"
	clusters := []string{"cluster-1", "cluster-2", "cluster-3"}
	f := startFleet(b, 3, 3)
	c := f.w.client(b)
	pid := f.w.proc.PID()
	files := func(value string) map[string]string {
		return map[string]string{
			"fleet.yaml":  neverReadyFleetYAML(ns, soakReadyTimeout),
			"deploy.yaml": deploymentDoc("soak-web", false),
			"cm.yaml":     configMapDoc("soak-config", value),
		}
	}
	repo := f.git.CreateRepo(b, name, files("v1"))
	// A registration notified late would supersede the first rollout.
	waitClustersNotified(b, c, clusters...)
	lg := newBenchLog(b, "soak")
	lg.logf("duration %s, history budget %d, ready timeout %ds, polling every 2s", duration, budget, soakReadyTimeout)
	b.ResetTimer()

	cpu0, _, _, err := procCPU(pid)
	require.NoError(b, err)
	start := time.Now()
	f.apply(b, gitRepoDoc(name, repo.URL(), allClusters+"  pollingInterval: 2s\n"))
	commitAt, end := start.Add(duration/2), start.Add(duration)
	committed := false
	nextLog := start
	for time.Now().Before(end) {
		if !committed && !time.Now().Before(commitAt) {
			commit := repo.Commit(b, files("v2"), "v2")
			committed = true
			lg.logf("%s: committed %s", time.Since(start).Round(time.Second), commit[:12])
		}
		if !time.Now().Before(nextLog) {
			nextLog = nextLog.Add(soakProgress)
			soakLogProgress(b, lg, f, c, name, start)
		}
		wake := minTime(end, nextLog)
		if !committed {
			wake = minTime(wake, commitAt)
		}
		time.Sleep(time.Until(wake))
	}
	cpu1, _, _, err := procCPU(pid)
	require.NoError(b, err)
	elapsed := time.Since(start)
	b.StopTimer()
	soakLogProgress(b, lg, f, c, name, start)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// Visibility learns of starts and closes asynchronously.
	time.Sleep(2 * time.Second)
	rollouts, err := rolloutExecutions(ctx, c, "fleet-default", name)
	require.NoError(b, err)
	distinct := map[string]bool{}
	for _, r := range rollouts {
		distinct[r.id] = true
	}
	gitRepo, err := gitRepoRuns(ctx, c, "fleet-default", name)
	require.NoError(b, err)
	tree, err := rolloutTreeRuns(ctx, c, "fleet-default", name)
	require.NoError(b, err)
	var total, maxEvents, maxGitRepo, maxRollout int64
	maxRun := ""
	for i, r := range append(append([]runRef{}, gitRepo...), tree...) {
		d, err := c.DescribeWorkflowExecution(ctx, r.id, r.runID)
		require.NoError(b, err, r.id)
		n := d.GetWorkflowExecutionInfo().GetHistoryLength()
		total += n
		if n > maxEvents {
			maxEvents, maxRun = n, runIDs([]runRef{r})[0]
		}
		if i < len(gitRepo) {
			maxGitRepo = max(maxGitRepo, n)
		} else {
			maxRollout = max(maxRollout, n)
		}
	}
	revisions := 0
	var perCluster []string
	for _, cl := range clusters {
		n := f.releaseRevisions(b, cl, ns, release)
		perCluster = append(perCluster, fmt.Sprintf("%s %d", cl, n))
		revisions = max(revisions, n)
	}
	lg.logf("Helm revisions of %s: %s", release, strings.Join(perCluster, ", "))
	deployed := 0
	for _, n := range f.countDeployed(b, name, "") {
		deployed += n
	}
	perHour := func(v float64) float64 { return v * float64(time.Hour) / float64(elapsed) }
	lg.logf("rollout runs: %v", runIDs(rollouts))
	lg.logf("%d GitRepo runs (longest %d events), %d rollout runs and children (longest %d events); longest run %s",
		len(gitRepo), maxGitRepo, len(tree), maxRollout, maxRun)
	res := map[string]float64{
		"duration_s":                         elapsed.Seconds(),
		"clusters":                           float64(len(clusters)),
		"polling_interval_s":                 2,
		"history_budget":                     float64(budget),
		"rollouts_started":                   float64(len(rollouts)),
		"rollouts_superseded_without_change": float64(len(rollouts) - len(distinct)),
		"max_events_per_run":                 float64(maxEvents),
		"gitrepo_max_events_per_run":         float64(maxGitRepo),
		"rollout_max_events_per_run":         float64(maxRollout),
		"gitrepo_runs":                       float64(len(gitRepo)),
		"rollout_tree_runs":                  float64(len(tree)),
		"helm_revisions_max":                 float64(revisions),
		"deployed_lines":                     float64(deployed),
		"worker_cpu_s":                       cpu1 - cpu0,
		"worker_cpu_s_per_hour":              perHour(cpu1 - cpu0),
		"events_total":                       float64(total),
		"events_per_hour":                    perHour(float64(total)),
	}
	writeBenchResult(b, "soak", res)
	if res["rollouts_superseded_without_change"] > 0 {
		b.Errorf("%d rollout runs started without a change of commit or spec: %v", len(rollouts)-len(distinct), runIDs(rollouts))
	}
	if maxEvents > 10000 {
		b.Errorf("the longest history holds %d events (%s): more than 10,000", maxEvents, maxRun)
	}
}

// soakLogProgress logs the GitRepo's state and the runs so far.
func soakLogProgress(b *testing.B, lg *benchLog, f *fleet, c client.Client, name string, start time.Time) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	line := fmt.Sprintf("%s:", time.Since(start).Round(time.Second))
	if st, err := f.statusErr(b, name); err != nil {
		line += fmt.Sprintf(" status: %v;", err)
	} else {
		line += fmt.Sprintf(" commit %.12s (latest %.12s) %s %s, rollout %q, last %q;", st.Commit, st.LatestCommit,
			st.Summary.State, status.CountStates(st.Deployments), st.Rollout, st.LastRollout)
	}
	if runs, err := gitRepoRuns(ctx, c, "fleet-default", name); err == nil {
		line += fmt.Sprintf(" %d GitRepo runs;", len(runs))
	}
	if runs, err := rolloutExecutions(ctx, c, "fleet-default", name); err == nil {
		line += fmt.Sprintf(" %d rollout runs;", len(runs))
	}
	if cpu, _, _, err := procCPU(f.w.proc.PID()); err == nil {
		line += fmt.Sprintf(" worker CPU %.1fs", cpu)
	}
	lg.logf("%s", line)
}

func minTime(ts ...time.Time) time.Time {
	m := ts[0]
	for _, t := range ts[1:] {
		if t.Before(m) {
			m = t
		}
	}
	return m
}
