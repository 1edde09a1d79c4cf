package cluster

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/api"
)

func secretObj(ns, name string, data map[string]string) api.Secret {
	s := api.Secret{Metadata: api.ObjectMeta{Namespace: ns, Name: name}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

func TestSecretStore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "secrets")
	s := NewSecretStore(dir)

	require.NoError(t, s.Save(secretObj("team-a", "git-creds", map[string]string{"username": "alice", "password": token, "extra": "dropped"})))
	user, pass, err := s.Load("team-a", "git-creds")
	require.NoError(t, err)
	assert.Equal(t, "alice", user)
	assert.Equal(t, token, pass)

	path := filepath.Join(dir, "team-a", "git-creds.json")
	info, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	for _, d := range []string{dir, filepath.Dir(path)} {
		info, err := os.Stat(d)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o700), info.Mode().Perm(), d)
	}
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.NotContains(t, string(raw), "dropped", "only the credentials are stored")

	// A token alone is a password for user "git"; the default namespace applies.
	tokenOnly := secretObj("", "tok", nil)
	tokenOnly.StringData = map[string]string{"token": token}
	require.NoError(t, s.Save(tokenOnly))
	user, pass, err = s.Load(api.DefaultNamespace, "tok")
	require.NoError(t, err)
	assert.Equal(t, "git", user)
	assert.Equal(t, token, pass)

	require.NoError(t, s.Remove("team-a", "git-creds"))
	require.NoError(t, s.Remove("team-a", "git-creds"), "remove is idempotent")
	_, _, err = s.Load("team-a", "git-creds")
	require.ErrorIs(t, err, ErrNotFound)
	assert.EqualError(t, err, "secret team-a/git-creds not found in "+dir)
}

func TestSecretStore_Errors(t *testing.T) {
	s := NewSecretStore(t.TempDir())
	tests := []struct {
		name   string
		secret api.Secret
		wantIs error // nil: any error
	}{
		{name: "no password or token", secret: secretObj("ns", "s", map[string]string{"username": token})},
		{name: "bad namespace", secret: secretObj("../x", "s", map[string]string{"password": token}), wantIs: ErrInvalidName},
		{name: "bad name", secret: secretObj("ns", "a/b", map[string]string{"password": token}), wantIs: ErrInvalidName},
		{name: "empty name", secret: secretObj("ns", "", map[string]string{"password": token}), wantIs: ErrInvalidName},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := s.Save(tt.secret)
			require.Error(t, err)
			if tt.wantIs != nil {
				require.ErrorIs(t, err, tt.wantIs)
			}
			assert.NotContains(t, err.Error(), token)
		})
	}
	_, _, err := s.Load("ns", "../../etc/passwd")
	require.ErrorIs(t, err, ErrInvalidName)
	require.ErrorIs(t, s.Remove("NS", "x"), ErrInvalidName)
}

func TestSecretStore_CorruptFile(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "ns"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "ns", "s.json"), []byte(`{"password": "`+token), 0o600))
	_, _, err := NewSecretStore(dir).Load("ns", "s")
	require.Error(t, err)
	assert.NotContains(t, err.Error(), token)
}

// A webhook Secret (Fleet's keys) is stored and loaded with its keys; a
// Git credential Secret has none; a Secret with neither is rejected.
func TestSecretStore_Webhook(t *testing.T) {
	s := NewSecretStore(filepath.Join(t.TempDir(), "secrets"))
	require.NoError(t, s.Save(secretObj("team-a", "hooks", map[string]string{"github": "gh-" + token, "azure-username": "u", "azure-password": "p", "other": "dropped"})))
	keys, err := s.LoadWebhook("team-a", "hooks")
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"github": "gh-" + token, "azure-username": "u", "azure-password": "p"}, keys)

	require.NoError(t, s.Save(secretObj("team-a", "git-creds", map[string]string{"token": token})))
	keys, err = s.LoadWebhook("team-a", "git-creds")
	require.NoError(t, err)
	assert.Empty(t, keys)

	_, err = s.LoadWebhook("team-a", "missing")
	require.ErrorIs(t, err, ErrNotFound)
	err = s.Save(secretObj("team-a", "empty", map[string]string{"other": "x"}))
	require.ErrorContains(t, err, "a webhook secret one of github, gitlab")
}
