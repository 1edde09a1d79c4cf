package tests

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/flotilla-gitops/flotilla/internal/cluster"
	"github.com/flotilla-gitops/flotilla/internal/plan"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
)

// planBenchBundles are the bundles of BenchmarkPlan's GitRepo.
const planBenchBundles = 10

// planBenchFiles is planBenchBundles raw bundles of one ConfigMap each at
// version.
func planBenchFiles(version string) map[string]string {
	files := map[string]string{}
	for i := range planBenchBundles {
		dir := fmt.Sprintf("b%02d", i)
		files[dir+"/fleet.yaml"] = "namespace: bench-plan-" + dir + "\n"
		files[dir+"/cm.yaml"] = configMapDoc("bench-"+dir, version)
	}
	return files
}

// BenchmarkPlan measures `flotilla plan`'s workflow: plan_ms is the
// median of 5 plans of a GitRepo of 10 bundles (one changed ConfigMap
// each) on 3 clusters, from start to result; plan_ms_per_cluster is one
// plan of the same change on 100 clusters (97 virtual ones registered
// with the 3 API servers' kubeconfigs) divided by 100. Output:
// bench/out/plan.json. Goal: plan_ms ≤ 2000.
func BenchmarkPlan(b *testing.B) {
	f := startFleet(b, 3, 3)
	repo := f.git.CreateRepo(b, "bench-plan", planBenchFiles("v1"))
	f.apply(b, gitRepoDoc("bench-plan", repo.URL(), allClusters))
	f.waitFor(b, "bench-plan", "v1 on 3 clusters", settledAt(repo.Head(b), 3*planBenchBundles))
	f.cli(b, "pause", "bench-plan")
	repo.Commit(b, planBenchFiles("v2"), "v2")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c := f.w.client(b)
	var runs []float64
	for i := range 5 {
		ms, res := timePlan(ctx, b, c, i)
		require.Len(b, res.Clusters, 3)
		require.Equal(b, plan.Counts{Upgrade: 3 * planBenchBundles}, res.Counts(), res.Summary())
		runs = append(runs, ms)
	}
	slices.Sort(runs)
	median := runs[len(runs)/2]

	const total = 100
	key, err := cluster.CurrentKey(ctx, c)
	require.NoError(b, err)
	err = parallel(3, total, 8, func(i int) error {
		name := virtualClusterName(i)
		if err := registerClusterDirect(ctx, c, key, name, f.clusters[i%3].KubeconfigPath, map[string]string{"env": "virtual"}); err != nil {
			return err
		}
		return waitNotified(ctx, c, name)
	})
	require.NoError(b, err)
	ms, res := timePlan(ctx, b, c, 100)
	require.Len(b, res.Clusters, total)
	require.Zero(b, res.Counts().Errors, res.Summary())
	b.Logf("plan of %d bundles: 3 clusters %.0f ms (runs %v), %d clusters %.0f ms", planBenchBundles, median, runs, total, ms)
	writeBenchResult(b, "plan", map[string]float64{
		"plan_ms":             median,
		"plan_ms_per_cluster": ms / total,
		"plan_ms_100":         ms,
		"bundles":             planBenchBundles,
	})
}

// timePlan runs one PlanWorkflow of bench-plan and returns its duration
// in milliseconds and its result.
func timePlan(ctx context.Context, b *testing.B, c client.Client, i int) (float64, plan.Result) {
	b.Helper()
	start := time.Now()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: fmt.Sprintf("plan/fleet-default/bench-plan/%d", i),
		TaskQueue: protocol.DefaultTaskQueue}, plan.WorkflowName, plan.Request{Namespace: "fleet-default", Name: "bench-plan"})
	require.NoError(b, err)
	var res plan.Result
	require.NoError(b, run.Get(ctx, &res))
	return float64(time.Since(start).Microseconds()) / 1000, res
}
