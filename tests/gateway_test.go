package tests

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/internal/content"
	"github.com/flotilla-gitops/flotilla/internal/freeport"
	"github.com/flotilla-gitops/flotilla/internal/gateway"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	flstatus "github.com/flotilla-gitops/flotilla/internal/status"
	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

// TestGateway: agents reach the controller only through its gateway,
// each with its own cluster's credential. The agents' own work runs
// (registration, deploys, content, heartbeats); the credential taken
// from cluster-1's agent can start no workflow, signal no other
// cluster's workflow, poll no other queue, answer no task that was not
// handed to it, read no history, publish no sealing key and fetch no
// content of another cluster, whether used with the Temporal SDK or
// with the gateway's own calls. Every refusal is logged with the
// cluster's name.
func TestGateway(t *testing.T) {
	ports, err := freeport.Pick("127.0.0.1", 1)
	require.NoError(t, err)
	gw := fmt.Sprintf("127.0.0.1:%d", ports[0])
	// cluster-3's managed agent starts before the gateway exists, with
	// the controller's credentials; the upgraded controller moves it.
	f := startAgentFleet(t, 3)
	managed := startManagedBeforeGateway(t, f)
	f.ctrlArgs = append(f.ctrlArgs, "--gateway-listen", gw)
	f.restartController(t)
	t.Run("ManagedAgentMovedOnce", func(t *testing.T) { testManagedAgentMoved(t, f, gw, managed) })

	for _, name := range []string{"cluster-1", "cluster-2"} {
		f.startGatewayAgent(t, name, f.newToken(t, "1h"), gw)
		f.waitCluster(t, name, "agent online", 30*time.Second, func(r protocol.ClusterRecord) bool {
			return r.Agent != nil && r.Agent.LastSeen != nil && r.PullMode()
		})
	}
	// cluster-2 alone gets "only2": its manifest is content of cluster-2.
	repo := f.git.CreateRepo(t, "gw-both", map[string]string{"fleet.yaml": fleetYAML("gw-both"), "cm.yaml": configMapDoc("both", "v1")})
	f.cli(t, "apply", "-f", writeTemp(t, "gw-both.yaml", gitRepoDoc("gw-both", repo.URL(), allClusters)))
	only2 := f.git.CreateRepo(t, "gw-only2", map[string]string{"fleet.yaml": fleetYAML("gw-only2"), "cm.yaml": configMapDoc("only2", "v1")})
	f.cli(t, "apply", "-f", writeTemp(t, "gw-only2.yaml", gitRepoDoc("gw-only2", only2.URL(), "  targets:\n  - clusterName: cluster-2\n")))
	f.waitGitRepo(t, "gw-both", "Ready on all three clusters through the gateway", 2*time.Minute, settledAt(repo.Head(t), 3))
	st := f.waitGitRepo(t, "gw-only2", "Ready on cluster-2", 2*time.Minute, settledAt(only2.Head(t), 1))
	d, ok := deploymentOn(st, "gw-only2", "cluster-2")
	require.True(t, ok, "deployments: %+v", st.Deployments)
	manifest2, _, _ := strings.Cut(d.DeploymentID, ":")

	// What an attacker finds on cluster-1: its agent's credential.
	cred1 := readCredential(t, f.agents["cluster-1"].stateDir)
	cred2 := readCredential(t, f.agents["cluster-2"].stateDir)
	assertAgentHoldsNoControllerSecret(t, f, "cluster-1")

	t.Run("SDKCallsRefused", func(t *testing.T) { testGatewaySDKRefusals(t, f, gw, cred1) })
	t.Run("ContentOfAnotherCluster", func(t *testing.T) {
		conn, err := gateway.Dial(gw, nil)
		require.NoError(t, err)
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err = gateway.NewRemote(conn, gw, cred1).Pull(ctx, content.KindManifest, manifest2)
		require.Error(t, err, "cluster-1 fetched cluster-2's manifest")
		assert.Equal(t, codes.PermissionDenied, grpcCode(err), "%v", err)
		data, err := gateway.NewRemote(conn, gw, cred2).Pull(ctx, content.KindManifest, manifest2)
		require.NoError(t, err, "cluster-2 fetches its own content")
		assert.NotEmpty(t, data)
		_, err = gateway.NewRemote(conn, gw, "flga1.forged").Pull(ctx, content.KindManifest, manifest2)
		require.Error(t, err)
		assert.Equal(t, codes.Unauthenticated, grpcCode(err), "%v", err)
	})
	t.Run("RefusalsLoggedWithCluster", func(t *testing.T) {
		lines := logLines(t, "Gateway refused an agent's call", f.ctrlLogs)
		require.NotEmpty(t, lines)
		for _, l := range lines {
			assert.Equal(t, "cluster-1", l["cluster"], "%v", l)
		}
		assert.NotEmpty(t, logLines(t, "Gateway refused an agent's content fetch: no task of the cluster names it", f.ctrlLogs))
	})
	t.Run("RemovedClusterCredentialRevoked", func(t *testing.T) {
		f.cli(t, "cluster", "remove", "cluster-1")
		c1 := gatewayClient(t, gw, cred1)
		require.Eventually(t, func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			err := c1.SignalWorkflow(ctx, protocol.ClusterID("cluster-1"), "", protocol.SignalHeartbeat, protocol.Heartbeat{Interval: time.Second})
			return grpcCode(err) == codes.Unauthenticated
		}, 30*time.Second, 500*time.Millisecond, "a removed cluster's credential must stop working")
	})
}

