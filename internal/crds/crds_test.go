package crds

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// TestAll_OneCRDPerKind: the embedded chart carries exactly one CRD per
// kind of Kinds, and each names its kind, resource, scope and Flotilla's
// managed-by label.
func TestAll_OneCRDPerKind(t *testing.T) {
	docs := All()
	require.Len(t, docs, len(Kinds))
	var want []string
	for i, k := range Kinds {
		want = append(want, k.FileName())
		var crd struct {
			Metadata struct {
				Name   string            `json:"name"`
				Labels map[string]string `json:"labels"`
			} `json:"metadata"`
			Spec struct {
				Group string `json:"group"`
				Scope string `json:"scope"`
				Names struct {
					Kind   string `json:"kind"`
					Plural string `json:"plural"`
				} `json:"names"`
			} `json:"spec"`
		}
		require.NoError(t, yaml.Unmarshal(docs[i], &crd), k.Kind)
		assert.Equal(t, k.CRDName(), crd.Metadata.Name)
		assert.True(t, Managed(crd.Metadata.Labels), k.Kind)
		assert.Equal(t, Group, crd.Spec.Group)
		assert.Equal(t, k.Kind, crd.Spec.Names.Kind)
		assert.Equal(t, k.Resource, crd.Spec.Names.Plural)
		assert.Equal(t, k.Namespaced, crd.Spec.Scope == "Namespaced", k.Kind)
	}
	names, err := fileNames()
	require.NoError(t, err)
	assert.ElementsMatch(t, want, names, "the chart's crds/ holds exactly one file per kind")
}

func TestKind_Names(t *testing.T) {
	k := Kind{Kind: "GitRepo", Resource: "gitrepos", Namespaced: true}
	assert.Equal(t, "gitrepos.fleet.cattle.io", k.CRDName())
	assert.Equal(t, "fleet.cattle.io/v1alpha1, Resource=gitrepos", k.GroupVersionResource().String())
	assert.Equal(t, "fleet.cattle.io/v1alpha1, Kind=GitRepo", k.GroupVersionKind().String())
	assert.False(t, Managed(map[string]string{"app.kubernetes.io/managed-by": "Helm"}))
	assert.False(t, Managed(nil))
}
