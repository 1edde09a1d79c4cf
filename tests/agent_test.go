package tests

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/status"
	"github.com/flotilla-gitops/flotilla/internal/testenv"
	"github.com/flotilla-gitops/flotilla/internal/testenv/history"
)

const agentNamespace = "flotilla-system"

// TestAgents runs pull-mode agents as separate processes against a
// Temporal server of their own, and checks registration, managed agents,
// and crash safety: controller restarts redeploy no agent, kill -9 of the
// controller during 20 rollouts loses and duplicates nothing, and an agent
// killed mid-deploy finishes the deploy once when it is back.
func TestAgents(t *testing.T) {
	f := startAgentFleet(t, 4)
	if !t.Run("Registration", func(t *testing.T) { testAgentRegistration(t, f) }) {
		return
	}
	if !t.Run("ManagedAgent", func(t *testing.T) { testManagedAgent(t, f) }) {
		return
	}
	// cluster-4 is in push mode: the controller deploys to it.
	require.Contains(t, f.cli(t, "cluster", "add", "cluster-4", "--kubeconfig", f.cluster("cluster-4").KubeconfigPath), "created")
	t.Run("RestartsAndKills", func(t *testing.T) {
		rep := runCrashRollouts(t, f, crashConfig{IdleRestarts: 5, Measured: 3, Killed: 20, Seed: uint64(time.Now().UnixNano())})
		assert.Zero(t, rep.AgentRedeploys, "agent redeploys")
		assert.Zero(t, rep.DuplicateDeployLogs, "duplicate Deployed bundle lines: %+v", rep.Audit)
		assert.Zero(t, rep.ExtraHelmRevisions, "Helm revisions beyond distinct deployment IDs: %+v", rep.Audit)
	})
	t.Run("HealthAndMetrics", func(t *testing.T) { testHealthAndMetrics(t, f) })
	t.Run("KillAgentMidDeploy", func(t *testing.T) { testKillAgentMidDeploy(t, f) })
	t.Run("KillAgentMidCorrection", func(t *testing.T) { testKillAgentMidCorrection(t, f) })
}

// testHealthAndMetrics: controller and agents serve /healthz, /readyz and
// /metrics on --http-listen, and /metrics carries the Temporal SDK's
// metrics for the worker's own task queue beside the process's.
func testHealthAndMetrics(t *testing.T, f *agentFleet) {
	for _, w := range []struct {
		name string
		proc *testenv.Process
		// want are lines of /metrics that must exist, as prefix and
		// substrings of one line.
		want [][]string
	}{
		{"controller", f.ctrl, [][]string{
			{"temporal_num_pollers{", `poller_type="workflow_task"`, `task_queue="flotilla"`},
			{"temporal_request_total{", `operation="SignalWorkflowExecution"`},
			{"process_resident_memory_bytes"},
		}},
		{"agent of cluster-2", f.agents["cluster-2"].proc, [][]string{
			{"temporal_num_pollers{", `poller_type="activity_task"`, `task_queue="cluster/cluster-2"`},
			{"temporal_activity_execution_latency_seconds_count{", `activity_type="Deploy"`, `task_queue="cluster/cluster-2"`},
			{"process_resident_memory_bytes"},
		}},
	} {
		lines := logLines(t, "Serving health and metrics", []string{w.proc.LogPath()})
		require.NotEmpty(t, lines, "%s: no \"Serving health and metrics\" line", w.name)
		base := "http://" + lines[len(lines)-1]["address"].(string)
		assert.Equal(t, "ok\n", httpGet(t, base+"/healthz"), "%s /healthz", w.name)
		assert.Equal(t, "ok\n", httpGet(t, base+"/readyz"), "%s /readyz", w.name)
		metrics := strings.Split(httpGet(t, base+"/metrics"), "\n")
		for _, want := range w.want {
			assert.True(t, slices.ContainsFunc(metrics, func(l string) bool {
				if !strings.HasPrefix(l, want[0]) {
					return false
				}
				for _, sub := range want[1:] {
					if !strings.Contains(l, sub) {
						return false
					}
				}
				return true
			}), "%s /metrics: no line like %q", w.name, want)
		}
	}
}

// httpGet GETs url (on 127.0.0.1) and returns the body of a 200 answer.
func httpGet(t testing.TB, url string) string {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil}}
	resp, err := c.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "GET %s: %s", url, body)
	return string(body)
}

