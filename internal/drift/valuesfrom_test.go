package drift_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chart"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/flotilla-gitops/flotilla/internal/bundle"
	"github.com/flotilla-gitops/flotilla/internal/deployer"
	"github.com/flotilla-gitops/flotilla/internal/drift"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

// testMonitorValuesFrom: a release whose values come from a ConfigMap and
// a Secret on the cluster is reported drifted when their data changes or
// they go away, is not "corrected" (a rollback would restore the old
// values), and is clean again once deployed with the new data.
func testMonitorValuesFrom(t *testing.T, e *monitorEnv) {
	const ns, bundleName = "drift-values", "values"
	nsObj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}}
	_, err := e.dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).Create(e.ctx(t), nsObj, metav1.CreateOptions{})
	require.NoError(t, err)
	for gvr, obj := range map[schema.GroupVersionResource]map[string]any{
		monConfigMaps: {"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "vals", "namespace": ns},
			"data": map[string]any{"values.yaml": "key: from-configmap\n"}},
		monSecrets: {"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "creds", "namespace": ns},
			"stringData": map[string]any{"values.yaml": "other: from-secret\n"}},
	} {
		_, err := e.dyn.Resource(gvr).Namespace(ns).Create(e.ctx(t), &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	refs := []deployer.ValuesRef{{Namespace: ns, Name: "vals"}, {Secret: true, Namespace: ns, Name: "creds"}}
	deploy := func() int {
		t.Helper()
		c := &chart.Chart{Metadata: &chart.Metadata{APIVersion: chart.APIVersionV2, Name: "drift", Version: "0.1.0"},
			Templates: []*chart.File{{Name: "templates/cm.yaml", Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: rendered}\n" +
				"data: {key: {{ .Values.key | quote }}, other: {{ .Values.other | quote }}}\n")}}}
		res, err := e.deployer.Deploy(e.ctx(t), e.base.ForNamespace(ns), deployer.Release{
			Name: monRelease, Namespace: ns, Chart: c, DeploymentID: monDeploymentID, ValuesFrom: refs,
			Labels: map[string]string{drift.BundleLabel: bundleName},
		})
		require.NoError(t, err)
		return res.Revision
	}
	require.Equal(t, 1, deploy())

	target := monTarget(ns, bundleName)
	target.ValuesFrom = refs
	target.Correct = &bundle.CorrectDrift{Enabled: true}
	run := e.start(t, drift.Config{}, target)
	run.reports.waitFor(t, 0, 30*time.Second, "of the unchanged release", clean(1))
	settle()

	from := run.reports.mark()
	e.update(t, monConfigMaps, ns, "vals", "kubectl-edit", func(obj map[string]any) {
		_ = unstructured.SetNestedField(obj, "key: changed\n", "data", "values.yaml")
	})
	rep := run.reports.waitFor(t, from, detectWithin, "with the changed ConfigMap", func(r status.LiveReport) bool { return r.Modified == 1 })
	assert.Equal(t, []status.ModifiedStatus{{Kind: "valuesFrom configmap", Namespace: ns, Name: "vals",
		Patch: "(key values.yaml changed since the last deploy)"}}, rep.ModifiedStatus)
	assert.Equal(t, "valuesFrom configmap "+ns+"/vals: modified (key values.yaml changed since the last deploy)", rep.ModifiedStatus[0].String())
	time.Sleep(2 * time.Second)
	assert.Zero(t, run.corrected("success")+run.corrected("failure"), "a changed source is not corrected")

	// A deploy at the same deployment ID takes the new data: clean again.
	from = run.reports.mark()
	require.Equal(t, 2, deploy())
	run.reports.waitFor(t, from, detectWithin, "after the redeploy", clean(1))
	assert.Equal(t, "changed", e.dataKey(t, ns, "rendered"))

	// A deleted Secret is reported missing.
	from = run.reports.mark()
	require.NoError(t, e.dyn.Resource(monSecrets).Namespace(ns).Delete(e.ctx(t), "creds", metav1.DeleteOptions{}))
	rep = run.reports.waitFor(t, from, detectWithin, "with the Secret gone", func(r status.LiveReport) bool { return r.Modified == 1 })
	assert.Equal(t, []status.ModifiedStatus{{Kind: "valuesFrom secret", Namespace: ns, Name: "creds", Missing: true}}, rep.ModifiedStatus)
}
