package tests

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/flotilla-gitops/flotilla/internal/deployer"
	"github.com/flotilla-gitops/flotilla/internal/outcome"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

// TestDeployOptions checks that the fleet.yaml options of issue 17 act at
// deploy time, on one push-mode cluster (RBAC on, as every testenv API
// server): namespaceLabels/namespaceAnnotations, serviceAccount and
// helm.valuesFrom. Each scenario has its own GitRepos and namespace.
func TestDeployOptions(t *testing.T) {
	start := time.Now()
	f := &failureFleet{fleet: startFleet(t, 1, 1)}
	t.Run("NamespaceLabels", func(t *testing.T) { testOptionsNamespaceLabels(t, f) })
	t.Run("ServiceAccount", func(t *testing.T) { testOptionsServiceAccount(t, f) })
	t.Run("ValuesFrom", func(t *testing.T) { testOptionsValuesFrom(t, f) })
	t.Logf("TestDeployOptions ran in %s", time.Since(start).Round(time.Second))
}

// readyOn waits for bundle to be Ready on cluster-1 at the GitRepo's
// commit head.
func (f *failureFleet) readyOn(t testing.TB, name, bundle, head string) status.GitRepo {
	t.Helper()
	return f.waitFor(t, name, bundle+" Ready at "+head, func(st status.GitRepo) bool {
		return st.Commit == head && is(st, bundle, "cluster-1", status.Ready)
	})
}

// failedOn waits for bundle to have failed on cluster-1 (ErrApplied).
func (f *failureFleet) failedOn(t testing.TB, name, bundle string) status.Deployment {
	t.Helper()
	st := f.waitFor(t, name, bundle+" ErrApplied", func(st status.GitRepo) bool { return is(st, bundle, "cluster-1", status.ErrApplied) })
	return dep(t, st, bundle, "cluster-1")
}

func testOptionsNamespaceLabels(t *testing.T, f *failureFleet) {
	const ns, name = "opts-ns", "nslabels"
	bundle := name + "-app"
	repo := f.git.CreateRepo(t, name, map[string]string{
		"app/fleet.yaml": "namespace: " + ns + "\nnamespaceLabels:\n  team: a\n  tier: web\nnamespaceAnnotations:\n  owner: ops\n",
		"app/cm.yaml":    configMapDoc("labelled", "v1"),
	})
	f.apply(t, gitRepoDoc(name, repo.URL(), clusterTarget("cluster-1")))
	f.readyOn(t, name, bundle, repo.Head(t))
	cs, ctx := f.kube(t, "cluster-1")
	got, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	require.NoError(t, err, "the target namespace is created")
	assert.Equal(t, "a", got.Labels["team"])
	assert.Equal(t, "web", got.Labels["tier"])
	assert.Equal(t, "ops", got.Annotations["owner"])

	// Others label the namespace too: a person, an admission policy.
	patch := `{"metadata":{"labels":{"by-hand":"x","pod-security.kubernetes.io/enforce":"baseline"}}}`
	_, err = cs.CoreV1().Namespaces().Patch(ctx, ns, types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "kubectl"})
	require.NoError(t, err)

	// A commit changes team and drops tier and the annotations: the keys
	// Flotilla set follow Git, the others stay.
	head := repo.Commit(t, map[string]string{"app/fleet.yaml": "namespace: " + ns + "\nnamespaceLabels:\n  team: b\n"}, "relabel")
	f.readyOn(t, name, bundle, head)
	cs, ctx = f.kube(t, "cluster-1")
	got, err = cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"team": "b", "by-hand": "x", "pod-security.kubernetes.io/enforce": "baseline",
		"kubernetes.io/metadata.name": ns}, got.Labels)
	assert.NotContains(t, got.Annotations, "owner")
	f.remove(t, name)
}

// serviceAccount creates ServiceAccount ns/name on cluster-1 bound to a
// Role of ns allowing every verb on resources, and waits until the API
// server's authorizer knows the binding.
func (f *failureFleet) serviceAccount(t testing.TB, ns, name string, resources ...string) {
	t.Helper()
	cs, ctx := f.kube(t, "cluster-1")
	_, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	require.NoError(t, err)
	f.role(t, ns, name, resources...)
	_, err = cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	f.waitAllowed(t, ns, name, resources[0])
}

// role creates or replaces Role ns/name allowing every verb on resources.
func (f *failureFleet) role(t testing.TB, ns, name string, resources ...string) {
	t.Helper()
	cs, ctx := f.kube(t, "cluster-1")
	rules := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: resources, Verbs: []string{"*"}}}
	cur, err := cs.RbacV1().Roles(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = cs.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{})
		require.NoError(t, err)
		return
	}
	require.NoError(t, err)
	cur.Rules = rules
	_, err = cs.RbacV1().Roles(ns).Update(ctx, cur, metav1.UpdateOptions{})
	require.NoError(t, err)
}

