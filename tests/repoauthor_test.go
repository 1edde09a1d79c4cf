package tests

import (
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chartutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/internal/outcome"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

// TestRepositoryAuthor checks that a person who can push to one
// repository stays inside what its GitRepo grants (issue 28, item 4), on
// one push-mode cluster with RBAC on: a customization cannot leave the
// GitRepo's targetNamespace, the GitRepo's serviceAccount bounds
// valuesFrom reads and namespace labels, and helmSecretName's credentials
// reach only chart URLs its helmRepoURLRegex matches as a whole. Each
// refusal names the file or object, the bundle and the cluster; the
// repository's other bundles deploy, and the controller stays up.
func TestRepositoryAuthor(t *testing.T) {
	f := &failureFleet{fleet: startFleet(t, 1, 1)}
	t.Run("NamespaceEscape", func(t *testing.T) { t.Parallel(); testNamespaceEscape(t, f) })
	t.Run("ServiceAccountBypass", func(t *testing.T) { t.Parallel(); testServiceAccountBypass(t, f) })
	t.Run("CredentialHarvest", func(t *testing.T) { t.Parallel(); testCredentialHarvest(t, f) })
}

// testNamespaceEscape: a targetCustomization naming another namespace
// than the GitRepo's targetNamespace is ErrApplied (Invalid) on the
// cluster it selects, and nothing of it is applied anywhere.
func testNamespaceEscape(t *testing.T, f *failureFleet) {
	const name, ns = "tenant", "tenant-a"
	repo := f.git.CreateRepo(t, name, map[string]string{
		"ok/fleet.yaml":     "labels:\n  app: ok\n",
		"ok/cm.yaml":        configMapDoc("tenant-ok", "v1"),
		"escape/fleet.yaml": "targetCustomizations:\n- name: everywhere\n  clusterSelector: {}\n  namespace: victim\n",
		"escape/cm.yaml":    configMapDoc("escaped", "v1"),
	})
	f.apply(t, gitRepoDoc(name, repo.URL(), "  targetNamespace: "+ns+"\n"+clusterTarget("cluster-1")))
	f.readyOn(t, name, name+"-ok", repo.Head(t))

	d := f.failedOn(t, name, name+"-escape")
	assert.Equal(t, outcome.Invalid, d.Outcome)
	assert.Equal(t, `bundle tenant-escape: cluster cluster-1: escape/fleet.yaml: targetCustomizations[0].namespace `+
		`(customization everywhere): "victim" leaves the GitRepo's targetNamespace "tenant-a", which binds every bundle and customization`,
		d.Message)
	cs, ctx := f.kube(t, "cluster-1")
	_, err := cs.CoreV1().Namespaces().Get(ctx, "victim", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "namespace victim never created: %v", err)
	_, ok := f.configMap(t, "cluster-1", ns, "escaped")
	assert.False(t, ok, "nothing of the refused bundle applied in the target namespace either")
	_, ok = f.configMap(t, "cluster-1", ns, "tenant-ok")
	assert.True(t, ok)
}

// testServiceAccountBypass: with the GitRepo's serviceAccount, a bundle
// cannot read a Secret of another namespace through valuesFrom, label its
// namespace, or name another account; its other bundles deploy as the
// account.
func testServiceAccountBypass(t *testing.T, f *failureFleet) {
	const name, ns, victim = "satenant", "sa-tenant", "sa-victim"
	cs, ctx := f.kube(t, "cluster-1")
	for _, n := range []string{ns, victim} {
		_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	_, err := cs.CoreV1().Secrets(victim).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "admin-creds"},
		Data: map[string][]byte{"values.yaml": []byte("password: hunter2-admin\n")}}, metav1.CreateOptions{})
	require.NoError(t, err)
	f.serviceAccount(t, ns, "deployer", "configmaps", "secrets")

	repo := f.git.CreateRepo(t, name, map[string]string{
		"good/fleet.yaml": "namespace: " + ns + "\n",
		"good/cm.yaml":    configMapDoc("sa-good", "v1"),
		"steal/fleet.yaml": "namespace: " + ns + "\nhelm:\n  valuesFrom:\n  - secretKeyRef:\n      name: admin-creds\n" +
			"      namespace: " + victim + "\n",
		"steal/cm.yaml":      configMapDoc("sa-steal", "v1"),
		"label/fleet.yaml":   "namespace: " + ns + "\nnamespaceLabels:\n  pod-security.kubernetes.io/enforce: privileged\n",
		"label/cm.yaml":      configMapDoc("sa-label", "v1"),
		"ownsa/fleet.yaml":   "namespace: " + ns + "\nserviceAccount: admin\n",
		"ownsa/cm.yaml":      configMapDoc("sa-own", "v1"),
		"outside/cm.yaml":    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: sa-outside\n  namespace: " + victim + "\n",
		"outside/fleet.yaml": "defaultNamespace: " + ns + "\n",
	})
	f.apply(t, gitRepoDoc(name, repo.URL(), "  serviceAccount: deployer\n"+clusterTarget("cluster-1")))
	f.readyOn(t, name, name+"-good", repo.Head(t))

	d := f.failedOn(t, name, name+"-steal")
	assert.Equal(t, outcome.BundleFailed, d.Outcome, "a missing permission, retried on the failure backoff")
	assert.Contains(t, d.Message, "cluster cluster-1: bundle satenant-steal: service account sa-tenant/deployer: "+
		"valuesFrom secret sa-victim/admin-creds key values.yaml: ")
	assert.Contains(t, d.Message, "forbidden")
	assert.NotContains(t, d.Message, "hunter2")

	d = f.failedOn(t, name, name+"-label")
	assert.Contains(t, d.Message, "cluster cluster-1: bundle satenant-label: service account sa-tenant/deployer: ")
	assert.Contains(t, d.Message, "namespaces")
	got, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotContains(t, got.Labels, "pod-security.kubernetes.io/enforce")

	d = f.failedOn(t, name, name+"-ownsa")
	assert.Equal(t, outcome.Invalid, d.Outcome)
	assert.Equal(t, `bundle satenant-ownsa: cluster cluster-1: ownsa/fleet.yaml: serviceAccount: "admin" leaves the GitRepo's `+
		`serviceAccount "deployer", which binds every bundle and customization`, d.Message)

	d = f.failedOn(t, name, name+"-outside")
	assert.Contains(t, d.Message, `"system:serviceaccount:sa-tenant:deployer"`, "the bundle deployed as the GitRepo's account")
	for _, cm := range []struct{ ns, name string }{{ns, "sa-steal"}, {ns, "sa-label"}, {ns, "sa-own"}, {victim, "sa-outside"}} {
		_, ok := f.configMap(t, "cluster-1", cm.ns, cm.name)
		assert.False(t, ok, "%s/%s not applied", cm.ns, cm.name)
	}

	// downstreamResources are copied as the account: weak may manage
	// Secrets only, so its copy of a ConfigMap is refused.
	const weak = "saweak"
	f.serviceAccount(t, ns, "weak", "secrets")
	f.apply(t, sourceConfigMapDoc("sa-shared", "on"))
	weakRepo := f.git.CreateRepo(t, weak, map[string]string{
		"copy/fleet.yaml":  downstreamFleetYAML(ns, "ConfigMap/sa-shared"),
		"copy/secret.yaml": secretDoc("sa-copy", "x"),
	})
	f.apply(t, gitRepoDoc(weak, weakRepo.URL(), "  serviceAccount: weak\n"+clusterTarget("cluster-1")))
	d = f.failedOn(t, weak, weak+"-copy")
	assert.Contains(t, d.Message, "cluster cluster-1: bundle saweak-copy: downstreamResources: service account sa-tenant/weak: ")
	assert.Contains(t, d.Message, `configmaps "sa-shared" is forbidden`)
	_, ok := f.configMap(t, "cluster-1", ns, "sa-shared")
	assert.False(t, ok, "no copy made with the cluster's own credentials")
}

