package main

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/temporalx"
)

func TestAPIKeyName(t *testing.T) {
	payload := base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"ci-bot"}`))
	assert.Equal(t, "ci-bot", apiKeyName("eyJhbGciOiJIUzI1NiJ9."+payload+".sig"))
	name := apiKeyName("plain-secret-key")
	assert.True(t, strings.HasPrefix(name, "sha256:"), name)
	assert.Len(t, name, len("sha256:")+12)
	assert.NotContains(t, name, "plain-secret-key", "the key itself never shows")
}

func TestCLIIdentity(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "key")
	require.NoError(t, os.WriteFile(keyFile, []byte("secret\n"), 0o600))
	id := cliIdentity(temporalx.ClientOptions{APIKeyFile: keyFile})
	assert.Equal(t, "cli", id.Via)
	assert.NotEmpty(t, id.User)
	assert.Equal(t, apiKeyName("secret"), id.APIKey)
	assert.Contains(t, id.String(), "api key sha256:")
}
