package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/status"
	"github.com/flotilla-gitops/flotilla/internal/testenv"
	"github.com/flotilla-gitops/flotilla/internal/testenv/devtemporal"
)

// agentFleet is a production-shaped installation: a Temporal server of its
// own (so the controller can be killed without it), the controller worker
// and one agent per pull-mode cluster as separate processes, an OCI
// registry carrying rendered bundles to the agents (which never see the
// controller's state dir), real kube-apiservers and a Git server.
type agentFleet struct {
	t        testing.TB
	temporal *devtemporal.Server
	// addr is the frontend of a Temporal server that is not temporal
	// (one on PostgreSQL in a process of its own).
	addr string
	// cliDir, when set, is the CLI's working directory.
	cliDir   string
	c        client.Client
	registry string
	stateDir string
	defaults string
	ctrl     *testenv.Process
	// logs are the log files of every controller and agent process
	// started, oldest first.
	logs     []string
	ctrlLogs []string
	agents   map[string]*agentProc
	clusters []*testenv.Cluster
	git      *testenv.GitServer
	// restarts and kills count controller restarts and SIGKILLs.
	restarts, kills int
	// ctrlArgs are extra flags of every controller started.
	ctrlArgs []string
}

type agentProc struct {
	proc     *testenv.Process
	stateDir string
	cluster  *testenv.Cluster
}

// startAgentFleet starts n clusters (cluster-1 … cluster-n), Temporal, a
// registry, a Git server and the controller. No cluster is registered.
func startAgentFleet(t testing.TB, n int) *agentFleet {
	t.Helper()
	return startAgentFleetArgs(t, n)
}