// testAgentRegistration: an agent registers with a token once; a reused,
// unknown or forged token is rejected with a message saying which; the
// token never reaches Temporal's history.
func testAgentRegistration(t *testing.T, f *agentFleet) {
	tok := f.newToken(t, "1h")
	f.startAgent(t, "cluster-1", tok, "--label", "env=pull")
	rec := f.waitCluster(t, "cluster-1", "agent online", 30*time.Second, func(r protocol.ClusterRecord) bool {
		return r.Agent != nil && r.Agent.LastSeen != nil
	})
	assert.Equal(t, map[string]string{"env": "pull"}, rec.Labels)
	assert.True(t, rec.PullMode())

	out, err := f.runAgentOnce(t, "cluster-2", tok)
	require.Error(t, err, out)
	assert.Contains(t, out, "already used by cluster cluster-1")

	out, err = f.runAgentOnce(t, "cluster-2", "flt.nosuchtoken."+strings.Repeat("A", 43))
	require.Error(t, err, out)
	assert.Contains(t, out, "unknown registration token nosuchtoken")

	tok2 := f.newToken(t, "1h")
	forged := tok2[:strings.LastIndex(tok2, ".")+1] + strings.Repeat("B", 43)
	out, err = f.runAgentOnce(t, "cluster-2", forged)
	require.Error(t, err, out)
	assert.Contains(t, out, "invalid registration token")

	f.startAgent(t, "cluster-2", tok2, "--label", "env=pull")
	f.waitCluster(t, "cluster-2", "agent online", 30*time.Second, func(r protocol.ClusterRecord) bool {
		return r.Agent != nil && r.Agent.LastSeen != nil
	})
	list := f.cli(t, "cluster", "list")
	assert.Regexp(t, `cluster-1\s+agent\s+Online`, list)

	// Neither token's secret appears anywhere in the tokens' histories.
	for _, tk := range []string{tok, tok2} {
		secret := tk[strings.LastIndex(tk, ".")+1:]
		tid := strings.Split(tk, ".")[1]
		hist := historyText(t, f, protocol.ClusterTokenID(tid))
		assert.NotContains(t, hist, secret)
		assert.NotContains(t, hist, tk)
	}
}

// historyText is the whole history of a workflow's latest run as text,
// with every payload decoded (history.Text).
func historyText(t testing.TB, f *agentFleet, id string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	text, err := history.RunText(ctx, f.c, id, "")
	require.NoError(t, err)
	return text
}

// countSignals counts signals named name in a workflow's current run.
func countSignals(t testing.TB, f *agentFleet, id, name string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	it := f.c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	n := 0
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		if a := ev.GetWorkflowExecutionSignaledEventAttributes(); a != nil && a.GetSignalName() == name {
			n++
		}
	}
	return n
}

