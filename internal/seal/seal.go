// Package seal encrypts secrets to the controllers' public keys, so that
// kubeconfigs, Git and Helm credentials and webhook secrets can travel
// through Temporal (workflow inputs, updates, state) as ciphertext only.
//
// A Box is a NaCl anonymous sealed box (X25519, XSalsa20-Poly1305;
// golang.org/x/crypto/nacl/box): anyone holding a controller's public key
// can seal, only a holder of the matching private key can open, and the
// sender needs no key of its own, so the CLI on any machine seals with the
// public key it reads from Temporal. Each Box names the key it was sealed
// to, so keys rotate: new boxes use the newest key, old ones still open
// with the key they name, and a re-seal moves them to the newest.
//
// The private keys are a keyring (package keyring) only controllers hold.
package seal

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/crypto/curve25519"
	"golang.org/x/crypto/nacl/box"

	"github.com/flotilla-gitops/flotilla/internal/keyring"
)

// ErrUnknownKey means a Box was sealed to a key this opener does not hold.
var ErrUnknownKey = errors.New("sealed to a key this controller does not hold")

// ErrCorrupt means a Box does not open with the key it names: it was
// altered, or the key of that ID differs from the one it was sealed to.
var ErrCorrupt = errors.New("sealed data does not open")

// Box is sealed data and the ID of the public key it was sealed to.
type Box struct {
	KeyID string `json:"keyID"`
	// Data is the sealed box (ephemeral public key, then ciphertext).
	Data []byte `json:"data"`
}

// IsZero reports whether b holds nothing.
func (b *Box) IsZero() bool { return b == nil || len(b.Data) == 0 }

// PublicKey is a controller's public key with its ID.
type PublicKey struct {
	ID string `json:"id"`
	// Key is the X25519 public key.
	Key []byte `json:"key"`
	// Signer is the Ed25519 public key of the controllers' signing key
	// and Signature its signature over SignedMessage (sign.go); both are
	// empty on keys published before controllers signed them.
	Signer    []byte `json:"signer,omitempty"`
	Signature []byte `json:"signature,omitempty"`
}

// String renders the key as "<id>:<base64>", the form `flotilla secrets
// public-key` prints and --seal-public-key reads.
func (p PublicKey) String() string {
	return p.ID + ":" + base64.StdEncoding.EncodeToString(p.Key)
}

