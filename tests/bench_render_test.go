package tests

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/bundle"
	"github.com/flotilla-gitops/flotilla/internal/chartfetch"
	"github.com/flotilla-gitops/flotilla/internal/deployer"
	"github.com/flotilla-gitops/flotilla/internal/render"
	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

// writeRenderRepo writes a repository of n small bundles, raw YAML, Helm
// and Kustomize in turn, each with a fleet.yaml.
func writeRenderRepo(tb testing.TB, root string, n int) {
	tb.Helper()
	write := func(rel, content string) {
		p := filepath.Join(root, rel)
		require.NoError(tb, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(tb, os.WriteFile(p, []byte(content), 0o644))
	}
	cm := func(name string) string {
		return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\ndata:\n  key: value\n", name)
	}
	for i := range n {
		dir := fmt.Sprintf("bundles/b%04d", i)
		switch i % 3 {
		case 0:
			write(dir+"/fleet.yaml", fmt.Sprintf("namespace: ns-%d\n", i))
			write(dir+"/a.yaml", cm("a"))
			write(dir+"/b.yaml", cm("b"))
		case 1:
			write(dir+"/fleet.yaml", fmt.Sprintf("namespace: ns-%d\nhelm:\n  values:\n    replicas: 2\n    name: ${ .ClusterName }\n", i))
			write(dir+"/Chart.yaml", "apiVersion: v2\nname: app\nversion: 0.1.0\n")
			write(dir+"/values.yaml", "replicas: 1\nname: x\n")
			write(dir+"/templates/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n  replicas: {{ .Values.replicas | quote }}\n  name: {{ .Values.name }}\n")
			write(dir+"/templates/svc.yaml", "apiVersion: v1\nkind: Service\nmetadata:\n  name: {{ .Release.Name }}\nspec:\n  ports:\n  - port: 80\n")
		default:
			write(dir+"/fleet.yaml", fmt.Sprintf("namespace: ns-%d\n", i))
			write(dir+"/kustomization.yaml", "resources:\n- a.yaml\n- b.yaml\nlabels:\n- pairs:\n    tier: web\n")
			write(dir+"/a.yaml", cm("a"))
			write(dir+"/b.yaml", cm("b"))
		}
	}
}

// peakRSSMiB is this process's peak resident set (VmHWM), in MiB.
func peakRSSMiB(tb testing.TB) float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer func() { _ = f.Close() }()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 64)
			require.NoError(tb, err)
			return kb / 1024
		}
	}
	return 0
}

// BenchmarkRender measures the renderer in one process: a generated
// repository of 600 small bundles (raw YAML, Helm, Kustomize) for one
// cluster, and every fleet-examples bundle (remote charts from a local
// mirror, cached after the first round). Output: bench/out/render.json.
func BenchmarkRender(b *testing.B) {
	const n = 600
	root := b.TempDir()
	writeRenderRepo(b, root, n)
	d := deployer.New(deployer.Options{})
	cluster := bundle.Cluster{Name: "bench", Namespace: "fleet-default", Groups: []bundle.Group{{Name: "default"}}}
	ctx := context.Background()
	// Warm up once (kustomize and Helm initialise lazily), then measure.
	_, err := render.Dir(ctx, render.DirOptions{Root: root, RepoName: "bench", Deployer: d, Cluster: cluster})
	require.NoError(b, err)
	const rounds = 3
	var best time.Duration
	for range rounds {
		start := time.Now()
		res, err := render.Dir(ctx, render.DirOptions{Root: root, RepoName: "bench", Deployer: d, Cluster: cluster})
		elapsed := time.Since(start)
		require.NoError(b, err)
		require.Len(b, res, n)
		for _, r := range res {
			require.True(b, r.Deployment.Deploy, r.Bundle.Name)
			require.NotEmpty(b, r.Objects, r.Bundle.Name)
		}
		if best == 0 || elapsed < best {
			best = elapsed
		}
	}

	examples := testenv.SharedDir(b, "fleet-examples")
	srvFlags := chartMirror(b)
	var values []string
	for i := 1; i < len(srvFlags); i += 2 {
		values = append(values, srvFlags[i])
	}
	mirrors, err := chartfetch.ParseMirrors(values)
	require.NoError(b, err)
	fetch := &chartfetch.Fetcher{CacheDir: b.TempDir(), Mirrors: mirrors}
	dev := bundle.Cluster{Name: "dev", Namespace: "fleet-default", Labels: map[string]string{"env": "dev"}}
	var exampleMS []float64
	bundles := 0
	for range 3 {
		start := time.Now()
		res, err := render.Dir(ctx, render.DirOptions{Root: examples, Paths: []string{"single-cluster/*", "multi-cluster/*"},
			RepoName: "examples", Reader: &bundle.Reader{Charts: fetch}, Deployer: d, Cluster: dev})
		exampleMS = append(exampleMS, float64(time.Since(start).Microseconds())/1000)
		require.NoError(b, err)
		bundles = len(res)
	}
	writeBenchResult(b, "render", map[string]float64{
		"bundles":                n,
		"bundles_per_sec":        float64(n) / best.Seconds(),
		"fleet_examples_bundles": float64(bundles),
		"fleet_examples_ms":      percentile(exampleMS[1:], 0.5),
		"fleet_examples_cold_ms": exampleMS[0],
		"peak_rss_mib":           peakRSSMiB(b),
	})
}
