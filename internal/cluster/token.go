package cluster

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strings"
)

// Registration tokens have the form "flt.<id>.<secret>": the ID names the
// token's workflow, the secret proves possession. Temporal only ever holds
// the verifier, sha256(proof), where proof is sha256(secret); the agent
// sends the proof, never the token, and a token is used once, so neither
// a workflow history nor an update payload gives anyone a usable token.
const tokenPrefix = "flt"

// ErrMalformedToken is returned for a string that is not a registration
// token. The message never includes the string.
var ErrMalformedToken = errors.New(`malformed registration token: want "flt.<id>.<secret>" as printed by "flotilla cluster token create"`)

// Token is a new registration token.
type Token struct {
	// Value is what the user hands to the agent; it is printed once.
	Value string
	// ID names the token (and its workflow).
	ID string
	// Verifier is what Temporal stores.
	Verifier string
}

// NewToken returns a fresh random token.
func NewToken() (Token, error) {
	var id [10]byte
	var secret [32]byte
	if _, err := rand.Read(id[:]); err != nil {
		return Token{}, err
	}
	if _, err := rand.Read(secret[:]); err != nil {
		return Token{}, err
	}
	t := Token{
		ID: strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(id[:])),
	}
	s := base64.RawURLEncoding.EncodeToString(secret[:])
	t.Value = tokenPrefix + "." + t.ID + "." + s
	t.Verifier = Verifier(proofOf(s))
	return t, nil
}

// ParseToken splits a token into its ID and proof.
func ParseToken(value string) (id, proof string, err error) {
	parts := strings.Split(strings.TrimSpace(value), ".")
	if len(parts) != 3 || parts[0] != tokenPrefix || parts[1] == "" || len(parts[2]) < 32 {
		return "", "", ErrMalformedToken
	}
	return parts[1], proofOf(parts[2]), nil
}

// Verifier returns the verifier of a proof.
func Verifier(proof string) string {
	sum := sha256.Sum256([]byte(proof))
	return hex.EncodeToString(sum[:])
}

// VerifyProof reports, in constant time, whether proof matches verifier.
func VerifyProof(proof, verifier string) bool {
	return subtle.ConstantTimeCompare([]byte(Verifier(proof)), []byte(verifier)) == 1
}

func proofOf(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}
