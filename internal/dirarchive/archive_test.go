package dirarchive_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/dirarchive"
)

func TestPackUnpack(t *testing.T) {
	src := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(src, "app", "templates"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(src, ".git"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(src, "app", "fleet.yaml"), []byte("defaultNamespace: a\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(src, "app", "templates", "cm.yaml"), []byte("kind: ConfigMap\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(src, ".git", "HEAD"), []byte("ref"), 0o644))
	data, err := dirarchive.Pack(src)
	require.NoError(t, err)

	dest := t.TempDir()
	require.NoError(t, dirarchive.Unpack(data, dest))
	b, err := os.ReadFile(filepath.Join(dest, "app", "templates", "cm.yaml"))
	require.NoError(t, err)
	assert.Equal(t, "kind: ConfigMap\n", string(b))
	assert.NoFileExists(t, filepath.Join(dest, ".git", "HEAD"))

	require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(src, "app", "link.yaml")))
	_, err = dirarchive.Pack(src)
	var ee *dirarchive.EntryError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, "app/link.yaml", ee.Name)
}

func tarball(t *testing.T, hdrs ...*tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, h := range hdrs {
		require.NoError(t, tw.WriteHeader(h))
		if h.Typeflag == tar.TypeReg {
			_, err := tw.Write(bytes.Repeat([]byte{'a'}, int(h.Size)))
			require.NoError(t, err)
		}
	}
	require.NoError(t, tw.Close())
	require.NoError(t, gz.Close())
	return buf.Bytes()
}

func TestUnpack_Refuses(t *testing.T) {
	tests := []struct {
		name      string
		hdr       *tar.Header
		wantEntry string // the EntryError's name; empty: ErrTooLarge
	}{
		{"absolute", &tar.Header{Typeflag: tar.TypeReg, Name: "/etc/x", Size: 1}, "/etc/x"},
		{"dot dot", &tar.Header{Typeflag: tar.TypeReg, Name: "a/../../x", Size: 1}, "a/../../x"},
		{"symlink", &tar.Header{Typeflag: tar.TypeSymlink, Name: "l", Linkname: "/etc"}, "l"},
		{"hard link", &tar.Header{Typeflag: tar.TypeLink, Name: "h", Linkname: "x"}, "h"},
		{"too large unpacked", &tar.Header{Typeflag: tar.TypeReg, Name: "big", Size: dirarchive.MaxUnpacked + 1}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dest := t.TempDir()
			err := dirarchive.Unpack(tarball(t, tt.hdr), dest)
			if tt.wantEntry == "" {
				require.ErrorIs(t, err, dirarchive.ErrTooLarge)
				return
			}
			var ee *dirarchive.EntryError
			require.ErrorAs(t, err, &ee)
			assert.Equal(t, tt.wantEntry, ee.Name)
			assert.Contains(t, err.Error(), tt.wantEntry)
		})
	}
	err := dirarchive.Unpack([]byte(strings.Repeat("x", dirarchive.MaxCompressed+1)), t.TempDir())
	require.ErrorIs(t, err, dirarchive.ErrTooLarge)
}
