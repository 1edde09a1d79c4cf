package cluster

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A new token parses back to its ID and a proof that the token's
// verifier accepts.
func TestToken_RoundTrip(t *testing.T) {
	tok, err := NewToken()
	require.NoError(t, err)

	id, proof, err := ParseToken(tok.Value)
	require.NoError(t, err)
	assert.Equal(t, tok.ID, id)
	assert.True(t, VerifyProof(proof, tok.Verifier))
	assert.Equal(t, tok.Verifier, Verifier(proof))

	// What a user pastes often carries a newline.
	id, proof, err = ParseToken("  " + tok.Value + "\n")
	require.NoError(t, err)
	assert.Equal(t, tok.ID, id)
	assert.True(t, VerifyProof(proof, tok.Verifier))
}

// Temporal holds the verifier and sees the proof; neither is, or
// contains, the token or its secret, and the proof is not the verifier.
func TestToken_SecretNeverInTemporal(t *testing.T) {
	tok, err := NewToken()
	require.NoError(t, err)
	_, proof, err := ParseToken(tok.Value)
	require.NoError(t, err)
	secret := tok.Value[strings.LastIndex(tok.Value, ".")+1:]

	for name, s := range map[string]string{"verifier": tok.Verifier, "proof": proof} {
		assert.NotEqual(t, tok.Value, s, name)
		assert.NotContains(t, tok.Value, s, name)
		assert.NotContains(t, s, secret, name)
	}
	assert.NotContains(t, tok.Value, tok.Verifier)
	assert.NotEqual(t, proof, tok.Verifier, "sending the proof must not reveal the verifier, nor the reverse")
	assert.False(t, VerifyProof(tok.Verifier, tok.Verifier), "the verifier is not a proof")
	assert.False(t, VerifyProof(secret, tok.Verifier), "the raw secret is not a proof")
}

// A token with the right ID but another secret does not verify.
func TestVerifyProof_WrongSecret(t *testing.T) {
	tok, err := NewToken()
	require.NoError(t, err)
	other, err := NewToken()
	require.NoError(t, err)
	forged := tokenPrefix + "." + tok.ID + "." + other.Value[strings.LastIndex(other.Value, ".")+1:]

	id, proof, err := ParseToken(forged)
	require.NoError(t, err)
	assert.Equal(t, tok.ID, id)
	assert.False(t, VerifyProof(proof, tok.Verifier))
	assert.False(t, VerifyProof("", tok.Verifier))
	assert.False(t, VerifyProof(proof, ""))
}

// Strings that are not tokens are ErrMalformedToken, and the error never
// echoes them (they may be a mistyped secret).
func TestParseToken_Malformed(t *testing.T) {
	secret := strings.Repeat("s3cr3tS3CR3T", 4) // 48 characters, long enough
	tests := []struct {
		name  string
		value string
	}{
		{"empty", ""},
		{"blank", "   "},
		{"wrong prefix", "fleet.abcdef." + secret},
		{"no prefix", "abcdef." + secret},
		{"only prefix", "flt"},
		{"missing secret", "flt.abcdef"},
		{"empty secret", "flt.abcdef."},
		{"empty id", "flt.." + secret},
		{"short secret", "flt.abcdef." + secret[:31]},
		{"extra part", "flt.abcdef." + secret + ".x"},
		{"other separator", "flt:abcdef:" + secret},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, proof, err := ParseToken(tt.value)
			require.Error(t, err)
			assert.True(t, errors.Is(err, ErrMalformedToken), "got %v", err)
			assert.Empty(t, id)
			assert.Empty(t, proof)
			assert.NotContains(t, err.Error(), secret[:31])
			// "flt" alone is part of the message's own example.
			if v := strings.TrimSpace(tt.value); v != "" && !strings.Contains(ErrMalformedToken.Error(), v) {
				assert.NotContains(t, err.Error(), v)
			}
		})
	}
}

// Every token is new: its ID, secret and verifier.
func TestNewToken_Unique(t *testing.T) {
	a, err := NewToken()
	require.NoError(t, err)
	b, err := NewToken()
	require.NoError(t, err)
	assert.NotEqual(t, a.Value, b.Value)
	assert.NotEqual(t, a.ID, b.ID)
	assert.NotEqual(t, a.Verifier, b.Verifier)
	assert.True(t, strings.HasPrefix(a.Value, "flt."+a.ID+"."), a.Value)
}
