package gitsource

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/idxfile"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
)

// maxPacks bounds the pack files of a clone. Every fetch that brings
// objects adds a pack, and go-git never merges them: it reads every pack's
// index when it opens a clone and may look an object up in each. A
// monorepo's clone, fetched at every commit, slowed each check, comparison
// and render linearly (BenchmarkMonorepo: commit to render 4.3 s at the
// 50th commit, 11 s at the 160th, with 166 packs).
const maxPacks = 16

// pack is one pack file of a clone.
type pack struct {
	hash plumbing.Hash
	size int64
}

// consolidatePacks merges the packs of the clone in dir into one when
// there are more than maxPacks, leaving out the largest (the first
// fetch's, usually most of the repository), so a merge costs about what
// the fetches since the last one brought, like git's geometric repack. It
// keeps every object, referenced or not: a GitRepo may still compare with
// a commit no branch holds any more. The merged pack is written (pack and
// index, renamed into place) before the packs it replaces are deleted, so
// a crash leaves at worst objects twice. Objects are stored whole (no
// delta search), so memory stays bounded by go-git's streaming of large
// objects. It reports whether it merged. The caller holds the clone's lock.
func consolidatePacks(dir string) (bool, error) {
	packs, err := listPacks(filepath.Join(dir, "objects", "pack"))
	if err != nil || len(packs) <= maxPacks {
		return false, err
	}
	slices.SortFunc(packs, func(a, b pack) int { return cmp.Compare(b.size, a.size) })
	merge := packs[1:]
	hashes, err := packObjects(filepath.Join(dir, "objects", "pack"), merge)
	if err != nil {
		return false, err
	}
	st := bareStorage(dir)
	defer func() { _ = st.Close() }()
	w, err := st.PackfileWriter()
	if err != nil {
		return false, fmt.Errorf("merge packs of %s: %w", dir, err)
	}
	merged, err := packfile.NewEncoder(w, st, false).Encode(hashes, 0)
	if closeErr := w.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		return false, fmt.Errorf("merge packs of %s: %w", dir, err)
	}
	var errs []error
	for _, p := range merge {
		if p.hash != merged {
			errs = append(errs, st.DeleteOldObjectPackAndIndex(p.hash, time.Time{}))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return true, fmt.Errorf("merge packs of %s: %w", dir, err)
	}
	return true, nil
}

// listPacks returns the packs in packDir that have their index.
func listPacks(packDir string) ([]pack, error) {
	entries, err := os.ReadDir(packDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", packDir, err)
	}
	var packs []pack
	for _, e := range entries {
		base, ok := strings.CutSuffix(e.Name(), ".pack")
		hex, isPack := strings.CutPrefix(base, "pack-")
		if !ok || !isPack || !plumbing.IsHash(hex) {
			continue
		}
		if _, err := os.Stat(filepath.Join(packDir, base+".idx")); err != nil {
			continue // being written, or an interrupted fetch's
		}
		info, err := e.Info()
		if err != nil {
			return nil, err
		}
		packs = append(packs, pack{hash: plumbing.NewHash(hex), size: info.Size()})
	}
	return packs, nil
}

// packObjects returns the objects of packs, read from their indexes, each
// once.
func packObjects(packDir string, packs []pack) ([]plumbing.Hash, error) {
	seen := map[plumbing.Hash]bool{}
	var hashes []plumbing.Hash
	for _, p := range packs {
		idx, err := readIndex(filepath.Join(packDir, "pack-"+p.hash.String()+".idx"))
		if err != nil {
			return nil, err
		}
		iter, err := idx.Entries()
		if err != nil {
			return nil, err
		}
		for {
			e, err := iter.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("read index of pack %s: %w", p.hash, err)
			}
			if !seen[e.Hash] {
				seen[e.Hash] = true
				hashes = append(hashes, e.Hash)
			}
		}
		_ = iter.Close()
	}
	return hashes, nil
}

// readIndex reads a pack index file.
func readIndex(path string) (*idxfile.MemoryIndex, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	idx := idxfile.NewMemoryIndex()
	if err := idxfile.NewDecoder(f).Decode(idx); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return idx, nil
}
