package deployer_test

import (
	"context"
	"strings"
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

// configMapTemplate renders one ConfigMap named after the release. It has no
// namespace on purpose: Helm must place it in the release namespace.
const configMapTemplate = `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}
data:
  value: {{ .Values.value | quote }}
`

// testChart returns a fresh in-memory chart with the ConfigMap template.
func testChart() *chart.Chart {
	return &chart.Chart{
		Metadata: &chart.Metadata{APIVersion: chart.APIVersionV2, Name: "probe", Version: "0.1.0"},
		Templates: []*chart.File{
			{Name: "templates/configmap.yaml", Data: []byte(configMapTemplate)},
		},
	}
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

// newFixture starts one cluster (skipping the test in -short mode).
func newFixture(t *testing.T) *fixture {
	t.Helper()
	cluster := testenv.StartClusters(t, 1, testenv.Options{})[0]
	getter, err := deployer.NewRESTClientGetter(cluster.RESTConfig(), metav1.NamespaceDefault)
	require.NoError(t, err)
	return &fixture{cs: cluster.Clientset(t), config: cluster.RESTConfig(), getter: getter}
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
// failed operation would have left it.
func (f *fixture) setStatus(t *testing.T, namespace, name string, version int, status release.Status) {
	t.Helper()
	cfg := f.helm(t, namespace)
	rel, err := cfg.Releases.Get(name, version)
	require.NoError(t, err)
	rel.Info.Status = status
	require.NoError(t, cfg.Releases.Update(rel))
}

// createPending stores a new revision copied from revision from, carrying
// deploymentID and left in status: what Helm has written when a process dies
// after recording an upgrade or rollback and before finishing it.
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
		LastDeployed:  base.Info.LastDeployed,
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

// assertCurrent asserts what Current reports for the release.
func (f *fixture) assertCurrent(t *testing.T, d *deployer.Deployer, namespace, name, wantID string, wantRevision int) {
	t.Helper()
	id, rev, err := d.Current(f.getter, namespace, name)
	require.NoError(t, err)
	assert.Equal(t, wantID, id, "Current deployment ID")
	assert.Equal(t, wantRevision, rev, "Current revision")
}

func TestDeployer(t *testing.T) {
	f := newFixture(t)

	// Every subtest uses its own namespace, so they run in parallel on the
	// one cluster, which also exercises concurrent use on different releases.
	t.Run("install", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
		defer cancel()
		d := newDeployer(t)
		rel := testRelease("install", "app", "id-1", "one")

		res, err := d.Deploy(ctx, f.getter, rel)
		require.NoError(t, err)

		assert.Equal(t, deployer.Result{Revision: 1, Changed: true, Previous: ""}, res)
		assert.Equal(t, map[string]string{"value": "one"}, f.configMap(ctx, t, "install", "app").Data)
		f.assertCurrent(t, d, "install", "app", "id-1", 1)
		assert.Equal(t, []release.Status{release.StatusDeployed}, f.statuses(t, "install", "app"))
		assert.Nil(t, rel.Chart.Metadata.Annotations, "Deploy must not modify the caller's chart")
	})

	t.Run("same ID is a no-op", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
		defer cancel()
		d := newDeployer(t)
		_, err := d.Deploy(ctx, f.getter, testRelease("noop", "app", "id-1", "one"))
		require.NoError(t, err)
		before := f.configMap(ctx, t, "noop", "app")
		secretsBefore := f.helmSecrets(ctx, t, "noop", "app")
		require.Len(t, secretsBefore, 1)

		// Values differ but the ID is the same: the ID alone decides.
		res, err := d.Deploy(ctx, f.getter, testRelease("noop", "app", "id-1", "ignored"))
		require.NoError(t, err)

		assert.Equal(t, deployer.Result{Revision: 1, Changed: false, Previous: "id-1"}, res)
		after := f.configMap(ctx, t, "noop", "app")
		assert.Equal(t, before.ResourceVersion, after.ResourceVersion, "ConfigMap must not be touched")
		assert.Equal(t, map[string]string{"value": "one"}, after.Data)
		secretsAfter := f.helmSecrets(ctx, t, "noop", "app")
		if assert.Len(t, secretsAfter, 1, "Helm history must keep one revision") {
			assert.Equal(t, secretsBefore[0].ResourceVersion, secretsAfter[0].ResourceVersion,
				"release record must not be rewritten")
		}
		f.assertCurrent(t, d, "noop", "app", "id-1", 1)
	})

	t.Run("new ID upgrades", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
		defer cancel()
		d := newDeployer(t)
		_, err := d.Deploy(ctx, f.getter, testRelease("upgrade", "app", "id-1", "one"))
		require.NoError(t, err)

		res, err := d.Deploy(ctx, f.getter, testRelease("upgrade", "app", "id-2", "two"))
		require.NoError(t, err)

		assert.Equal(t, deployer.Result{Revision: 2, Changed: true, Previous: "id-1"}, res)
		assert.Equal(t, map[string]string{"value": "two"}, f.configMap(ctx, t, "upgrade", "app").Data)
		f.assertCurrent(t, d, "upgrade", "app", "id-2", 2)
		assert.Equal(t, []release.Status{release.StatusSuperseded, release.StatusDeployed}, f.statuses(t, "upgrade", "app"))
		assert.Len(t, f.helmSecrets(ctx, t, "upgrade", "app"), 2)
	})

	t.Run("failed release with same ID is upgraded", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
		defer cancel()
		d := newDeployer(t)
		_, err := d.Deploy(ctx, f.getter, testRelease("failed", "app", "id-1", "one"))
		require.NoError(t, err)
		f.setStatus(t, "failed", "app", 1, release.StatusFailed)
		f.assertCurrent(t, d, "failed", "app", "", 0)

		res, err := d.Deploy(ctx, f.getter, testRelease("failed", "app", "id-1", "one"))
		require.NoError(t, err)

		// Previous names what last ran successfully: nothing, here.
		assert.Equal(t, deployer.Result{Revision: 2, Changed: true, Previous: ""}, res)
		f.assertCurrent(t, d, "failed", "app", "id-1", 2)
		assert.Equal(t, []release.Status{release.StatusSuperseded, release.StatusDeployed}, f.statuses(t, "failed", "app"))
		assert.Equal(t, map[string]string{"value": "one"}, f.configMap(ctx, t, "failed", "app").Data)
	})

	t.Run("uninstall is idempotent", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
		defer cancel()
		d := newDeployer(t)
		_, err := d.Deploy(ctx, f.getter, testRelease("uninstall", "app", "id-1", "one"))
		require.NoError(t, err)
		f.configMap(ctx, t, "uninstall", "app")

		require.NoError(t, d.Uninstall(ctx, f.getter, "uninstall", "app"))

		f.assertNoConfigMap(ctx, t, "uninstall", "app")
		assert.Empty(t, f.helmSecrets(ctx, t, "uninstall", "app"), "release history must be gone")
		f.assertCurrent(t, d, "uninstall", "app", "", 0)

		require.NoError(t, d.Uninstall(ctx, f.getter, "uninstall", "app"), "second Uninstall")
		require.NoError(t, d.Uninstall(ctx, f.getter, "uninstall", "never-installed"), "Uninstall of an unknown release")
		f.assertCurrent(t, d, "uninstall", "app", "", 0)

		// The name is free again: the next Deploy is a fresh install.
		res, err := d.Deploy(ctx, f.getter, testRelease("uninstall", "app", "id-1", "one"))
		require.NoError(t, err)
		assert.Equal(t, deployer.Result{Revision: 1, Changed: true, Previous: ""}, res)
	})

	t.Run("53-character name is accepted", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
		defer cancel()
		d := newDeployer(t)
		name := strings.Repeat("a", 53)

		res, err := d.Deploy(ctx, f.getter, testRelease("longname", name, "id-1", "one"))
		require.NoError(t, err)

		assert.Equal(t, deployer.Result{Revision: 1, Changed: true}, res)
		f.configMap(ctx, t, "longname", name)
		f.assertCurrent(t, d, "longname", name, "id-1", 1)
	})

	// A getter serves a whole cluster and its default namespace is not the
	// release's: objects without a namespace must still go to the release
	// namespace, on install, upgrade and uninstall alike.
	t.Run("objects without namespace land in release namespace", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
		defer cancel()
		d := newDeployer(t)
		// "other" exists, so a misplaced object is created there rather than
		// failing with NotFound.
		_, err := f.cs.CoreV1().Namespaces().Create(ctx,
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "other"}}, metav1.CreateOptions{})
		require.NoError(t, err)
		getter, err := deployer.NewRESTClientGetter(f.config, "other")
		require.NoError(t, err)

		res, err := d.Deploy(ctx, getter, testRelease("target", "app", "id-1", "one"))
		require.NoError(t, err)
		assert.Equal(t, deployer.Result{Revision: 1, Changed: true}, res)
		assert.Equal(t, map[string]string{"value": "one"}, f.configMap(ctx, t, "target", "app").Data)
		f.assertNoConfigMap(ctx, t, "other", "app")
		assert.Len(t, f.helmSecrets(ctx, t, "target", "app"), 1, "release record in the release namespace")
		assert.Empty(t, f.helmSecrets(ctx, t, "other", "app"), "no release record in the getter's namespace")

		res, err = d.Deploy(ctx, getter, testRelease("target", "app", "id-2", "two"))
		require.NoError(t, err)
		assert.Equal(t, deployer.Result{Revision: 2, Changed: true, Previous: "id-1"}, res)
		assert.Equal(t, map[string]string{"value": "two"}, f.configMap(ctx, t, "target", "app").Data)
		f.assertNoConfigMap(ctx, t, "other", "app")

		require.NoError(t, d.Uninstall(ctx, getter, "target", "app"))
		f.assertNoConfigMap(ctx, t, "target", "app")
		assert.Empty(t, f.helmSecrets(ctx, t, "target", "app"))
	})
}

