package kubenative

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestSecretRefs: the Secrets a GitRepo or HelmOp names, with the field
// naming each (what a refusal names), each Secret once.
func TestSecretRefs(t *testing.T) {
	tests := []struct {
		name string
		kind string
		spec map[string]any
		want []secretRef
	}{
		{"gitrepo without secrets", "GitRepo", map[string]any{"repo": "https://x"}, nil},
		{"gitrepo with every field", "GitRepo", map[string]any{"clientSecretName": "git", "helmSecretName": "helm",
			"helmSecretNameForPaths": "paths", "webhookSecret": "hook", "verify": map[string]any{"secretRef": map[string]any{"name": "signers"}},
			"previews": map[string]any{"secretName": "gh-api"}},
			[]secretRef{{"spec.clientSecretName", "git"}, {"spec.helmSecretName", "helm"}, {"spec.helmSecretNameForPaths", "paths"},
				{"spec.webhookSecret", "hook"}, {"spec.verify.secretRef.name", "signers"}, {"spec.previews.secretName", "gh-api"}}},
		{"one secret named twice", "GitRepo", map[string]any{"clientSecretName": "creds", "helmSecretName": "creds"},
			[]secretRef{{"spec.clientSecretName", "creds"}}},
		{"helmop reads only helmSecretName", "HelmOp", map[string]any{"helmSecretName": "helm", "clientSecretName": "ignored"},
			[]secretRef{{"spec.helmSecretName", "helm"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := &unstructured.Unstructured{Object: map[string]any{"kind": tt.kind, "spec": tt.spec}}
			assert.Equal(t, tt.want, secretRefs(obj))
		})
	}
}

// TestSecretSyncReferrers: a Secret's referrers are the objects whose
// last apply named it; an object forgotten names nothing.
func TestSecretSyncReferrers(t *testing.T) {
	s := newSecretSync(&Deps{}, nil)
	a := objKey{Kind: "GitRepo", Namespace: "team-a", Name: "a"}
	b := objKey{Kind: "HelmOp", Namespace: "team-a", Name: "b"}
	s.index(a, []string{"team-a/git", "team-a/helm"})
	s.index(b, []string{"team-a/helm"})
	assert.Equal(t, []objKey{a, b}, s.referrers("team-a/helm"))
	assert.Equal(t, []objKey{a}, s.referrers("team-a/git"))
	s.index(a, []string{"team-a/other"})
	assert.Empty(t, s.referrers("team-a/git"))
	s.unindex(b)
	assert.Empty(t, s.referrers("team-a/helm"))
}
