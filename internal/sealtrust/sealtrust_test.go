package sealtrust

import (
	"bytes"
	"crypto/ed25519"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/seal"
)

func signer(t *testing.T, b byte) *seal.Signer {
	t.Helper()
	s, err := seal.NewSigner(bytes.Repeat([]byte{b}, ed25519.SeedSize))
	require.NoError(t, err)
	return s
}

func key(id string, b byte) seal.PublicKey {
	return seal.PublicKey{ID: id, Key: bytes.Repeat([]byte{b}, 32)}
}

func TestDecide(t *testing.T) {
	mine, theirs := signer(t, 1), signer(t, 2)
	fp, other := mine.Fingerprint(), theirs.Fingerprint()
	forged := mine.Sign(key("fk-3", 3))
	forged.Key = key("fk-3", 4).Key
	keys := func(newest seal.PublicKey) []seal.PublicKey {
		return []seal.PublicKey{mine.Sign(key("fk-1", 1)), newest}
	}

	cases := []struct {
		name      string
		newest    seal.PublicKey
		pin       *Pin
		flag      string
		reason    Reason // "": accepted
		pinned    bool
		given     bool
		previous  string
		errSubstr string
	}{
		{name: "first use pins the signer", newest: mine.Sign(key("fk-2", 2)), pinned: true},
		{name: "pinned signer, same key", newest: mine.Sign(key("fk-2", 2)), pin: &Pin{fp, "fk-2"}},
		{name: "pinned signer, new key is told", newest: mine.Sign(key("fk-3", 3)), pin: &Pin{fp, "fk-2"}, previous: "fk-2"},
		{name: "pinned, another signer", newest: theirs.Sign(key("fk-3", 3)), pin: &Pin{fp, "fk-2"}, reason: UntrustedSigner,
			errSubstr: "it is signed by " + other + ", not by " + fp + ", the controllers' signing key pinned in PINS"},
		{name: "unsigned newer key", newest: key("fk-3", 3), pin: &Pin{fp, "fk-2"}, reason: Unsigned, errSubstr: "it is not signed"},
		{name: "unsigned at first use", newest: key("fk-3", 3), reason: Unsigned},
		{name: "forged signature", newest: forged, pin: &Pin{fp, "fk-2"}, reason: BadSignature, errSubstr: "does not verify"},
		{name: "flag matches", newest: mine.Sign(key("fk-2", 2)), flag: fp, pinned: true, given: true},
		{name: "flag matches the pin", newest: mine.Sign(key("fk-2", 2)), pin: &Pin{fp, "fk-2"}, flag: fp, given: true},
		{name: "flag re-pins a new signer", newest: theirs.Sign(key("fk-3", 3)), pin: &Pin{fp, "fk-2"}, flag: other, pinned: true, given: true},
		{name: "flag differs", newest: mine.Sign(key("fk-2", 2)), flag: other, reason: WrongFingerprint,
			errSubstr: "it is signed by " + fp + ", not by the " + other + " given with --seal-key-fingerprint"},
		{name: "flag does not trust an unsigned key", newest: key("fk-2", 2), flag: fp, reason: Unsigned},
		{name: "rolled back to an older key of the signer", newest: mine.Sign(key("fk-2", 2)), pin: &Pin{fp, "fk-3"}, reason: Rollback,
			errSubstr: "it is older than fk-3, the key this CLI sealed to before"},
		{name: "rolled back, with the flag", newest: mine.Sign(key("fk-2", 2)), pin: &Pin{fp, "fk-3"}, flag: fp, reason: Rollback},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Decide(keys(tc.newest), tc.pin, tc.flag, "PINS")
			if tc.reason != "" {
				var refused *RefusedError
				require.ErrorAs(t, err, &refused)
				assert.Equal(t, tc.reason, refused.Reason)
				assert.Equal(t, tc.newest.ID, refused.KeyID)
				assert.Contains(t, err.Error(), tc.errSubstr)
				if tc.reason != WrongFingerprint && tc.reason != Rollback {
					assert.Contains(t, err.Error(), "run the command again with --seal-key-fingerprint", "says how to re-pin")
				}
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.newest.ID, d.Key.ID)
			assert.Equal(t, Pin{Fingerprint: signerOf(tc.newest), KeyID: tc.newest.ID}, d.Pin)
			assert.Equal(t, tc.pinned, d.Pinned)
			assert.Equal(t, tc.given, d.Given)
			assert.Equal(t, tc.previous, d.PreviousKeyID)
			assert.Equal(t, tc.pinned || tc.previous != "", Describe(d, "ns") != "", "says so exactly when something changed")
		})
	}
	_, err := Decide(keys(mine.Sign(key("fk-2", 2))), nil, "SHA256:short", "PINS")
	require.ErrorIs(t, err, ErrInvalidFingerprint)
}

func TestDescribe(t *testing.T) {
	s := signer(t, 1)
	d := Decision{Key: key("fk-2", 2), Pin: Pin{s.Fingerprint(), "fk-2"}, Pinned: true}
	assert.Equal(t, "pinned the controllers' signing key "+s.Fingerprint()+" for ns (first use): compare it with the fingerprint a controller logs at start; sealing to key fk-2", Describe(d, "ns"))
	d.Pinned, d.PreviousKeyID = false, "fk-1"
	assert.Equal(t, "the controllers' sealing key changed from fk-1 to fk-2 (signed by the trusted signing key "+s.Fingerprint()+")", Describe(d, "ns"))
}
