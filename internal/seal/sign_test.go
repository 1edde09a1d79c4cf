package seal

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"testing"

	"github.com/flotilla-gitops/flotilla/internal/keyring"
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

func TestCheckPublishAndMerge(t *testing.T) {
	mine, theirs := newSigner(t, 1), newSigner(t, 2)
	o := opener(t, newKey(t, "fk-1"), newKey(t, "fk-2"))
	old, cur := o.PublicKeys()[0], o.PublicKeys()[1]
	other := opener(t, newKey(t, "fk-3")).Newest()
	forged := mine.Sign(cur)
	forged.Signature = flip(forged.Signature)

	cases := []struct {
		name      string
		published []PublicKey
		keys      []PublicKey
		want      error  // nil: accepted
		msg       string // part of the refusal
	}{
		{name: "first signed keys", keys: []PublicKey{mine.Sign(old), mine.Sign(cur)}},
		{name: "unsigned before any signer (older controllers)", published: []PublicKey{old}, keys: []PublicKey{cur}},
		{name: "upgrade signs the unsigned", published: []PublicKey{old, cur}, keys: []PublicKey{mine.Sign(old), mine.Sign(cur)}},
		{name: "same signer, newer key", published: []PublicKey{mine.Sign(old)}, keys: []PublicKey{mine.Sign(cur)}},
		{name: "older controller republishes what is there", published: []PublicKey{mine.Sign(old)}, keys: []PublicKey{old}},
		{name: "new unsigned key over signed ones", published: []PublicKey{mine.Sign(old)}, keys: []PublicKey{other},
			want: ErrForeignSigner, msg: "sealing key fk-3 (signer none) is not signed by the signer of the published keys " + mine.Fingerprint()},
		{name: "foreign signer", published: []PublicKey{mine.Sign(old)}, keys: []PublicKey{theirs.Sign(other)},
			want: ErrForeignSigner, msg: "(signer " + theirs.Fingerprint() + ")"},
		{name: "foreign signer re-signs a published key", published: []PublicKey{old, mine.Sign(cur)}, keys: []PublicKey{theirs.Sign(old)},
			want: ErrForeignSigner},
		{name: "bad signature", keys: []PublicKey{forged}, want: ErrBadSignature},
		{name: "other material under a published ID", published: []PublicKey{mine.Sign(old)}, keys: []PublicKey{mine.Sign(PublicKey{ID: old.ID, Key: cur.Key})},
			msg: "already published with different key material"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckPublish(tc.published, tc.keys)
			if tc.want == nil && tc.msg == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			if tc.want != nil {
				require.ErrorIs(t, err, tc.want)
			}
			assert.Contains(t, err.Error(), tc.msg)
		})
	}
}

func TestPublishedSignerAndMerge(t *testing.T) {
	mine, theirs := newSigner(t, 1), newSigner(t, 2)
	o := opener(t, newKey(t, "fk-1"), newKey(t, "fk-2"), newKey(t, "fk-3"))
	k := o.PublicKeys()
	assert.Nil(t, PublishedSigner(nil))
	assert.Nil(t, PublishedSigner([]PublicKey{k[0], k[1]}), "unsigned keys have no signer")
	assert.Equal(t, mine.Public(), PublishedSigner([]PublicKey{mine.Sign(k[0]), k[2]}))
	assert.Equal(t, theirs.Public(), PublishedSigner([]PublicKey{mine.Sign(k[0]), theirs.Sign(k[1])}), "the newest signed key's signer")

	merged := MergePublished([]PublicKey{k[1], k[0]}, []PublicKey{mine.Sign(k[1]), mine.Sign(k[2]), k[0]})
	require.Len(t, merged, 3)
	assert.Equal(t, []string{"fk-1", "fk-2", "fk-3"}, []string{merged[0].ID, merged[1].ID, merged[2].ID}, "oldest first")
	assert.Empty(t, merged[0].Signature, "fk-1 was not offered signed")
	assert.True(t, merged[1].SignedBy(mine.Public()), "an unsigned published key takes its signature")
	assert.True(t, merged[2].SignedBy(mine.Public()))
	again := MergePublished(merged, []PublicKey{theirs.Sign(k[1])})
	assert.True(t, again[1].SignedBy(mine.Public()), "a signed key keeps its signature")
}

func TestOpenerSigns(t *testing.T) {
	dir := t.TempDir()
	ring, _, err := keyring.LoadOrCreateSealing(dir)
	require.NoError(t, err)
	o, err := NewOpener(ring)
	require.NoError(t, err)
	require.NotNil(t, o.Signer())
	for _, k := range o.SignedPublicKeys() {
		assert.True(t, k.SignedBy(o.Signer().Public()), k.ID)
	}
	assert.Nil(t, opener(t, newKey(t, "fk-1")).Signer(), "a keyring without the signing key signs nothing")
}
