package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/status"
	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

// defaultWait bounds waitFor: rollouts of ConfigMaps take seconds.
const defaultWait = 60 * time.Second

// fleet is one end-to-end installation: a dev worker (embedded Temporal),
// real kube-apiservers registered with `flotilla cluster add`, and a Git
// server. Processes belong to the test that created the fleet, so subtests
// may restart the worker without it being stopped at the subtest's end.
type fleet struct {
	t        testing.TB
	stateDir string
	w        *devWorker
	// logs are the log files of every worker started on stateDir, oldest
	// first (a kill -9 and restart adds one).
	logs []string
	// clusters are all started clusters; the first registered of them are
	// registered as cluster-1, cluster-2, ... with clusterLabels.
	clusters []*testenv.Cluster
	git      *testenv.GitServer
}

// clusterLabels are the labels cluster i (0-based) is registered with:
// the first two are env=dev, the others env=prod.
func clusterLabels(i int) string {
	if i < 2 {
		return "env=dev"
	}
	return "env=prod"
}

// startFleet starts nClusters clusters and registers the first registered
// of them; the rest are spares a test registers itself.
func startFleet(t testing.TB, nClusters, registered int) *fleet {
	t.Helper()
	return startFleetWith(t, nClusters, registered, testenv.Options{})
}

// startFleetWith is startFleet with cluster options (Sim: Deployments
// become Ready through kwok).
func startFleetWith(t testing.TB, nClusters, registered int, opts testenv.Options) *fleet {
	t.Helper()
	return startFleetArgs(t, nClusters, registered, opts)
}

// startFleetArgs is startFleetWith with extra worker flags.
func startFleetArgs(t testing.TB, nClusters, registered int, opts testenv.Options, workerArgs ...string) *fleet {
	t.Helper()
	if testing.Short() {
		t.Skip("starts kube-apiservers, a Temporal dev server and a Git server")
	}
	start := time.Now()
	f := &fleet{t: t, stateDir: t.TempDir()}
	f.clusters = testenv.StartClusters(t, nClusters, opts)
	f.git = testenv.NewGitServer(t, testenv.GitServerOptions{})
	f.w = startDevWorker(t, f.stateDir, workerArgs...)
	f.logs = append(f.logs, f.w.proc.LogPath())
	for i, c := range f.clusters[:registered] {
		out := f.cli(t, "cluster", "add", c.Name, "--kubeconfig", c.KubeconfigPath, "--label", clusterLabels(i))
		require.Contains(t, out, "cluster/"+c.Name+" created")
	}
	t.Logf("fleet of %d clusters ready in %s", nClusters, time.Since(start).Round(time.Millisecond))
	return f
}

// cluster returns the cluster registered as name.
func (f *fleet) cluster(name string) *testenv.Cluster {
	for _, c := range f.clusters {
		if c.Name == name {
			return c
		}
	}
	f.t.Fatalf("no cluster %s", name)
	return nil
}