// startManagedBeforeGateway adds cluster-3 with a managed agent, runs
// the agent (as a process: the cluster has no kubelet) and deploys a
// bundle to it. It returns the bundle's Git repo.
func startManagedBeforeGateway(t *testing.T, f *agentFleet) *testenv.GitRepo {
	c3 := f.cluster("cluster-3")
	require.Contains(t, f.cli(t, "cluster", "add", "cluster-3", "--kubeconfig", c3.KubeconfigPath, "--install-agent"), "created")
	rec := f.waitCluster(t, "cluster-3", "agent installed", time.Minute, func(r protocol.ClusterRecord) bool {
		return r.Agent != nil && (r.Agent.DeploymentID != "" || r.Agent.Error != "")
	})
	require.Empty(t, rec.Agent.Error)
	f.startAgent(t, "cluster-3", "")
	repo := f.git.CreateRepo(t, "gw-managed", map[string]string{"fleet.yaml": fleetYAML("gw-managed"), "cm.yaml": configMapDoc("managed", "v1")})
	f.cli(t, "apply", "-f", writeTemp(t, "gw-managed.yaml", gitRepoDoc("gw-managed", repo.URL(), "  targets:\n  - clusterName: cluster-3\n")))
	f.waitGitRepo(t, "gw-managed", "Ready on cluster-3", 2*time.Minute, settledAt(repo.Head(t), 1))
	return repo
}

