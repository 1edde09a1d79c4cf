package sealtrust

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPins(t *testing.T) {
	p := Pins{Path: filepath.Join(t.TempDir(), "flotilla", "known-seal-keys")}
	a := Target{Address: "127.0.0.1:7233", Namespace: "default", NamespaceID: "id-1"}
	again := Target{Address: "127.0.0.1:7233", Namespace: "default", NamespaceID: "id-2"} // the namespace created anew
	b := Target{Address: "temporal:7233", Namespace: "prod", NamespaceID: "id-3"}

	pin, err := p.Load(a)
	require.NoError(t, err)
	assert.Nil(t, pin, "no file: nothing pinned")

	require.NoError(t, p.Save(a, Pin{"SHA256:a", "fk-1"}))
	require.NoError(t, p.Save(b, Pin{"SHA256:b", "fk-9"}))
	require.NoError(t, p.Save(a, Pin{"SHA256:a", "fk-2"}))
	pin, err = p.Load(a)
	require.NoError(t, err)
	assert.Equal(t, &Pin{"SHA256:a", "fk-2"}, pin, "replaced, not added")
	pin, err = p.Load(b)
	require.NoError(t, err)
	assert.Equal(t, &Pin{"SHA256:b", "fk-9"}, pin, "other namespaces kept")
	pin, err = p.Load(again)
	require.NoError(t, err)
	assert.Nil(t, pin, "a namespace created again is met as new")

	data, err := os.ReadFile(p.Path)
	require.NoError(t, err)
	assert.Equal(t, "# flotilla: the controllers' seal-key signers this CLI trusts (see flotilla secrets --help)\n"+
		"temporal:7233 prod id-3 SHA256:b fk-9\n127.0.0.1:7233 default id-1 SHA256:a fk-2\n", string(data))
	fi, err := os.Stat(p.Path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	entries, err := os.ReadDir(filepath.Dir(p.Path))
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no temporary file left")

	require.ErrorContains(t, p.Save(Target{Address: "a b", Namespace: "n", NamespaceID: "i"}, Pin{"SHA256:a", "fk-1"}), "white space")
}
