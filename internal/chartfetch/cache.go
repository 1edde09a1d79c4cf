package chartfetch

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/renameio/v2"
	"helm.sh/helm/v3/pkg/repo"
)

// The cache has three parts, on disk under Fetcher.CacheDir or in memory
// when CacheDir is empty:
//
//   - blobs: chart archives by content, <CacheDir>/sha256/<hex>.tgz;
//   - refs: what a download key (a resolved chart URL, or a repository or
//     OCI reference with an exact version) gave, <CacheDir>/refs/<sha256 of
//     key>.json holding the archive digest;
//   - indexes: repository index.yaml files, <CacheDir>/index/<sha256 of
//     key>.yaml, used while younger than Fetcher.IndexTTL.
//
// Every key carries a fingerprint of the credentials used, so content
// fetched with one set of credentials is not handed out under another (or
// none). Files are written atomically, so processes can share a CacheDir.

// memCache is the in-memory part of the cache.
type memCache struct {
	blobs   map[string][]byte // by hex digest; only when CacheDir is empty
	refs    map[string]string // by key; only when CacheDir is empty
	indexes map[string]cachedIndex
}

type cachedIndex struct {
	index   *repo.IndexFile
	fetched time.Time
}

// refRecord is the content of a refs file.
type refRecord struct {
	Source string `json:"source"`
	Digest string `json:"digest"`
}

// cacheKey joins the parts of a cache key.
func cacheKey(parts ...string) string {
	return strings.Join(parts, "\x00")
}

// hashKey names a key's cache file.
func hashKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// authFingerprint identifies the credentials of a, or is empty when a
// holds none.
func authFingerprint(a *Auth) string {
	if a == nil || (a.Username == "" && a.Password == "") {
		return ""
	}
	sum := sha256.Sum256([]byte("chartfetch-auth\x00" + a.Username + "\x00" + a.Password))
	return hex.EncodeToString(sum[:16])
}

func (f *Fetcher) cachePath(parts ...string) string {
	return filepath.Join(append([]string{f.CacheDir}, parts...)...)
}

// writeCacheFile writes data to the cache file atomically.
func (f *Fetcher) writeCacheFile(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("chart cache: %w", err)
	}
	if err := renameio.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("chart cache: %w", err)
	}
	return nil
}

// loadBlob returns the cached archive with the given "sha256:<hex>" digest.
// A cached file whose content does not match its name is ignored.
func (f *Fetcher) loadBlob(digest string) ([]byte, bool) {
	h := hexOf(digest)
	if len(h) != sha256.Size*2 || strings.Trim(h, "0123456789abcdef") != "" {
		return nil, false
	}
	if f.CacheDir == "" {
		f.mu.Lock()
		defer f.mu.Unlock()
		data, ok := f.mem.blobs[h]
		return data, ok
	}
	data, err := os.ReadFile(f.cachePath("sha256", h+".tgz"))
	if err != nil || hexOf(digestOf(data)) != h {
		return nil, false
	}
	return data, true
}

// storeBlob caches an archive and returns its digest.
func (f *Fetcher) storeBlob(data []byte) (string, error) {
	digest := digestOf(data)
	h := hexOf(digest)
	if f.CacheDir == "" {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.mem.blobs == nil {
			f.mem.blobs = map[string][]byte{}
		}
		f.mem.blobs[h] = data
		return digest, nil
	}
	path := f.cachePath("sha256", h+".tgz")
	if _, err := os.Stat(path); err == nil {
		return digest, nil
	}
	return digest, f.writeCacheFile(path, data)
}

// loadRef returns the digest recorded for key.
func (f *Fetcher) loadRef(key string) (string, bool) {
	if f.CacheDir == "" {
		f.mu.Lock()
		defer f.mu.Unlock()
		d, ok := f.mem.refs[key]
		return d, ok
	}
	data, err := os.ReadFile(f.cachePath("refs", hashKey(key)+".json"))
	if err != nil {
		return "", false
	}
	var rec refRecord
	if json.Unmarshal(data, &rec) != nil || rec.Digest == "" {
		return "", false
	}
	return rec.Digest, true
}

// storeRef records that key gave the archive with digest. source describes
// the key for people reading the cache; it must not hold secrets.
func (f *Fetcher) storeRef(key, source, digest string) error {
	if f.CacheDir == "" {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.mem.refs == nil {
			f.mem.refs = map[string]string{}
		}
		f.mem.refs[key] = digest
		return nil
	}
	if d, ok := f.loadRef(key); ok && d == digest {
		return nil
	}
	data, err := json.Marshal(refRecord{Source: source, Digest: digest})
	if err != nil {
		return err
	}
	return f.writeCacheFile(f.cachePath("refs", hashKey(key)+".json"), data)
}

// store caches an archive and records that key gave it; source is as
// for storeRef.
func (f *Fetcher) store(key, source string, data []byte) error {
	digest, err := f.storeBlob(data)
	if err != nil {
		return err
	}
	return f.storeRef(key, source, digest)
}

// cachedBlobForKey returns the archive recorded for key, if both the record
// and the archive are cached.
func (f *Fetcher) cachedBlobForKey(key string) ([]byte, bool) {
	digest, ok := f.loadRef(key)
	if !ok {
		return nil, false
	}
	return f.loadBlob(digest)
}

func (f *Fetcher) indexTTL() time.Duration {
	if f.IndexTTL == 0 {
		return DefaultIndexTTL
	}
	return f.IndexTTL
}

// loadIndex returns a cached repository index younger than the TTL.
func (f *Fetcher) loadIndex(key string) (*repo.IndexFile, bool) {
	ttl := f.indexTTL()
	if ttl < 0 {
		return nil, false
	}
	now := time.Now()
	f.mu.Lock()
	ci, ok := f.mem.indexes[key]
	f.mu.Unlock()
	if ok && now.Sub(ci.fetched) < ttl {
		return ci.index, true
	}
	if f.CacheDir == "" {
		return nil, false
	}
	path := f.cachePath("index", hashKey(key)+".yaml")
	st, err := os.Stat(path)
	if err != nil || now.Sub(st.ModTime()) >= ttl {
		return nil, false
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, false
	}
	idx, err := parseIndex(data)
	if err != nil {
		return nil, false
	}
	f.rememberIndex(key, idx, st.ModTime())
	return idx, true
}

// storeIndex caches a downloaded index (raw bytes on disk, parsed in memory).
func (f *Fetcher) storeIndex(key string, raw []byte, idx *repo.IndexFile) error {
	if f.indexTTL() < 0 {
		return nil
	}
	f.rememberIndex(key, idx, time.Now())
	if f.CacheDir == "" {
		return nil
	}
	return f.writeCacheFile(f.cachePath("index", hashKey(key)+".yaml"), raw)
}

func (f *Fetcher) rememberIndex(key string, idx *repo.IndexFile, at time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.mem.indexes == nil {
		f.mem.indexes = map[string]cachedIndex{}
	}
	// Drop stale entries so the map does not grow without bound.
	for k, ci := range f.mem.indexes {
		if time.Since(ci.fetched) >= f.indexTTL() {
			delete(f.mem.indexes, k)
		}
	}
	f.mem.indexes[key] = cachedIndex{index: idx, fetched: at}
}
