package tests

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes"

	"github.com/flotilla-gitops/flotilla/internal/gitsource"
)

// BenchmarkWebhook (`make bench BENCH=webhook`) measures a Git push
// delivered by webhook on 3 clusters: a GitRepo with polling disabled and
// a one-ConfigMap bundle gets 15 commits, each announced by a signed
// GitHub push; it times the receiver's reply and the time from the POST
// to the new ConfigMap value on all 3 apiservers (polled every 10 ms). It
// also times one ls-remote of the repository, the cost of a poll the
// webhook saves. It writes bench/out/webhook.json.
func BenchmarkWebhook(b *testing.B) {
	const (
		nClusters  = 3
		iterations = 15
		lsRemotes  = 20
		name       = "bench-hook"
		ns         = "bench-hook-ns"
		cm         = "bench-hook-config"
	)
	f := startWebhookFleet(b, nClusters,
		"--webhook-secrets", writeWebhookSecrets(b, map[string]string{"github": globalGitHubSecret}))
	h := newHookClient(b, f)
	repo := f.git.CreateRepo(b, "bench-app", map[string]string{"fleet.yaml": fleetYAML(ns), "cm.yaml": configMapDoc(cm, "v0")})
	f.apply(b, gitRepoDoc(name, repo.URL(), "  disablePolling: true\n"+allClusters))
	prev := repo.Head(b)
	f.waitFor(b, name, "first commit Ready", settledAt(prev, nClusters))
	cs := make([]kubernetes.Interface, nClusters)
	for i, c := range f.clusters {
		cs[i] = c.Clientset(b)
	}

	b.ResetTimer()
	var ack, deployed []float64
	for i := 1; i <= iterations; i++ {
		value := fmt.Sprintf("v%d", i)
		commit := repo.Commit(b, map[string]string{"cm.yaml": configMapDoc(cm, value)}, value)
		body := githubPush(repo, "refs/heads/master", prev, commit)
		hdr := githubHeaders(newDeliveryID(), signGitHub(globalGitHubSecret, body))
		posted := time.Now()
		resp := h.post(b, "/", hdr, body)
		require.Equal(b, http.StatusAccepted, resp.status, "body: %s", resp.body)
		require.Len(b, resp.decode(b).Signalled, 1, "body: %s", resp.body)
		took := waitHookConfigMapsOn(b, cs, ns, cm, value, posted, time.Minute)
		ack = append(ack, ms(resp.took))
		deployed = append(deployed, ms(took))
		// The next push starts from a settled GitRepo.
		b.StopTimer()
		f.waitFor(b, name, "commit "+value+" Ready", settledAt(commit, nClusters))
		b.StartTimer()
		prev = commit
	}

	var polls []float64
	for range lsRemotes {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		start := time.Now()
		ref, err := gitsource.Resolve(ctx, gitsource.Remote{URL: repo.URL()}, "master", "")
		polls = append(polls, ms(time.Since(start)))
		cancel()
		require.NoError(b, err)
		require.Equal(b, prev, ref.Commit)
	}
	b.StopTimer()
	b.Logf("per push: ack ms %v; POST → deployed ms %v", rounded(ack), rounded(deployed))

	fields := map[string]float64{
		"webhook_ack_p50_ms":         percentile(ack, 0.5),
		"webhook_to_deployed_p50_ms": percentile(deployed, 0.5),
		"webhook_to_deployed_p95_ms": percentile(deployed, 0.95),
		"poll_cost_ms":               percentile(polls, 0.5),
		"iterations":                 iterations,
		"clusters":                   nClusters,
	}
	b.Logf("webhook: ack p50 %.1f ms; POST → deployed on %d clusters p50 %.1f ms, p95 %.1f ms (goal p50 ≤ 1000 ms: %v); ls-remote p50 %.1f ms",
		fields["webhook_ack_p50_ms"], nClusters, fields["webhook_to_deployed_p50_ms"], fields["webhook_to_deployed_p95_ms"],
		fields["webhook_to_deployed_p50_ms"] <= 1000, fields["poll_cost_ms"])
	writeBenchResult(b, "webhook", fields)
}

// rounded rounds each value to whole units, for logs.
func rounded(v []float64) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(int64(x + 0.5))
	}
	return out
}
