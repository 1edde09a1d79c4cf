package tests

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/internal/testenv"
	"github.com/flotilla-gitops/flotilla/internal/testenv/devtemporal"
)

// statelessFleet is two controller replicas (separate processes, each on
// a state dir of its own, the same seal keys) on one Temporal server, with
// no content registry: whatever a replica deploys that the other rendered
// it must re-derive from Git. One push-mode cluster, one Git server.
type statelessFleet struct {
	*agentFleet
	keys     string
	replicas [2]*testenv.Process
	// stateDirs are the replicas' current state dirs; starts counts the
	// starts of each replica.
	stateDirs [2]string
	starts    [2]int
}

func startStatelessFleet(t *testing.T) *statelessFleet {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a kube-apiserver, Temporal, controllers and a Git server")
	}
	f := &statelessFleet{agentFleet: &agentFleet{t: t, cliDir: t.TempDir(), agents: map[string]*agentProc{}}}
	f.clusters = testenv.StartClusters(t, 1, testenv.Options{})
	f.temporal = devtemporal.Start(t, devtemporal.Options{})
	f.c = f.temporal.Client
	f.git = testenv.NewGitServer(t, testenv.GitServerOptions{})
	f.keys = filepath.Join(t.TempDir(), "seal-keys")
	out, err := exec.Command(bins.worker, "keygen", "--out", f.keys).CombinedOutput()
	require.NoError(t, err, "%s", out)
	for i := range f.replicas {
		f.startReplica(t, i, t.TempDir())
	}
	return f
}

// startReplica starts controller replica i on stateDir (no content
// registry) and waits until it polls.
func (f *statelessFleet) startReplica(t *testing.T, i int, stateDir string) {
	t.Helper()
	f.starts[i]++
	f.stateDirs[i] = stateDir
	args := []string{"--temporal-address", f.frontend(), "--state-dir", stateDir, "--seal-keys", f.keys,
		"--webhook-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0"}
	p := testenv.StartProcess(f.t, testenv.ProcessOptions{Name: fmt.Sprintf("flotilla-controller-%c-%d", 'a'+i, f.starts[i]),
		Path: bins.worker, Args: args})
	f.replicas[i], f.ctrl = p, p
	f.logs = append(f.logs, p.LogPath())
	f.ctrlLogs = append(f.ctrlLogs, p.LogPath())
	waitLog(t, p, `"msg":"Worker started"`, time.Minute)
}

// stopReplica stops replica i gracefully.
func (f *statelessFleet) stopReplica(i int) {
	f.replicas[i].Stop()
	f.ctrl = f.replicas[1-i]
}

// killReplica kills replica i with SIGKILL.
func (f *statelessFleet) killReplica(t *testing.T, i int) {
	t.Helper()
	kill9(t, f.replicas[i])
	f.kills++
	f.ctrl = f.replicas[1-i]
}

// wipeStateDir removes everything in replica i's state dir while it runs.
func (f *statelessFleet) wipeStateDir(t *testing.T, i int) {
	t.Helper()
	entries, err := os.ReadDir(f.stateDirs[i])
	require.NoError(t, err)
	require.NotEmpty(t, entries, "the replica has cached something")
	for _, e := range entries {
		require.NoError(t, os.RemoveAll(filepath.Join(f.stateDirs[i], e.Name())))
	}
}

// addCluster registers cluster-1 in push mode. Its kubeconfig is sealed
// into Temporal, so neither replica's state dir holds it: wiping one
// loses nothing.
func (f *statelessFleet) addCluster(t *testing.T) {
	t.Helper()
	c := f.cluster("cluster-1")
	require.Contains(t, f.cli(t, "cluster", "add", c.Name, "--kubeconfig", c.KubeconfigPath), "cluster/"+c.Name+" created")
}

// refills counts, per replica start, the renders made for content the
// replica's store missed.
func (f *statelessFleet) refills(t *testing.T) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, p := range f.logs {
		if n := len(logLines(t, "Rendered commit again for missing content", []string{p})); n > 0 {
			out[filepath.Base(p)] = n
		}
	}
	return out
}

