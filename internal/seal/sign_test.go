package seal

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func newSigner(t *testing.T, b byte) *Signer {
	t.Helper()
	s, err := NewSigner(bytes.Repeat([]byte{b}, ed25519.SeedSize))
	require.NoError(t, err)
	return s
}

// TestSignedMessage pins the v1 format: the context, then each field
// length-prefixed. A change breaks every published signature, so it must
// come with a new context version.
func TestSignedMessage(t *testing.T) {
	p := PublicKey{ID: "fk-1", Key: []byte{0xaa, 0xbb}}
	got := SignedMessage(p, []byte{0xcc})
	want := "flotilla/seal-key-signature/v1" + "\x00\x04fk-1" + "\x00\x02\xaa\xbb" + "\x00\x01\xcc"
	assert.Equal(t, hex.EncodeToString([]byte(want)), hex.EncodeToString(got))

	// Moving a byte from one field to the next changes the message.
	assert.NotEqual(t, SignedMessage(PublicKey{ID: "fk-1a", Key: []byte{0xbb}}, []byte{0xcc}), got)
}

func TestSignVerify(t *testing.T) {
	s := newSigner(t, 1)
	o := opener(t, newKey(t, "fk-1"), newKey(t, "fk-2"))
	signed := s.Sign(o.Newest())
	require.NoError(t, signed.Verify())
	assert.True(t, signed.SignedBy(s.Public()))
	assert.False(t, signed.SignedBy(newSigner(t, 2).Public()), "another signer's key")
	assert.Equal(t, Fingerprint(s.Public()), s.Fingerprint())
	assert.Regexp(t, `^SHA256:[A-Za-z0-9+/]{43}$`, s.Fingerprint())

	cases := map[string]struct {
		key  func(PublicKey) PublicKey
		want error
	}{
		"unsigned":      {func(p PublicKey) PublicKey { p.Signer, p.Signature = nil, nil; return p }, ErrUnsigned},
		"other key":     {func(p PublicKey) PublicKey { p.Key = o.PublicKeys()[0].Key; return p }, ErrBadSignature},
		"renamed":       {func(p PublicKey) PublicKey { p.ID = "fk-9"; return p }, ErrBadSignature},
		"signer swap":   {func(p PublicKey) PublicKey { p.Signer = newSigner(t, 2).Public(); return p }, ErrBadSignature},
		"no signature":  {func(p PublicKey) PublicKey { p.Signature = nil; return p }, ErrBadSignature},
		"short signer":  {func(p PublicKey) PublicKey { p.Signer = p.Signer[:5]; return p }, ErrBadSignature},
		"flipped bit":   {func(p PublicKey) PublicKey { p.Signature = flip(p.Signature); return p }, ErrBadSignature},
		"valid as sent": {func(p PublicKey) PublicKey { return p }, nil},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := tc.key(signed).Verify()
			if tc.want == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tc.want)
			assert.Contains(t, err.Error(), "fk-")
		})
	}
}

func flip(b []byte) []byte {
	out := bytes.Clone(b)
	out[0] ^= 1
	return out
}

func TestNewSignerRejectsShortSeed(t *testing.T) {
	_, err := NewSigner([]byte("short"))
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "short", "the key material is not in the error")
}