// waitAllowed waits until ServiceAccount ns/name may create resource in ns.
func (f *failureFleet) waitAllowed(t testing.TB, ns, name, resource string) {
	t.Helper()
	cs, ctx := f.kube(t, "cluster-1")
	waitUntil(t, 10*time.Second, "RBAC allows "+ns+"/"+name+" "+resource, func() bool {
		sar, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: deployer.ServiceAccountUser(ns, name),
				ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: "create", Resource: resource}}},
			metav1.CreateOptions{})
		return err == nil && sar.Status.Allowed
	})
}

func testOptionsServiceAccount(t *testing.T, f *failureFleet) {
	const ns = "opts-sa"
	cs, ctx := f.kube(t, "cluster-1")
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	// deployer may manage ConfigMaps (and Helm's records, Secrets); weak
	// only Secrets.
	f.serviceAccount(t, ns, "deployer", "configmaps", "secrets")
	f.serviceAccount(t, ns, "weak", "secrets")
	mark := f.mark()

	// One GitRepo deploys as deployer and as weak; another names an
	// account that does not exist.
	const name, missing = "sa", "nosa"
	repo := f.git.CreateRepo(t, name, map[string]string{
		"ok/fleet.yaml":   "namespace: " + ns + "\nserviceAccount: deployer\n",
		"ok/cm.yaml":      configMapDoc("by-deployer", "v1"),
		"weak/fleet.yaml": "namespace: " + ns + "\nserviceAccount: weak\n",
		"weak/cm.yaml":    configMapDoc("by-weak", "v1"),
	})
	f.apply(t, gitRepoDoc(name, repo.URL(), clusterTarget("cluster-1")))
	missingRepo := f.git.CreateRepo(t, missing, map[string]string{
		"app/fleet.yaml": "namespace: " + ns + "\nserviceAccount: nobody\n",
		"app/cm.yaml":    configMapDoc("by-nobody", "v1"),
	})
	f.apply(t, gitRepoDoc(missing, missingRepo.URL(), clusterTarget("cluster-1")))

	f.readyOn(t, name, name+"-ok", repo.Head(t))
	_, ok := f.configMap(t, "cluster-1", ns, "by-deployer")
	assert.True(t, ok, "deployed as the ServiceAccount")

	d := f.failedOn(t, name, name+"-weak")
	assert.Equal(t, outcome.BundleFailed, d.Outcome)
	assert.Contains(t, d.Message, "cluster cluster-1: bundle sa-weak: service account opts-sa/weak: ")
	assert.Contains(t, d.Message, "forbidden")
	assert.Contains(t, d.Message, `"system:serviceaccount:opts-sa:weak"`)
	assert.Contains(t, d.Message, "configmaps")
	_, ok = f.configMap(t, "cluster-1", ns, "by-weak")
	assert.False(t, ok, "nothing deployed as weak")

	d = f.failedOn(t, missing, missing+"-app")
	assert.Equal(t, outcome.BundleFailed, d.Outcome)
	assert.Equal(t, "cluster cluster-1: bundle nosa-app: service account opts-sa/nobody: not found", d.Message)
	_, ok = f.configMap(t, "cluster-1", ns, "by-nobody")
	assert.False(t, ok)
	lines := f.since(mark, logBundleFailed, "bundle", missing+"-app")
	assert.Len(t, lines, 1, "retried with backoff (30 s at first), not in a loop")

	// Once weak may manage ConfigMaps, the retry of its failure deploys.
	f.role(t, ns, "weak", "configmaps", "secrets")
	f.waitAllowed(t, ns, "weak", "configmaps")
	f.waitForWithin(t, name, "sa-weak retried and Ready", 90*time.Second, func(st status.GitRepo) bool {
		return is(st, name+"-weak", "cluster-1", status.Ready)
	})
	_, ok = f.configMap(t, "cluster-1", ns, "by-weak")
	assert.True(t, ok)

	// Removing the GitRepo uninstalls as each release's account.
	f.remove(t, name)
	for _, cm := range []string{"by-deployer", "by-weak"} {
		_, ok := f.configMap(t, "cluster-1", ns, cm)
		assert.False(t, ok, "%s uninstalled", cm)
	}
	f.remove(t, missing)
}

