package keyring

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSigningKey(t *testing.T) {
	dir := t.TempDir()
	_, found, err := LoadSigningKey(dir)
	require.NoError(t, err)
	assert.False(t, found)

	seed, created, err := LoadOrCreateSigningKey(dir)
	require.NoError(t, err)
	assert.True(t, created)
	assert.Len(t, seed, KeySize)
	again, created, err := LoadOrCreateSigningKey(dir)
	require.NoError(t, err)
	assert.False(t, created, "generated once")
	assert.Equal(t, seed, again)

	// Beside sealing keys it is not one of them, and leaves nothing else behind.
	k, err := Generate()
	require.NoError(t, err)
	require.NoError(t, WriteKey(dir, k))
	r, err := LoadDir(dir)
	require.NoError(t, err)
	assert.Equal(t, []string{k.ID}, r.IDs())
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 2)

	require.NoError(t, os.WriteFile(filepath.Join(dir, SigningKeyName), []byte("bm90IGEga2V5"), 0o600))
	_, _, err = LoadSigningKey(dir)
	require.ErrorContains(t, err, "file signing-key is not a base64-encoded 32-byte key")
}

// TestSigningKeyRace: replicas sharing a directory that start together
// all end up with the same key.
func TestSigningKeyRace(t *testing.T) {
	dir := t.TempDir()
	seeds := make([][]byte, 8)
	var wg sync.WaitGroup
	for i := range seeds {
		wg.Go(func() {
			s, _, err := LoadOrCreateSigningKey(dir)
			assert.NoError(t, err)
			seeds[i] = s
		})
	}
	wg.Wait()
	for _, s := range seeds {
		assert.Equal(t, seeds[0], s)
	}
}

func TestSigningKeyReadOnlyDir(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root writes into read-only directories")
	}
	dir := t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o500))
	t.Cleanup(func() { _ = os.Chmod(dir, 0o700) })
	_, _, err := LoadOrCreateSigningKey(dir)
	require.ErrorContains(t, err, "write the signing key into "+dir)
}

func TestLoadSealing(t *testing.T) {
	dir := t.TempDir()
	r, created, err := LoadOrCreateSealing(dir)
	require.NoError(t, err)
	assert.True(t, created)
	seed, ok := r.SigningKey()
	require.True(t, ok)
	assert.Len(t, r.IDs(), 1, "the signing key is not a sealing key")

	again, err := LoadSealing(dir)
	require.NoError(t, err)
	seed2, _ := again.SigningKey()
	assert.Equal(t, seed, seed2, "every replica given the directory loads the same signing key")

	plain, err := LoadDir(dir)
	require.NoError(t, err)
	_, ok = plain.SigningKey()
	assert.False(t, ok, "payload and agent keyrings carry no signing key")
}
