// Package keyring loads and generates the named 32-byte keys Flotilla's
// controllers hold: the X25519 keys secrets are sealed to (package seal)
// and the AES-256 keys of the optional payload codec. A keyring is a
// directory with one file per key, the file's name being the key's ID and
// its content the key in standard base64, which is exactly how a mounted
// Kubernetes Secret looks. IDs sort by age ("fk-20261127t033000z"), so the
// newest key, the one new data is encrypted with, is the greatest ID, and
// every replica given the same directory agrees on it without talking to
// the others. Older keys stay to read what they encrypted.
package keyring

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

// KeySize is the length of every key.
const KeySize = 32

// idPattern is what a key ID may be: a DNS-1123-label-like name, which is
// also a valid Kubernetes Secret key and file name.
var idPattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// ErrNoKeys means a keyring directory holds no key.
var ErrNoKeys = errors.New("no keys")

// Key is one named key.
type Key struct {
	ID    string
	Bytes [KeySize]byte
}

// Ring is a set of keys, sorted by ID, oldest first.
type Ring struct {
	keys []Key
	// signing is the controllers' signing key seed, when the ring was
	// loaded with LoadSealing or LoadOrCreateSealing.
	signing []byte
}

// New returns a ring of keys (any order); IDs must be valid and distinct.
func New(keys ...Key) (*Ring, error) {
	r := &Ring{keys: append([]Key(nil), keys...)}
	sort.Slice(r.keys, func(i, j int) bool { return r.keys[i].ID < r.keys[j].ID })
	for i, k := range r.keys {
		if err := ValidateID(k.ID); err != nil {
			return nil, err
		}
		if i > 0 && r.keys[i-1].ID == k.ID {
			return nil, fmt.Errorf("key %q appears twice", k.ID)
		}
	}
	return r, nil
}

// ValidateID checks that id can name a key.
func ValidateID(id string) error {
	if !idPattern.MatchString(id) {
		return fmt.Errorf("invalid key ID %q: want lower-case letters, digits and '-', at most 63, e.g. %q", id, "fk-20261127t033000z")
	}
	return nil
}

// NewID returns the ID a key generated at t gets (now when t is zero).
func NewID(t time.Time) string {
	if t.IsZero() {
		t = time.Now()
	}
	return "fk-" + strings.ToLower(t.UTC().Format("20060102t150405z"))
}

// Generate returns a new random key named NewID(now).
func Generate() (Key, error) {
	k := Key{ID: NewID(time.Time{})}
	if _, err := rand.Read(k.Bytes[:]); err != nil {
		return Key{}, fmt.Errorf("generate key: %w", err)
	}
	return k, nil
}

// Encode returns the key's file content.
func (k Key) Encode() []byte {
	return []byte(base64.StdEncoding.EncodeToString(k.Bytes[:]) + "\n")
}

// LoadDir reads every key in dir: each regular file whose name does not
// start with "." (a mounted Secret's ..data links are skipped; symlinks to
// files are followed), except the signing key (SigningKeyName). Errors
// name the file, never its content.
func LoadDir(dir string) (*Ring, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read keyring %s: %w", dir, err)
	}
	var keys []Key
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") || e.Name() == SigningKeyName {
			continue
		}
		path := filepath.Join(dir, e.Name())
		fi, err := os.Stat(path) // follows the links of a mounted Secret
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		if err := ValidateID(e.Name()); err != nil {
			return nil, fmt.Errorf("keyring %s: file %s: %w", dir, e.Name(), err)
		}
		raw, err := readKeyFile(dir, e.Name())
		if err != nil {
			return nil, err
		}
		k := Key{ID: e.Name()}
		copy(k.Bytes[:], raw)
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("keyring %s: %w", dir, ErrNoKeys)
	}
	return New(keys...)
}

// readKeyFile reads the key in file name of dir. Errors name the file,
// never its content.
func readKeyFile(dir, name string) ([]byte, error) {
	data, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return nil, fmt.Errorf("keyring %s: %w", dir, err)
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(data)))
	if err != nil || len(raw) != KeySize {
		return nil, fmt.Errorf("keyring %s: file %s is not a base64-encoded %d-byte key", dir, name, KeySize)
	}
	return raw, nil
}

// WriteKey writes k into dir (created 0700) as a 0600 file, refusing to
// replace an existing key of the same ID.
func WriteKey(dir string, k Key) error {
	if err := ValidateID(k.ID); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create keyring %s: %w", dir, err)
	}
	f, err := os.OpenFile(filepath.Join(dir, k.ID), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("write key %s: %w", k.ID, err)
	}
	if _, err := f.Write(k.Encode()); err != nil {
		_ = f.Close()
		return fmt.Errorf("write key %s: %w", k.ID, err)
	}
	return f.Close()
}

// LoadOrCreate loads dir's keys, generating and writing a first key when
// dir holds none. created reports whether it did.
func LoadOrCreate(dir string) (r *Ring, created bool, err error) {
	r, err = LoadDir(dir)
	if err == nil {
		return r, false, nil
	}
	if !errors.Is(err, ErrNoKeys) && !errors.Is(err, os.ErrNotExist) {
		return nil, false, err
	}
	k, err := Generate()
	if err != nil {
		return nil, false, err
	}
	if err := WriteKey(dir, k); err != nil {
		return nil, false, err
	}
	r, err = LoadDir(dir)
	return r, err == nil, err
}

// Newest returns the key new data is encrypted with: the greatest ID.
func (r *Ring) Newest() Key { return r.keys[len(r.keys)-1] }

// Get returns the key named id.
func (r *Ring) Get(id string) (Key, bool) {
	i := sort.Search(len(r.keys), func(i int) bool { return r.keys[i].ID >= id })
	if i < len(r.keys) && r.keys[i].ID == id {
		return r.keys[i], true
	}
	return Key{}, false
}

// IDs returns the key IDs, oldest first.
func (r *Ring) IDs() []string {
	out := make([]string, len(r.keys))
	for i, k := range r.keys {
		out[i] = k.ID
	}
	return out
}

// Keys returns the keys, oldest first.
func (r *Ring) Keys() []Key { return append([]Key(nil), r.keys...) }
