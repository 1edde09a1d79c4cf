package kubenative

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/flotilla-gitops/flotilla/internal/outcome"
)

func meta(ns string, created time.Time) metav1.Object {
	o := &unstructured.Unstructured{}
	o.SetNamespace(ns)
	o.SetCreationTimestamp(metav1.NewTime(created))
	return o
}

func TestNameHolder(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name  string
		items []metav1.Object
		want  string
	}{
		{name: "none", want: ""},
		{name: "alone", items: []metav1.Object{meta("b", t0)}, want: "b"},
		{name: "the oldest holds it", items: []metav1.Object{meta("a", t0.Add(time.Second)), meta("b", t0)}, want: "b"},
		{name: "same age: first namespace", items: []metav1.Object{meta("b", t0), meta("a", t0)}, want: "a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, nameHolder(tt.items))
		})
	}
}

func TestSecretsOf(t *testing.T) {
	tests := []struct {
		name string
		spec map[string]any
		want []string
	}{
		{name: "pull mode", spec: map[string]any{"paused": true}},
		{name: "own namespace", spec: map[string]any{"kubeConfigSecret": "kc"}, want: []string{"fleet-default/kc"}},
		{name: "other namespace", spec: map[string]any{"kubeConfigSecret": "kc", "kubeConfigSecretNamespace": "sec"}, want: []string{"sec/kc"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := &unstructured.Unstructured{Object: map[string]any{"spec": tt.spec}}
			obj.SetNamespace("fleet-default")
			assert.Equal(t, tt.want, SecretsOf(obj))
		})
	}
}

// A Fleet Cluster decodes as `flotilla apply` decodes one: status and
// server-set metadata are not part of it, kubectl's last-applied
// annotation is dropped, and an invalid one is refused naming the field.
func TestDocumentOfCluster(t *testing.T) {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "fleet.cattle.io/v1alpha1", "kind": "Cluster",
		"metadata": map[string]any{"name": "prod-1", "namespace": "fleet-default", "uid": "u", "resourceVersion": "7",
			"labels":      map[string]any{"env": "prod"},
			"annotations": map[string]any{lastApplied: "{...}", "team": "a"}},
		"spec":   map[string]any{"kubeConfigSecret": "kc", "paused": true},
		"status": map[string]any{"display": map[string]any{"readyBundles": "1/1"}},
	}}
	doc, err := documentOf(obj)
	require.NoError(t, err)
	require.NotNil(t, doc.Cluster)
	assert.Equal(t, map[string]string{"env": "prod"}, doc.Cluster.Metadata.Labels)
	assert.Equal(t, map[string]string{"team": "a"}, doc.Cluster.Metadata.Annotations)
	assert.Equal(t, "kc", doc.Cluster.Spec.KubeConfigSecret)
	assert.True(t, doc.Cluster.Spec.Paused)

	obj.SetLabels(map[string]string{"bad key!": "x"})
	_, err = documentOf(obj)
	var ref *RefusedError
	require.ErrorAs(t, err, &ref)
	assert.Equal(t, ReasonInvalidSpec, ref.Reason)
	assert.Contains(t, ref.Error(), "metadata.labels")
	assert.Equal(t, outcome.Invalid, ref.OutcomeClass())
	assert.True(t, errors.As(err, &ref))
}