func TestDeploy_RecoversInterruptedOperation(t *testing.T) {
	f := newFixture(t)

	tests := []struct {
		name string
		// crash leaves release "app" in namespace ns as an interrupted or
		// half-removed Helm operation would.
		crash func(ctx context.Context, t *testing.T, d *deployer.Deployer, ns string)
		// wantRevision is the revision Deploy must report.
		wantRevision int
		// wantHistory is each revision's status afterwards, oldest first.
		wantHistory []release.Status
		// wantPrevious is the ID of the last successfully deployed revision
		// before the recovering deploy; interrupted revisions do not count.
		wantPrevious string
	}{
		{
			name: "pending install",
			crash: func(ctx context.Context, t *testing.T, _ *deployer.Deployer, ns string) {
				in := action.NewInstall(f.helm(t, ns))
				in.ReleaseName = "app"
				in.Namespace = ns
				in.CreateNamespace = true
				rel := testRelease(ns, "app", "id-crashed", "crashed")
				_, err := in.RunWithContext(ctx, rel.Chart, rel.Values)
				require.NoError(t, err)
				f.setStatus(t, ns, "app", 1, release.StatusPendingInstall)
			},
			wantRevision: 1,
			wantPrevious: "",
			wantHistory:  []release.Status{release.StatusDeployed},
		},
		{
			name: "pending upgrade at revision 2 after revision 1 deployed",
			crash: func(ctx context.Context, t *testing.T, d *deployer.Deployer, ns string) {
				mustDeploy(ctx, t, d, f, ns, "id-1", "one")
				f.createPending(t, ns, "app", 1, "id-2", release.StatusPendingUpgrade)
			},
			wantRevision: 3,
			wantPrevious: "id-1",
			wantHistory:  []release.Status{release.StatusSuperseded, release.StatusFailed, release.StatusDeployed},
		},
		{
			name: "pending upgrade at revision 2 without a deployed revision",
			crash: func(ctx context.Context, t *testing.T, d *deployer.Deployer, ns string) {
				mustDeploy(ctx, t, d, f, ns, "id-1", "one")
				mustDeploy(ctx, t, d, f, ns, "id-2", "two")
				f.setStatus(t, ns, "app", 2, release.StatusPendingUpgrade)
			},
			wantRevision: 3,
			wantPrevious: "",
			wantHistory:  []release.Status{release.StatusSuperseded, release.StatusSuperseded, release.StatusDeployed},
		},
		{
			name: "pending rollback",
			crash: func(ctx context.Context, t *testing.T, d *deployer.Deployer, ns string) {
				mustDeploy(ctx, t, d, f, ns, "id-1", "one")
				mustDeploy(ctx, t, d, f, ns, "id-2", "two")
				f.createPending(t, ns, "app", 1, "id-1", release.StatusPendingRollback)
			},
			wantRevision: 4,
			wantPrevious: "id-2",
			wantHistory: []release.Status{
				release.StatusSuperseded, release.StatusSuperseded, release.StatusFailed, release.StatusDeployed,
			},
		},
		{
			name: "interrupted uninstall",
			crash: func(ctx context.Context, t *testing.T, d *deployer.Deployer, ns string) {
				mustDeploy(ctx, t, d, f, ns, "id-1", "one")
				f.setStatus(t, ns, "app", 1, release.StatusUninstalling)
			},
			wantRevision: 1,
			wantPrevious: "",
			wantHistory:  []release.Status{release.StatusDeployed},
		},
		{
			name: "uninstalled with history kept",
			crash: func(ctx context.Context, t *testing.T, d *deployer.Deployer, ns string) {
				mustDeploy(ctx, t, d, f, ns, "id-1", "one")
				f.setStatus(t, ns, "app", 1, release.StatusUninstalled)
				require.NoError(t, f.cs.CoreV1().ConfigMaps(ns).Delete(ctx, "app", metav1.DeleteOptions{}))
			},
			wantRevision: 1,
			wantPrevious: "",
			wantHistory:  []release.Status{release.StatusDeployed},
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
			defer cancel()
			d := newDeployer(t)
			ns := "recover-" + string(rune('a'+i))
			tt.crash(ctx, t, d, ns)

			res, err := d.Deploy(ctx, f.getter, testRelease(ns, "app", "id-new", "new"))
			require.NoError(t, err)

			assert.True(t, res.Changed, "Changed")
			assert.Equal(t, tt.wantRevision, res.Revision, "Revision")
			assert.Equal(t, tt.wantPrevious, res.Previous, "Previous")
			f.assertCurrent(t, d, ns, "app", "id-new", tt.wantRevision)
			assert.Equal(t, tt.wantHistory, f.statuses(t, ns, "app"))
			assert.Equal(t, map[string]string{"value": "new"}, f.configMap(ctx, t, ns, "app").Data)

			// Recovered releases then behave normally.
			res, err = d.Deploy(ctx, f.getter, testRelease(ns, "app", "id-new", "new"))
			require.NoError(t, err)
			assert.Equal(t, deployer.Result{Revision: tt.wantRevision, Previous: "id-new"}, res, "redeploy")
		})
	}
}

