package activities

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/flotilla-gitops/flotilla/internal/api"
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
