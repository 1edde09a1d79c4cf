package keyring

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLoadDir(t *testing.T) {
	dir := t.TempDir()
	_, err := LoadDir(dir)
	require.ErrorIs(t, err, ErrNoKeys)

	old, err := Generate()
	require.NoError(t, err)
	old.ID = "fk-20250101t000000z"
	newer, err := Generate()
	require.NoError(t, err)
	newer.ID = "fk-20261127t033000z"
	require.NoError(t, WriteKey(dir, newer))
	require.NoError(t, WriteKey(dir, old))
	require.Error(t, WriteKey(dir, old), "a key is never replaced")
	// What a mounted Secret adds beside its keys.
	require.NoError(t, os.Mkdir(filepath.Join(dir, "..2026_11_27"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".hidden"), []byte("x"), 0o600))

	r, err := LoadDir(dir)
	require.NoError(t, err)
	assert.Equal(t, []string{old.ID, newer.ID}, r.IDs())
	assert.Equal(t, newer, r.Newest(), "the greatest ID is the newest")
	got, ok := r.Get(old.ID)
	assert.True(t, ok)
	assert.Equal(t, old, got)
	_, ok = r.Get("fk-1")
	assert.False(t, ok)
	info, err := os.Stat(filepath.Join(dir, old.ID))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())
}

func TestLoadDir_BadFiles(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "fk-1"), []byte("c2hvcnQ=\n"), 0o600))
	_, err := LoadDir(dir)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "fk-1")
	assert.NotContains(t, err.Error(), "c2hvcnQ", "never the content")

	dir = t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "Upper_Case"), []byte("x"), 0o600))
	_, err = LoadDir(dir)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Upper_Case")
}

func TestLoadOrCreate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys")
	r, created, err := LoadOrCreate(dir)
	require.NoError(t, err)
	assert.True(t, created)
	again, created, err := LoadOrCreate(dir)
	require.NoError(t, err)
	assert.False(t, created)
	assert.Equal(t, r.Newest(), again.Newest())
}

func TestIDs(t *testing.T) {
	id := NewID(time.Date(2026, 11, 27, 3, 30, 0, 0, time.UTC))
	assert.Equal(t, "fk-20261127t033000z", id)
	require.NoError(t, ValidateID(id))
	assert.Less(t, NewID(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), id, "IDs sort by age")
	for _, bad := range []string{"", "-a", "a-", "A", "a_b", "a/b", "..data"} {
		assert.Error(t, ValidateID(bad), bad)
	}
	_, err := New(Key{ID: "a"}, Key{ID: "a"})
	assert.Error(t, err)
}
