package tests

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/internal/plan"
	"github.com/flotilla-gitops/flotilla/internal/status"
	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

// TestRolloutStrategy runs rollouts whose readiness is real: clusters in
// sim mode (kube-controller-manager, scheduler and kwok) make Deployments
// Available, so Ready, NotReady and dependsOn are decided by what the
// clusters report.
func TestRolloutStrategy(t *testing.T) {
	f := startFleetWith(t, 2, 2, testenv.Options{Sim: true})
	t.Run("DeploymentBecomesReady", func(t *testing.T) { testDeploymentBecomesReady(t, f) })
	t.Run("FailingDeploymentHaltsAndNamesCluster", func(t *testing.T) { testFailingDeployment(t, f) })
	t.Run("DependsOnStartsWhenDependencyReady", func(t *testing.T) { testDependsOn(t, f) })
	t.Run("ApprovalGate", func(t *testing.T) { testApprovalGate(t, f) })
}

// deploymentDoc is a one-replica Deployment; nodeSelector, when set,
// matches no node, so its pod never runs.
func deploymentDoc(name string, unschedulable bool) string {
	sel := ""
	if unschedulable {
		sel = "      nodeSelector:\n        flotilla.dev/no-such-node: \"true\"\n"
	}
	return `apiVersion: apps/v1
kind: Deployment
metadata:
  name: ` + name + `
spec:
  replicas: 1
  selector:
    matchLabels: {app: ` + name + `}
  template:
    metadata:
      labels: {app: ` + name + `}
    spec:
` + sel + `      containers:
      - name: app
        image: registry.example/app:v1
`
}

func testDeploymentBecomesReady(t *testing.T, f *fleet) {
	repo := f.git.CreateRepo(t, "web", map[string]string{"fleet.yaml": fleetYAML("web-ns"), "deploy.yaml": deploymentDoc("web", false)})
	f.apply(t, gitRepoDoc("web", repo.URL(), selectorTarget("env", "dev")))
	defer f.remove(t, "web")
	st := f.waitFor(t, "web", "the Deployment Ready on both clusters", settledAt(repo.Head(t), 2))
	assert.Equal(t, "2/2", st.Display.ReadyClusters)
	for _, c := range []string{"cluster-1", "cluster-2"} {
		rc := st.PerClusterResourceCounts[c]
		assert.Equal(t, 1, rc.DesiredReady, "cluster %s", c)
		assert.Equal(t, 1, rc.Ready, "cluster %s", c)
		d, err := f.cluster(c).Clientset(t).AppsV1().Deployments("web-ns").Get(context.Background(), "web", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, int32(1), d.Status.AvailableReplicas, "kwok runs the pod on %s", c)
	}
	ready, ok := st.Condition("Ready")
	require.True(t, ok)
	assert.Equal(t, "True", ready.Status)
}

// A Deployment that never becomes Available is NotReady, the message names
// the object and the cluster, and with failureThreshold 0 the rollout
// halts after the ready timeout instead of retrying forever.
func testFailingDeployment(t *testing.T, f *fleet) {
	fy := fleetYAML("broken-ns") + "rolloutStrategy:\n  failureThreshold: 0\n  readyTimeoutSeconds: 3\n"
	repo := f.git.CreateRepo(t, "broken", map[string]string{"fleet.yaml": fy, "deploy.yaml": deploymentDoc("broken", true)})
	f.apply(t, gitRepoDoc("broken", repo.URL(), selectorTarget("env", "dev")))
	defer f.remove(t, "broken")
	st := f.waitFor(t, "broken", "the rollout halted", func(st status.GitRepo) bool {
		return st.Settled && len(st.Halts) > 0
	})
	for _, d := range st.Deployments {
		assert.Equal(t, status.NotReady, d.State, "%s on %s", d.Bundle, d.Cluster)
		assert.Contains(t, d.Message, "cluster "+d.Cluster, "the message names the cluster")
		assert.Contains(t, d.Message, "Deployment broken-ns/broken", "the message names the object")
	}
	halted, ok := st.Condition("RolloutHalted")
	require.True(t, ok)
	assert.Equal(t, "True", halted.Status)
	assert.Contains(t, halted.Message, "broken")
	assert.Equal(t, "0/2", st.Display.ReadyClusters)
	assert.Equal(t, 2, st.ResourceCounts.NotReady, "one not-ready Deployment per cluster")
	for _, c := range []string{"cluster-1", "cluster-2"} {
		rc := st.PerClusterResourceCounts[c]
		assert.Equal(t, 1, rc.NotReady, "cluster %s", c)
		assert.Equal(t, 1, rc.DesiredReady, "cluster %s", c)
		assert.Zero(t, rc.Ready, "cluster %s", c)
	}
}

