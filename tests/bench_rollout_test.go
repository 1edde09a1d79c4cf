package tests

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"helm.sh/helm/v3/pkg/chartutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/bundle"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/status"
	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

// helmVersion is the helm.sh/helm/v3 version in go.mod; the benchmark's
// floor is the helm CLI built from it.
const helmVersion = "v3.22.0"

// BenchmarkRollout measures the rollout loop on 3 real clusters with a
// small raw bundle (one ConfigMap): deploy (sync signal after a commit →
// all 3 deployed and Ready), cleanup (target edit → the untargeted
// cluster's release gone), no-op (sync with nothing changed → settled),
// and the floor: `helm upgrade --install` of the same chart with the helm
// CLI. Output: bench/out/rollout.json.
func BenchmarkRollout(b *testing.B) {
	const iterations = 12
	ctx := context.Background()
	f := startFleet(b, 3, 3)
	clusters := f.clusters
	repo := f.git.CreateRepo(b, "bench", map[string]string{"cm.yaml": benchConfigMap(0)})
	gr := api.GitRepo{TypeMeta: api.TypeMeta{APIVersion: api.Version, Kind: api.KindGitRepo},
		Metadata: api.ObjectMeta{Name: "bench", Namespace: api.DefaultNamespace},
		Spec: api.GitRepoSpec{Repo: repo.URL(), DisablePolling: true,
			Targets: []api.TargetSelector{{ClusterSelector: &metav1.LabelSelector{}}}}}
	doc, err := yaml.Marshal(gr)
	require.NoError(b, err)
	f.apply(b, string(doc))
	c := f.w.client(b)
	waitBench(ctx, b, c, func(st status.GitRepo) bool { return st.Summary.Ready == 3 })

	var deploy, cleanup, noop []float64
	for i := 1; i <= iterations; i++ {
		commit := repo.Commit(b, map[string]string{"cm.yaml": benchConfigMap(i)}, fmt.Sprintf("change %d", i))
		start := time.Now()
		require.NoError(b, c.SignalWorkflow(ctx, protocol.GitRepoID(api.DefaultNamespace, "bench"), "", protocol.SignalSync, nil))
		waitBench(ctx, b, c, func(st status.GitRepo) bool { return st.Commit == commit && st.Summary.Ready == 3 })
		deploy = append(deploy, ms(time.Since(start)))
	}
	for range iterations {
		before := queryBench(ctx, b, c).Syncs
		start := time.Now()
		require.NoError(b, c.SignalWorkflow(ctx, protocol.GitRepoID(api.DefaultNamespace, "bench"), "", protocol.SignalSync, nil))
		waitBench(ctx, b, c, func(st status.GitRepo) bool { return st.Syncs > before && st.Summary.Ready == 3 })
		noop = append(noop, ms(time.Since(start)))
	}
	third := clusters[2].Clientset(b)
	releaseSecrets := func() int {
		l, err := third.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{LabelSelector: "owner=helm,name=bench"})
		require.NoError(b, err)
		return len(l.Items)
	}
	for range iterations {
		narrowed := gr
		narrowed.Spec.Targets = []api.TargetSelector{{ClusterName: clusters[0].Name}, {ClusterName: clusters[1].Name}}
		start := time.Now()
		applyBench(ctx, b, c, narrowed)
		for releaseSecrets() > 0 {
			time.Sleep(5 * time.Millisecond)
		}
		cleanup = append(cleanup, ms(time.Since(start)))
		waitBench(ctx, b, c, func(st status.GitRepo) bool { return st.Summary.Desired == 2 })
		applyBench(ctx, b, c, gr)
		waitBench(ctx, b, c, func(st status.GitRepo) bool { return st.Summary.Ready == 3 })
	}

	helmCLI := helmFloor(b, clusters[0], iterations)
	writeBenchResult(b, "rollout", map[string]float64{
		"clusters":        3,
		"iterations":      iterations,
		"deploy_p50_ms":   percentile(deploy, 0.5),
		"deploy_p95_ms":   percentile(deploy, 0.95),
		"cleanup_p50_ms":  percentile(cleanup, 0.5),
		"cleanup_p95_ms":  percentile(cleanup, 0.95),
		"noop_p50_ms":     percentile(noop, 0.5),
		"helm_cli_p50_ms": percentile(helmCLI, 0.5),
	})
}

func benchConfigMap(i int) string {
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bench\ndata:\n  iteration: %q\n", fmt.Sprint(i))
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func queryBench(ctx context.Context, b *testing.B, c client.Client) status.GitRepo {
	v, err := c.QueryWorkflow(ctx, protocol.GitRepoID(api.DefaultNamespace, "bench"), "", protocol.QueryStatus)
	require.NoError(b, err)
	var st status.GitRepo
	require.NoError(b, v.Get(&st))
	return st
}

// waitBench polls the GitRepo's status until it is settled and ok holds.
func waitBench(ctx context.Context, b *testing.B, c client.Client, ok func(status.GitRepo) bool) {
	deadline := time.Now().Add(time.Minute)
	for {
		st := queryBench(ctx, b, c)
		if st.Settled && ok(st) {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("GitRepo did not settle: %+v", st)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func applyBench(ctx context.Context, b *testing.B, c client.Client, gr api.GitRepo) {
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: protocol.GitRepoID(gr.Metadata.Namespace, gr.Metadata.Name),
		UpdateName: protocol.UpdateApply, Args: []any{protocol.GitRepoApply{GitRepo: gr}}, WaitForStage: client.WorkflowUpdateStageCompleted})
	require.NoError(b, err)
	require.NoError(b, h.Get(ctx, nil))
}

// helmFloor times `helm upgrade --install` of the chart Flotilla generates
// for the same bundle, with the helm CLI built from our Helm version.
func helmFloor(b *testing.B, cluster *testenv.Cluster, iterations int) []float64 {
	helm := helmBinary(b)
	m := bundle.Manifest{Resources: []bundle.Resource{{Name: "cm.yaml", Content: benchConfigMap(0)}}}
	chrt, err := bundle.Chart(bundle.Bundle{Name: "bench-cli", ManifestID: m.ID()}, m)
	require.NoError(b, err)
	dir := b.TempDir()
	require.NoError(b, chartutil.SaveDir(chrt, dir))
	chartDir := filepath.Join(dir, chrt.Name())
	var out []float64
	for i := range iterations {
		start := time.Now()
		cmd := exec.Command(helm, "upgrade", "--install", "bench-cli", chartDir, "--namespace", "helm-floor", "--create-namespace",
			"--kubeconfig", cluster.KubeconfigPath, "--set", fmt.Sprintf("iteration=%d", i))
		cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+dir, "HELM_CONFIG_HOME="+dir, "HELM_DATA_HOME="+dir)
		res, err := cmd.CombinedOutput()
		require.NoError(b, err, string(res))
		out = append(out, ms(time.Since(start)))
	}
	return out
}

// helmBinary builds (once per machine, cached) the helm CLI at helmVersion.
func helmBinary(b *testing.B) string {
	cache, err := os.UserCacheDir()
	require.NoError(b, err)
	dir := filepath.Join(cache, "flotilla", "helm-"+helmVersion)
	bin := filepath.Join(dir, "helm")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	cmd := exec.Command("go", "install", "helm.sh/helm/v3/cmd/helm@"+helmVersion)
	cmd.Env = append(os.Environ(), "GOBIN="+dir, "GOFLAGS=-mod=mod")
	out, err := cmd.CombinedOutput()
	require.NoError(b, err, string(out))
	return bin
}
