package gitverify

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/internal/gitverify/verifytest"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func testCommit(message string) *object.Commit {
	sig := object.Signature{Name: "dev", Email: "dev@example.com", When: time.Unix(1700000000, 0).UTC()}
	return &object.Commit{Author: sig, Committer: sig, Message: message, TreeHash: plumbing.NewHash(strings.Repeat("a", 40))}
}

// signed returns a commit with message carrying s's signature of a commit
// with signedMessage (different messages: a tampered commit).
func signed(t *testing.T, message, signedMessage string, s verifytest.Signer) *object.Commit {
	sig := verifytest.SignCommit(t, testCommit(signedMessage), s).PGPSignature
	c := testCommit(message)
	c.PGPSignature = sig
	return c
}

// rawSig is a signature given as text.
type rawSig string

func (r rawSig) Sign(testing.TB, []byte) string { return string(r) }
func (rawSig) Fingerprint() string              { return "" }
func (rawSig) Public(testing.TB) []byte         { return nil }

func TestCheckCommit(t *testing.T) {
	alice := verifytest.NewPGPKey(t, "Alice", "alice@example.com")
	mallory := verifytest.NewPGPKey(t, "Mallory", "mallory@example.com")
	bob := verifytest.NewSSHKey(t, "bob@laptop")
	eve := verifytest.NewSSHKey(t, "eve@evil")
	bobOtherNS := bob
	bobOtherNS.Namespace = "file"
	keys, err := ParseKeys("Secret ns/keys", map[string][]byte{"alice.asc": alice.Public(t), "ssh": bob.Public(t)})
	require.NoError(t, err)

	x509 := rawSig("-----BEGIN SIGNED MESSAGE-----\nMIIB\n-----END SIGNED MESSAGE-----\n")
	garbage := rawSig("-----BEGIN PGP SIGNATURE-----\n\nnope\n")
	tests := []struct {
		name          string
		commit        *object.Commit
		outcome       Outcome
		key, owner    string
		reasonContain string
	}{
		{"unsigned", signed(t, "m", "m", nil), Unsigned, "", "", "not signed"},
		{"pgp trusted", signed(t, "m", "m", alice), Trusted, alice.Fingerprint(), "Alice <alice@example.com>", ""},
		{"pgp untrusted", signed(t, "m", "m", mallory), UnknownKey, mallory.Fingerprint(), "", "signed by a key that is not in Secret ns/keys"},
		{"pgp tampered", signed(t, "changed", "m", alice), BadSignature, alice.Fingerprint(), "", "bad signature"},
		{"ssh trusted", signed(t, "m", "m", bob), Trusted, bob.Fingerprint(), "bob@laptop", ""},
		{"ssh untrusted", signed(t, "m", "m", eve), UnknownKey, eve.Fingerprint(), "", "signed by a key that is not in Secret ns/keys"},
		{"ssh tampered", signed(t, "changed", "m", bob), BadSignature, bob.Fingerprint(), "", "bad signature"},
		{"ssh other namespace", signed(t, "m", "m", bobOtherNS), BadSignature, bob.Fingerprint(), "", "namespace"},
		{"x509", signed(t, "m", "m", x509), Unsupported, "", "", "X.509"},
		{"garbage", signed(t, "m", "m", garbage), BadSignature, "", "", "bad signature"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := keys.CheckCommit(tt.commit)
			assert.Equal(t, tt.outcome, v.Outcome, "verdict %+v", v)
			assert.Equal(t, tt.outcome == Trusted, v.OK())
			assert.Equal(t, tt.key, v.Key)
			assert.Equal(t, tt.owner, v.Owner)
			if tt.reasonContain == "" {
				assert.Empty(t, v.Reason(keys))
			} else {
				assert.Contains(t, v.Reason(keys), tt.reasonContain)
			}
		})
	}
}

func TestCheckTag(t *testing.T) {
	alice := verifytest.NewPGPKey(t, "Alice", "alice@example.com")
	bob := verifytest.NewSSHKey(t, "bob@laptop")
	keys, err := ParseKeys("Secret ns/keys", map[string][]byte{"alice.asc": alice.Public(t), "ssh": bob.Public(t)})
	require.NoError(t, err)
	tag := func(s verifytest.Signer) *object.Tag {
		return verifytest.SignTag(t, &object.Tag{Name: "v1", Tagger: testCommit("").Author, Message: "release v1\n",
			TargetType: plumbing.CommitObject, Target: plumbing.NewHash(strings.Repeat("b", 40))}, s)
	}

	v := keys.CheckTag(tag(alice))
	assert.Equal(t, Trusted, v.Outcome)
	assert.Equal(t, alice.Fingerprint()+" (Alice <alice@example.com>)", v.Signer())

	v = keys.CheckTag(tag(bob))
	assert.Equal(t, Trusted, v.Outcome)
	assert.Equal(t, bob.Fingerprint()+" (bob@laptop)", v.Signer())

	assert.Equal(t, Unsigned, keys.CheckTag(tag(nil)).Outcome)

	moved := tag(alice)
	moved.Target = plumbing.NewHash(strings.Repeat("c", 40))
	assert.Equal(t, BadSignature, keys.CheckTag(moved).Outcome)
}

func TestParseKeys(t *testing.T) {
	alice := verifytest.NewPGPKey(t, "Alice", "alice@example.com")
	carol := verifytest.NewPGPKey(t, "Carol", "carol@example.com")
	bob := verifytest.NewSSHKey(t, "bob@laptop")
	dave := verifytest.NewSSHKey(t, "dave")

	// Several keys per entry: two armored blocks, and authorized_keys
	// lines with comments, options and blank lines.
	ring := append(alice.Public(t), carol.Public(t)...)
	lines := "# deploy signers\n\n" + string(bob.Public(t)) + `namespaces="git" ` + string(dave.Public(t))
	keys, err := ParseKeys("Secret ns/keys", map[string][]byte{"ring": ring, "ssh": []byte(lines), "empty": nil})
	require.NoError(t, err)
	assert.Len(t, keys.pgp, 2)
	assert.Len(t, keys.ssh, 2)
	assert.Equal(t, "dave", keys.ssh[1].comment)

	again, err := ParseKeys("Secret ns/keys", map[string][]byte{"ssh": []byte(lines), "ring": ring, "empty": nil})
	require.NoError(t, err)
	assert.Equal(t, keys.ID(), again.ID(), "the same data is the same key set")
	other, err := ParseKeys("Secret ns/keys", map[string][]byte{"ring": ring})
	require.NoError(t, err)
	assert.NotEqual(t, keys.ID(), other.ID())

	_, err = ParseKeys("s", map[string][]byte{"empty": []byte("  \n")})
	assert.ErrorIs(t, err, ErrNoKeys)

	_, err = ParseKeys("s", map[string][]byte{"ok": bob.Public(t), "junk": []byte("not a key\n")})
	var ke *KeyError
	require.True(t, errors.As(err, &ke), "%v", err)
	assert.Equal(t, "junk", ke.Entry)
	assert.NotContains(t, err.Error(), "not a key", "the entry's content is not repeated")

	_, err = ParseKeys("s", map[string][]byte{"bad.asc": []byte("-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nxx\n-----END PGP PUBLIC KEY BLOCK-----\n")})
	require.True(t, errors.As(err, &ke), "%v", err)
	assert.Equal(t, "bad.asc", ke.Entry)
}
