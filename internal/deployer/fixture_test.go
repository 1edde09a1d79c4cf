package deployer_test

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/kube"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/releaseutil"
	helmtime "helm.sh/helm/v3/pkg/time"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/flotilla-gitops/flotilla/internal/deployer"
	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

// testTimeout bounds one subtest's Kubernetes and Helm calls. It is generous
// because tests share a small machine with other test binaries.
const testTimeout = 2 * time.Minute

// configMapTemplate renders one ConfigMap named after the release, labelled
// with the map in value "labels", if any. It has no namespace on purpose:
// Helm must place it in the release namespace.
const configMapTemplate = `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}
  {{- with .Values.labels }}
  labels: {{ toYaml . | nindent 4 }}
  {{- end }}
data:
  value: {{ .Values.value | quote }}
`

// deploymentTemplate renders Deployment "web" with one replica. It becomes
// available only on a cluster with controllers (testenv.Options.Sim).
const deploymentTemplate = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: registry.invalid/web:1
`

// testChart returns a fresh in-memory chart with the ConfigMap template and
// then each of templates, as templates/extra-<i>.yaml.
func testChart(templates ...string) *chart.Chart {
	c := &chart.Chart{
		Metadata: &chart.Metadata{APIVersion: chart.APIVersionV2, Name: "probe", Version: "0.1.0"},
		Templates: []*chart.File{
			{Name: "templates/configmap.yaml", Data: []byte(configMapTemplate)},
		},
	}
	for i, tpl := range templates {
		c.Templates = append(c.Templates, &chart.File{Name: fmt.Sprintf("templates/extra-%d.yaml", i), Data: []byte(tpl)})
	}
	return c
}

// testRelease returns a valid Release of testChart whose ConfigMap holds value.
func testRelease(namespace, name, id, value string) deployer.Release {
	return deployer.Release{
		Name:         name,
		Namespace:    namespace,
		Chart:        testChart(),
		Values:       map[string]any{"value": value},
		DeploymentID: id,
	}
}

// fixture is one API server plus what the tests need to drive and inspect it.
type fixture struct {
	cs     kubernetes.Interface
	config *rest.Config
	// getter is shared by all subtests, as one getter serves a whole cluster
	// in production. Its default namespace is "default".
	getter *deployer.RESTClientGetter
}

// newFixture starts one bare cluster, without controllers (skipping the
// test in -short mode).
func newFixture(t *testing.T) *fixture {
	t.Helper()
	return newFixtureWith(t, testenv.Options{})
}

// newFixtureWith starts one cluster with opts (skipping the test in -short
// mode).
func newFixtureWith(t *testing.T, opts testenv.Options) *fixture {
	t.Helper()
	cluster := testenv.StartClusters(t, 1, opts)[0]
	getter, err := deployer.NewRESTClientGetter(cluster.RESTConfig(), metav1.NamespaceDefault)
	require.NoError(t, err)
	return &fixture{cs: cluster.Clientset(t), config: cluster.RESTConfig(), getter: getter}
}

// testContext returns a context that bounds one subtest by testTimeout.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// unreachableGetter returns a getter for a server nothing listens on (port
// 1), for releases that must fail before any cluster call: one that wrongly
// got that far fails with a connection error instead.
func unreachableGetter(t *testing.T) *deployer.RESTClientGetter {
	t.Helper()
	getter, err := deployer.NewRESTClientGetter(&rest.Config{Host: "https://127.0.0.1:1"}, metav1.NamespaceDefault)
	require.NoError(t, err)
	return getter
}

// newDeployer returns a Deployer that logs to t from Info level up.
func newDeployer(t *testing.T) *deployer.Deployer {
	return deployer.New(deployer.Options{
		Logger:  zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel)),
		Timeout: time.Minute,
	})
}

// helm returns a Helm configuration for namespace that reads and writes the
// same release storage as the Deployer, for setting up and inspecting
// releases behind the Deployer's back.
func (f *fixture) helm(t *testing.T, namespace string) *action.Configuration {
	t.Helper()
	cfg := new(action.Configuration)
	require.NoError(t, cfg.Init(f.getter, namespace, "secret", func(string, ...any) {}))
	kc, ok := cfg.KubeClient.(*kube.Client)
	require.True(t, ok, "Helm kube client is %T", cfg.KubeClient)
	kc.Namespace = namespace
	return cfg
}

// history returns the release's revisions, oldest first.
func (f *fixture) history(t *testing.T, namespace, name string) []*release.Release {
	t.Helper()
	rels, err := f.helm(t, namespace).Releases.History(name)
	require.NoError(t, err)
	releaseutil.SortByRevision(rels)
	return rels
}

// statuses returns the status of each revision of the release, oldest first.
func (f *fixture) statuses(t *testing.T, namespace, name string) []release.Status {
	t.Helper()
	var out []release.Status
	for _, r := range f.history(t, namespace, name) {
		out = append(out, r.Info.Status)
	}
	return out
}

// setStatus overwrites the stored status of one revision, as a crash or a
// failed operation would have left it. A pending (or uninstalling) record
// is dated an hour back: written by a process long gone, whose lease, if
// any, expired.
func (f *fixture) setStatus(t *testing.T, namespace, name string, version int, status release.Status) {
	t.Helper()
	cfg := f.helm(t, namespace)
	rel, err := cfg.Releases.Get(name, version)
	require.NoError(t, err)
	rel.Info.Status = status
	if status.IsPending() || status == release.StatusUninstalling {
		rel.Info.LastDeployed = helmtime.Time{Time: time.Now().Add(-time.Hour)}
	}
	require.NoError(t, cfg.Releases.Update(rel))
}

// createPending stores a new revision copied from revision from, carrying
// deploymentID and left in status: what Helm has written when a process dies
// after recording an upgrade or rollback and before finishing it, an hour
// ago.
func (f *fixture) createPending(t *testing.T, namespace, name string, from int, deploymentID string, status release.Status) {
	t.Helper()
	cfg := f.helm(t, namespace)
	base, err := cfg.Releases.Get(name, from)
	require.NoError(t, err)
	last, err := cfg.Releases.Last(name)
	require.NoError(t, err)
	chrt := *base.Chart
	md := *chrt.Metadata
	md.Annotations = map[string]string{deployer.DeploymentIDAnnotation: deploymentID}
	chrt.Metadata = &md
	pending := *base
	pending.Chart = &chrt
	pending.Version = last.Version + 1
	pending.Info = &release.Info{
		FirstDeployed: base.Info.FirstDeployed,
		LastDeployed:  helmtime.Time{Time: time.Now().Add(-time.Hour)},
		Status:        status,
		Description:   "interrupted by the test",
	}
	require.NoError(t, cfg.Releases.Create(&pending))
}

// helmSecrets lists the Secrets the Helm storage driver keeps for a release.
func (f *fixture) helmSecrets(ctx context.Context, t *testing.T, namespace, name string) []corev1.Secret {
	t.Helper()
	list, err := f.cs.CoreV1().Secrets(namespace).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm,name=" + name})
	require.NoError(t, err)
	return list.Items
}

// configMap returns the release's ConfigMap, failing the test if it is missing.
func (f *fixture) configMap(ctx context.Context, t *testing.T, namespace, name string) *corev1.ConfigMap {
	t.Helper()
	cm, err := f.cs.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err, "ConfigMap %s/%s", namespace, name)
	return cm
}

// assertNoConfigMap asserts that namespace holds no ConfigMap called name.
func (f *fixture) assertNoConfigMap(ctx context.Context, t *testing.T, namespace, name string) {
	t.Helper()
	_, err := f.cs.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "ConfigMap %s/%s: want NotFound, got err=%v", namespace, name, err)
}

// assertNothingApplied asserts that a failed first Deploy of release name
// into namespace changed nothing: no namespace (Helm creates it only after
// rendering succeeded), no release record, no ConfigMap.
func (f *fixture) assertNothingApplied(ctx context.Context, t *testing.T, namespace, name string) {
	t.Helper()
	_, err := f.cs.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "namespace %s: want NotFound, got err=%v", namespace, err)
	assert.Empty(t, f.helmSecrets(ctx, t, namespace, name), "release records")
	f.assertNoConfigMap(ctx, t, namespace, name)
}

// assertCurrent asserts what Current reports for the release.
func (f *fixture) assertCurrent(t *testing.T, d *deployer.Deployer, namespace, name, wantID string, wantRevision int) {
	t.Helper()
	id, rev, err := d.Current(f.getter, namespace, name)
	require.NoError(t, err)
	assert.Equal(t, wantID, id, "Current deployment ID")
	assert.Equal(t, wantRevision, rev, "Current revision")
}

// mustDeploy deploys release "app" in ns at id with value, as a crash
// scenario's set-up step.
func mustDeploy(ctx context.Context, t *testing.T, d *deployer.Deployer, f *fixture, ns, id, value string) {
	t.Helper()
	_, err := d.Deploy(ctx, f.getter, testRelease(ns, "app", id, value))
	require.NoError(t, err)
}

// mustDeployWeb deploys release "app" in ns at "id-1": the ConfigMap and
// Deployment "web".
func mustDeployWeb(ctx context.Context, t *testing.T, d *deployer.Deployer, f *fixture, ns string) {
	t.Helper()
	rel := testRelease(ns, "app", "id-1", "one")
	rel.Chart = testChart(deploymentTemplate)
	_, err := d.Deploy(ctx, f.getter, rel)
	require.NoError(t, err)
}

// requestCounter counts the requests match selects.
type requestCounter struct {
	next  http.RoundTripper
	n     *atomic.Int64
	match func(*http.Request) bool
}

func (c requestCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	if c.match(req) {
		c.n.Add(1)
	}
	return c.next.RoundTrip(req)
}

// countingConfig returns a REST config of the fixture's cluster that
// counts the requests match selects.
func (f *fixture) countingConfig(match func(*http.Request) bool) (*rest.Config, *atomic.Int64) {
	n := new(atomic.Int64)
	cfg := rest.CopyConfig(f.config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return requestCounter{next: rt, n: n, match: match} })
	return cfg, n
}