// valuesChart is a chart that renders its values: ConfigMap "rendered"
// with each plain value, and Secret "rendered" with the password.
var valuesChart = map[string]string{
	"app/Chart.yaml": "apiVersion: v2\nname: values\nversion: 0.1.0\n",
	"app/templates/out.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: rendered
data:
{{- range $k, $v := .Values }}
{{- if ne $k "password" }}
  {{ $k }}: {{ $v | quote }}
{{- end }}
{{- end }}
---
apiVersion: v1
kind: Secret
metadata:
  name: rendered
data:
  password: {{ .Values.password | default "" | b64enc }}
`,
	"app/files.yaml": "file: file\nboth: file\nall: file\n",
	"app/fleet.yaml": `namespace: opts-values
helm:
  values:
    inline: inline
    both: inline
    all: inline
  valuesFiles:
  - files.yaml
  valuesFrom:
  - configMapKeyRef:
      name: vals
  - secretKeyRef:
      name: creds
      key: secret.yaml
`,
}

func testOptionsValuesFrom(t *testing.T, f *failureFleet) {
	const ns, name = "opts-values", "values"
	bundle := name + "-app"
	secretValue := "pw-" + strings.ReplaceAll(time.Now().Format("150405.000000"), ".", "") + "-4Xq9zT"
	cs, ctx := f.kube(t, "cluster-1")
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "vals"},
		Data: map[string]string{"values.yaml": "all: configmap\nshared: configmap\nfromConfigMap: v1\n"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds"},
		Data: map[string][]byte{"secret.yaml": []byte("password: " + secretValue + "\nshared: secret\n")}}, metav1.CreateOptions{})
	require.NoError(t, err)

	repo := f.git.CreateRepo(t, name, valuesChart)
	f.apply(t, gitRepoDoc(name, repo.URL(), clusterTarget("cluster-1")))
	st := f.readyOn(t, name, bundle, repo.Head(t))
	id := dep(t, st, bundle, "cluster-1").DeploymentID

	// Fleet's precedence: values < valuesFiles < valuesFrom, in list order.
	rendered, ok := f.configMap(t, "cluster-1", ns, "rendered")
	require.True(t, ok)
	assert.Equal(t, map[string]string{"inline": "inline", "file": "file", "both": "file", "all": "configmap",
		"shared": "secret", "fromConfigMap": "v1"}, rendered.Data)
	cs, ctx = f.kube(t, "cluster-1")
	sec, err := cs.CoreV1().Secrets(ns).Get(ctx, "rendered", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, secretValue, string(sec.Data["password"]), "the Secret's value reached the release")

	// The ConfigMap changes on the cluster: the cluster's watch reports
	// the bundle Modified, and a sync deploys the new values at the same
	// deployment ID.
	settle()
	mark := f.mark()
	cs, ctx = f.kube(t, "cluster-1")
	vals, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "vals", metav1.GetOptions{})
	require.NoError(t, err)
	vals.Data["values.yaml"] = "all: configmap\nshared: configmap\nfromConfigMap: v2\n"
	_, err = cs.CoreV1().ConfigMaps(ns).Update(ctx, vals, metav1.UpdateOptions{})
	require.NoError(t, err)
	st = f.waitForWithin(t, name, "Modified by the valuesFrom change", driftWait, func(st status.GitRepo) bool {
		return is(st, bundle, "cluster-1", status.Modified)
	})
	d := dep(t, st, bundle, "cluster-1")
	assert.Contains(t, d.Message, "cluster cluster-1: valuesFrom configmap opts-values/vals: modified (key values.yaml changed since the last deploy)")
	rendered, _ = f.configMap(t, "cluster-1", ns, "rendered")
	assert.Equal(t, "v1", rendered.Data["fromConfigMap"], "nothing redeploys before a sync")

	f.sync(t, name)
	rendered, _ = f.configMap(t, "cluster-1", ns, "rendered")
	assert.Equal(t, "v2", rendered.Data["fromConfigMap"], "the sync deployed the new values")
	st = f.waitForWithin(t, name, "Ready after the sync", driftWait, func(st status.GitRepo) bool {
		return st.Settled && is(st, bundle, "cluster-1", status.Ready)
	})
	d = dep(t, st, bundle, "cluster-1")
	assert.Equal(t, id, d.DeploymentID, "the deployment ID does not change")
	assert.Equal(t, id, d.AppliedDeploymentID)
	assert.Len(t, f.since(mark, logDeployed, "bundle", bundle), 1, "one %q line", logDeployed)

	// A reference to a ConfigMap that does not exist fails the bundle,
	// naming it, its key, the bundle and the cluster.
	const missing = "novalues"
	missingRepo := f.git.CreateRepo(t, missing, map[string]string{
		"app/fleet.yaml": "namespace: " + ns + "\nhelm:\n  valuesFrom:\n  - configMapKeyRef:\n      name: absent\n",
		"app/cm.yaml":    configMapDoc("never", "v1"),
	})
	f.apply(t, gitRepoDoc(missing, missingRepo.URL(), clusterTarget("cluster-1")))
	d = f.failedOn(t, missing, missing+"-app")
	assert.Equal(t, outcome.BundleFailed, d.Outcome)
	assert.Equal(t, "cluster cluster-1: bundle novalues-app: valuesFrom configmap opts-values/absent key values.yaml: configmap not found", d.Message)
	_, ok = f.configMap(t, "cluster-1", ns, "never")
	assert.False(t, ok)

	// The Secret's value is in no workflow history and no worker log.
	actx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n, found := auditHistories(actx, t, f.w.client(t), map[string]string{"valuesFrom secret value": secretValue})
	t.Logf("%d histories audited", n)
	assert.Empty(t, found, "secret value in workflow histories")
	for _, p := range f.logs {
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		for _, form := range secretForms(secretValue) {
			assert.NotContains(t, string(data), form, "secret value in worker log %s", p)
		}
	}
	f.remove(t, name)
	f.remove(t, missing)
}
