package seal

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/flotilla-gitops/flotilla/internal/keyring"
)

// A published sealing key is authenticated: the controllers hold a
// long-lived Ed25519 signing key beside their sealing keys and publish
// every public sealing key with a signature over SignedMessage. The CLI
// seals only to a key signed by a signer it trusts (package sealtrust),
// so a Temporal client without the signing key cannot make it seal to a
// key of its own.

// signatureContext separates these signatures from every other use of an
// Ed25519 key, and versions the message format.
const signatureContext = "flotilla/seal-key-signature/v1"

// The reasons a published key does not verify.
var (
	// ErrUnsigned: the key carries no signature (published by a
	// controller older than signing, or by someone without the key).
	ErrUnsigned = errors.New("not signed")
	// ErrBadSignature: the signature does not verify under the signer the
	// key names, or the signer is not an Ed25519 public key.
	ErrBadSignature = errors.New("signature does not verify")
)

// SignedMessage is what a sealing key's signature covers: the context
// string, then the key ID (which names the key's creation time), the
// X25519 public key and the signer's Ed25519 public key, each preceded by
// its length as a big-endian uint16, so no two different keys share a
// message.
func SignedMessage(p PublicKey, signer []byte) []byte {
	b := []byte(signatureContext)
	for _, field := range [][]byte{[]byte(p.ID), p.Key, signer} {
		b = binary.BigEndian.AppendUint16(b, uint16(len(field))) //nolint:gosec // IDs and keys are far shorter than 64 KiB
		b = append(b, field...)
	}
	return b
}

// Signer signs the public sealing keys a controller publishes.
type Signer struct {
	priv ed25519.PrivateKey
}

// NewSigner returns the signer of an Ed25519 seed
// (ed25519.SeedSize bytes).
func NewSigner(seed []byte) (*Signer, error) {
	if len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("signing key: %d bytes, want %d", len(seed), ed25519.SeedSize)
	}
	return &Signer{priv: ed25519.NewKeyFromSeed(seed)}, nil
}

// Public is the signer's Ed25519 public key.
func (s *Signer) Public() []byte {
	return bytes.Clone(s.priv.Public().(ed25519.PublicKey))
}

// Fingerprint is the signer's fingerprint, what a user pins.
func (s *Signer) Fingerprint() string { return Fingerprint(s.Public()) }

// Sign returns p signed: Signer and Signature set.
func (s *Signer) Sign(p PublicKey) PublicKey {
	p.Signer = s.Public()
	p.Signature = ed25519.Sign(s.priv, SignedMessage(p, p.Signer))
	return p
}

// SignedBy reports whether p carries a valid signature by the signer
// whose public key is signer.
func (p PublicKey) SignedBy(signer []byte) bool {
	return bytes.Equal(p.Signer, signer) && p.Verify() == nil
}

// Verify checks p's signature under the signer it names (which says
// nothing about whether that signer is trusted: compare its Fingerprint
// with a pinned one). The error wraps ErrUnsigned or ErrBadSignature and
// names the key.
func (p PublicKey) Verify() error {
	if len(p.Signature) == 0 && len(p.Signer) == 0 {
		return fmt.Errorf("sealing key %s: %w", p.ID, ErrUnsigned)
	}
	if len(p.Signer) != ed25519.PublicKeySize || !ed25519.Verify(p.Signer, SignedMessage(p, p.Signer), p.Signature) {
		return fmt.Errorf("sealing key %s (signer %s): %w", p.ID, Fingerprint(p.Signer), ErrBadSignature)
	}
	return nil
}

// Fingerprint renders a signer's public key as "SHA256:" and the
// unpadded standard base64 of its SHA-256, the form OpenSSH prints
// host keys in. It is what --seal-key-fingerprint takes.
func Fingerprint(signer []byte) string {
	sum := sha256.Sum256(signer)
	return "SHA256:" + base64.RawStdEncoding.EncodeToString(sum[:])
}

// ErrForeignSigner: a key offered for publication is not signed by the
// signer of the keys already published.
var ErrForeignSigner = errors.New("not signed by the signer of the published keys")

// ErrTypeForeignSigner is the Temporal application error type the keys
// workflow refuses a foreign signer's key with: a controller reads it as a
// value (not its message) and keeps the published keys.
const ErrTypeForeignSigner = "ForeignSigner"

// PublishedSigner returns the signer of the published keys: the signer of
// the newest key that carries a valid signature; nil when none does (no
// key yet, or only keys of controllers older than signing).
func PublishedSigner(published []PublicKey) []byte {
	var newest *PublicKey
	for i, p := range published {
		if p.Verify() == nil && (newest == nil || p.ID > newest.ID) {
			newest = &published[i]
		}
	}
	if newest == nil {
		return nil
	}
	return newest.Signer
}

// CheckPublish decides whether keys may join the published ones: each
// must be a valid key, must not reuse a published ID with other key
// material, must verify if it is signed, and, once a signer has signed
// the published keys, must be signed by that signer (ErrForeignSigner).
// Unsigned keys are accepted while no published key is signed (the
// controllers that published them were older than signing), and so is an
// unsigned key that is already published as it is: it adds nothing, and
// an older controller (a rollback) still starts.
func CheckPublish(published, keys []PublicKey) error {
	signer := PublishedSigner(published)
	for _, k := range keys {
		if err := checkKey(published, signer, k); err != nil {
			return err
		}
	}
	return nil
}

func checkKey(published []PublicKey, signer []byte, k PublicKey) error {
	if err := k.Validate(); err != nil {
		return err
	}
	i := slices.IndexFunc(published, func(p PublicKey) bool { return p.ID == k.ID })
	if i >= 0 && !bytes.Equal(published[i].Key, k.Key) {
		return fmt.Errorf("sealing key %s is already published with different key material: every controller must hold the same --seal-keys", k.ID)
	}
	signed := len(k.Signer) > 0 || len(k.Signature) > 0
	if signed {
		if err := k.Verify(); err != nil {
			return err
		}
	}
	if signer == nil || bytes.Equal(k.Signer, signer) || (i >= 0 && !signed) {
		return nil
	}
	return fmt.Errorf("sealing key %s (signer %s) is %w %s: every controller must hold the same signing key (%s in --seal-keys)",
		k.ID, signerName(k.Signer), ErrForeignSigner, Fingerprint(signer), keyring.SigningKeyName)
}

func signerName(signer []byte) string {
	if len(signer) == 0 {
		return "none"
	}
	return Fingerprint(signer)
}

// MergePublished adds keys (checked by CheckPublish) to the published
// ones, oldest first. A key published before unsigned takes the
// signature it now comes with: a controller upgraded to signing signs the
// keys its predecessors published.
func MergePublished(published, keys []PublicKey) []PublicKey {
	out := slices.Clone(published)
	for _, k := range keys {
		i := slices.IndexFunc(out, func(p PublicKey) bool { return p.ID == k.ID })
		switch {
		case i < 0:
			out = append(out, k)
		case len(out[i].Signature) == 0 && len(k.Signature) > 0:
			out[i] = k
		}
	}
	slices.SortFunc(out, func(a, b PublicKey) int { return strings.Compare(a.ID, b.ID) })
	return out
}
