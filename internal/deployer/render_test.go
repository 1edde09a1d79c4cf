package deployer_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/internal/deployer"
)

// pinnedConfigMapTemplate renders a ConfigMap that names a namespace of its
// own, which does not exist: it can only be created if it is moved.
const pinnedConfigMapTemplate = `apiVersion: v1
kind: ConfigMap
metadata:
  name: pinned
  namespace: elsewhere
`

// clusterRoleTemplate renders a cluster-scoped object.
const clusterRoleTemplate = `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ .Release.Namespace }}-reader
rules: []
`

// widgetCRD defines a namespaced custom resource; a chart ships it in crds/.
const widgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names: {kind: Widget, listKind: WidgetList, plural: widgets, singular: widget}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`

// badLabels is a label set whose value the API server rejects.
func badLabels() map[string]any { return map[string]any{"tier": "bad value!"} }

// testPostRender is TestOnBareCluster's post-render group.
func testPostRender(t *testing.T, f *fixture) {
	t.Run("forced namespace moves every object", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		d := newDeployer(t)
		rel := testRelease("forced", "app", "id-1", "one")
		rel.Chart = testChart(pinnedConfigMapTemplate, deploymentTemplate)
		rel.ForceNamespace = "forced"

		_, err := d.Deploy(ctx, f.getter, rel)
		require.NoError(t, err)

		f.configMap(ctx, t, "forced", "app")
		f.configMap(ctx, t, "forced", "pinned")
		_, err = f.cs.AppsV1().Deployments("forced").Get(ctx, "web", metav1.GetOptions{})
		require.NoError(t, err)
		// Helm stores the post-rendered manifest, which upgrade, uninstall
		// and Status work from; it keeps the templates' source comments.
		manifest := f.history(t, "forced", "app")[0].Manifest
		assert.Contains(t, manifest, "# Source: probe/templates/extra-0.yaml\n")
		assert.NotContains(t, manifest, "elsewhere")

		require.NoError(t, d.Uninstall(ctx, f.getter, "forced", "app", ""))
		f.assertNoConfigMap(ctx, t, "forced", "pinned")
	})

	t.Run("cluster-scoped object with forced namespace is rejected", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		d := newDeployer(t)
		rel := testRelease("scoped", "app", "id-1", "one")
		rel.Chart = testChart(clusterRoleTemplate)
		rel.ForceNamespace = "scoped"

		_, err := d.Deploy(ctx, f.getter, rel)

		require.ErrorIs(t, err, deployer.ErrInvalidRelease)
		assert.NotErrorIs(t, err, deployer.ErrInvalidMetadata)
		assert.ErrorContains(t, err, "ClusterRole scoped-reader is cluster-scoped; forced namespace scoped forbids it")
		f.assertNothingApplied(ctx, t, "scoped", "app")
		_, err = f.cs.RbacV1().ClusterRoles().Get(ctx, "scoped-reader", metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "ClusterRole: want NotFound, got err=%v", err)
	})

	// Helm installs crds/ before rendering, unmodified: Deploy checks them
	// first.
	t.Run("CRD in crds/ with forced namespace is rejected", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		d := newDeployer(t)
		rel := testRelease("crds", "app", "id-1", "one")
		rel.Chart.Files = append(rel.Chart.Files, &chart.File{Name: "crds/widgets.yaml", Data: []byte(widgetCRD)})
		rel.ForceNamespace = "crds"

		_, err := d.Deploy(ctx, f.getter, rel)

		require.ErrorIs(t, err, deployer.ErrInvalidRelease)
		assert.ErrorContains(t, err, "probe/crds/widgets.yaml: invalid release: "+
			"CustomResourceDefinition widgets.example.com is cluster-scoped; forced namespace crds forbids it")
		f.assertNothingApplied(ctx, t, "crds", "app")
		err = f.cs.Discovery().RESTClient().Get().
			AbsPath("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com").Do(ctx).Error()
		assert.True(t, apierrors.IsNotFound(err), "CRD: want NotFound, got err=%v", err)
	})

	t.Run("labels and annotations are added to every object", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		d := newDeployer(t)
		rel := testRelease("labelled", "app", "id-1", "one")
		rel.Chart = testChart(deploymentTemplate)
		rel.Values["labels"] = map[string]any{"app": "theirs", "tier": "web"}
		rel.Labels = map[string]string{"flotilla.dev/bundle": "bundle-a", "app": "ours"}
		rel.Annotations = map[string]string{"flotilla.dev/gitrepo": "fleet/repo"}

		_, err := d.Deploy(ctx, f.getter, rel)
		require.NoError(t, err)

		cm := f.configMap(ctx, t, "labelled", "app")
		dep, err := f.cs.AppsV1().Deployments("labelled").Get(ctx, "web", metav1.GetOptions{})
		require.NoError(t, err)
		for _, obj := range []metav1.Object{cm, dep} {
			assert.Equal(t, "bundle-a", obj.GetLabels()["flotilla.dev/bundle"], "%s label", obj.GetName())
			assert.Equal(t, "ours", obj.GetLabels()["app"], "%s: ours replace the chart's", obj.GetName())
			assert.Equal(t, "fleet/repo", obj.GetAnnotations()["flotilla.dev/gitrepo"], "%s annotation", obj.GetName())
		}
		assert.Equal(t, "web", cm.Labels["tier"], "the chart's other labels stay")
	})

	t.Run("invalid label in the chart fails an install before anything is applied", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		d := newDeployer(t)
		rel := testRelease("badinstall", "app", "id-1", "one")
		rel.Values["labels"] = badLabels()

		_, err := d.Deploy(ctx, f.getter, rel)

		require.ErrorIs(t, err, deployer.ErrInvalidMetadata)
		require.ErrorIs(t, err, deployer.ErrInvalidRelease)
		assert.ErrorContains(t, err, `ConfigMap badinstall/app: metadata.labels[tier]: Invalid value: "bad value!"`)
		f.assertNothingApplied(ctx, t, "badinstall", "app")
	})

	t.Run("invalid label in the chart fails an upgrade and leaves the deployed revision", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		d := newDeployer(t)
		mustDeploy(ctx, t, d, f, "badupgrade", "id-1", "one")
		before := f.configMap(ctx, t, "badupgrade", "app")
		secretsBefore := f.helmSecrets(ctx, t, "badupgrade", "app")
		rel := testRelease("badupgrade", "app", "id-2", "two")
		rel.Values["labels"] = badLabels()

		_, err := d.Deploy(ctx, f.getter, rel)

		require.ErrorIs(t, err, deployer.ErrInvalidMetadata)
		assert.ErrorContains(t, err, `ConfigMap badupgrade/app: metadata.labels[tier]: Invalid value: "bad value!"`)
		f.assertCurrent(t, d, "badupgrade", "app", "id-1", 1)
		assert.Equal(t, []release.Status{release.StatusDeployed}, f.statuses(t, "badupgrade", "app"))
		secretsAfter := f.helmSecrets(ctx, t, "badupgrade", "app")
		if assert.Len(t, secretsAfter, 1, "no new revision") {
			assert.Equal(t, secretsBefore[0].ResourceVersion, secretsAfter[0].ResourceVersion, "release record untouched")
		}
		after := f.configMap(ctx, t, "badupgrade", "app")
		assert.Equal(t, before.ResourceVersion, after.ResourceVersion, "ConfigMap untouched")
	})
}

// Release-level labels and annotations are checked before any cluster call.
func TestDeploy_InvalidReleaseMetadata(t *testing.T) {
	getter := unreachableGetter(t)
	d := deployer.New(deployer.Options{})

	tests := []struct {
		name   string
		modify func(*deployer.Release)
		// wantMsg is a substring of the error.
		wantMsg string
		// wantMetadata says the error wraps ErrInvalidMetadata (it always
		// wraps ErrInvalidRelease).
		wantMetadata bool
	}{
		{
			name:         "label key",
			modify:       func(r *deployer.Release) { r.Labels = map[string]string{"bad key!": "x"} },
			wantMsg:      `Release.Labels[bad key!]: Invalid value: "bad key!"`,
			wantMetadata: true,
		},
		{
			name:         "label value",
			modify:       func(r *deployer.Release) { r.Labels = map[string]string{"flotilla.dev/bundle": "bad value!"} },
			wantMsg:      `Release.Labels[flotilla.dev/bundle]: Invalid value: "bad value!"`,
			wantMetadata: true,
		},
		{
			name:         "annotation key",
			modify:       func(r *deployer.Release) { r.Annotations = map[string]string{"bad key": "x"} },
			wantMsg:      `Release.Annotations[bad key]: Invalid value: "bad key"`,
			wantMetadata: true,
		},
		{
			name: "annotations too large",
			modify: func(r *deployer.Release) {
				r.Annotations = map[string]string{"flotilla.dev/big": strings.Repeat("x", 256*1024)}
			},
			wantMsg:      "Release.Annotations: Too long",
			wantMetadata: true,
		},
		{
			name:    "forced namespace",
			modify:  func(r *deployer.Release) { r.ForceNamespace = "Not_A_Namespace" },
			wantMsg: `forced namespace "Not_A_Namespace"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rel := testRelease("ns", "app", "id-1", "one")
			tt.modify(&rel)

			_, err := d.Deploy(t.Context(), getter, rel)

			require.ErrorIs(t, err, deployer.ErrInvalidRelease)
			assert.Equal(t, tt.wantMetadata, errors.Is(err, deployer.ErrInvalidMetadata), "wraps ErrInvalidMetadata")
			assert.ErrorContains(t, err, tt.wantMsg)
		})
	}
}
