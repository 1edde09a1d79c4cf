package keyring

import (
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// SigningKeyName is the file, in the controllers' sealing keyring, that
// holds their long-lived signing key (an Ed25519 seed, KeySize bytes in
// base64, like every key): it signs the public sealing keys they publish.
// It is not a sealing key, so LoadDir skips it, and it is never rotated
// with them: the CLI pins it.
const SigningKeyName = "signing-key"

// LoadSigningKey reads dir's signing key. found is false when dir holds
// none. Errors name the file, never its content.
func LoadSigningKey(dir string) (seed []byte, found bool, err error) {
	raw, err := readKeyFile(dir, SigningKeyName)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	return raw, err == nil, err
}

// LoadOrCreateSigningKey reads dir's signing key, generating and writing
// one first when dir holds none. The file appears whole or not at all
// (written aside, then linked into place), so replicas sharing dir that
// start together end up with the one key that was linked first. created
// reports whether this call wrote it.
func LoadOrCreateSigningKey(dir string) (seed []byte, created bool, err error) {
	if seed, found, err := LoadSigningKey(dir); err != nil || found {
		return seed, false, err
	}
	var k Key
	if _, err := rand.Read(k.Bytes[:]); err != nil {
		return nil, false, fmt.Errorf("generate the signing key: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, false, fmt.Errorf("create keyring %s: %w", dir, err)
	}
	tmp, err := os.CreateTemp(dir, "."+SigningKeyName+"-*") // hidden: LoadDir skips it
	if err != nil {
		return nil, false, fmt.Errorf("write the signing key into %s: %w", dir, err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	_, err = tmp.Write(k.Encode())
	if err = errors.Join(err, tmp.Close()); err == nil {
		err = os.Link(tmp.Name(), filepath.Join(dir, SigningKeyName))
		created = err == nil
	}
	if err != nil && !errors.Is(err, os.ErrExist) {
		return nil, false, fmt.Errorf("write the signing key into %s: %w", dir, err)
	}
	seed, found, err := LoadSigningKey(dir)
	if err == nil && !found {
		err = fmt.Errorf("keyring %s: the signing key vanished after it was written", dir)
	}
	return seed, created, err
}

// SigningKey returns the signing key seed loaded with the ring
// (LoadSealing, LoadOrCreateSealing).
func (r *Ring) SigningKey() ([]byte, bool) { return r.signing, r.signing != nil }

// LoadSealing reads the controllers' sealing keyring (LoadDir) with its
// signing key, which is generated into dir the first time. A directory
// that holds no signing key and cannot be written (a mounted Secret of an
// older install) is an error saying how to add one.
func LoadSealing(dir string) (*Ring, error) {
	r, err := LoadDir(dir)
	if err != nil {
		return nil, err
	}
	return r, r.loadSigning(dir)
}

// LoadOrCreateSealing is LoadOrCreate with the signing key, both
// generated when missing. created reports a new sealing key.
func LoadOrCreateSealing(dir string) (r *Ring, created bool, err error) {
	if r, created, err = LoadOrCreate(dir); err != nil {
		return nil, false, err
	}
	return r, created, r.loadSigning(dir)
}

func (r *Ring) loadSigning(dir string) error {
	seed, _, err := LoadOrCreateSigningKey(dir)
	if err != nil {
		return fmt.Errorf("%w; the controllers' signing key is generated once into the sealing keyring: add it yourself, "+
			"e.g. to the mounted Secret as key %q with the value of `head -c 32 /dev/urandom | base64`, the same for every replica", err, SigningKeyName)
	}
	r.signing = seed
	return nil
}