// startAgentFleetArgs is startAgentFleet with extra controller flags.
func startAgentFleetArgs(t testing.TB, n int, ctrlArgs ...string) *agentFleet {
	t.Helper()
	if testing.Short() {
		t.Skip("starts kube-apiservers, Temporal, a registry and a Git server")
	}
	f := &agentFleet{t: t, stateDir: t.TempDir(), agents: map[string]*agentProc{}, ctrlArgs: ctrlArgs}
	f.clusters = testenv.StartClusters(t, n, testenv.Options{})
	f.temporal = devtemporal.Start(t, devtemporal.Options{})
	f.c = f.temporal.Client
	reg := httptest.NewServer(ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(reg.Close)
	f.registry = "oci://" + strings.TrimPrefix(reg.URL, "http://") + "/flotilla/content"
	f.git = testenv.NewGitServer(t, testenv.GitServerOptions{})
	f.defaults = writeTemp(t, "agent-defaults.yaml", "heartbeatInterval: 1s\nimage: flotilla-worker:e2e\n")
	f.startController(t)
	return f
}

func (f *agentFleet) frontend() string {
	if f.temporal == nil {
		return f.addr
	}
	return f.temporal.FrontendAddress()
}

// registryArgs are the content registry flags of controller and agents.
func (f *agentFleet) registryArgs() []string {
	return []string{"--content-registry", f.registry, "--content-registry-plain-http"}
}

// startController starts the controller worker and waits until it polls.
func (f *agentFleet) startController(t testing.TB) {
	t.Helper()
	args := append([]string{"--temporal-address", f.frontend(), "--state-dir", f.stateDir,
		"--agent-defaults", f.defaults, "--webhook-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0"}, f.registryArgs()...)
	args = append(args, f.ctrlArgs...)
	f.ctrl = testenv.StartProcess(f.t, testenv.ProcessOptions{Name: "flotilla-controller", Path: bins.worker, Args: args})
	f.logs = append(f.logs, f.ctrl.LogPath())
	f.ctrlLogs = append(f.ctrlLogs, f.ctrl.LogPath())
	waitLog(t, f.ctrl, `"msg":"Worker started"`, time.Minute)
	waitLog(t, f.ctrl, `"msg":"Announced agent defaults"`, time.Minute)
}

// killController kills the controller with SIGKILL.
func (f *agentFleet) killController(t testing.TB) {
	t.Helper()
	kill9(t, f.ctrl)
	f.kills++
}

// restartController stops the controller (gracefully unless it is
// already dead) and starts a new one.
func (f *agentFleet) restartController(t testing.TB) {
	t.Helper()
	select {
	case <-f.ctrl.Done():
	default:
		f.ctrl.Stop()
	}
	f.startController(t)
	f.restarts++
}

// agentArgs are an agent's command line for cluster c.
func (f *agentFleet) agentArgs(c *testenv.Cluster, stateDir string, extra ...string) []string {
	args := append([]string{"agent", "--cluster", c.Name, "--kubeconfig", c.KubeconfigPath,
		"--temporal-address", f.frontend(), "--state-dir", stateDir, "--heartbeat-interval", "1s",
		"--http-listen", "127.0.0.1:0"}, f.registryArgs()...)
	return append(args, extra...)
}

// startAgent starts cluster's agent (token "" for a registered cluster)
// and waits until it polls its queue.
func (f *agentFleet) startAgent(t testing.TB, name, token string, extra ...string) *agentProc {
	t.Helper()
	a := f.agents[name]
	if a == nil {
		a = &agentProc{stateDir: f.t.TempDir(), cluster: f.cluster(name)}
		f.agents[name] = a
	}
	var env []string
	if token != "" {
		env = []string{"FLOTILLA_REGISTRATION_TOKEN=" + token}
	}
	a.proc = testenv.StartProcess(f.t, testenv.ProcessOptions{Name: "flotilla-agent-" + name, Path: bins.worker,
		Args: f.agentArgs(a.cluster, a.stateDir, extra...), Env: env})
	f.logs = append(f.logs, a.proc.LogPath())
	waitLog(t, a.proc, `"msg":"Agent started"`, time.Minute)
	return a
}

// runAgentOnce runs an agent expected to fail at startup and returns its
// error output.
func (f *agentFleet) runAgentOnce(t testing.TB, name, token string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bins.worker, f.agentArgs(f.cluster(name), t.TempDir(), "--log-format", "console")...)
	cmd.Env = append(os.Environ(), "FLOTILLA_REGISTRATION_TOKEN="+token)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func (f *agentFleet) cluster(name string) *testenv.Cluster {
	for _, c := range f.clusters {
		if c.Name == name {
			return c
		}
	}
	f.t.Fatalf("no cluster %s", name)
	return nil
}

// cli runs the CLI against the fleet and returns stdout.
func (f *agentFleet) cli(t testing.TB, args ...string) string {
	t.Helper()
	o, e, err := f.run(args...)
	require.NoError(t, err, "flotilla %s\nstdout: %s\nstderr: %s\ncontroller log tail:\n%s",
		strings.Join(args, " "), o, e, f.ctrl.LogTail(30))
	return o
}

// cliErr runs the CLI expecting it may fail, and returns stdout and
// stderr together with its error.
func (f *agentFleet) cliErr(t testing.TB, args ...string) (string, error) {
	t.Helper()
	o, e, err := f.run(args...)
	return o + e, err
}

func (f *agentFleet) run(args ...string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	full := append([]string{"--temporal-address", f.frontend()}, args...)
	cmd := exec.CommandContext(ctx, bins.cli, full...)
	cmd.Dir = f.cliDir
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// newToken creates a registration token with the CLI.
func (f *agentFleet) newToken(t testing.TB, ttl string) string {
	t.Helper()
	var tok struct {
		Token string `json:"token"`
	}
	out := f.cli(t, "cluster", "token", "create", "--ttl", ttl, "-o", "json")
	require.NoError(t, json.Unmarshal([]byte(out), &tok), out)
	require.NotEmpty(t, tok.Token)
	return tok.Token
}

// clusterRecord queries a cluster's workflow, asking again for up to
// 30 s while the query fails.
func (f *agentFleet) clusterRecord(t testing.TB, name string) protocol.ClusterRecord {
	t.Helper()
	return f.waitCluster(t, name, "record read", 30*time.Second, func(protocol.ClusterRecord) bool { return true })
}

// queryCluster queries a cluster's workflow once. Just after a
// controller restart Temporal can hold a query for seconds (on the old
// worker's sticky queue, or behind a workflow task the old worker had
// started), longer than the SDK's 5 s call timeout here (half the
// context's), so a query can time out: callers that wait ask again.
func (f *agentFleet) queryCluster(name string) (protocol.ClusterRecord, error) {
	var rec protocol.ClusterRecord
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v, err := f.c.QueryWorkflow(ctx, protocol.ClusterID(name), "", protocol.QueryStatus)
	if err != nil {
		return rec, err
	}
	return rec, v.Get(&rec)
}

// waitCluster polls a cluster's record until cond holds. A query that
// fails is asked again until the timeout.
func (f *agentFleet) waitCluster(t testing.TB, name, what string, timeout time.Duration, cond func(protocol.ClusterRecord) bool) protocol.ClusterRecord {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		rec, err := f.queryCluster(name)
		if err == nil && cond(rec) {
			return rec
		}
		if time.Now().After(deadline) {
			js, _ := json.Marshal(rec)
			t.Fatalf("cluster %s: %s: not reached within %s (last error %v); record %s", name, what, timeout, err, js)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// gitRepoStatus queries a GitRepo's status from Temporal.
func (f *agentFleet) gitRepoStatus(name string) (status.GitRepo, error) {
	var st status.GitRepo
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v, err := f.c.QueryWorkflow(ctx, protocol.GitRepoID("fleet-default", name), "", protocol.QueryStatus)
	if err != nil {
		return st, err
	}
	return st, v.Get(&st)
}

// waitGitRepo polls the GitRepo's status until cond holds.
func (f *agentFleet) waitGitRepo(t testing.TB, name, what string, timeout time.Duration, cond func(status.GitRepo) bool) status.GitRepo {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		st, err := f.gitRepoStatus(name)
		if err == nil && cond(st) {
			return st
		}
		if time.Now().After(deadline) {
			js, _ := json.MarshalIndent(st, "", "  ")
			t.Fatalf("GitRepo %s: %s: not reached within %s (last error %v)\nstatus: %s\ncontroller log tail:\n%s",
				name, what, timeout, err, js, f.ctrl.LogTail(30))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// sync asks the GitRepo to check its remote now.
func (f *agentFleet) sync(t testing.TB, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, f.c.SignalWorkflow(ctx, protocol.GitRepoID("fleet-default", name), "", protocol.SignalSync, nil))
}

// logLines returns the JSON log lines with message msg in files, in file
// order.
func logLines(t testing.TB, msg string, files []string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, p := range files {
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		for _, line := range bytes.Split(data, []byte("\n")) {
			if !bytes.Contains(line, []byte(`"`+msg+`"`)) {
				continue
			}
			var m map[string]any
			if json.Unmarshal(line, &m) == nil && m["msg"] == msg {
				out = append(out, m)
			}
		}
	}
	return out
}

// countBundleLines counts the log lines with message msg about bundle per
// cluster; a non-empty deploymentID restricts the count to it.
func countBundleLines(t testing.TB, msg string, files []string, bundle, deploymentID string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, l := range logLines(t, msg, files) {
		if l["bundle"] != bundle || (deploymentID != "" && l["deploymentID"] != deploymentID) {
			continue
		}
		c, _ := l["cluster"].(string)
		out[c]++
	}
	return out
}

// assertDeployRecorded checks how one deploy was logged: exactly one
// "Deployed bundle" line, unless a kill landed between Helm's final write
// and that line. Then the retry found its predecessor's revision and wrote
// "Confirmed interrupted deploy", and the Deployed line may be missing;
// it is never doubled.
func assertDeployRecorded(t testing.TB, deployed, confirmed int, msgAndArgs ...any) {
	t.Helper()
	if confirmed == 0 {
		assert.Equal(t, 1, deployed, msgAndArgs...)
	} else {
		assert.LessOrEqual(t, deployed, 1, msgAndArgs...)
	}
}

// deployAudit compares the deploy log lines of bundle with the Helm
// release records on each cluster.
type deployAudit struct {
	// lines counts "Deployed bundle" lines per cluster and logged their
	// distinct deployment IDs; confirmed counts "Confirmed interrupted
	// deploy" lines; distinct counts the deployment IDs either line names;
	// revisions counts Helm revisions.
	lines, logged, confirmed, distinct, revisions map[string]int
}

func (a deployAudit) duplicates() int {
	n := 0
	for c, l := range a.lines {
		n += l - a.logged[c]
	}
	return n
}

func (a deployAudit) extraRevisions() int {
	n := 0
	for c, r := range a.revisions {
		n += r - a.distinct[c]
	}
	return n
}

func (f *agentFleet) audit(t testing.TB, bundle, ns string, clusters []string) deployAudit {
	t.Helper()
	a := deployAudit{lines: map[string]int{}, logged: map[string]int{}, confirmed: map[string]int{},
		distinct: map[string]int{}, revisions: map[string]int{}}
	// ids[cluster][deploymentID] is true once a "Deployed bundle" line
	// names it, false when only a confirmation does.
	ids := map[string]map[string]bool{}
	scan := func(msg string, count map[string]int, deployed bool) {
		for _, l := range logLines(t, msg, f.logs) {
			if l["bundle"] != bundle {
				continue
			}
			c, _ := l["cluster"].(string)
			id, _ := l["deploymentID"].(string)
			count[c]++
			if ids[c] == nil {
				ids[c] = map[string]bool{}
			}
			ids[c][id] = ids[c][id] || deployed
		}
	}
	scan("Deployed bundle", a.lines, true)
	scan("Confirmed interrupted deploy", a.confirmed, false)
	for _, c := range clusters {
		for _, deployed := range ids[c] {
			a.distinct[c]++
			if deployed {
				a.logged[c]++
			}
		}
		a.revisions[c] = helmRevisions(t, f.cluster(c), ns, bundle)
	}
	return a
}

// helmRevisions is the newest Helm revision of release: the number of
// installs and upgrades Helm made (the deployer keeps only the last few
// records, so counting records would undercount).
func helmRevisions(t testing.TB, c *testenv.Cluster, ns, release string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := c.Clientset(t).CoreV1().Secrets(ns).List(ctx, listByRelease(release))
	require.NoError(t, err)
	n := 0
	for _, s := range list.Items {
		v, err := strconv.Atoi(s.Labels["version"])
		require.NoError(t, err, "Helm record %s", s.Name)
		n = max(n, v)
	}
	return n
}

// helmRecordIDs describes each Helm record of release: revision, status
// and the time it was last modified.
func helmRecordIDs(t testing.TB, c *testenv.Cluster, ns, release string) []string {
	t.Helper()
	list, err := c.Clientset(t).CoreV1().Secrets(ns).List(context.Background(), listByRelease(release))
	require.NoError(t, err)
	var out []string
	for _, s := range list.Items {
		out = append(out, s.Labels["version"]+":"+s.Labels["status"]+"@"+s.Labels["modifiedAt"])
	}
	return out
}

// waitLog waits until the process's log contains s.
func waitLog(t testing.TB, p *testenv.Process, s string, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	require.NoError(t, p.WaitReady(ctx, func(context.Context) error {
		data, err := os.ReadFile(p.LogPath())
		if err != nil || !bytes.Contains(data, []byte(s)) {
			return errors.New("not yet: " + s)
		}
		return nil
	}), "%s never logged %s; log tail:\n%s", p.Name(), s, p.LogTail(30))
}

// kill9 kills a process with SIGKILL and waits for it to die.
func kill9(t testing.TB, p *testenv.Process) {
	t.Helper()
	require.NoError(t, syscall.Kill(p.PID(), syscall.SIGKILL))
	select {
	case <-p.Done():
	case <-time.After(20 * time.Second):
		t.Fatalf("%s did not die after SIGKILL", p.Name())
	}
}

// listByRelease selects the Helm release records of release.
func listByRelease(release string) metav1.ListOptions {
	return metav1.ListOptions{LabelSelector: "owner=helm,name=" + release}
}
