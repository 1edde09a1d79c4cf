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
		{name: "credentials by path without a regex are refused", spec: api.GitRepoSpec{HelmSecretNameForPaths: "creds"}, required: true},
		{name: "credentials by path are bounded by the regex", spec: api.GitRepoSpec{HelmSecretNameForPaths: "creds", HelmRepoURLRegex: good},
			match: []string{"https://good.example/x"}, noMatch: []string{"https://evil.example/?https://good.example/x"}},
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
		{"helmSecretNameForPaths needs the regex", "  helmSecretNameForPaths: by-path\n",
			"spec.helmRepoURLRegex: Required value: helmSecretNameForPaths requires helmRepoURLRegex"},
		{"an invalid regex", "  helmSecretName: creds\n  helmRepoURLRegex: '('\n", "spec.helmRepoURLRegex: Invalid value"},
		{"an options file outside the repository", "  bundles:\n  - base: app\n    options: ../../x.yaml\n",
			"spec.bundles[0].options: Invalid value: \"../../x.yaml\": must name a file inside the repository"},
		{"a base outside the repository", "  bundles:\n  - base: ../app\n", "spec.bundles[0].base: Invalid value"},
		{"an invalid service account", "  serviceAccount: Not_Valid\n", "spec.serviceAccount: Invalid value"},
		{"an options file beside the base, as Fleet allows", "  bundles:\n  - base: apps/web\n    options: ../envs/dev.yaml\n" +
			"  serviceAccount: deployer\n", ""},
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

// TestParseHelmPathCredentials: secrets-path.yaml in Fleet's format;
// errors name the key, never a value.
func TestParseHelmPathCredentials(t *testing.T) {
	tests := []struct {
		name, data string
		want       api.HelmPathCredentials
		err        string
	}{
		{name: "Fleet's fields", data: "apps/web:\n  username: robot\n  password: s3cret\n  caBundle: " +
			"LS0tLS1CRUdJTg==\n  insecureSkipVerify: true\n  basicHTTP: true\n./apps/*/:\n  username: other\n",
			want: api.HelmPathCredentials{
				"apps/web": {Username: "robot", Password: "s3cret", CABundle: []byte("-----BEGIN"), InsecureSkipVerify: true, BasicHTTP: true},
				"apps/*":   {Username: "other"}}},
		{name: "empty", data: "", want: api.HelmPathCredentials{}},
		{name: "a bad glob", data: "'apps/[':\n  password: s3cret\n", err: `path "apps/[": syntax error in pattern`},
		{name: "a path twice", data: "app:\n  password: s3cret\n./app:\n  password: s3cret\n", err: `path "app" is given twice`},
		{name: "a wrong type", data: "app:\n  insecureSkipVerify: s3cret\n", err: "invalid Helm credentials by path"},
		{name: "not a mapping", data: "- s3cret\n", err: "invalid Helm credentials by path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := api.ParseHelmPathCredentials([]byte(tt.data))
			if tt.err != "" {
				require.ErrorIs(t, err, api.ErrHelmPathCredentials)
				assert.Contains(t, err.Error(), tt.err)
				assert.NotContains(t, err.Error(), "s3cret")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

// TestHelmPathCredentials_For: the bundle's own path wins, then the first
// matching glob in lexical order; a bundle nothing matches gets none.
func TestHelmPathCredentials_For(t *testing.T) {
	c := api.HelmPathCredentials{
		"apps/web": {Username: "exact"},
		"apps/*":   {Username: "glob-a"},
		"*/web":    {Username: "glob-b"},
		".":        {Username: "root"},
	}
	tests := []struct{ dir, key, user string }{
		{"apps/web", "apps/web", "exact"},
		{"apps/db", "apps/*", "glob-a"},
		{"infra/web", "*/web", "glob-b"},
		{".", ".", "root"},
		{"apps/web/sub", "", ""},
		{"other", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			key, creds, ok := c.For(tt.dir)
			assert.Equal(t, tt.key != "", ok)
			assert.Equal(t, tt.key, key)
			assert.Equal(t, tt.user, creds.Username)
		})
	}
}
