package kubenative

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestCheckHelmOp: a HelmOp's bundle part is checked as `flotilla apply`
// checks it: unknown keys are warnings, a value of the wrong type refuses
// the HelmOp naming the field.
func TestCheckHelmOp(t *testing.T) {
	helmOp := func(helm map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "fleet.cattle.io/v1alpha1", "kind": "HelmOp",
			"metadata": map[string]any{"name": "web", "namespace": "team-a"},
			"spec":     map[string]any{"helm": helm},
		}}
	}
	tests := []struct {
		name        string
		helm        map[string]any
		wantWarning string
		wantRefusal bool
	}{
		{"valid", map[string]any{"chart": "web", "repo": "https://charts.example.com", "version": "1.0.0"}, "", false},
		{"unknown key", map[string]any{"chart": "web", "repo": "https://charts.example.com", "version": "1.0.0", "chrat": "x"},
			`HelmOp team-a/web: unknown field "spec.helm.chrat" (ignored)`, false},
		{"wrong type", map[string]any{"chart": "web", "repo": "https://charts.example.com", "version": "1.0.0", "atomic": "yes"}, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := helmOp(tt.helm)
			doc, err := documentOf(obj)
			require.NoError(t, err)
			err = checkHelmOp(obj, &doc)
			if tt.wantRefusal {
				var ref *RefusedError
				require.ErrorAs(t, err, &ref)
				assert.Equal(t, ReasonInvalidSpec, ref.Reason)
				return
			}
			require.NoError(t, err)
			if tt.wantWarning != "" {
				assert.Contains(t, doc.Warnings, tt.wantWarning)
			}
		})
	}
}