// testManagedAgentMoved: the controller upgraded to serve the gateway
// redeploys cluster-3's agent once, pointing it at the gateway with its
// cluster's credential and none of the controller's secrets; the agent
// run with that configuration works, and no bundle is redeployed.
func testManagedAgentMoved(t *testing.T, f *agentFleet, gw string, repo *testenv.GitRepo) {
	rec := f.waitCluster(t, "cluster-3", "agent moved to the gateway", time.Minute, func(r protocol.ClusterRecord) bool {
		return r.Agent.Deploys >= 2 || r.Agent.Error != ""
	})
	require.Empty(t, rec.Agent.Error)
	assert.Equal(t, 2, rec.Agent.Deploys, "installed, then moved once")
	args := strings.Join(agentDeployment(t, f).Spec.Template.Spec.Containers[0].Args, " ")
	assert.Contains(t, args, "--temporal-address "+gw)
	assert.Contains(t, args, "--gateway")
	assert.NotContains(t, args, "--content-registry")
	assert.NotContains(t, args, "--payload-keys")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sec, err := f.cluster("cluster-3").Clientset(t).CoreV1().Secrets(agentNamespace).Get(ctx, "flotilla-agent", metav1.GetOptions{})
	require.NoError(t, err)
	cred := string(sec.Data["api-key"])
	require.True(t, strings.HasPrefix(cred, "flga1."), "the Secret holds the cluster's gateway credential, keys: %v", keysOf(sec.Data))

	f.restartController(t) // a restart moves nothing again
	f.agents["cluster-3"].proc.Stop()
	a := f.agents["cluster-3"]
	a.proc = testenv.StartProcess(f.t, testenv.ProcessOptions{Name: "flotilla-agent-cluster-3-gw", Path: bins.worker,
		Args: []string{"agent", "--cluster", "cluster-3", "--kubeconfig", a.cluster.KubeconfigPath, "--temporal-address", gw, "--gateway",
			"--state-dir", a.stateDir, "--heartbeat-interval", "1s", "--http-listen", "127.0.0.1:0"},
		Env: []string{"FLOTILLA_API_KEY=" + cred}})
	f.logs = append(f.logs, a.proc.LogPath())
	waitLog(t, a.proc, `"msg":"Agent started"`, time.Minute)
	repo.Commit(t, map[string]string{"cm.yaml": configMapDoc("managed", "v2")}, "v2")
	f.sync(t, "gw-managed")
	f.waitGitRepo(t, "gw-managed", "v2 Ready through the gateway", 2*time.Minute, settledAt(repo.Head(t), 1))
	assert.Equal(t, 2, helmRevisions(t, f.cluster("cluster-3"), "gw-managed", "gw-managed"), "v1 once, v2 once: moving the agent redeployed nothing")
	assert.Equal(t, 2, f.clusterRecord(t, "cluster-3").Agent.Deploys, "a controller restart does not move the agent again")
}

func keysOf(m map[string][]byte) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// startGatewayAgent starts cluster name's agent through the gateway gw.
func (f *agentFleet) startGatewayAgent(t testing.TB, name, token, gw string) *agentProc {
	t.Helper()
	a := &agentProc{stateDir: f.t.TempDir(), cluster: f.cluster(name)}
	f.agents[name] = a
	a.proc = testenv.StartProcess(f.t, testenv.ProcessOptions{Name: "flotilla-agent-" + name, Path: bins.worker,
		Args: []string{"agent", "--cluster", name, "--kubeconfig", a.cluster.KubeconfigPath, "--temporal-address", gw, "--gateway",
			"--state-dir", a.stateDir, "--heartbeat-interval", "1s", "--http-listen", "127.0.0.1:0"},
		Env: []string{"FLOTILLA_REGISTRATION_TOKEN=" + token}})
	f.logs = append(f.logs, a.proc.LogPath())
	waitLog(t, a.proc, `"msg":"Agent started"`, time.Minute)
	return a
}

func readCredential(t testing.TB, stateDir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(stateDir, "credential"))
	require.NoError(t, err)
	cred := strings.TrimSpace(string(b))
	require.True(t, strings.HasPrefix(cred, "flga1."), "credential format")
	return cred
}

// assertAgentHoldsNoControllerSecret: the agent's command line and state
// name neither Temporal's frontend nor the registry nor any key.
func assertAgentHoldsNoControllerSecret(t *testing.T, f *agentFleet, name string) {
	a := f.agents[name]
	log, err := os.ReadFile(a.proc.LogPath())
	require.NoError(t, err)
	assert.NotContains(t, string(log), f.frontend(), "the agent never learns Temporal's address")
	assert.NotContains(t, string(log), f.registry, "the agent never learns the registry")
	entries, err := os.ReadDir(a.stateDir)
	require.NoError(t, err)
	for _, e := range entries {
		assert.Contains(t, []string{"credential", "seal-key", "content"}, e.Name(), "unexpected file in the agent's state dir")
	}
}