// cliErr runs the CLI against the fleet's worker and state dir.
func (f *fleet) cliErr(t testing.TB, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	full := append([]string{"--temporal-address", f.w.frontend}, args...)
	cmd := exec.CommandContext(ctx, bins.cli, full...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// cli runs the CLI, fails the test on a non-zero exit and returns stdout.
func (f *fleet) cli(t testing.TB, args ...string) string {
	t.Helper()
	stdout, stderr, err := f.cliErr(t, args...)
	require.NoError(t, err, "flotilla %s\nstdout: %s\nstderr: %s\nworker log tail:\n%s",
		strings.Join(args, " "), stdout, stderr, f.w.proc.LogTail(30))
	return stdout
}

// apply writes doc to a file and runs `flotilla apply -f` on it.
func (f *fleet) apply(t testing.TB, doc string) string {
	t.Helper()
	return f.cli(t, "apply", "-f", writeTemp(t, "doc.yaml", doc))
}

// sync runs `flotilla sync NAME --wait`.
func (f *fleet) sync(t testing.TB, name string) {
	t.Helper()
	f.cli(t, "sync", name, "--wait", "--timeout", "3m")
}

// remove runs `flotilla delete NAME`, which waits until the GitRepo is gone.
func (f *fleet) remove(t testing.TB, name string) {
	t.Helper()
	out := f.cli(t, "delete", name, "--timeout", "3m")
	require.Contains(t, out, "gitrepo/fleet-default/"+name+" deleted")
}

func writeTemp(t testing.TB, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

// gitRepoDoc is a GitRepo document; spec holds extra spec lines, each
// indented by two spaces.
func gitRepoDoc(name, repoURL, spec string) string {
	return fmt.Sprintf("apiVersion: flotilla.dev/v1alpha1\nkind: GitRepo\nmetadata:\n  name: %s\nspec:\n  repo: %s\n%s\n",
		name, repoURL, strings.TrimRight(spec, "\n"))
}

// selectorTarget is a targets spec selecting clusters by one label.
func selectorTarget(key, value string) string {
	return fmt.Sprintf("  targets:\n  - clusterSelector:\n      matchLabels:\n        %s: %s\n", key, value)
}

// allClusters is a targets spec matching every registered cluster.
const allClusters = "  targets:\n  - clusterSelector: {}\n"

// configMapDoc is a ConfigMap manifest with data {value: value}.
func configMapDoc(name, value string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\ndata:\n  value: %q\n", name, value)
}

// manyConfigMaps is n ConfigMap manifests prefix-0 … prefix-<n-1>.
func manyConfigMaps(prefix string, n int) string {
	docs := make([]string, n)
	for i := range docs {
		docs[i] = configMapDoc(fmt.Sprintf("%s-%d", prefix, i), "x")
	}
	return strings.Join(docs, "---\n")
}

// fleetYAML puts a bundle's objects in namespace ns.
func fleetYAML(ns string) string { return "defaultNamespace: " + ns + "\n" }

// statusErr runs `flotilla status NAME -o json`.
func (f *fleet) statusErr(t testing.TB, name string) (status.GitRepo, error) {
	t.Helper()
	var st status.GitRepo
	stdout, stderr, err := f.cliErr(t, "status", name, "-o", "json")
	if err != nil {
		return st, fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr))
	}
	if err := json.Unmarshal([]byte(stdout), &st); err != nil {
		return st, fmt.Errorf("parse status: %w: %s", err, stdout)
	}
	return st, nil
}

// status returns the GitRepo's status and fails the test if it cannot.
func (f *fleet) status(t testing.TB, name string) status.GitRepo {
	t.Helper()
	st, err := f.statusErr(t, name)
	require.NoError(t, err)
	return st
}

// waitFor polls the GitRepo's status until cond holds (defaultWait).
func (f *fleet) waitFor(t testing.TB, name, what string, cond func(status.GitRepo) bool) status.GitRepo {
	t.Helper()
	return f.waitForWithin(t, name, what, defaultWait, cond)
}

// waitForWithin is waitFor with a timeout. On timeout it fails the test with
// the last status and the worker's log tail.
func (f *fleet) waitForWithin(t testing.TB, name, what string, timeout time.Duration, cond func(status.GitRepo) bool) status.GitRepo {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last status.GitRepo
	var lastErr error
	for {
		last, lastErr = f.statusErr(t, name)
		if lastErr == nil && cond(last) {
			return last
		}
		if time.Now().After(deadline) {
			js, _ := json.MarshalIndent(last, "", "  ")
			t.Fatalf("GitRepo %s: %s: not reached within %s\nlast status error: %v\nlast status: %s\nworker log tail:\n%s",
				name, what, timeout, lastErr, js, f.w.proc.LogTail(40))
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// settledAt reports whether the GitRepo finished rolling out commit with
// want deployments, all Ready.
func settledAt(commit string, want int) func(status.GitRepo) bool {
	return func(st status.GitRepo) bool {
		return st.Settled && st.Commit == commit && st.Error == "" && st.ObservedGeneration == st.Generation &&
			st.Summary.State == status.Ready && st.Summary.Ready == want && st.Summary.Desired == want
	}
}

// deploymentOn returns the GitRepo's deployment of bundle on cluster.
func deploymentOn(st status.GitRepo, bundle, cluster string) (status.Deployment, bool) {
	for _, d := range st.Deployments {
		if d.Bundle == bundle && d.Cluster == cluster {
			return d, true
		}
	}
	return status.Deployment{}, false
}

// gitRepoNames lists the names `flotilla get gitrepos -o json` shows.
func (f *fleet) gitRepoNames(t testing.TB) []string {
	t.Helper()
	var repos []status.GitRepo
	out := f.cli(t, "get", "gitrepos", "-o", "json")
	require.NoError(t, json.Unmarshal([]byte(out), &repos), out)
	names := []string{}
	for _, r := range repos {
		names = append(names, r.Name)
	}
	return names
}

// clustersOf lists the clusters the GitRepo has deployments on.
func clustersOf(st status.GitRepo) []string {
	var out []string
	for _, d := range st.Deployments {
		out = append(out, d.Cluster)
	}
	return out
}

// configMap reads a ConfigMap from the named cluster.
func (f *fleet) configMap(t testing.TB, cluster, ns, name string) (*corev1.ConfigMap, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cm, err := f.cluster(cluster).Clientset(t).CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	require.NoError(t, err, "get ConfigMap %s/%s on %s", ns, name, cluster)
	return cm, true
}

// releaseRevisions counts the Helm release records (one Secret
// sh.helm.release.v1.<release>.v<N> per revision) of release on cluster.
func (f *fleet) releaseRevisions(t testing.TB, cluster, ns, release string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := f.cluster(cluster).Clientset(t).CoreV1().Secrets(ns).List(ctx,
		metav1.ListOptions{LabelSelector: "owner=helm,name=" + release})
	require.NoError(t, err)
	n := 0
	for _, s := range list.Items {
		if strings.HasPrefix(s.Name, "sh.helm.release.v1."+release+".v") {
			n++
		}
	}
	return n
}

// countDeployed counts "Deployed bundle" lines of bundle per cluster in
// the logs of every worker that ran on the fleet's state dir; a non-empty
// deploymentID restricts the count to it.
func (f *fleet) countDeployed(t testing.TB, bundle, deploymentID string) map[string]int {
	t.Helper()
	return countBundleLines(t, "Deployed bundle", f.logs, bundle, deploymentID)
}

// countConfirmed is countDeployed for "Confirmed interrupted deploy".
func (f *fleet) countConfirmed(t testing.TB, bundle, deploymentID string) map[string]int {
	t.Helper()
	return countBundleLines(t, "Confirmed interrupted deploy", f.logs, bundle, deploymentID)
}

// waitDeploying waits, querying Temporal directly (a CLI call is too slow),
// until the GitRepo's running rollout has reached its Deploying phase and
// returns the rollout's status.
func (f *fleet) waitDeploying(t testing.TB, name string) status.Rollout {
	t.Helper()
	c := f.w.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		var st status.GitRepo
		var ro status.Rollout
		v, err := c.QueryWorkflow(ctx, protocol.GitRepoID("fleet-default", name), "", protocol.QueryStatus)
		if err == nil && v.Get(&st) == nil && st.Rollout != "" {
			if v, err := c.QueryWorkflow(ctx, st.Rollout, "", protocol.QueryStatus); err == nil && v.Get(&ro) == nil &&
				ro.Phase == "Deploying" {
				return ro
			}
		}
		require.NoError(t, ctx.Err(), "rollout of %s never reached Deploying; last status %+v", name, st)
		time.Sleep(5 * time.Millisecond)
	}
}

// kill9 kills the worker (and its embedded Temporal server) with SIGKILL.
func (f *fleet) kill9(t testing.TB) {
	t.Helper()
	kill9(t, f.w.proc)
}

// killOnRevision watches release's Helm records on cluster, runs trigger,
// and kills the worker with SIGKILL the moment record v<rev> is created —
// in the middle of the Helm operation that writes it. It returns the
// record's Helm status label at the kill (pending-install, pending-upgrade,
// or later if Helm was faster than the kill).
func (f *fleet) killOnRevision(t testing.TB, cluster, ns, release string, rev int, trigger func()) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs := f.cluster(cluster).Clientset(t)
	w, err := cs.CoreV1().Secrets(ns).Watch(ctx, metav1.ListOptions{LabelSelector: "owner=helm,name=" + release})
	require.NoError(t, err)
	defer w.Stop()
	want := fmt.Sprintf("sh.helm.release.v1.%s.v%d", release, rev)
	trigger()
	for ev := range w.ResultChan() {
		if s, ok := ev.Object.(*corev1.Secret); ok && s.Name == want {
			f.kill9(t)
			got, err := cs.CoreV1().Secrets(ns).Get(context.Background(), want, metav1.GetOptions{})
			require.NoError(t, err)
			return got.Labels["status"]
		}
	}
	t.Fatalf("%s never appeared on %s: %v", want, cluster, ctx.Err())
	return ""
}

// helmRecords returns the Helm status label of each release record of
// release on cluster, by revision.
func (f *fleet) helmRecords(t testing.TB, cluster, ns, release string) map[string]string {
	t.Helper()
	list, err := f.cluster(cluster).Clientset(t).CoreV1().Secrets(ns).List(context.Background(),
		metav1.ListOptions{LabelSelector: "owner=helm,name=" + release})
	require.NoError(t, err)
	out := map[string]string{}
	for _, s := range list.Items {
		out[s.Labels["version"]] = s.Labels["status"]
	}
	return out
}

// restart starts a new worker on the same state dir. The process belongs
// to the fleet's test, so it outlives the calling subtest.
func (f *fleet) restart(t testing.TB) {
	t.Helper()
	f.w = startDevWorker(f.t, f.stateDir)
	f.logs = append(f.logs, f.w.proc.LogPath())
}

// unreachableKubeconfig writes a copy of c's kubeconfig whose server is a
// port of 127.0.0.1 that nobody listens on.
func unreachableKubeconfig(t testing.TB, c *testenv.Cluster) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(c.KubeconfigPath)
	require.NoError(t, err)
	for _, cl := range cfg.Clusters {
		cl.Server = fmt.Sprintf("https://127.0.0.1:%d", testenv.FreePort(t))
	}
	p := filepath.Join(t.TempDir(), "unreachable.kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*cfg, p))
	return p
}

func exitCode(err error) int {
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode()
	}
	return -1
}
