package activities

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/bundle"
	"github.com/flotilla-gitops/flotilla/internal/chartfetch"
	"github.com/flotilla-gitops/flotilla/internal/cluster"
)

// loadRecorder is a SecretSource that records which Secrets were read.
type loadRecorder struct{ loaded []string }

func (l *loadRecorder) Load(namespace, name string) (string, string, error) {
	l.loaded = append(l.loaded, namespace+"/"+name)
	return "robot", "s3cret-robot", nil
}

func (l *loadRecorder) SecretData(_ context.Context, namespace, name string) (string, map[string][]byte, error) {
	user, pass, err := l.Load(namespace, name)
	return "kubernetes.io/basic-auth", map[string][]byte{"username": []byte(user), "password": []byte(pass)}, err
}

// TestFetcher_HelmCredentials: a stored GitRepo naming helmSecretName
// without helmRepoURLRegex fails non-retryably before its Secret is read;
// with a regex, only URLs it matches as a whole get the credentials.
func TestFetcher_HelmCredentials(t *testing.T) {
	ref := GitRepoRef{Namespace: "fleet-default", Name: "r"}
	secrets := &loadRecorder{}
	a := &Activities{Secrets: secrets}

	_, err := a.fetcher(ref, api.GitRepoSpec{HelmSecretName: "creds"})
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "%v", err)
	assert.True(t, appErr.NonRetryable())
	assert.Equal(t, ErrTypeInvalidBundle, appErr.Type())
	assert.Contains(t, err.Error(), "helmSecretName requires helmRepoURLRegex")
	assert.Empty(t, secrets.loaded, "the Secret is not read")

	f, err := a.fetcher(ref, api.GitRepoSpec{HelmSecretName: "creds", HelmRepoURLRegex: `https://good\.example/.*`})
	require.NoError(t, err)
	assert.Equal(t, []string{"fleet-default/creds"}, secrets.loaded)
	if auth := f.Auth("https://good.example/charts/app-1.0.0.tgz"); assert.NotNil(t, auth) {
		assert.Equal(t, "robot", auth.Username)
	}
	assert.Nil(t, f.Auth("https://evil.example/?https://good.example/x"))
	assert.Nil(t, f.Auth("https://good.example.evil.example/x"))
}

// dataSecrets is a SecretSource holding Secrets' data by name.
type dataSecrets struct {
	data   map[string]map[string][]byte
	loaded []string
}

func (d *dataSecrets) Load(namespace, name string) (string, string, error) {
	d.loaded = append(d.loaded, namespace+"/"+name)
	return "robot", "s3cret-robot", nil
}

func (d *dataSecrets) SecretData(_ context.Context, namespace, name string) (string, map[string][]byte, error) {
	d.loaded = append(d.loaded, namespace+"/"+name)
	data, ok := d.data[name]
	if !ok {
		return "", nil, cluster.ErrNotFound
	}
	return "Opaque", data, nil
}

// TestReaders_HelmPathCredentials: with helmSecretNameForPaths each
// bundle gets its secrets-path.yaml entry (its own path, else the first
// glob), sent only to URLs helmRepoURLRegex matches; a bundle without an
// entry gets nothing, helmSecretName included; errors name the Secret and
// key, never a value.
func TestReaders_HelmPathCredentials(t *testing.T) {
	ref := GitRepoRef{Namespace: "fleet-default", Name: "r"}
	secrets := &dataSecrets{data: map[string]map[string][]byte{
		"by-path": {api.HelmPathCredentialsKey: []byte("apps/a:\n  username: user-a\n  password: pass-a\n" +
			"apps/b*:\n  username: user-b\n  password: pass-b\n  insecureSkipVerify: true\n")},
		"no-key": {"username": []byte("x")},
		"broken": {api.HelmPathCredentialsKey: []byte("apps/a:\n  insecureSkipVerify: pass-broken\n")},
	}}
	a := &Activities{Secrets: secrets, Charts: &chartfetch.Fetcher{}}
	spec := api.GitRepoSpec{HelmSecretNameForPaths: "by-path", HelmSecretName: "creds", HelmRepoURLRegex: `https://good\.example/.*`}

	_, err := a.readers(context.Background(), ref, api.GitRepoSpec{HelmSecretNameForPaths: "by-path"})
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "%v", err)
	assert.Equal(t, ErrTypeInvalidBundle, appErr.Type())
	assert.Contains(t, err.Error(), "helmSecretNameForPaths requires helmRepoURLRegex")
	assert.Empty(t, secrets.loaded, "the Secret is not read without the regex")

	readers, err := a.readers(context.Background(), ref, spec)
	require.NoError(t, err)
	assert.Equal(t, []string{"fleet-default/by-path"}, secrets.loaded, "helmSecretName is not read")
	const good, evil = "https://good.example/charts/x-1.0.0.tgz", "https://evil.example/x-1.0.0.tgz"
	if auth := chartsOf(readers("apps/a")).Auth(good); assert.NotNil(t, auth) {
		assert.Equal(t, chartfetch.Auth{Username: "user-a", Password: "pass-a"}, *auth)
	}
	assert.Nil(t, chartsOf(readers("apps/a")).Auth(evil))
	if auth := chartsOf(readers("apps/b2")).Auth(good); assert.NotNil(t, auth) {
		assert.Equal(t, chartfetch.Auth{Username: "user-b", Password: "pass-b", InsecureSkipTLSVerify: true}, *auth)
	}
	if auth := chartsOf(readers("apps/b2")).Auth(evil); assert.NotNil(t, auth) {
		assert.Equal(t, chartfetch.Auth{InsecureSkipTLSVerify: true}, *auth, "transport settings only")
	}
	assert.Same(t, readers("apps/b1"), readers("apps/b2"), "one entry, one fetcher")
	assert.Nil(t, chartsOf(readers("apps/c")).Auth, "no entry: no credentials, not even helmSecretName's")

	for name, want := range map[string]string{
		"missing": `GitRepo fleet-default/r: helmSecretNameForPaths "missing": no such secret in namespace fleet-default`,
		"no-key":  `helmSecretNameForPaths "no-key": has no key secrets-path.yaml`,
		"broken":  `helmSecretNameForPaths "broken": key secrets-path.yaml: invalid Helm credentials by path`,
	} {
		spec.HelmSecretNameForPaths = name
		_, err := a.readers(context.Background(), ref, spec)
		require.True(t, errors.As(err, &appErr), "%v", err)
		assert.True(t, appErr.NonRetryable())
		assert.Equal(t, ErrTypeSecretNotFound, appErr.Type())
		assert.Contains(t, err.Error(), want)
		assert.NotContains(t, err.Error(), "pass-")
	}
}

// chartsOf is the chart fetcher of a bundle reader readers returned.
func chartsOf(r bundleReader) *chartfetch.Fetcher {
	if w, ok := r.(warningReader); ok {
		return w.Charts
	}
	return r.(*bundle.Reader).Charts
}
