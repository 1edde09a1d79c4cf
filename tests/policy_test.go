package tests

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/internal/status"
	"github.com/flotilla-gitops/flotilla/internal/temporalx"
)

// TestPolicy checks that a Policy of a GitRepo's namespace, applied with
// `flotilla apply`, is enforced before anything is fetched or deployed
// (issue 29, item 4), on one push-mode cluster with RBAC on: a repo its
// allowedRepoPatterns do not match stalls the GitRepo with a violation
// naming the rule and deploys nothing; relaxing the Policy lets it
// deploy, as its defaultServiceAccount; deleting the Policy
// (`flotilla delete policy/NAME`) rolls out the GitRepo's own spec again; a
// GitRepoRestriction applied later stalls it and leaves what runs alone.
func TestPolicy(t *testing.T) {
	f := &failureFleet{fleet: startFleet(t, 1, 1)}
	const name, ns, other = "polapp", "pol-apps", "pol-other"
	cs, ctx := f.kube(t, "cluster-1")
	for _, n := range []string{ns, other} {
		_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	f.serviceAccount(t, ns, "deployer", "configmaps", "secrets")

	out := f.apply(t, policyDoc("strict", "gitRepo:\n  allowedRepoPatterns:\n  - https://git\\.example\\.com/.*\n"))
	assert.Contains(t, out, "policy/fleet-default/strict created")

	repo := f.git.CreateRepo(t, name, map[string]string{
		"app/fleet.yaml":     "namespace: " + ns + "\n",
		"app/cm.yaml":        configMapDoc("pol-app", "v1"),
		"outside/fleet.yaml": "defaultNamespace: " + ns + "\n",
		"outside/cm.yaml":    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: pol-outside\n  namespace: " + other + "\n",
	})
	f.apply(t, gitRepoDoc(name, repo.URL(), clusterTarget("cluster-1")))

	// Refused: stalled with the rule, nothing deployed.
	st := f.waitFor(t, name, "a policy violation", func(st status.GitRepo) bool { return st.PolicyViolation != "" })
	assert.Equal(t, `Policy fleet-default/strict: gitRepo.allowedRepoPatterns [https://git\.example\.com/.*] do not match repo "`+
		repo.URL()+`"`, st.PolicyViolation)
	stalled, _ := st.Condition(status.ConditionStalled)
	assert.Equal(t, status.ConditionTrue, stalled.Status)
	assert.Equal(t, status.ReasonPolicyViolation, stalled.Reason)
	assert.Equal(t, status.DisplayPolicyViolation, st.Display.State)
	assert.Empty(t, st.LatestCommit, "the remote was not asked")
	time.Sleep(2 * time.Second) // a rollout, had one started, deploys ConfigMaps within this
	_, ok := f.configMap(t, "cluster-1", ns, "pol-app")
	assert.False(t, ok, "nothing deployed while refused")

	// Relaxed, with a default service account: it deploys as that account,
	// which may manage ConfigMaps and Secrets in its namespace only.
	f.apply(t, policyDoc("strict", "requireServiceAccount: true\ngitRepo:\n  defaultServiceAccount: deployer\n"+
		"  allowedRepoPatterns:\n  - http://127\\.0\\.0\\.1:[0-9]+/.*\n"))
	st = f.readyOn(t, name, name+"-app", repo.Head(t))
	assert.Empty(t, st.PolicyViolation)
	_, ok = f.configMap(t, "cluster-1", ns, "pol-app")
	assert.True(t, ok)
	d := f.failedOn(t, name, name+"-outside")
	assert.Contains(t, d.Message, `"system:serviceaccount:pol-apps:deployer"`, "deployed as the policy's defaultServiceAccount")

	// Deleted: the GitRepo's own spec (no serviceAccount) rolls out again.
	assert.Contains(t, f.cli(t, "delete", "policy/strict"), "policy/fleet-default/strict deleted")
	_, stderr, err := f.cliErr(t, "delete", "policy/strict")
	require.Error(t, err, "a second delete finds nothing")
	assert.Contains(t, stderr, "Policy fleet-default/strict not found")
	f.readyOn(t, name, name+"-outside", repo.Head(t))
	_, ok = f.configMap(t, "cluster-1", other, "pol-outside")
	assert.True(t, ok, "deployed with the cluster's credentials once the policy is gone")

	// A GitRepoRestriction refuses what now runs: it stalls, and what it
	// deployed stays; deleting the GitRepo still removes it.
	out = f.apply(t, "apiVersion: fleet.cattle.io/v1alpha1\nkind: GitRepoRestriction\nmetadata:\n  name: ns-only\n"+
		"allowedTargetNamespaces:\n- "+ns+"\n")
	assert.Contains(t, out, "gitreporestriction/fleet-default/ns-only created")
	st = f.waitFor(t, name, "a restriction violation", func(st status.GitRepo) bool { return st.PolicyViolation != "" })
	assert.Equal(t, "GitRepoRestriction fleet-default/ns-only: allowedTargetNamespaces is set, and the GitRepo sets no targetNamespace",
		st.PolicyViolation)
	assert.Len(t, st.Deployments, 2, "the deployments stay as they were")
	_, ok = f.configMap(t, "cluster-1", ns, "pol-app")
	assert.True(t, ok, "nothing removed by a refusal")
	f.remove(t, name)
	_, ok = f.configMap(t, "cluster-1", ns, "pol-app")
	assert.False(t, ok, "a refused GitRepo is still deleted")
}

// policyDoc is a Policy of fleet-default; body holds its top-level fields.
func policyDoc(name, body string) string {
	return "apiVersion: fleet.cattle.io/v1alpha1\nkind: Policy\nmetadata:\n  name: " + name + "\n" + body
}

// policyClient dials the fleet's Temporal as the CLI does.
func policyClient(t testing.TB, f *fleet) client.Client {
	t.Helper()
	opts, err := temporalx.ClientOptions{Address: f.w.frontend}.ClientConfig(zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)))
	require.NoError(t, err)
	c, err := client.Dial(opts)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}
