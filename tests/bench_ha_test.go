package tests

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

// BenchmarkHA runs the HA scenario of TestHA (two controller replicas on
// Temporal with PostgreSQL, a replica killed during 8 of 10 rollouts, the
// Temporal server restarted during another) and compares the deploy
// latency of quiet rollouts to a push-mode cluster on PostgreSQL with the
// same on the embedded SQLite server. Output: bench/out/ha.json.
func BenchmarkHA(b *testing.B) {
	f := startHAFleet(b)
	f.register(b)
	const rounds = 5
	pg := quietRollouts(b, f.git, "latency-pg", rounds, f.cli, func(name, commit string) bool {
		return f.waitGitRepoErr(name, 2*time.Minute, settledAt(commit, 1))
	}, func(name string) { f.sync(b, name) })

	seed := uint64(time.Now().UnixNano())
	rep := runHA(b, f, seed)

	// The same quiet rollouts on the embedded SQLite server, to the same
	// API server.
	dev := &fleet{t: b, stateDir: b.TempDir(), clusters: []*testenv.Cluster{f.cluster("cluster-1")}, git: f.git}
	dev.w = startDevWorker(b, dev.stateDir)
	dev.cli(b, "cluster", "add", "cluster-1", "--kubeconfig", f.cluster("cluster-1").KubeconfigPath, "--label", "mode=push")
	dev.apply(b, "apiVersion: v1\nkind: Secret\nmetadata:\n  name: git-creds\ntype: kubernetes.io/basic-auth\n"+
		"stringData:\n  username: bot\n  password: "+haPassword+"\n")
	sqlite := quietRollouts(b, f.git, "latency-sqlite", rounds, dev.cli, func(name, commit string) bool {
		dev.waitForWithin(b, name, "commit "+commit, 2*time.Minute, settledAt(commit, 1))
		return true
	}, func(name string) { dev.cli(b, "sync", name) })

	b.Logf("ha: %d rollouts (%d lost), %d kills, failover %v ms, deploy p50 %.0f ms on PostgreSQL, %.0f ms on SQLite",
		rep.Rollouts, rep.Lost, rep.Kills, rep.FailoverMs, percentile(pg, 0.5), percentile(sqlite, 0.5))
	fields := map[string]float64{
		"replicas":                     2,
		"kills":                        float64(rep.Kills),
		"rollouts":                     float64(rep.Rollouts + rep.Lost),
		"rollouts_lost":                float64(rep.Lost),
		"duplicate_deploy_logs":        float64(rep.Duplicates),
		"extra_helm_revisions":         float64(rep.ExtraRevisions),
		"plaintext_secrets_in_history": float64(len(rep.Plaintext)),
		"histories_audited":            float64(rep.Histories),
		"deploy_p50_ms_postgres":       percentile(pg, 0.5),
		"deploy_p50_ms_sqlite":         percentile(sqlite, 0.5),
		"seed":                         float64(seed % 1e9),
	}
	if len(rep.FailoverMs) > 0 {
		fields["failover_p50_ms"] = percentile(rep.FailoverMs, 0.5)
		fields["failover_max_ms"] = percentile(rep.FailoverMs, 1)
	}
	writeBenchResult(b, "ha", fields)
}

// quietRollouts rolls n commits of a private repo out to the push-mode
// cluster (mode=push) and returns each one's time from sync to settled.
func quietRollouts(tb testing.TB, git *testenv.GitServer, name string, n int, cli func(testing.TB, ...string) string,
	settled func(name, commit string) bool, sync func(name string)) []float64 {
	tb.Helper()
	ns := name + "-ns"
	repo := git.CreateRepo(tb, name, map[string]string{"fleet.yaml": fleetYAML(ns), "cm.yaml": configMapDoc(name, "v0")})
	cli(tb, "apply", "-f", writeTemp(tb, name+".yaml", gitRepoDoc(name, repo.URL(), selectorTarget("mode", "push")+"  clientSecretName: git-creds\n")))
	require.True(tb, settled(name, repo.Head(tb)), "%s: the first commit", name)
	var ms []float64
	for i := 1; i <= n; i++ {
		value := fmt.Sprintf("v%d", i)
		commit := repo.Commit(tb, map[string]string{"cm.yaml": configMapDoc(name, value)}, value)
		start := time.Now()
		sync(name)
		require.True(tb, settled(name, commit), "%s: commit %s", name, value)
		ms = append(ms, float64(time.Since(start).Milliseconds()))
	}
	return ms
}