func TestDeploy_InvalidRelease(t *testing.T) {
	// Nothing listens on port 1: a release that wrongly passed validation
	// fails with a connection error instead of ErrInvalidRelease.
	getter, err := deployer.NewRESTClientGetter(&rest.Config{Host: "https://127.0.0.1:1"}, metav1.NamespaceDefault)
	require.NoError(t, err)
	d := deployer.New(deployer.Options{})

	tests := []struct {
		name   string
		modify func(*deployer.Release)
	}{
		{name: "empty name", modify: func(r *deployer.Release) { r.Name = "" }},
		{name: "54-character name", modify: func(r *deployer.Release) { r.Name = strings.Repeat("a", 54) }},
		{name: "empty namespace", modify: func(r *deployer.Release) { r.Namespace = "" }},
		{name: "nil chart", modify: func(r *deployer.Release) { r.Chart = nil }},
		{name: "chart without metadata", modify: func(r *deployer.Release) { r.Chart.Metadata = nil }},
		{name: "empty deployment ID", modify: func(r *deployer.Release) { r.DeploymentID = "" }},
		{name: "everything missing", modify: func(r *deployer.Release) { *r = deployer.Release{} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rel := testRelease("ns", "app", "id-1", "one")
			tt.modify(&rel)

			res, err := d.Deploy(t.Context(), getter, rel)

			require.ErrorIs(t, err, deployer.ErrInvalidRelease)
			assert.Equal(t, deployer.Result{}, res)
		})
	}

	t.Run("valid release passes validation", func(t *testing.T) {
		_, err := d.Deploy(t.Context(), getter, testRelease("ns", "app", "id-1", "one"))
		require.Error(t, err, "nothing listens on the getter's server")
		assert.NotErrorIs(t, err, deployer.ErrInvalidRelease)
	})
}

// mustDeploy deploys release "app" in ns at id with value, as a crash
// scenario's set-up step.
func mustDeploy(ctx context.Context, t *testing.T, d *deployer.Deployer, f *fixture, ns, id, value string) {
	t.Helper()
	_, err := d.Deploy(ctx, f.getter, testRelease(ns, "app", id, value))
	require.NoError(t, err)
}
