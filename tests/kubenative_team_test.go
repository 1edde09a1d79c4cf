package tests

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/flotilla-gitops/flotilla/internal/fleetstatus"
	"github.com/flotilla-gitops/flotilla/internal/policy"
	"github.com/flotilla-gitops/flotilla/internal/status"
	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

// teamKubeconfig returns a kubeconfig for ServiceAccount ns/name of c,
// which may edit Fleet's GitRepos in ns and nothing else (a Role bound in
// ns, no cluster-wide binding): a team's member.
func teamKubeconfig(t *testing.T, c *testenv.Cluster, ns, name string) string {
	t.Helper()
	cs := c.Clientset(t)
	ctx := t.Context()
	_, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = cs.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "gitrepo-editor"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"fleet.cattle.io"}, Resources: []string{"gitrepos"},
			Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name + "-gitrepo-editor"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "gitrepo-editor"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	require.NoError(t, err)
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["mgmt"] = &clientcmdapi.Cluster{Server: c.Server, CertificateAuthorityData: c.RESTConfig().CAData}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts["mgmt"] = &clientcmdapi.Context{Cluster: "mgmt", AuthInfo: name}
	cfg.CurrentContext = "mgmt"
	path := filepath.Join(t.TempDir(), ns+"-"+name+".kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*cfg, path))
	return path
}

// testTeamPolicy: a member of team-a, bound only there by Kubernetes RBAC,
// creates a GitRepo in team-a and is refused in team-b; a Policy of
// team-a refusing the GitRepo's repository stalls it (Stalled condition
// and an event naming the rule) and nothing is deployed; once the Policy
// is deleted the GitRepo deploys.
func testTeamPolicy(t *testing.T, f *mgmtFleet) {
	for _, ns := range []string{"team-a", "team-b"} {
		_, err := f.mgmt.Clientset(t).CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	alice := crdKubectl{bin: f.k.bin, kubeconfig: teamKubeconfig(t, f.mgmt, "team-a", "alice"), cacheDir: t.TempDir()}
	repo := f.git.CreateRepo(t, "team-a-app", map[string]string{"fleet.yaml": fleetYAML("team-a-app"), "cm.yaml": configMapDoc("team-app", "v1")})
	gitRepo := func(ns string) string {
		return "apiVersion: fleet.cattle.io/v1alpha1\nkind: GitRepo\nmetadata: {name: app, namespace: " + ns + "}\n" +
			"spec:\n  repo: " + repo.URL() + "\n  targets:\n  - clusterSelector: {matchLabels: {env: dev}}\n"
	}

	_, stderr, err := alice.try(gitRepo("team-b"), "apply", "-f", "-")
	require.Error(t, err, "alice may not create GitRepos in team-b")
	assert.Contains(t, stderr, "forbidden")

	const rule = "Policy team-a/strict"
	f.k.run(t, "apiVersion: fleet.cattle.io/v1alpha1\nkind: Policy\nmetadata: {name: strict, namespace: team-a}\n"+
		"gitRepo:\n  allowedRepoPatterns: ['^https://git\\.example\\.com/']\n", "apply", "-f", "-")
	// The Policy reaches Temporal before the GitRepo is applied: the
	// controller applies both from its informers, in either order, and a
	// GitRepo applied first would deploy before the Policy exists.
	c := policyClient(t, f.fleet)
	require.Eventually(t, func() bool {
		set, err := policy.Load(t.Context(), c, "team-a")
		return err == nil && len(set.Policies) == 1
	}, 30*time.Second, 250*time.Millisecond, "the Policy reaches Temporal")
	alice.run(t, gitRepo("team-a"), "apply", "-f", "-")

	f.waitIn(t, "team-a", "app", "stalled by the Policy", time.Minute, func(st status.GitRepo) bool {
		return strings.Contains(st.PolicyViolation, rule)
	})
	stalled := func() bool {
		obj, err := f.dyn.Resource(mgmtGitRepos).Namespace("team-a").Get(t.Context(), "app", metav1.GetOptions{})
		if err != nil {
			return false
		}
		c := condition(obj, "Stalled")
		return c["status"] == "True" && strings.Contains(c["message"], rule)
	}
	require.Eventually(t, stalled, 30*time.Second, 250*time.Millisecond, "GitRepo team-a/app: Stalled naming %s", rule)
	require.Eventually(t, func() bool {
		evs, err := f.mgmt.Clientset(t).CoreV1().Events("team-a").List(t.Context(), metav1.ListOptions{})
		require.NoError(t, err)
		for _, e := range evs.Items {
			if e.Reason == fleetstatus.ReasonPolicyViolation && e.InvolvedObject.Name == "app" && strings.Contains(e.Message, rule) {
				return true
			}
		}
		return false
	}, 30*time.Second, 250*time.Millisecond, "a PolicyViolation event names %s", rule)
	for _, c := range f.clusters[:2] {
		assert.Empty(t, configMapValue(t, c, "team-a-app", "team-app"), "%s: a refused GitRepo deployed", c.Name)
	}

	f.k.run(t, "", "delete", "policy", "strict", "-n", "team-a")
	f.waitIn(t, "team-a", "app", "deployed once the Policy is gone", 2*time.Minute, settledReady(2))
	for _, c := range f.clusters[:2] {
		assert.Equal(t, "v1", configMapValue(t, c, "team-a-app", "team-app"), c.Name)
	}
}

// condition returns the type cond of obj's status.conditions as strings.
func condition(obj *unstructured.Unstructured, cond string) map[string]string {
	list, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range list {
		m, _ := c.(map[string]any)
		if m["type"] == cond {
			out := map[string]string{}
			for k, v := range m {
				if s, ok := v.(string); ok {
					out[k] = s
				}
			}
			return out
		}
	}
	return nil
}