// testManagedAgent: `cluster add --install-agent` installs the agent as a
// Deployment with the tolerations asked for, removes a StatefulSet an older
// install left, and the agent (run here as a process, as the cluster has no
// kubelet) serves the cluster without a token.
func testManagedAgent(t *testing.T, f *agentFleet) {
	c3 := f.cluster("cluster-3")
	cs := c3.Clientset(t)
	ctx := context.Background()
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: agentNamespace}}, metav1.CreateOptions{})
	require.NoError(t, err)
	labels := map[string]string{"app": "flotilla-agent"}
	_, err = cs.AppsV1().StatefulSets(agentNamespace).Create(ctx, &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "flotilla-agent"},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "old-agent:v0"}}}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	out := f.cli(t, "cluster", "add", "cluster-3", "--kubeconfig", c3.KubeconfigPath, "--label", "env=pull",
		"--install-agent", "--agent-toleration", "dedicated=flotilla:NoSchedule", "--agent-env", "EXTRA=1")
	require.Contains(t, out, "cluster/cluster-3 created")
	rec := f.waitCluster(t, "cluster-3", "agent installed", time.Minute, func(r protocol.ClusterRecord) bool {
		return r.Agent != nil && r.Agent.DeploymentID != "" || r.Agent != nil && r.Agent.Error != ""
	})
	require.Empty(t, rec.Agent.Error)
	assert.Equal(t, 1, rec.Agent.Deploys)

	dep := agentDeployment(t, f)
	pod := dep.Spec.Template.Spec
	assert.Contains(t, pod.Tolerations, corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "flotilla", Effect: corev1.TaintEffectNoSchedule})
	require.Len(t, pod.Containers, 1)
	args := strings.Join(pod.Containers[0].Args, " ")
	assert.Contains(t, args, "--cluster cluster-3")
	assert.Contains(t, args, "--temporal-address "+f.frontend())
	assert.Contains(t, args, "--content-registry "+f.registry)
	assert.Contains(t, pod.Containers[0].Env, corev1.EnvVar{Name: "EXTRA", Value: "1"})
	assert.Equal(t, "flotilla-worker:e2e", pod.Containers[0].Image)
	_, err = cs.AppsV1().StatefulSets(agentNamespace).Get(ctx, "flotilla-agent", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the older install's StatefulSet must be gone: %v", err)
	assert.Len(t, logLines(t, "Deployed agent", f.ctrlLogs), 1)

	f.startAgent(t, "cluster-3", "")
	f.waitCluster(t, "cluster-3", "agent online", 30*time.Second, func(r protocol.ClusterRecord) bool {
		return r.Agent.LastSeen != nil
	})

	// A Cluster resource with Fleet's agent fields replaces those settings
	// (the flags' toleration and env go), keeps the rest, and upgrades the
	// agent once.
	doc := filepath.Join(t.TempDir(), "cluster-3.yaml")
	require.NoError(t, os.WriteFile(doc, []byte(`apiVersion: flotilla.dev/v1alpha1
kind: Cluster
metadata: {name: cluster-3, labels: {env: pull}}
spec:
  agentTolerations: [{key: gpu, operator: Exists, effect: NoExecute}]
  agentEnvVars: [{name: FROM_CLUSTER, value: "1"}]
  agentResources: {limits: {memory: 256Mi}}
`), 0o600))
	assert.Contains(t, f.cli(t, "apply", "-f", doc), "cluster/cluster-3 configured")
	rec = f.waitCluster(t, "cluster-3", "agent upgraded", time.Minute, func(r protocol.ClusterRecord) bool {
		return r.Agent.Deploys == 2 || r.Agent.Error != ""
	})
	require.Empty(t, rec.Agent.Error)
	pod = agentDeployment(t, f).Spec.Template.Spec
	assert.Contains(t, pod.Tolerations, corev1.Toleration{Key: "gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute})
	assert.NotContains(t, pod.Tolerations, corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "flotilla", Effect: corev1.TaintEffectNoSchedule})
	assert.Contains(t, pod.Containers[0].Env, corev1.EnvVar{Name: "FROM_CLUSTER", Value: "1"})
	assert.NotContains(t, pod.Containers[0].Env, corev1.EnvVar{Name: "EXTRA", Value: "1"})
	assert.Equal(t, "256Mi", pod.Containers[0].Resources.Limits.Memory().String())
	assert.Equal(t, "flotilla-worker:e2e", pod.Containers[0].Image, "settings the resource does not name are kept")
	assert.Len(t, logLines(t, "Deployed agent", f.ctrlLogs), 2)

	// On a cluster without a managed agent the same fields are refused.
	bad := filepath.Join(t.TempDir(), "cluster-1.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("apiVersion: flotilla.dev/v1alpha1\nkind: Cluster\nmetadata: {name: cluster-1, labels: {env: pull}}\nspec: {agentNamespace: agents}\n"), 0o600))
	out, err = f.cliErr(t, "apply", "-f", bad)
	require.Error(t, err)
	assert.Contains(t, out, "cluster cluster-1")
	assert.Contains(t, out, "--install-agent")
}

// agentDeployment reads the managed agent's Deployment on cluster-3.
func agentDeployment(t testing.TB, f *agentFleet) *appsv1.Deployment {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dep, err := f.cluster("cluster-3").Clientset(t).AppsV1().Deployments(agentNamespace).Get(ctx, "flotilla-agent", metav1.GetOptions{})
	require.NoError(t, err)
	return dep
}

// crashConfig shapes runCrashRollouts.
type crashConfig struct {
	// IdleRestarts are graceful controller restarts with nothing to do.
	IdleRestarts int
	// Measured rollouts run undisturbed and time each cluster's deploy.
	Measured int
	// Killed rollouts each kill -9 the controller at a random point and
	// restart it.
	Killed int
	Seed   uint64
}

// crashReport is what runCrashRollouts observed.
type crashReport struct {
	Rollouts, ControllerRestarts, Kills int
	AgentRedeploys                      int
	DuplicateDeployLogs                 int
	ExtraHelmRevisions                  int
	// ConfirmedDeploys counts "Confirmed interrupted deploy" lines; of
	// those deploys, UnloggedDeploys had no "Deployed bundle" line (the
	// kill landed between Helm's final write and the log).
	ConfirmedDeploys, UnloggedDeploys    int
	PullDeployMs, PushDeployMs           []float64
	AgentGeneration, AgentGenerationWas  int64
	AgentDefaultsSignals, ExpectedSignal int
	Audit                                deployAudit
}

// runCrashRollouts rolls a ConfigMap out to cluster-1..3 (agents) and
// cluster-4 (push) again and again while restarting and killing the
// controller, then audits logs, Helm records and the managed agent.
func runCrashRollouts(t testing.TB, f *agentFleet, cfg crashConfig) crashReport {
	t.Helper()
	const ns, cm = "crash-ns", "crash"
	clusters := []string{"cluster-1", "cluster-2", "cluster-3", "cluster-4"}
	var rep crashReport
	repo := f.git.CreateRepo(t, "crash", map[string]string{"fleet.yaml": fleetYAML(ns), "cm.yaml": configMapDoc(cm, "v0")})
	f.cli(t, "apply", "-f", writeTemp(t, "crash.yaml", gitRepoDoc("crash", repo.URL(), allClusters)))
	f.waitGitRepo(t, "crash", "first commit on 4 clusters", 2*time.Minute, settledAt(repo.Head(t), 4))
	rep.Rollouts++
	rep.AgentGenerationWas = agentDeployment(t, f).Generation
	agentDeploysWas := len(logLines(t, "Deployed agent", f.ctrlLogs))
	recordDeploysWas := f.clusterRecord(t, "cluster-3").Agent.Deploys

	for range cfg.IdleRestarts {
		f.restartController(t)
	}
	t.Logf("crash: seed %d", cfg.Seed)
	rng := rand.New(rand.NewPCG(cfg.Seed, 0))
	for i := 1; i <= cfg.Measured+cfg.Killed; i++ {
		value := fmt.Sprintf("v%d", i)
		commit := repo.Commit(t, map[string]string{"cm.yaml": configMapDoc(cm, value)}, value)
		start := time.Now()
		f.sync(t, "crash")
		if i > cfg.Measured {
			time.Sleep(time.Duration(rng.IntN(1500)) * time.Millisecond)
			f.killController(t)
			f.restartController(t)
		} else {
			for c, ms := range waitConfigMaps(t, f, clusters, ns, cm, value, start) {
				if c == "cluster-4" {
					rep.PushDeployMs = append(rep.PushDeployMs, ms)
				} else {
					rep.PullDeployMs = append(rep.PullDeployMs, ms)
				}
			}
		}
		f.waitGitRepo(t, "crash", "commit "+value+" on 4 clusters", 3*time.Minute, settledAt(commit, 4))
		rep.Rollouts++
	}
	rep.ControllerRestarts, rep.Kills = f.restarts, f.kills
	rep.Audit = f.audit(t, "crash", ns, clusters)
	rep.DuplicateDeployLogs = rep.Audit.duplicates()
	rep.ExtraHelmRevisions = rep.Audit.extraRevisions()
	for _, c := range clusters {
		rep.ConfirmedDeploys += rep.Audit.confirmed[c]
		rep.UnloggedDeploys += rep.Audit.distinct[c] - rep.Audit.logged[c]
	}
	if rep.DuplicateDeployLogs != 0 || rep.ExtraHelmRevisions != 0 || rep.ConfirmedDeploys != 0 {
		for _, c := range clusters {
			t.Logf("crash: Helm records on %s: %v", c, helmRecordIDs(t, f.cluster(c), ns, "crash"))
		}
		for _, msg := range []string{"Deployed bundle", "Confirmed interrupted deploy"} {
			for _, l := range logLines(t, msg, f.logs) {
				t.Logf("crash: %s %v rev %v %v at %v", msg, l["cluster"], l["revision"], l["deploymentID"], l["ts"])
			}
		}
	}
	t.Logf("crash: %d interrupted deploys confirmed by their retry, %d of them without a Deployed bundle line", rep.ConfirmedDeploys, rep.UnloggedDeploys)
	for _, c := range clusters {
		assert.Equal(t, rep.Rollouts, rep.Audit.distinct[c], "deployment IDs applied on %s", c)
	}
	// Every controller start since cluster-3 was added told it the agent
	// defaults, and none redeployed the agent.
	rep.ExpectedSignal = f.restarts
	require.Eventually(t, func() bool {
		rep.AgentDefaultsSignals = countSignals(t, f, protocol.ClusterID("cluster-3"), protocol.SignalAgentDefaults)
		return rep.AgentDefaultsSignals >= rep.ExpectedSignal
	}, 30*time.Second, 200*time.Millisecond, "agentDefaults signals to cluster-3: want at least one per controller start (%d)", rep.ExpectedSignal)
	t.Logf("crash: %d agentDefaults signals to cluster-3 for %d controller starts", rep.AgentDefaultsSignals, rep.ExpectedSignal)
	rep.AgentGeneration = agentDeployment(t, f).Generation
	rep.AgentRedeploys = len(logLines(t, "Deployed agent", f.ctrlLogs)) - agentDeploysWas
	if rep.AgentGeneration != rep.AgentGenerationWas {
		rep.AgentRedeploys = max(rep.AgentRedeploys, 1)
	}
	assert.Equal(t, rep.AgentGenerationWas, rep.AgentGeneration, "agent Deployment generation")
	assert.Equal(t, recordDeploysWas, f.clusterRecord(t, "cluster-3").Agent.Deploys, "managed agent deploys")
	t.Logf("crash: %d rollouts, %d controller restarts (%d kill -9), %d agentDefaults signals, pull deploy p50 %.0f ms, push p50 %.0f ms",
		rep.Rollouts, rep.ControllerRestarts, rep.Kills, rep.AgentDefaultsSignals, median(rep.PullDeployMs), median(rep.PushDeployMs))
	return rep
}

// waitConfigMaps waits until the ConfigMap holds value on every cluster
// and returns how long after start each one did, in milliseconds.
func waitConfigMaps(t testing.TB, f *agentFleet, clusters []string, ns, name, value string, start time.Time) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	deadline := start.Add(2 * time.Minute)
	for len(out) < len(clusters) {
		for _, c := range clusters {
			if _, done := out[c]; done {
				continue
			}
			cm, err := f.cluster(c).Clientset(t).CoreV1().ConfigMaps(ns).Get(context.Background(), name, metav1.GetOptions{})
			if err == nil && cm.Data["value"] == value {
				out[c] = ms(time.Since(start))
			}
		}
		require.False(t, time.Now().After(deadline), "ConfigMap %s=%s not on all clusters: %v", name, value, out)
		time.Sleep(10 * time.Millisecond)
	}
	return out
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	return percentile(v, 0.5)
}

// testKillAgentMidDeploy: the agent of cluster-1 is killed while Helm
// installs a 300-object release (its record pending-install); the cluster
// turns Offline; when the agent is back, the deploy completes once, with
// one Helm revision and one "Deployed bundle" line.
func testKillAgentMidDeploy(t *testing.T, f *agentFleet) {
	const ns, release = "big-ns", "big"
	cs := f.cluster("cluster-1").Clientset(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w, err := cs.CoreV1().Secrets(ns).Watch(ctx, listByRelease(release))
	require.NoError(t, err)
	defer w.Stop()

	repo := f.git.CreateRepo(t, "big", map[string]string{"fleet.yaml": fleetYAML(ns), "cms.yaml": manyConfigMaps("big", 300)})
	f.cli(t, "apply", "-f", writeTemp(t, "big.yaml", gitRepoDoc("big", repo.URL(), "  targets:\n  - clusterName: cluster-1\n")))
	var state string
	for ev := range w.ResultChan() {
		if s, ok := ev.Object.(*corev1.Secret); ok && s.Name == "sh.helm.release.v1.big.v1" {
			kill9(t, f.agents["cluster-1"].proc)
			got, err := cs.CoreV1().Secrets(ns).Get(context.Background(), s.Name, metav1.GetOptions{})
			require.NoError(t, err)
			state = got.Labels["status"]
			break
		}
	}
	require.NotEmpty(t, state, "release record never appeared: %v", ctx.Err())
	t.Logf("agent killed with release record in state %s", state)
	f.waitCluster(t, "cluster-1", "Offline after missed heartbeats", 20*time.Second, func(r protocol.ClusterRecord) bool {
		return r.Agent.Offline
	})
	assert.Regexp(t, `cluster-1\s+agent\s+Offline`, f.cli(t, "cluster", "list"))

	f.startAgent(t, "cluster-1", "")
	f.waitGitRepo(t, "big", "big bundle Ready after the agent is back", 3*time.Minute, settledAt(repo.Head(t), 1))
	f.waitCluster(t, "cluster-1", "back online", 20*time.Second, func(r protocol.ClusterRecord) bool { return !r.Agent.Offline })
	a := f.audit(t, release, ns, []string{"cluster-1"})
	assert.Equal(t, 1, a.lines["cluster-1"], "Deployed bundle lines")
	assert.Equal(t, 1, a.revisions["cluster-1"], "Helm revisions (the interrupted install is replaced, not stacked)")
	cms, err := cs.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "flotilla.dev/bundle=big"})
	require.NoError(t, err)
	assert.Len(t, cms.Items, 300)
}