// authRecorder is a chart server on another host than the GitRepo's
// chart repository: it serves a chart archive and records the
// Authorization header of every request.
type authRecorder struct {
	*httptest.Server
	mu       sync.Mutex
	requests int
	auth     []string
}

func newAuthRecorder(t *testing.T) *authRecorder {
	t.Helper()
	p, err := chartutil.Save(testChart("evil", "0.1.0"), t.TempDir())
	require.NoError(t, err)
	archive, err := os.ReadFile(p)
	require.NoError(t, err)
	r := &authRecorder{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.requests++
		if a := req.Header.Get("Authorization"); a != "" {
			r.auth = append(r.auth, a)
		}
		r.mu.Unlock()
		_, _ = w.Write(archive)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *authRecorder) seen() (requests int, auth []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests, append([]string(nil), r.auth...)
}

// testCredentialHarvest: helmSecretName without helmRepoURLRegex is
// refused; with a regex for host A, a chart URL on host B that merely
// contains A's URL gets no credentials, while A's chart gets them.
func testCredentialHarvest(t *testing.T, f *failureFleet) {
	const name, ns = "harvest", "harvest"
	a := newChartRepo(t, "web", "robot", "s3cret-robot")
	a.publish(t, "1.0.0")
	b := newAuthRecorder(t)
	f.apply(t, basicAuthSecret("chart-creds", "robot", "s3cret-robot"))
	repo := f.git.CreateRepo(t, name, map[string]string{
		"froma/fleet.yaml": "namespace: " + ns + "\nhelm:\n  repo: " + a.URL + "\n  chart: web\n  version: 1.0.0\n",
		// Unanchored, A's regex matches this URL on B.
		"fromb/fleet.yaml": "namespace: " + ns + "-b\nhelm:\n  chart: " + b.URL + "/evil-0.1.0.tgz?from=" + a.URL + "/web\n",
	})

	_, stderr, err := f.cliErr(t, "apply", "-f", writeTemp(t, "gitrepo.yaml",
		gitRepoDoc(name, repo.URL(), "  helmSecretName: chart-creds\n"+clusterTarget("cluster-1"))))
	require.Error(t, err, "helmSecretName without helmRepoURLRegex is refused")
	assert.Contains(t, stderr, "spec.helmRepoURLRegex: Required value: helmSecretName requires helmRepoURLRegex")
	requests, _ := b.seen()
	assert.Zero(t, requests, "nothing rendered")

	spec := "  helmSecretName: chart-creds\n  helmRepoURLRegex: '" + regexp.QuoteMeta(a.URL) + "(/.*)?'\n" + clusterTarget("cluster-1")
	f.apply(t, gitRepoDoc(name, repo.URL(), spec))
	head := repo.Head(t)
	f.waitFor(t, name, "both charts Ready", func(st status.GitRepo) bool {
		return st.Commit == head && is(st, name+"-froma", "cluster-1", status.Ready) && is(st, name+"-fromb", "cluster-1", status.Ready)
	})
	_, ok := f.configMap(t, "cluster-1", ns, "web")
	assert.True(t, ok, "A's chart, fetched with the credentials, deployed")
	requests, auth := b.seen()
	assert.NotZero(t, requests, "B's chart was fetched")
	assert.Empty(t, auth, "no credentials reached B")
}
