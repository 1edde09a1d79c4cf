package api_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/api"
)

// TestDecode_OverriddenFields: fields Fleet leaves unused when another is
// set are accepted and warned about, naming the file, the GitRepo and both
// fields.
func TestDecode_OverriddenFields(t *testing.T) {
	doc := "apiVersion: fleet.cattle.io/v1alpha1\nkind: GitRepo\nmetadata: {name: r}\nspec:\n  repo: https://git.example/r\n" +
		"  helmRepoURLRegex: https://charts\\.example/.*\n"
	tests := []struct{ name, extra, want string }{
		{"paths with bundles", "  paths: [apps]\n  bundles:\n  - base: apps/web\n",
			"gitrepo.yaml#1: GitRepo fleet-default/r: spec.paths: not used: spec.bundles lists the bundles (as in Fleet)"},
		{"helmSecretName with helmSecretNameForPaths", "  helmSecretName: creds\n  helmSecretNameForPaths: by-path\n",
			"gitrepo.yaml#1: GitRepo fleet-default/r: spec.helmSecretName: not used: spec.helmSecretNameForPaths gives each bundle path its credentials (as in Fleet)"},
		{"bundles alone", "  bundles:\n  - base: apps/web\n    options: dev.yaml\n", ""},
		{"helmSecretNameForPaths alone", "  helmSecretNameForPaths: by-path\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			docs, err := api.Decode(strings.NewReader(doc+tt.extra), "gitrepo.yaml")
			require.NoError(t, err)
			require.Len(t, docs, 1)
			if tt.want == "" {
				assert.Empty(t, docs[0].Warnings)
				return
			}
			assert.Equal(t, []string{tt.want}, docs[0].Warnings)
		})
	}
}
