package content

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/google/renameio/v2"

	"github.com/flotilla-gitops/flotilla/internal/bundle"
)

var (
	// ErrNotFound is returned for an ID the store does not hold.
	ErrNotFound = errors.New("content not found")
	// ErrInvalidID is returned for a string that is not an ID this store
	// produces.
	ErrInvalidID = errors.New("invalid content ID")
	// ErrCorrupt is returned when stored content does not match its ID.
	ErrCorrupt = errors.New("stored content does not match its ID")
)

const (
	manifestsDir = "manifests"
	optionsDir   = "options"
	bundlesDir   = "bundles"
	manifestExt  = ".json.gz"
	optionsExt   = ".json"
)

// Store is a content-addressed store in a directory. It is safe for
// concurrent use by multiple goroutines and processes.
type Store struct {
	dir string
}

// New returns a store in dir, creating dir (mode 0700) and its
// subdirectories when missing.
func New(dir string) (*Store, error) {
	for _, d := range []string{dir, filepath.Join(dir, manifestsDir), filepath.Join(dir, optionsDir), filepath.Join(dir, bundlesDir)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("create content store: %w", err)
		}
	}
	return &Store{dir: dir}, nil
}

// PutManifest stores m and returns its ID. Storing a manifest that is
// already present does nothing.
func (s *Store) PutManifest(m bundle.Manifest) (string, error) {
	id := m.ID()
	data, err := json.Marshal(m)
	if err != nil {
		return "", fmt.Errorf("store manifest %s: %w", id, err)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(data); err != nil {
		return "", fmt.Errorf("store manifest %s: %w", id, err)
	}
	if err := zw.Close(); err != nil {
		return "", fmt.Errorf("store manifest %s: %w", id, err)
	}
	if err := s.write(manifestsDir, id+manifestExt, buf.Bytes()); err != nil {
		return "", fmt.Errorf("store manifest %s: %w", id, err)
	}
	return id, nil
}

// GetManifest returns the manifest with the given ID. It fails with
// ErrInvalidID for a malformed ID, ErrNotFound when the store does not hold
// it, and ErrCorrupt when the stored manifest's ID is not id.
func (s *Store) GetManifest(id string) (bundle.Manifest, error) {
	if !validManifestID(id) {
		return bundle.Manifest{}, fmt.Errorf("get manifest %q: %w", id, ErrInvalidID)
	}
	file := filepath.Join(s.dir, manifestsDir, id+manifestExt)
	f, err := os.Open(file)
	if errors.Is(err, fs.ErrNotExist) {
		return bundle.Manifest{}, fmt.Errorf("get manifest %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return bundle.Manifest{}, fmt.Errorf("get manifest %s: %w", id, err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return bundle.Manifest{}, fmt.Errorf("get manifest %s: read %s: %w", id, file, err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		return bundle.Manifest{}, fmt.Errorf("get manifest %s: read %s: %w", id, file, err)
	}
	var m bundle.Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return bundle.Manifest{}, fmt.Errorf("get manifest %s: decode %s: %w", id, file, err)
	}
	if got := m.ID(); got != id {
		return bundle.Manifest{}, fmt.Errorf("get manifest %s: %s holds manifest %s: %w", id, file, got, ErrCorrupt)
	}
	return m, nil
}

// PutOptions stores o and returns its hash. Storing options that are
// already present does nothing.
func (s *Store) PutOptions(o bundle.Options) (string, error) {
	hash := o.Key()
	data, err := json.Marshal(o)
	if err != nil {
		return "", fmt.Errorf("store options %s: %w", hash, err)
	}
	if err := s.write(optionsDir, hash+optionsExt, data); err != nil {
		return "", fmt.Errorf("store options %s: %w", hash, err)
	}
	return hash, nil
}

// GetOptions returns the options with the given hash. It fails with
// ErrInvalidID for a malformed hash, ErrNotFound when the store does not
// hold it, and ErrCorrupt when the stored options do not hash to hash.
func (s *Store) GetOptions(hash string) (bundle.Options, error) {
	if !validHash(hash) {
		return bundle.Options{}, fmt.Errorf("get options %q: %w", hash, ErrInvalidID)
	}
	file := filepath.Join(s.dir, optionsDir, hash+optionsExt)
	data, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return bundle.Options{}, fmt.Errorf("get options %s: %w", hash, ErrNotFound)
	}
	if err != nil {
		return bundle.Options{}, fmt.Errorf("get options %s: %w", hash, err)
	}
	var o bundle.Options
	if err := json.Unmarshal(data, &o); err != nil {
		return bundle.Options{}, fmt.Errorf("get options %s: decode %s: %w", hash, file, err)
	}
	if got := o.Key(); got != hash {
		return bundle.Options{}, fmt.Errorf("get options %s: %s holds options %s: %w", hash, file, got, ErrCorrupt)
	}
	return o, nil
}

// PutBundle stores b (its options and fleet.yaml spec, without content)
// and returns its key, the SHA-256 of its JSON encoding.
func (s *Store) PutBundle(b bundle.Bundle) (string, error) {
	data, err := json.Marshal(b)
	if err != nil {
		return "", fmt.Errorf("store bundle %s: %w", b.Name, err)
	}
	key := sha256Hex(data)
	if err := s.write(bundlesDir, key+optionsExt, data); err != nil {
		return "", fmt.Errorf("store bundle %s: %w", b.Name, err)
	}
	return key, nil
}

// GetBundle returns the bundle stored under key, with the errors of
// GetOptions.
func (s *Store) GetBundle(key string) (bundle.Bundle, error) {
	if !validHash(key) {
		return bundle.Bundle{}, fmt.Errorf("get bundle %q: %w", key, ErrInvalidID)
	}
	file := filepath.Join(s.dir, bundlesDir, key+optionsExt)
	data, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return bundle.Bundle{}, fmt.Errorf("get bundle %s: %w", key, ErrNotFound)
	}
	if err != nil {
		return bundle.Bundle{}, fmt.Errorf("get bundle %s: %w", key, err)
	}
	if got := sha256Hex(data); got != key {
		return bundle.Bundle{}, fmt.Errorf("get bundle %s: %s holds bundle %s: %w", key, file, got, ErrCorrupt)
	}
	var b bundle.Bundle
	if err := json.Unmarshal(data, &b); err != nil {
		return bundle.Bundle{}, fmt.Errorf("get bundle %s: decode %s: %w", key, file, err)
	}
	return b, nil
}

func sha256Hex(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// write stores data as dir/name unless that file exists. The data goes to
// a temporary file in the same directory first and is renamed into place,
// so the file appears complete or not at all; concurrent writers of the
// same name write the same bytes, so whichever rename wins is fine.
func (s *Store) write(dir, name string, data []byte) error {
	final := filepath.Join(s.dir, dir, name)
	if _, err := os.Stat(final); err == nil {
		return nil
	}
	return renameio.WriteFile(final, data, 0o600)
}

// validManifestID reports whether id has the form of bundle.Manifest.ID:
// "s-" and 61 lower-case hex digits.
func validManifestID(id string) bool {
	return len(id) == 63 && id[:2] == "s-" && isLowerHex(id[2:])
}

// validHash reports whether h has the form of bundle.Options.Key: 64
// lower-case hex digits.
func validHash(h string) bool {
	return len(h) == 64 && isLowerHex(h)
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
