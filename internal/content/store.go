package content

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/singleflight"

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

// Store is a content-addressed store in a directory, optionally backed
// by a Registry (see WithRemote). It is safe for concurrent use by multiple
// goroutines and processes.
type Store struct {
	dir    string
	remote Remote
	pulls  singleflight.Group
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

// WithRemote returns a store on the same directory that also writes
// manifests and options to r and, for those missing locally, reads them
// from r and keeps a verified copy in the directory. A nil r gives a
// store without a remote. Bundles stay local. s itself is unchanged.
func (s *Store) WithRemote(r Remote) *Store {
	if r == nil || r == Remote((*Registry)(nil)) {
		return &Store{dir: s.dir}
	}
	return &Store{dir: s.dir, remote: r}
}

// Remote is where a Store writes its content and reads what it misses: a
// Registry, or (agents) the controller's gateway.
type Remote interface {
	Push(ctx context.Context, kind Kind, id string, data []byte) error
	Pull(ctx context.Context, kind Kind, id string) ([]byte, error)
	String() string
}

// remoteMaxSize is the largest item r gives: a registry's limit, else
// the default.
func remoteMaxSize(r Remote) int64 {
	if reg, ok := r.(*Registry); ok {
		return reg.maxSize
	}
	return defaultMaxSize
}

// PutManifest is PutManifestContext with a background context;
// registry calls are still bounded by RegistryOptions.Timeout.
func (s *Store) PutManifest(m bundle.Manifest) (string, error) {
	return s.PutManifestContext(context.Background(), m)
}

// PutManifestContext stores m and returns its ID. Storing a manifest that
// is already present does nothing locally. With a remote, m is then pushed
// to it (a no-op when the registry has it); when that fails m stays stored
// locally and calling again retries the push.
func (s *Store) PutManifestContext(ctx context.Context, m bundle.Manifest) (string, error) {
	id, data, err := s.putManifest(m)
	if err != nil {
		return "", err
	}
	if s.remote != nil {
		if err := s.remote.Push(ctx, KindManifest, id, data); err != nil {
			return "", err
		}
	}
	return id, nil
}

// putManifest stores m locally and returns its ID and stored bytes.
func (s *Store) putManifest(m bundle.Manifest) (string, []byte, error) {
	id := m.ID()
	data, err := json.Marshal(m)
	if err != nil {
		return "", nil, fmt.Errorf("store manifest %s: %w", id, err)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(data); err != nil {
		return "", nil, fmt.Errorf("store manifest %s: %w", id, err)
	}
	if err := zw.Close(); err != nil {
		return "", nil, fmt.Errorf("store manifest %s: %w", id, err)
	}
	if err := s.write(manifestsDir, id+manifestExt, buf.Bytes()); err != nil {
		return "", nil, fmt.Errorf("store manifest %s: %w", id, err)
	}
	return id, buf.Bytes(), nil
}

// GetManifest is GetManifestContext with a background context;
// registry calls are still bounded by RegistryOptions.Timeout.
func (s *Store) GetManifest(id string) (bundle.Manifest, error) {
	return s.GetManifestContext(context.Background(), id)
}

// GetManifestContext returns the manifest with the given ID. It fails with
// ErrInvalidID for a malformed ID, ErrNotFound when neither the store nor
// its remote holds it, and ErrCorrupt when the stored or pulled manifest's
// ID is not id. A manifest pulled from the remote is stored locally only
// after it has been verified; with a remote, a local copy that fails to
// verify is replaced by the remote's.
func (s *Store) GetManifestContext(ctx context.Context, id string) (bundle.Manifest, error) {
	m, err := s.getManifest(id)
	if !s.repairable(err) {
		return m, err
	}
	if err := s.fill(ctx, KindManifest, id); err != nil {
		return bundle.Manifest{}, err
	}
	return s.getManifest(id)
}

func (s *Store) getManifest(id string) (bundle.Manifest, error) {
	if !validManifestID(id) {
		return bundle.Manifest{}, fmt.Errorf("get manifest %q: %w", id, ErrInvalidID)
	}
	file := s.path(KindManifest, id)
	data, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return bundle.Manifest{}, fmt.Errorf("get manifest %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return bundle.Manifest{}, fmt.Errorf("get manifest %s: %w", id, err)
	}
	m, err := decodeManifest(id, file, data, 0)
	if err != nil {
		return bundle.Manifest{}, fmt.Errorf("get manifest %s: %w", id, err)
	}
	return m, nil
}

// decodeManifest decodes the stored form of the manifest id read from src
// and checks its ID. A positive limit bounds the decompressed size.
func decodeManifest(id, src string, data []byte, limit int64) (bundle.Manifest, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return bundle.Manifest{}, fmt.Errorf("read %s: %w: %w", src, ErrCorrupt, err)
	}
	var r io.Reader = zr
	if limit > 0 {
		r = io.LimitReader(zr, limit+1)
	}
	plain, err := io.ReadAll(r)
	if err != nil {
		return bundle.Manifest{}, fmt.Errorf("read %s: %w: %w", src, ErrCorrupt, err)
	}
	if limit > 0 && int64(len(plain)) > limit {
		return bundle.Manifest{}, fmt.Errorf("read %s: more than %d bytes decompressed", src, limit)
	}
	var m bundle.Manifest
	if err := json.Unmarshal(plain, &m); err != nil {
		return bundle.Manifest{}, fmt.Errorf("decode %s: %w: %w", src, ErrCorrupt, err)
	}
	if got := m.ID(); got != id {
		return bundle.Manifest{}, fmt.Errorf("%s holds manifest %s: %w", src, got, ErrCorrupt)
	}
	return m, nil
}

// PutOptions is PutOptionsContext with a background context;
// registry calls are still bounded by RegistryOptions.Timeout.
func (s *Store) PutOptions(o bundle.Options) (string, error) {
	return s.PutOptionsContext(context.Background(), o)
}

// PutOptionsContext stores o and returns its hash, with the local and
// remote behaviour of PutManifestContext.
func (s *Store) PutOptionsContext(ctx context.Context, o bundle.Options) (string, error) {
	hash, data, err := s.putOptions(o)
	if err != nil {
		return "", err
	}
	if s.remote != nil {
		if err := s.remote.Push(ctx, KindOptions, hash, data); err != nil {
			return "", err
		}
	}
	return hash, nil
}

// OptionsBatch stores options on this host as they are put and pushes
// them to the registry together (Push): each distinct one once, a few at
// a time. A rollout to a thousand agents pushes their options in
// parallel rather than one registry round trip after another.
type OptionsBatch struct {
	s *Store
	// data are the options to push, by hash.
	data map[string][]byte
}

// pushParallelism bounds an OptionsBatch's concurrent pushes.
const pushParallelism = 16

// NewOptionsBatch returns an empty batch of s.
func (s *Store) NewOptionsBatch() *OptionsBatch {
	return &OptionsBatch{s: s, data: map[string][]byte{}}
}

// Put stores o locally and returns its hash; the push waits for Push.
func (b *OptionsBatch) Put(o bundle.Options) (string, error) {
	hash, data, err := b.s.putOptions(o)
	if err != nil {
		return "", err
	}
	if b.s.remote != nil {
		b.data[hash] = data
	}
	return hash, nil
}

// Len is how many distinct options wait to be pushed.
func (b *OptionsBatch) Len() int { return len(b.data) }

// Push pushes every options put since the last Push (nothing without a
// registry) and returns the first error.
func (b *OptionsBatch) Push(ctx context.Context) error {
	if len(b.data) == 0 {
		return nil
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(pushParallelism)
	for hash, data := range b.data {
		g.Go(func() error { return b.s.remote.Push(gctx, KindOptions, hash, data) })
	}
	b.data = map[string][]byte{}
	return g.Wait()
}

// putOptions stores o locally and returns its hash and stored bytes.
func (s *Store) putOptions(o bundle.Options) (string, []byte, error) {
	hash := o.Key()
	data, err := json.Marshal(o)
	if err != nil {
		return "", nil, fmt.Errorf("store options %s: %w", hash, err)
	}
	if err := s.write(optionsDir, hash+optionsExt, data); err != nil {
		return "", nil, fmt.Errorf("store options %s: %w", hash, err)
	}
	return hash, data, nil
}

// GetOptions is GetOptionsContext with a background context;
// registry calls are still bounded by RegistryOptions.Timeout.
func (s *Store) GetOptions(hash string) (bundle.Options, error) {
	return s.GetOptionsContext(context.Background(), hash)
}

// GetOptionsContext returns the options with the given hash, with the
// errors and remote behaviour of GetManifestContext.
func (s *Store) GetOptionsContext(ctx context.Context, hash string) (bundle.Options, error) {
	o, err := s.getOptions(hash)
	if !s.repairable(err) {
		return o, err
	}
	if err := s.fill(ctx, KindOptions, hash); err != nil {
		return bundle.Options{}, err
	}
	return s.getOptions(hash)
}

func (s *Store) getOptions(hash string) (bundle.Options, error) {
	if !validHash(hash) {
		return bundle.Options{}, fmt.Errorf("get options %q: %w", hash, ErrInvalidID)
	}
	file := s.path(KindOptions, hash)
	data, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return bundle.Options{}, fmt.Errorf("get options %s: %w", hash, ErrNotFound)
	}
	if err != nil {
		return bundle.Options{}, fmt.Errorf("get options %s: %w", hash, err)
	}
	o, err := decodeOptions(hash, file, data)
	if err != nil {
		return bundle.Options{}, fmt.Errorf("get options %s: %w", hash, err)
	}
	return o, nil
}

// decodeOptions decodes the stored form of the options hash read from src
// and checks their hash.
func decodeOptions(hash, src string, data []byte) (bundle.Options, error) {
	var o bundle.Options
	if err := json.Unmarshal(data, &o); err != nil {
		return bundle.Options{}, fmt.Errorf("decode %s: %w: %w", src, ErrCorrupt, err)
	}
	if got := o.Key(); got != hash {
		return bundle.Options{}, fmt.Errorf("%s holds options %s: %w", src, got, ErrCorrupt)
	}
	return o, nil
}

// repairable reports whether the remote can answer a local read that
// failed with err: a miss, or a local copy that does not verify (a disk
// error, or a file damaged behind the store's back), which pull replaces
// with the verified remote copy. Without a remote nothing is.
func (s *Store) repairable(err error) bool {
	return s.remote != nil && (errors.Is(err, ErrNotFound) || errors.Is(err, ErrCorrupt))
}

// fill pulls the item of kind and id from the remote, verifies it and
// stores it locally. Concurrent fills of one item share one pull, and each
// caller still stops waiting when its own ctx ends.
func (s *Store) fill(ctx context.Context, kind Kind, id string) error {
	ch := s.pulls.DoChan(string(kind)+"/"+id, func() (any, error) {
		// The shared pull must not fail because the caller that started it
		// gave up; the registry's timeout still bounds it.
		return nil, s.pull(context.WithoutCancel(ctx), kind, id)
	})
	select {
	case res := <-ch:
		return res.Err
	case <-ctx.Done():
		return fmt.Errorf("get %s %s from %s: %w", kind, id, s.remote, ctx.Err())
	}
}

// pull is fill without the deduplication.
func (s *Store) pull(ctx context.Context, kind Kind, id string) error {
	// A fill that finished between the caller's failed read and this call
	// has stored the item already. A local copy that does not verify is
	// replaced; pulls of one item run one at a time, so this never removes
	// a good copy another pull just stored.
	switch err := s.verifyLocal(kind, id); {
	case err == nil:
		return nil
	case errors.Is(err, ErrCorrupt):
		if err := os.Remove(s.path(kind, id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("replace damaged %s %s: %w", kind, id, err)
		}
	}
	data, err := s.remote.Pull(ctx, kind, id)
	if err != nil {
		return err
	}
	tag, _, err := kind.tag(id)
	if err != nil {
		return err
	}
	src := s.remote.String() + ":" + tag
	// Store what a local put of the verified value would store, not the
	// registry's bytes.
	switch kind {
	case KindManifest:
		m, err := decodeManifest(id, src, data, remoteMaxSize(s.remote))
		if err != nil {
			return fmt.Errorf("get manifest %s: %w", id, err)
		}
		_, _, err = s.putManifest(m)
		return err
	case KindOptions:
		o, err := decodeOptions(id, src, data)
		if err != nil {
			return fmt.Errorf("get options %s: %w", id, err)
		}
		_, _, err = s.putOptions(o)
		return err
	}
	return fmt.Errorf("unknown kind %q", string(kind))
}

// verifyLocal reads and verifies the local copy of the item of kind and id.
func (s *Store) verifyLocal(kind Kind, id string) error {
	var err error
	if kind == KindManifest {
		_, err = s.getManifest(id)
	} else {
		_, err = s.getOptions(id)
	}
	return err
}

// path returns the file of the item of kind and id.
func (s *Store) path(kind Kind, id string) string {
	if kind == KindManifest {
		return filepath.Join(s.dir, manifestsDir, id+manifestExt)
	}
	return filepath.Join(s.dir, optionsDir, id+optionsExt)
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
// same name write the same bytes, so whichever rename wins is fine. A
// directory removed behind the store's back (the store is a cache that
// may be emptied while its process runs) is made again.
func (s *Store) write(dir, name string, data []byte) error {
	final := filepath.Join(s.dir, dir, name)
	if fi, err := os.Stat(final); err == nil && fi.Size() == int64(len(data)) {
		return nil
	}
	err := writeAtomic(final, data)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(final), 0o700); err != nil {
			return err
		}
		err = writeAtomic(final, data)
	}
	return err
}

// writeAtomic writes data to a temporary file beside path and renames it
// over path, without fsync: a reader sees all of data or the old file.
// The store is a cache whose items are named by their content and
// verified on every read, so a file a crash left short is detected (and
// replaced by the next put of the item: write compares sizes) rather
// than paid for with an fsync per item, which made targeting a thousand
// clusters take seconds.
func writeAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		_ = os.Remove(f.Name()) // best effort: a leftover temp file is only litter
	}
	return err
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

// Raw returns the stored bytes of the item of kind and id (what a
// Registry holds for it), after checking them against id; a miss is
// pulled from the remote first. The gateway serves agents these.
func (s *Store) Raw(ctx context.Context, kind Kind, id string) ([]byte, error) {
	var err error
	switch kind {
	case KindManifest:
		_, err = s.GetManifestContext(ctx, id)
	case KindOptions:
		_, err = s.GetOptionsContext(ctx, id)
	default:
		return nil, fmt.Errorf("unknown kind %q", string(kind))
	}
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(s.path(kind, id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s %s: %w", kind, id, ErrNotFound)
	}
	return data, err
}