// TestStatelessControllers: two controller replicas with separate, empty
// state dirs and no content registry roll a GitRepo out to a push-mode
// cluster. A deploy that lands on the replica that did not render the
// commit (the renderer was killed while the cluster was down) re-renders
// it from Git, checks it against the planned IDs and deploys it; a
// replica restarted with an empty state dir, and one whose state dir is
// wiped while it runs, go on serving new commits. No deploy is logged
// twice and Helm makes no revision beyond the distinct deployment IDs.
func TestStatelessControllers(t *testing.T) {
	start := time.Now()
	f := startStatelessFleet(t)
	f.addCluster(t)
	const ns, name = "stateless-ns", "stateless"
	kube := f.cluster("cluster-1")
	repo := f.git.CreateRepo(t, name, map[string]string{"fleet.yaml": fleetYAML(ns), "cm.yaml": configMapDoc(name, "v0")})
	f.cli(t, "apply", "-f", writeTemp(t, "stateless.yaml", gitRepoDoc(name, repo.URL(), allClusters)))
	f.waitGitRepo(t, name, "the first commit", 2*time.Minute, settledAt(repo.Head(t), 1))
	t.Logf("stateless: fleet up and first rollout done in %s", time.Since(start).Round(time.Millisecond))

	// Replica a renders and targets commit v1 alone while the cluster is
	// down, so its deploy cannot happen there; a is killed and b, started
	// on an empty state dir, deploys what a planned once the cluster is
	// back.
	phase := time.Now()
	f.stopReplica(1)
	kube.Stop()
	commit := repo.Commit(t, map[string]string{"cm.yaml": configMapDoc(name, "v1")}, "v1")
	f.sync(t, name)
	waitLog(t, f.replicas[0], `"msg":"Cluster not reachable"`, time.Minute)
	f.killReplica(t, 0)
	f.startReplica(t, 1, t.TempDir())
	kube.Start(t)
	st := f.waitGitRepo(t, name, "v1 deployed by the replica that did not render it", 3*time.Minute, settledAt(commit, 1))
	deployed := logLines(t, "Deployed bundle", []string{f.replicas[1].LogPath()})
	require.Len(t, deployed, 1, "replica b deployed v1")
	assert.Equal(t, st.Deployments[0].DeploymentID, deployed[0]["deploymentID"])
	assert.NotEmpty(t, logLines(t, "Rendered commit again for missing content", []string{f.replicas[1].LogPath()}),
		"replica b re-rendered v1 from Git")
	t.Logf("stateless: cross-replica deploy after the renderer's kill in %s", time.Since(phase).Round(time.Millisecond))

	// Replica a comes back on an empty state dir; b's is wiped while it
	// runs. New commits roll out on whichever replica serves them.
	phase = time.Now()
	f.startReplica(t, 0, t.TempDir())
	f.wipeStateDir(t, 1)
	for i := 2; i <= 4; i++ {
		value := fmt.Sprintf("v%d", i)
		commit = repo.Commit(t, map[string]string{"cm.yaml": configMapDoc(name, value)}, value)
		f.sync(t, name)
		f.waitGitRepo(t, name, value+" deployed", 2*time.Minute, settledAt(commit, 1))
		cm, err := kube.Clientset(t).CoreV1().ConfigMaps(ns).Get(context.Background(), name, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, value, cm.Data["value"])
		if i == 2 {
			f.wipeStateDir(t, 0)
		}
	}
	t.Logf("stateless: 3 rollouts after restart and wipes in %s; refills per process: %v", time.Since(phase).Round(time.Millisecond),
		f.refills(t))

	audit := f.audit(t, name, ns, []string{"cluster-1"})
	assert.Zero(t, audit.duplicates(), "duplicate Deployed bundle lines: %v", audit.lines)
	assert.Zero(t, audit.extraRevisions(), "Helm revisions beyond distinct deployment IDs: %v / %v", audit.revisions, audit.distinct)
	assert.Equal(t, 5, audit.distinct["cluster-1"], "every commit deployed")
	for _, l := range logLines(t, "Content unavailable", f.logs) {
		assert.NotContains(t, fmt.Sprint(l["error"]), "changed since", "no refill found changed content")
	}
}
