package content_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/bundle"
	"github.com/flotilla-gitops/flotilla/internal/content"
)

func newStore(t *testing.T) (*content.Store, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "store")
	s, err := content.New(dir)
	require.NoError(t, err)
	return s, dir
}

func manifest(n int) bundle.Manifest {
	return bundle.Manifest{Resources: []bundle.Resource{
		{Name: "a.yaml", Content: fmt.Sprintf("n: %d\n<html> & stuff\n", n)},
		{Name: "bin", Content: "AP8=", Encoding: bundle.EncodingBase64},
	}}
}

func options() bundle.Options {
	return bundle.Options{
		TargetNamespace: "ns",
		Helm: &bundle.HelmOptions{
			ReleaseName: "rel",
			Values:      map[string]any{"replicas": 2.0, "nested": map[string]any{"list": []any{"a", 1.5}}},
		},
		NamespaceLabels: map[string]string{"a": "b"},
	}
}

func TestNewCreatesPrivateDir(t *testing.T) {
	_, dir := newStore(t)
	fi, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm())

	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	_, err = content.New(file)
	require.Error(t, err)
}

func TestManifestRoundTrip(t *testing.T) {
	s, dir := newStore(t)
	m := manifest(1)
	id, err := s.PutManifest(m)
	require.NoError(t, err)
	assert.Equal(t, m.ID(), id)

	// Stored as gzip JSON under manifests/<id>.json.gz.
	raw, err := os.ReadFile(filepath.Join(dir, "manifests", id+".json.gz"))
	require.NoError(t, err)
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	require.NoError(t, err)
	var onDisk bundle.Manifest
	require.NoError(t, json.NewDecoder(zr).Decode(&onDisk))
	assert.Equal(t, m, onDisk)

	got, err := s.GetManifest(id)
	require.NoError(t, err)
	assert.Equal(t, m, got)

	// Idempotent.
	again, err := s.PutManifest(m)
	require.NoError(t, err)
	assert.Equal(t, id, again)
}

func TestOptionsRoundTrip(t *testing.T) {
	s, dir := newStore(t)
	o := options()
	hash, err := s.PutOptions(o)
	require.NoError(t, err)
	assert.Equal(t, o.Key(), hash)
	assert.FileExists(t, filepath.Join(dir, "options", hash+".json"))

	got, err := s.GetOptions(hash)
	require.NoError(t, err)
	assert.Equal(t, o, got)
	assert.Equal(t, hash, got.Key())

	empty, err := s.PutOptions(bundle.Options{})
	require.NoError(t, err)
	gotEmpty, err := s.GetOptions(empty)
	require.NoError(t, err)
	assert.Equal(t, bundle.Options{}, gotEmpty)
}

func TestNotFound(t *testing.T) {
	s, _ := newStore(t)
	_, err := s.GetManifest(manifest(1).ID())
	assert.ErrorIs(t, err, content.ErrNotFound)
	_, err = s.GetOptions(options().Key())
	assert.ErrorIs(t, err, content.ErrNotFound)
}

func TestInvalidIDs(t *testing.T) {
	s, _ := newStore(t)
	valid := manifest(1).ID()
	hash := options().Key()
	for _, id := range []string{
		"", "s-", "../../etc/passwd", "s-" + strings.Repeat("a", 60), valid + "0", strings.ToUpper(valid),
		"x-" + valid[2:], valid[:62] + "/", hash,
	} {
		_, err := s.GetManifest(id)
		assert.ErrorIs(t, err, content.ErrInvalidID, "manifest %q", id)
	}
	for _, h := range []string{
		"", "../options/" + hash[:53], strings.Repeat("g", 64), strings.ToUpper(hash), hash[:63], hash + "0", valid,
	} {
		_, err := s.GetOptions(h)
		assert.ErrorIs(t, err, content.ErrInvalidID, "options %q", h)
	}
}

