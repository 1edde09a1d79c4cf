package deployer_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-gitops/flotilla/internal/deployer"
)

// thingKind is a custom resource kind whose CRD a release templates, as a
// raw-YAML bundle (every file a template) ships it. Each test uses its own
// API group, since CRDs are cluster-scoped and the tests share a cluster.
type thingKind struct{ group string }

// crd returns the CustomResourceDefinition of Thing in k's group.
func (k thingKind) crd() string {
	return fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: things.%[1]s
spec:
  group: %[1]s
  names: {kind: Thing, listKind: ThingList, plural: things, singular: thing}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              value: {type: string}
`, k.group)
}

// thing returns a template of a Thing named after the release whose
// spec.value is the release's value.
func (k thingKind) thing() string {
	return fmt.Sprintf(`apiVersion: %s/v1
kind: Thing
metadata:
  name: {{ .Release.Name }}
spec:
  value: {{ .Values.value | quote }}
`, k.group)
}

// chart returns testChart with Thing's CRD and one Thing.
func (k thingKind) chart() []string { return []string{k.crd(), k.thing()} }

func (k thingKind) name() string { return "things." + k.group }

var crds = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

func (k thingKind) resource() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: k.group, Version: "v1", Resource: "things"}
}

// dynamic returns a dynamic client of the fixture's cluster.
func (f *fixture) dynamic(t *testing.T) dynamic.Interface {
	t.Helper()
	dyn, err := dynamic.NewForConfig(f.config)
	require.NoError(t, err)
	return dyn
}

// getCRD returns k's CRD, failing the test if it is missing.
func (f *fixture) getCRD(ctx context.Context, t *testing.T, k thingKind) *unstructured.Unstructured {
	t.Helper()
	crd, err := f.dynamic(t).Resource(crds).Get(ctx, k.name(), metav1.GetOptions{})
	require.NoError(t, err, "CRD %s", k.name())
	return crd
}

// thingValue returns spec.value of Thing namespace/name, failing the test
// if the Thing is missing.
func (f *fixture) thingValue(ctx context.Context, t *testing.T, k thingKind, namespace, name string) string {
	t.Helper()
	obj, err := f.dynamic(t).Resource(k.resource()).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err, "Thing %s/%s", namespace, name)
	v, _, _ := unstructured.NestedString(obj.Object, "spec", "value")
	return v
}

// thingGone reports whether Thing namespace/name is missing.
func (f *fixture) thingGone(ctx context.Context, t *testing.T, k thingKind, namespace, name string) bool {
	t.Helper()
	_, err := f.dynamic(t).Resource(k.resource()).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	return apierrors.IsNotFound(err)
}

// createThing creates Thing namespace/name outside any release.
func (f *fixture) createThing(ctx context.Context, t *testing.T, k thingKind, namespace, name string) {
	t.Helper()
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": k.group + "/v1", "kind": "Thing",
		"metadata": map[string]any{"name": name, "namespace": namespace},
		"spec":     map[string]any{"value": "outside"},
	}}
	_, err := f.dynamic(t).Resource(k.resource()).Namespace(namespace).Create(ctx, obj, metav1.CreateOptions{})
	require.NoError(t, err)
}

// thingRelease returns release name in namespace at id whose chart holds
// the ConfigMap, k's CRD and a Thing, all with value.
func thingRelease(k thingKind, namespace, name, id, value string) deployer.Release {
	rel := testRelease(namespace, name, id, value)
	rel.Chart = testChart(k.chart()...)
	return rel
}

// mustDeployThings deploys thingRelease(k, namespace, name, "id-1", "one").
func mustDeployThings(ctx context.Context, t *testing.T, d *deployer.Deployer, f *fixture, k thingKind, namespace, name string) {
	t.Helper()
	_, err := d.Deploy(ctx, f.getter, thingRelease(k, namespace, name, "id-1", "one"))
	require.NoError(t, err)
}

// testCRDs is TestOnBareCluster's group for CRDs rendered by templates.
func testCRDs(t *testing.T, f *fixture) {
	t.Run("CRD and its custom resource install in one deploy and upgrade", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		d := newDeployer(t)
		k := thingKind{group: "install.crds.example.com"}

		res, err := d.Deploy(ctx, f.getter, thingRelease(k, "crd-install", "app", "id-1", "one"))
		require.NoError(t, err)

		assert.Equal(t, deployer.Result{Revision: 1, Changed: true, Description: "Install complete"}, res)
		assert.Equal(t, "one", f.thingValue(ctx, t, k, "crd-install", "app"))
		crd := f.getCRD(ctx, t, k)
		assert.Equal(t, "Helm", crd.GetLabels()["app.kubernetes.io/managed-by"])
		assert.Equal(t, map[string]string{
			"meta.helm.sh/release-name":      "app",
			"meta.helm.sh/release-namespace": "crd-install",
			"helm.sh/resource-policy":        "keep",
		}, crd.GetAnnotations())
		// Helm owns the CRD: it is in the release manifest.
		assert.Contains(t, f.history(t, "crd-install", "app")[0].Manifest, "name: "+k.name())

		res, err = d.Deploy(ctx, f.getter, thingRelease(k, "crd-install", "app", "id-2", "two"))
		require.NoError(t, err)
		assert.Equal(t, deployer.Result{Revision: 2, Changed: true, Previous: "id-1", Description: "Upgrade complete"}, res)
		assert.Equal(t, "two", f.thingValue(ctx, t, k, "crd-install", "app"))
	})

	t.Run("an upgrade adds a CRD and its custom resource", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		d := newDeployer(t)
		k := thingKind{group: "upgrade.crds.example.com"}
		mustDeploy(ctx, t, d, f, "crd-upgrade", "id-1", "one")

		res, err := d.Deploy(ctx, f.getter, thingRelease(k, "crd-upgrade", "app", "id-2", "two"))
		require.NoError(t, err)

		assert.Equal(t, 2, res.Revision)
		assert.Equal(t, "two", f.thingValue(ctx, t, k, "crd-upgrade", "app"))
	})

	t.Run("templated CRD with forced namespace is rejected before anything is applied", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		d := newDeployer(t)
		k := thingKind{group: "forced.crds.example.com"}
		rel := thingRelease(k, "crd-forced", "app", "id-1", "one")
		rel.ForceNamespace = "crd-forced"

		_, err := d.Deploy(ctx, f.getter, rel)

		require.ErrorIs(t, err, deployer.ErrInvalidRelease)
		assert.ErrorContains(t, err, "CustomResourceDefinition "+k.name()+" is cluster-scoped")
		f.assertNothingApplied(ctx, t, "crd-forced", "app")
		_, err = f.dynamic(t).Resource(crds).Get(ctx, k.name(), metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "CRD: want NotFound, got err=%v", err)
	})

	t.Run("Uninstall keeps the CRD, which another release then adopts", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		d := newDeployer(t)
		k := thingKind{group: "keep.crds.example.com"}
		mustDeployThings(ctx, t, d, f, k, "crd-keep", "app")
		f.createThing(ctx, t, k, "crd-keep", "outside")

		require.NoError(t, d.Uninstall(ctx, f.getter, "crd-keep", "app", ""))

		crd := f.getCRD(ctx, t, k)
		assert.Nil(t, crd.GetDeletionTimestamp(), "CRD is not being deleted")
		assert.Equal(t, "outside", f.thingValue(ctx, t, k, "crd-keep", "outside"), "a custom resource outside the release stays")
		assert.True(t, f.thingGone(ctx, t, k, "crd-keep", "app"), "the release's own custom resource is removed with it")
		f.assertNoConfigMap(ctx, t, "crd-keep", "app")

		// The kept CRD names the uninstalled release as its owner; another
		// release shipping it takes it over.
		res, err := d.Deploy(ctx, f.getter, thingRelease(k, "crd-keep-next", "next", "id-1", "next"))
		require.NoError(t, err)
		assert.Equal(t, 1, res.Revision)
		assert.Equal(t, "next", f.thingValue(ctx, t, k, "crd-keep-next", "next"))
		crd = f.getCRD(ctx, t, k)
		assert.Equal(t, "next", crd.GetAnnotations()["meta.helm.sh/release-name"])
		assert.Equal(t, "crd-keep-next", crd.GetAnnotations()["meta.helm.sh/release-namespace"])
	})

	t.Run("a CRD of another live release is not taken over", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		d := newDeployer(t)
		k := thingKind{group: "owned.crds.example.com"}
		mustDeployThings(ctx, t, d, f, k, "crd-owned-a", "first")
		before := f.getCRD(ctx, t, k)

		_, err := d.Deploy(ctx, f.getter, thingRelease(k, "crd-owned-b", "second", "id-1", "two"))

		require.Error(t, err)
		assert.NotErrorIs(t, err, deployer.ErrInvalidRelease)
		assert.ErrorContains(t, err, "exists and cannot be imported into the current release")
		after := f.getCRD(ctx, t, k)
		assert.Equal(t, before.GetResourceVersion(), after.GetResourceVersion(), "CRD untouched")
	})

	t.Run("with DeleteCRDResources Uninstall keeps a CRD the release adopted", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		d := newDeployer(t)
		k := thingKind{group: "adopted.crds.example.com"}
		// The CRD exists before the release: someone else created it.
		crd := new(unstructured.Unstructured)
		require.NoError(t, yaml.Unmarshal([]byte(k.crd()), &crd.Object))
		_, err := f.dynamic(t).Resource(crds).Create(ctx, crd, metav1.CreateOptions{})
		require.NoError(t, err)
		rel := thingRelease(k, "crd-adopted", "app", "id-1", "one")
		rel.DeleteCRDResources, rel.TakeOwnership = true, true
		_, err = d.Deploy(ctx, f.getter, rel)
		require.NoError(t, err)
		annotations := f.getCRD(ctx, t, k).GetAnnotations()
		assert.Equal(t, "app", annotations["meta.helm.sh/release-name"], "adopted")
		assert.Equal(t, "keep", annotations["helm.sh/resource-policy"])
		assert.NotContains(t, annotations, deployer.CRDCreatedByAnnotation)

		require.NoError(t, d.Uninstall(ctx, f.getter, "crd-adopted", "app", ""))

		crd = f.getCRD(ctx, t, k)
		assert.Nil(t, crd.GetDeletionTimestamp(), "the adopted CRD is not deleted")
	})

	t.Run("with DeleteCRDResources Uninstall deletes the CRD and its custom resources", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		d := newDeployer(t)
		k := thingKind{group: "delete.crds.example.com"}
		rel := thingRelease(k, "crd-delete", "app", "id-1", "one")
		rel.DeleteCRDResources = true
		_, err := d.Deploy(ctx, f.getter, rel)
		require.NoError(t, err)
		assert.NotContains(t, f.getCRD(ctx, t, k).GetAnnotations(), "helm.sh/resource-policy")
		assert.Equal(t, "crd-delete/app", f.getCRD(ctx, t, k).GetAnnotations()[deployer.CRDCreatedByAnnotation])
		f.createThing(ctx, t, k, "crd-delete", "outside")

		require.NoError(t, d.Uninstall(ctx, f.getter, "crd-delete", "app", ""))

		// The API server removes the custom resources, then the CRD.
		require.Eventually(t, func() bool {
			_, err := f.dynamic(t).Resource(crds).Get(ctx, k.name(), metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}, time.Minute, 200*time.Millisecond, "CRD is gone")
		_, err = f.dynamic(t).Resource(k.resource()).Namespace("crd-delete").Get(ctx, "outside", metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "Thing outside: want NotFound, got err=%v", err)
	})
}