// app depends on db: on each cluster app deploys only once db is Ready
// there, and within a second or so of it (no fixed requeue).
func testDependsOn(t *testing.T, f *fleet) {
	repo := f.git.CreateRepo(t, "stack", map[string]string{
		"db/fleet.yaml":   fleetYAML("stack-db"),
		"db/deploy.yaml":  deploymentDoc("db", false),
		"app/fleet.yaml":  fleetYAML("stack-app") + "dependsOn:\n- name: stack-db\n",
		"app/config.yaml": configMapDoc("app-config", "v1"),
	})
	f.apply(t, gitRepoDoc("stack", repo.URL(), selectorTarget("env", "dev")))
	defer f.remove(t, "stack")
	f.waitFor(t, "stack", "both bundles Ready on both clusters", settledAt(repo.Head(t), 4))
	for _, c := range []string{"cluster-1", "cluster-2"} {
		cs := f.cluster(c).Clientset(t)
		db, err := cs.AppsV1().Deployments("stack-db").Get(context.Background(), "db", metav1.GetOptions{})
		require.NoError(t, err)
		cm, ok := f.configMap(t, c, "stack-app", "app-config")
		require.True(t, ok, "app deployed on %s", c)
		available := availableSince(db)
		require.False(t, available.IsZero(), "db Available on %s", c)
		// Kubernetes timestamps have second precision: app's ConfigMap is
		// created in the same second as db's Available condition or later.
		gap := cm.CreationTimestamp.Sub(available)
		t.Logf("%s: db Available at %s, app deployed at %s (gap %s)", c, available.Format(time.RFC3339), cm.CreationTimestamp.Format(time.RFC3339), gap)
		assert.GreaterOrEqual(t, gap, time.Duration(0), "app must not deploy before db is Ready on %s", c)
		assert.LessOrEqual(t, gap, 2*time.Second, "app must start within about a second of db Ready on %s", c)
	}
}

func availableSince(d *appsv1.Deployment) time.Time {
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable && c.Status == "True" {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

// A partition that requires approval holds the rollout until
// `flotilla approve`; the status says so and names the command.
func testApprovalGate(t *testing.T, f *fleet) {
	fy := fleetYAML("gate-ns") + `rolloutStrategy:
  partitions:
  - name: canary
    clusterName: cluster-1
  - name: rest
    clusterName: cluster-2
    requireApproval: true
`
	repo := f.git.CreateRepo(t, "gate", map[string]string{"fleet.yaml": fy, "cm.yaml": configMapDoc("gate", "v1")})
	f.apply(t, gitRepoDoc("gate", repo.URL(), selectorTarget("env", "dev")))
	defer f.remove(t, "gate")
	st := f.waitFor(t, "gate", "partition rest waiting for approval", func(st status.GitRepo) bool {
		c, ok := st.Condition("WaitingForApproval")
		return ok && c.Status == "True"
	})
	c, _ := st.Condition("WaitingForApproval")
	assert.Contains(t, c.Message, "rest")
	assert.Contains(t, st.Progress, "approval")
	_, onCanary := f.configMap(t, "cluster-1", "gate-ns", "gate")
	_, onRest := f.configMap(t, "cluster-2", "gate-ns", "gate")
	assert.True(t, onCanary, "the canary partition deploys without approval")
	assert.False(t, onRest, "partition rest must wait for approval")

	_, stderr, err := f.cliErr(t, "approve", "gate", "--partition", "nope")
	require.Error(t, err, "an unknown partition is refused")
	assert.Contains(t, stderr, "nope")
	out := f.cli(t, "approve", "gate", "--partition", "rest")
	assert.True(t, strings.Contains(out, "approved") && strings.Contains(out, "rest"), out)
	assert.Regexp(t, `approved gate/rest by \S+@\S+`, out, "the answer names who was recorded")
	f.waitFor(t, "gate", "both clusters Ready after approval", settledAt(repo.Head(t), 2))
	_, onRest = f.configMap(t, "cluster-2", "gate-ns", "gate")
	assert.True(t, onRest)
	testApprovalShowsPlan(t, f, repo)
}

// A change waiting for approval carries the plan of what approving does:
// flotilla status shows its summary, flotilla approve --show the diff.
func testApprovalShowsPlan(t *testing.T, f *fleet, repo *testenv.GitRepo) {
	second := repo.Commit(t, map[string]string{"cm.yaml": configMapDoc("gate", "v2")}, "v2")
	f.cli(t, "sync", "gate")
	f.waitFor(t, "gate", "partition rest's plan made", func(st status.GitRepo) bool {
		return st.LatestCommit == second && slices.ContainsFunc(st.Waits, func(w status.Wait) bool {
			return w.Kind == status.WaitApproval && w.Partition == "rest" && strings.HasPrefix(w.Plan, "1 upgrade on 1 cluster(s)")
		})
	})
	assert.Contains(t, f.cli(t, "status", "gate"), "    plan: 1 upgrade on 1 cluster(s)")
	show := f.cli(t, "approve", "gate", "--show")
	assert.Contains(t, show, "bundle gate partition rest waits for approval (1 cluster(s): cluster-2)")
	assert.Contains(t, show, "-  value: v1")
	assert.Contains(t, show, "+  value: v2")
	var plans plan.ApprovalPlans
	require.NoError(t, json.Unmarshal([]byte(f.cli(t, "approve", "gate", "--show", "-o", "json")), &plans))
	require.Len(t, plans.Partitions, 1)
	assert.Equal(t, plan.StatePlanned, plans.Partitions[0].State)
	require.NotNil(t, plans.Partitions[0].Plan)
	assert.Equal(t, []string{"cluster-2"}, plans.Partitions[0].Clusters)
	cm, _ := f.configMap(t, "cluster-2", "gate-ns", "gate")
	require.NotNil(t, cm)
	assert.Equal(t, "v1", cm.Data["value"], "--show approves nothing")

	out := f.cli(t, "approve", "gate")
	assert.Regexp(t, `approved gate/rest by \S+@\S+`, out)
	f.waitFor(t, "gate", "v2 on both clusters after approval", settledAt(second, 2))
}