// testKillAgentMidCorrection: cluster-1's agent watches a release with
// correctDrift; a hand edit starts a correction and the agent is killed
// the moment Helm writes the correction's record. When the agent is back
// its watch resumes and the release is restored with exactly one
// correction record, at the same deployment ID, and no deploy.
func testKillAgentMidCorrection(t *testing.T, f *agentFleet) {
	const ns, name = "drift-agent", "drift-agent"
	bundle := name + "-app"
	repo := f.git.CreateRepo(t, name, map[string]string{"app/fleet.yaml": fleetYAML(ns), "app/cm.yaml": configMapDoc("cm", "v1")})
	f.cli(t, "apply", "-f", writeTemp(t, name+".yaml", gitRepoDoc(name, repo.URL(),
		"  targets:\n  - clusterName: cluster-1\n  correctDrift:\n    enabled: true\n")))
	st := f.waitGitRepo(t, name, "Ready on cluster-1", 2*time.Minute, settledAt(repo.Head(t), 1))
	d, _ := deploymentOn(st, bundle, "cluster-1")
	id := d.DeploymentID
	settle()

	cs := f.cluster("cluster-1").Clientset(t)
	records := func() map[string]string {
		list, err := cs.CoreV1().Secrets(ns).List(context.Background(), listByRelease(bundle))
		require.NoError(t, err)
		out := map[string]string{}
		for _, s := range list.Items {
			out[s.Labels["version"]] = s.Labels["status"]
		}
		return out
	}
	before := len(records())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w, err := cs.CoreV1().Secrets(ns).Watch(ctx, listByRelease(bundle))
	require.NoError(t, err)
	defer w.Stop()
	cms := cs.CoreV1().ConfigMaps(ns)
	cm, err := cms.Get(ctx, "cm", metav1.GetOptions{})
	require.NoError(t, err)
	cm.Data["value"] = "by-hand"
	_, err = cms.Update(ctx, cm, metav1.UpdateOptions{FieldManager: "kubectl-edit"})
	require.NoError(t, err)
	want := fmt.Sprintf("sh.helm.release.v1.%s.v%d", bundle, before+1)
	var state string
	for ev := range w.ResultChan() {
		if s, ok := ev.Object.(*corev1.Secret); ok && s.Name == want {
			kill9(t, f.agents["cluster-1"].proc)
			state = s.Labels["status"]
			break
		}
	}
	require.NotEmpty(t, state, "the correction's record never appeared: %v", ctx.Err())
	t.Logf("agent killed with the correction's record in state %s", state)

	f.startAgent(t, "cluster-1", "")
	waitUntil(t, 90*time.Second, "edit corrected after the agent is back", func() bool {
		got, err := cms.Get(context.Background(), "cm", metav1.GetOptions{})
		return err == nil && got.Data["value"] == "v1"
	})
	f.waitGitRepo(t, name, "Ready at the same deployment ID", time.Minute, func(st status.GitRepo) bool {
		return readyAt(st, bundle, "cluster-1", id)
	})
	recs := records()
	assert.Len(t, recs, before+1, "exactly one correction: %v", recs)
	assert.Equal(t, "deployed", recs[fmt.Sprint(before+1)], "%v", recs)
	corrected := 0
	for _, l := range logLines(t, logCorrected, f.logs) {
		if l["bundle"] == bundle {
			corrected++
		}
	}
	assert.LessOrEqual(t, corrected, 1, "at most one %q line", logCorrected)
	a := f.audit(t, bundle, ns, []string{"cluster-1"})
	assert.Equal(t, 1, a.lines["cluster-1"], "one Deployed bundle line: the first deploy, none for the correction")
}
