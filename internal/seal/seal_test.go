package seal

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/keyring"
)

func newKey(t *testing.T, id string) keyring.Key {
	t.Helper()
	k, err := keyring.Generate()
	require.NoError(t, err)
	k.ID = id
	return k
}

func opener(t *testing.T, keys ...keyring.Key) *Opener {
	t.Helper()
	r, err := keyring.New(keys...)
	require.NoError(t, err)
	o, err := NewOpener(r)
	require.NoError(t, err)
	return o
}

func TestSealOpen(t *testing.T) {
	o := opener(t, newKey(t, "fk-1"))
	b, err := Seal(o.Newest(), []byte("password"))
	require.NoError(t, err)
	assert.Equal(t, "fk-1", b.KeyID)
	assert.NotContains(t, string(b.Data), "password")
	plain, err := o.Open(b)
	require.NoError(t, err)
	assert.Equal(t, "password", string(plain))

	// Two seals of the same text differ (ephemeral keys).
	b2, err := Seal(o.Newest(), []byte("password"))
	require.NoError(t, err)
	assert.NotEqual(t, b.Data, b2.Data)
}

func TestOpen_WrongOrAlteredKey(t *testing.T) {
	a := opener(t, newKey(t, "fk-1"))
	b, err := Seal(a.Newest(), []byte("x"))
	require.NoError(t, err)

	other := opener(t, newKey(t, "fk-2"))
	_, err = other.Open(b)
	require.ErrorIs(t, err, ErrUnknownKey)
	assert.Contains(t, err.Error(), `"fk-1"`)
	assert.Contains(t, err.Error(), "fk-2")

	// Same ID, different key material.
	impostor := opener(t, newKey(t, "fk-1"))
	_, err = impostor.Open(b)
	require.ErrorIs(t, err, ErrCorrupt)

	b.Data[len(b.Data)-1] ^= 1
	_, err = a.Open(b)
	require.ErrorIs(t, err, ErrCorrupt)
}

func TestRotation(t *testing.T) {
	k1, k2 := newKey(t, "fk-20260101t000000z"), newKey(t, "fk-20261127t000000z")
	old := opener(t, k1)
	b, err := Seal(old.Newest(), []byte("kubeconfig"))
	require.NoError(t, err)

	both := opener(t, k2, k1)
	assert.Equal(t, k2.ID, both.Newest().ID, "the greatest ID is the newest")
	plain, err := both.Open(b)
	require.NoError(t, err, "old boxes still open")
	assert.Equal(t, "kubeconfig", string(plain))

	moved, changed, err := both.Reseal(b)
	require.NoError(t, err)
	assert.True(t, changed)
	assert.Equal(t, k2.ID, moved.KeyID)
	_, changed, err = both.Reseal(moved)
	require.NoError(t, err)
	assert.False(t, changed, "a box under the newest key stays")

	onlyNew := opener(t, k2)
	plain, err = onlyNew.Open(moved)
	require.NoError(t, err, "after the re-seal the old key can go")
	assert.Equal(t, "kubeconfig", string(plain))
}

func TestPublicKeyString(t *testing.T) {
	o := opener(t, newKey(t, "fk-1"), newKey(t, "fk-2"))
	pubs := o.PublicKeys()
	require.Len(t, pubs, 2)
	p, err := ParsePublicKey(pubs[1].String())
	require.NoError(t, err)
	assert.Equal(t, pubs[1], p)
	n, ok := Newest(pubs)
	assert.True(t, ok)
	assert.Equal(t, "fk-2", n.ID)

	_, err = ParsePublicKey("fk-1:AAAA")
	assert.Error(t, err)
	_, err = ParsePublicKey("nokey")
	assert.Error(t, err)
	_, err = Seal(PublicKey{ID: "fk-1", Key: []byte{1}}, nil)
	assert.Error(t, err)
}

func TestMAC(t *testing.T) {
	o := opener(t, newKey(t, "fk-1"), newKey(t, "fk-2"))
	m1, err := o.MAC("fk-1", []byte("secret"))
	require.NoError(t, err)
	again, err := o.MAC("fk-1", []byte("secret"))
	require.NoError(t, err)
	assert.Equal(t, m1, again, "deterministic")
	m2, err := o.MAC("fk-2", []byte("secret"))
	require.NoError(t, err)
	assert.NotEqual(t, m1, m2, "per key")
	other, err := o.MAC("fk-1", []byte("secreT"))
	require.NoError(t, err)
	assert.NotEqual(t, m1, other)

	impostor := opener(t, newKey(t, "fk-1"))
	m, err := impostor.MAC("fk-1", []byte("secret"))
	require.NoError(t, err)
	assert.NotEqual(t, m1, m, "only holders of the key compute it")
	_, err = o.MAC("fk-9", []byte("secret"))
	require.ErrorIs(t, err, ErrUnknownKey)
}
