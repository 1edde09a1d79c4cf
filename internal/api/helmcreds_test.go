package api_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/api"
)

// TestHelmRepoURLPattern: helmSecretName needs helmRepoURLRegex (except
// on a HelmOp's GitRepo), and the regex matches whole URLs only.
func TestHelmRepoURLPattern(t *testing.T) {
	const good = `https://good\.example/.*`
	tests := []struct {
		name     string
		spec     api.GitRepoSpec
		required bool
		// match and noMatch are URLs the pattern must and must not match.
		match, noMatch []string
	}{
		{name: "no credentials, no regex", spec: api.GitRepoSpec{}},
		{name: "credentials without a regex are refused", spec: api.GitRepoSpec{HelmSecretName: "creds"}, required: true},
		{name: "a HelmOp names its chart URL itself", spec: api.GitRepoSpec{HelmSecretName: "creds", HelmOp: &api.HelmOpSource{}}},
		{name: "the regex matches the whole URL", spec: api.GitRepoSpec{HelmSecretName: "creds", HelmRepoURLRegex: good},
			match: []string{"https://good.example/charts/app-1.0.0.tgz", "https://good.example/"},
			noMatch: []string{"https://evil.example/?https://good.example/x", "https://good.example.evil.example/x",
				"http://x/https://good.example/y", "https://evil.example/#https://good.example/"}},
		{name: "an alternation is anchored as a whole", spec: api.GitRepoSpec{HelmSecretName: "creds", HelmRepoURLRegex: "https://a/x|https://b/y"},
			match:   []string{"https://a/x", "https://b/y"},
			noMatch: []string{"https://a/xz", "zhttps://b/y", "https://evil/?https://a/x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			re, err := api.HelmRepoURLPattern(tt.spec)
			if tt.required {
				assert.True(t, errors.Is(err, api.ErrHelmRepoURLRegexRequired), "%v", err)
				assert.Nil(t, re)
				return
			}
			require.NoError(t, err)
			if tt.match == nil && tt.noMatch == nil {
				assert.Nil(t, re)
				return
			}
			for _, u := range tt.match {
				assert.True(t, re.MatchString(u), u)
			}
			for _, u := range tt.noMatch {
				assert.False(t, re.MatchString(u), u)
			}
		})
	}
}

// TestDecode_RepositoryAuthorBounds: a GitRepo naming helmSecretName
// without helmRepoURLRegex, or an invalid serviceAccount, is refused at
// apply, naming the field.
func TestDecode_RepositoryAuthorBounds(t *testing.T) {
	doc := func(extra string) string {
		return "apiVersion: fleet.cattle.io/v1alpha1\nkind: GitRepo\nmetadata: {name: r}\nspec:\n  repo: https://git.example/r\n" + extra
	}
	tests := []struct{ name, extra, err string }{
		{"helmSecretName needs the regex", "  helmSecretName: creds\n",
			"spec.helmRepoURLRegex: Required value: helmSecretName requires helmRepoURLRegex"},
		{"an invalid regex", "  helmSecretName: creds\n  helmRepoURLRegex: '('\n", "spec.helmRepoURLRegex: Invalid value"},
		{"an invalid service account", "  serviceAccount: Not_Valid\n", "spec.serviceAccount: Invalid value"},
		{"both set", "  helmSecretName: creds\n  helmRepoURLRegex: https://charts\\.example/.*\n  serviceAccount: deployer\n  targetNamespace: apps\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			docs, err := api.Decode(strings.NewReader(doc(tt.extra)), "gitrepo.yaml")
			if tt.err == "" {
				require.NoError(t, err)
				assert.Equal(t, "deployer", docs[0].GitRepo.Spec.ServiceAccount)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.err)
		})
	}
}