func gatewayClient(t testing.TB, gw, cred string) client.Client {
	t.Helper()
	c, err := client.Dial(client.Options{HostPort: gw, Credentials: client.NewAPIKeyStaticCredentials(cred),
		ConnectionOptions: client.ConnectionOptions{TLSDisabled: true}})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

// testGatewaySDKRefusals uses cluster-1's credential with the Temporal
// SDK against the gateway: everything but cluster-1's own calls is
// PermissionDenied.
func testGatewaySDKRefusals(t *testing.T, f *agentFleet, gw, cred string) {
	c := gatewayClient(t, gw, cred)
	ws := c.WorkflowService()
	ns := "default"
	denied := func(t *testing.T, what string, err error) {
		t.Helper()
		require.Error(t, err, what)
		var pd *serviceerror.PermissionDenied
		assert.True(t, errors.As(err, &pd) || status.Code(err) == codes.PermissionDenied, "%s: want PermissionDenied, got %T %v", what, err, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	_, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "evil", TaskQueue: protocol.DefaultTaskQueue}, protocol.GitRepoWorkflow)
	denied(t, "start a workflow", err)
	err = c.SignalWorkflow(ctx, protocol.ClusterID("cluster-2"), "", protocol.SignalHeartbeat, protocol.Heartbeat{Interval: time.Hour})
	denied(t, "signal another cluster's workflow", err)
	err = c.SignalWorkflow(ctx, protocol.GitRepoID("fleet-default", "gw-both"), "", protocol.SignalLive,
		flstatus.LiveSignal{Cluster: "cluster-2"})
	denied(t, "report live state of another cluster", err)
	_, err = ws.PollActivityTaskQueue(ctx, &workflowservice.PollActivityTaskQueueRequest{Namespace: ns,
		TaskQueue: &taskqueuepb.TaskQueue{Name: protocol.ClusterQueue("cluster-2")}})
	denied(t, "poll another cluster's queue", err)
	_, err = ws.PollWorkflowTaskQueue(ctx, &workflowservice.PollWorkflowTaskQueueRequest{Namespace: ns,
		TaskQueue: &taskqueuepb.TaskQueue{Name: protocol.DefaultTaskQueue}})
	denied(t, "poll the controller's workflow queue", err)
	for _, tok := range [][]byte{[]byte("raw temporal token"), append([]byte("FGT1\x09cluster-2\x01k"), make([]byte, 40)...)} {
		_, err = ws.RespondActivityTaskCompleted(ctx, &workflowservice.RespondActivityTaskCompletedRequest{Namespace: ns, TaskToken: tok})
		denied(t, "answer a task not handed to cluster-1", err)
	}
	_, err = ws.GetWorkflowExecutionHistory(ctx, &workflowservice.GetWorkflowExecutionHistoryRequest{Namespace: ns,
		Execution: &commonpb.WorkflowExecution{WorkflowId: protocol.GitRepoID("fleet-default", "gw-both")}})
	denied(t, "read history", err)
	_, err = c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: protocol.KeysID, UpdateName: protocol.UpdatePublishKeys,
		Args: []any{[]string{"evil"}}, WaitForStage: client.WorkflowUpdateStageCompleted})
	denied(t, "publish a sealing key", err)
	_, err = c.QueryWorkflow(ctx, protocol.ClusterID("cluster-2"), "", protocol.QueryStatus)
	denied(t, "query another cluster", err)
	_, err = ws.ListWorkflowExecutions(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: ns})
	denied(t, "list workflows", err)
	_, err = ws.DescribeTaskQueue(ctx, &workflowservice.DescribeTaskQueueRequest{Namespace: ns,
		TaskQueue: &taskqueuepb.TaskQueue{Name: protocol.ClusterQueue("cluster-2")}, TaskQueueType: enumspb.TASK_QUEUE_TYPE_ACTIVITY})
	denied(t, "describe another cluster's queue", err)

	// Its own calls pass: a heartbeat to its own workflow.
	require.NoError(t, c.SignalWorkflow(ctx, protocol.ClusterID("cluster-1"), "", protocol.SignalHeartbeat,
		protocol.Heartbeat{Interval: time.Second}))
}

// grpcCode is the gRPC code of err: a status error (wrapped or not), or a
// Temporal service error the SDK made of one.
func grpcCode(err error) codes.Code {
	if st, ok := status.FromError(err); ok {
		return st.Code()
	}
	var se serviceerror.ServiceError
	if errors.As(err, &se) {
		return se.Status().Code()
	}
	return codes.Unknown
}