func TestCorruptContent(t *testing.T) {
	s, dir := newStore(t)
	id, err := s.PutManifest(manifest(1))
	require.NoError(t, err)
	hash, err := s.PutOptions(options())
	require.NoError(t, err)

	// Swap in other content under the same names.
	other, err := s.PutManifest(manifest(2))
	require.NoError(t, err)
	mfile := filepath.Join(dir, "manifests", id+".json.gz")
	require.NoError(t, os.Rename(filepath.Join(dir, "manifests", other+".json.gz"), mfile))
	_, err = s.GetManifest(id)
	assert.ErrorIs(t, err, content.ErrCorrupt)
	assert.ErrorContains(t, err, mfile)

	ofile := filepath.Join(dir, "options", hash+".json")
	require.NoError(t, os.WriteFile(ofile, []byte(`{"namespace":"tampered"}`), 0o600))
	_, err = s.GetOptions(hash)
	assert.ErrorIs(t, err, content.ErrCorrupt)
	assert.ErrorContains(t, err, ofile)

	// Unreadable content names the file too.
	require.NoError(t, os.WriteFile(mfile, []byte("not gzip"), 0o600))
	_, err = s.GetManifest(id)
	assert.ErrorContains(t, err, mfile)
	require.NoError(t, os.WriteFile(ofile, []byte("{"), 0o600))
	_, err = s.GetOptions(hash)
	assert.ErrorContains(t, err, ofile)
}

// Items are written without fsync: a file a crash left short (empty, as
// a rename of an unsynced file may leave it) reads as corrupt, and the
// next put of the item replaces it.
func TestShortFileIsReplaced(t *testing.T) {
	s, dir := newStore(t)
	hash, err := s.PutOptions(options())
	require.NoError(t, err)
	ofile := filepath.Join(dir, "options", hash+".json")
	require.NoError(t, os.Truncate(ofile, 0))
	_, err = s.GetOptions(hash)
	require.ErrorIs(t, err, content.ErrCorrupt)

	again, err := s.PutOptions(options())
	require.NoError(t, err)
	assert.Equal(t, hash, again)
	got, err := s.GetOptions(hash)
	require.NoError(t, err)
	assert.Equal(t, options(), got)
	entries, err := os.ReadDir(filepath.Join(dir, "options"))
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no temporary files left")
}

func TestConcurrentUse(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	const workers = 8
	var wg sync.WaitGroup
	errs := make(chan error, workers*20)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each worker has its own Store, as separate processes would.
			s, err := content.New(dir)
			if err != nil {
				errs <- err
				return
			}
			for i := range 10 {
				m := manifest(i % 3)
				id, err := s.PutManifest(m)
				if err != nil {
					errs <- err
					continue
				}
				if _, err := s.GetManifest(id); err != nil {
					errs <- err
				}
				o := options()
				o.ForceSyncGeneration = int64((w + i) % 2)
				hash, err := s.PutOptions(o)
				if err != nil {
					errs <- err
					continue
				}
				if _, err := s.GetOptions(hash); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// No temporary files are left behind.
	for _, sub := range []string{"manifests", "options"} {
		entries, err := os.ReadDir(filepath.Join(dir, sub))
		require.NoError(t, err)
		for _, e := range entries {
			assert.False(t, strings.HasPrefix(e.Name(), ".tmp-"), e.Name())
		}
	}
	entries, err := os.ReadDir(filepath.Join(dir, "manifests"))
	require.NoError(t, err)
	assert.Len(t, entries, 3)
}

// TestPutAfterDirRemoved: the store is a cache under the state dir, which
// may be emptied while the process runs; a put makes the directory again
// and the content reads back.
func TestPutAfterDirRemoved(t *testing.T) {
	s, dir := newStore(t)
	require.NoError(t, os.RemoveAll(dir))

	id, err := s.PutManifest(manifest(1))
	require.NoError(t, err)
	hash, err := s.PutOptions(options())
	require.NoError(t, err)
	key, err := s.PutBundle(bundle.Bundle{Name: "app"})
	require.NoError(t, err)

	got, err := s.GetManifest(id)
	require.NoError(t, err)
	assert.Equal(t, manifest(1), got)
	_, err = s.GetOptions(hash)
	require.NoError(t, err)
	b, err := s.GetBundle(key)
	require.NoError(t, err)
	assert.Equal(t, "app", b.Name)
	fi, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
}
