package deployer_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"

	"github.com/flotilla-gitops/flotilla/internal/deployer"
)

// helperEnv holds, for TestHelperProcess, the API server to use as JSON.
const helperEnv = "FLOTILLA_DEPLOYER_HELPER"

// helperConfig is what TestTwoProcesses passes to its second process.
type helperConfig struct {
	Host, Token string
	CA          []byte
	Namespace   string
	// Tag names the process's deployment IDs; Rounds is how many deploys
	// and corrections it makes.
	Tag    string
	Rounds int
}

// tally counts the outcomes of one process's calls.
type tally struct {
	OK, Busy, NotCurrent int
	Other                []string
}

// churn deploys release "app" in cfg.Namespace Rounds times at
// alternating deployment IDs of its own, correcting it after each deploy,
// and counts what happened (each busy attempt of a deploy it retries). Busy and NotCurrent are the expected answers
// while the other process changes the release.
func churn(ctx context.Context, d *deployer.Deployer, getter *deployer.RESTClientGetter, cfg helperConfig) tally {
	var out tally
	count := func(err error) {
		switch {
		case err == nil:
			out.OK++
		case errors.Is(err, deployer.ErrReleaseBusy):
			out.Busy++
		case errors.Is(err, deployer.ErrNotCurrent):
			out.NotCurrent++
		default:
			out.Other = append(out.Other, err.Error())
		}
	}
	for i := range cfg.Rounds {
		id := fmt.Sprintf("%s-%d", cfg.Tag, i%2)
		rel := testRelease(cfg.Namespace, "app", id, id)
		rel.Owner = "GitRepo ns/churn, bundle app"
		// A busy deploy is tried again shortly, as the rollout does.
		_, err := d.Deploy(ctx, getter, rel)
		for try := 0; errors.Is(err, deployer.ErrReleaseBusy) && try < 50; try++ {
			count(err)
			time.Sleep(50 * time.Millisecond)
			_, err = d.Deploy(ctx, getter, rel)
		}
		count(err)
		_, err = d.Correct(ctx, getter, cfg.Namespace, "app", id, deployer.CorrectOptions{Owner: rel.Owner})
		count(err)
	}
	return out
}

// TestHelperProcess is TestTwoProcesses's second process; it does nothing
// in a normal test run.
func TestHelperProcess(t *testing.T) {
	raw := os.Getenv(helperEnv)
	if raw == "" {
		t.Skip("only run by TestTwoProcesses")
	}
	var cfg helperConfig
	require.NoError(t, json.Unmarshal([]byte(raw), &cfg))
	getter, err := deployer.NewRESTClientGetter(&rest.Config{Host: cfg.Host, BearerToken: cfg.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: cfg.CA}}, metav1.NamespaceDefault)
	require.NoError(t, err)
	out := churn(t.Context(), deployer.New(deployer.Options{Timeout: time.Minute}), getter, cfg)
	b, err := json.Marshal(out)
	require.NoError(t, err)
	fmt.Println("TALLY " + base64.StdEncoding.EncodeToString(b))
}

// TestTwoProcesses: two processes deploy and correct one release at the
// same time. Neither ever deletes a pending record of the other, or marks
// it failed: a call that finds the other at work fails with
// ErrReleaseBusy (or ErrNotCurrent, for a correction of an ID the other
// replaced) and changes nothing.
func TestTwoProcesses(t *testing.T) {
	f := newFixture(t)
	ctx := testContext(t)
	const ns, rounds = "two-processes", 12
	mustDeploy(ctx, t, newDeployer(t), f, ns, "seed", "seed")
	violations := watchPendingRecords(ctx, t, f, ns)

	raw, err := json.Marshal(helperConfig{Host: f.config.Host, Token: f.config.BearerToken, CA: f.config.CAData,
		Namespace: ns, Tag: "child", Rounds: rounds})
	require.NoError(t, err)
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"="+string(raw))
	var childOut []byte
	var childErr error
	var wg sync.WaitGroup
	wg.Go(func() { childOut, childErr = cmd.CombinedOutput() })
	start := time.Now()
	parent := churn(ctx, newDeployer(t), f.getter, helperConfig{Namespace: ns, Tag: "parent", Rounds: rounds})
	wg.Wait()
	took := time.Since(start)
	require.NoError(t, childErr, "second process:\n%s", childOut)
	child := parseTally(t, childOut)

	t.Logf("%d rounds each in %s: parent %+v, child %+v", rounds, took.Round(time.Millisecond), parent, child)
	assert.Empty(t, parent.Other, "parent: unexpected errors")
	assert.Empty(t, child.Other, "child: unexpected errors")
	assert.Positive(t, parent.OK, "parent deployed")
	assert.Positive(t, child.OK, "child deployed: the parent's leases were released")
	assert.Positive(t, parent.Busy+child.Busy, "the processes overlapped")
	assert.Empty(t, violations(), "pending records deleted or failed by the other process")
	// Once both are done, the release is settled and deploys again.
	_, err = newDeployer(t).Deploy(ctx, f.getter, testRelease(ns, "app", "final", "final"))
	require.NoError(t, err)
	f.assertCurrent(t, newDeployer(t), ns, "app", "final", f.history(t, ns, "app")[len(f.history(t, ns, "app"))-1].Version)
}

// parseTally reads the helper process's TALLY line.
func parseTally(t *testing.T, out []byte) tally {
	t.Helper()
	for line := range strings.Lines(string(out)) {
		if enc, ok := strings.CutPrefix(strings.TrimSpace(line), "TALLY "); ok {
			b, err := base64.StdEncoding.DecodeString(enc)
			require.NoError(t, err)
			var tl tally
			require.NoError(t, json.Unmarshal(b, &tl))
			return tl
		}
	}
	require.Failf(t, "no tally", "second process:\n%s", out)
	return tally{}
}

// watchPendingRecords watches release "app"'s records in ns and returns
// a function listing every pending record that was deleted, or changed
// from pending to failed (what a recovery does), so far. Neither happens
// while no process dies.
func watchPendingRecords(ctx context.Context, t *testing.T, f *fixture, ns string) func() []string {
	t.Helper()
	w, err := f.cs.CoreV1().Secrets(ns).Watch(ctx, metav1.ListOptions{LabelSelector: "owner=helm,name=app"})
	require.NoError(t, err)
	t.Cleanup(w.Stop)
	var mu sync.Mutex
	var bad []string
	seen := map[string]string{}
	go func() {
		for ev := range w.ResultChan() {
			s, ok := ev.Object.(*corev1.Secret)
			if !ok {
				continue
			}
			status, before := s.Labels["status"], seen[s.Name]
			mu.Lock()
			switch {
			case ev.Type == watch.Deleted && strings.HasPrefix(status, "pending"):
				bad = append(bad, "deleted "+s.Name+" while "+status)
			case ev.Type == watch.Modified && strings.HasPrefix(before, "pending") && status == "failed":
				bad = append(bad, "marked "+s.Name+" failed while "+before)
			}
			seen[s.Name] = status
			mu.Unlock()
		}
	}()
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), bad...)
	}
}