// ParsePublicKey reads the form String writes.
func ParsePublicKey(s string) (PublicKey, error) {
	id, b64, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok {
		return PublicKey{}, fmt.Errorf(`public key: want "<id>:<base64 key>"`)
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	p := PublicKey{ID: id, Key: key}
	if err != nil {
		return PublicKey{}, fmt.Errorf("public key %s: %w", id, err)
	}
	return p, p.Validate()
}

// Validate checks the ID and the key's length.
func (p PublicKey) Validate() error {
	if err := keyring.ValidateID(p.ID); err != nil {
		return err
	}
	if len(p.Key) != curve25519.PointSize {
		return fmt.Errorf("public key %s: %d bytes, want %d", p.ID, len(p.Key), curve25519.PointSize)
	}
	return nil
}

// Seal encrypts plaintext to p.
func Seal(p PublicKey, plaintext []byte) (Box, error) {
	if err := p.Validate(); err != nil {
		return Box{}, err
	}
	var pub [32]byte
	copy(pub[:], p.Key)
	data, err := box.SealAnonymous(nil, plaintext, &pub, rand.Reader)
	if err != nil {
		return Box{}, fmt.Errorf("seal to key %s: %w", p.ID, err)
	}
	return Box{KeyID: p.ID, Data: data}, nil
}

// Opener opens boxes with a keyring's private keys, and signs their
// public keys when the keyring came with the controllers' signing key.
type Opener struct {
	ring   *keyring.Ring
	pubs   map[string]*[32]byte
	signer *Signer
}

// NewOpener returns an Opener holding ring's keys.
func NewOpener(ring *keyring.Ring) (*Opener, error) {
	o := &Opener{ring: ring, pubs: map[string]*[32]byte{}}
	if seed, ok := ring.SigningKey(); ok {
		s, err := NewSigner(seed)
		if err != nil {
			return nil, err
		}
		o.signer = s
	}
	for _, k := range ring.Keys() {
		pub, err := curve25519.X25519(k.Bytes[:], curve25519.Basepoint)
		if err != nil {
			return nil, fmt.Errorf("key %s: %w", k.ID, err)
		}
		var p [32]byte
		copy(p[:], pub)
		o.pubs[k.ID] = &p
	}
	return o, nil
}

// PublicKeys returns the public keys of every private key held, oldest
// first.
func (o *Opener) PublicKeys() []PublicKey {
	ids := o.ring.IDs()
	out := make([]PublicKey, len(ids))
	for i, id := range ids {
		out[i] = PublicKey{ID: id, Key: bytes.Clone(o.pubs[id][:])}
	}
	return out
}

// Signer is the controllers' signing key; nil when the keyring came
// without it (an agent's own key, tests).
func (o *Opener) Signer() *Signer { return o.signer }

// SignedPublicKeys returns PublicKeys, each signed by Signer, which must
// not be nil.
func (o *Opener) SignedPublicKeys() []PublicKey {
	keys := o.PublicKeys()
	for i, k := range keys {
		keys[i] = o.signer.Sign(k)
	}
	return keys
}

// Newest is the public key new boxes are sealed to.
func (o *Opener) Newest() PublicKey {
	id := o.ring.Newest().ID
	return PublicKey{ID: id, Key: bytes.Clone(o.pubs[id][:])}
}

// Open decrypts b. Errors name the key, never the content.
func (o *Opener) Open(b Box) ([]byte, error) {
	k, ok := o.ring.Get(b.KeyID)
	if !ok {
		return nil, fmt.Errorf("key %q: %w (it holds %s); give it that key with --seal-keys",
			b.KeyID, ErrUnknownKey, strings.Join(o.ring.IDs(), ", "))
	}
	priv := k.Bytes
	out, ok := box.OpenAnonymous(nil, b.Data, o.pubs[b.KeyID], &priv)
	if !ok {
		return nil, fmt.Errorf("key %q: %w", b.KeyID, ErrCorrupt)
	}
	return out, nil
}

// Reseal opens b and seals its content to the newest key; a box already
// sealed to it is returned as it is (changed false).
func (o *Opener) Reseal(b Box) (out Box, changed bool, err error) {
	newest := o.Newest()
	if b.KeyID == newest.ID {
		return b, false, nil
	}
	plain, err := o.Open(b)
	if err != nil {
		return b, false, err
	}
	out, err = Seal(newest, plain)
	return out, err == nil, err
}

// Newest returns the key among keys that new boxes are sealed to: the
// greatest ID, as keyring.Ring.Newest chooses among private keys.
func Newest(keys []PublicKey) (PublicKey, bool) {
	var best PublicKey
	for _, k := range keys {
		if k.ID > best.ID {
			best = k
		}
	}
	return best, best.ID != ""
}

// macLabel separates the MAC keys derived from the sealing keys from
// every other use of them.
const macLabel = "flotilla/seal/mac/v1"

// MAC returns the HMAC-SHA256 of msg under a key derived from the private
// key keyID names (HMAC-SHA256 of macLabel under the private key). Only
// holders of the private key can compute or check it, so a MAC of secret
// content reveals nothing about it, however guessable the content is.
// Errors name the key, never the message.
func (o *Opener) MAC(keyID string, msg []byte) ([]byte, error) {
	k, ok := o.ring.Get(keyID)
	if !ok {
		return nil, fmt.Errorf("key %q: %w (it holds %s)", keyID, ErrUnknownKey, strings.Join(o.ring.IDs(), ", "))
	}
	derive := hmac.New(sha256.New, k.Bytes[:])
	derive.Write([]byte(macLabel))
	mac := hmac.New(sha256.New, derive.Sum(nil))
	mac.Write(msg)
	return mac.Sum(nil), nil
}
