package gitsource

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/sizelimit"
)

// Layout of a Cache directory.
const (
	reposDir     = "repos"     // one bare clone per remote URL: repos/<sha256(url)>
	worktreesDir = "worktrees" // one tree per commit: worktrees/<commit>
	tmpPrefix    = ".tmp-"     // directories being built; never returned
)

// maxTagDepth bounds how many annotated tags pointing at tags are peeled.
const maxTagDepth = 10

// Cache keeps one bare clone per remote URL and one worktree per commit
// under a directory it owns. It is safe for concurrent use within one
// process; two processes must not share a directory.
type Cache struct {
	dir string

	// MaxCheckoutSize bounds the files of one worktree together: a
	// commit over it is a *sizelimit.Error (flag --max-checkout-size)
	// and leaves no worktree. Optional: default sizelimit.DefaultCheckout.
	// Set it before the first Checkout.
	MaxCheckoutSize int64

	// MaxWorktrees bounds the worktrees kept: after each Checkout that
	// builds one, the least recently used beyond it that no caller holds
	// are removed (Prune). Optional: default DefaultMaxWorktrees. Set it
	// before the first Checkout.
	MaxWorktrees int
	// CloneTTL: a clone no Checkout, Touches, FindCommit or Signed used
	// for this long is removed by Prune; a later use clones again.
	// Optional: default DefaultCloneTTL. Set it before the first Checkout.
	CloneTTL time.Duration
	// OnPruneError, when set, is told a failure of the prune that follows
	// a Checkout, which still succeeds. Set it before the first Checkout.
	OnPruneError func(error)

	now func() time.Time // the clock; nil is time.Now (tests set it)

	mu    sync.Mutex
	locks map[string]chan struct{} // per clone directory; a full channel is a held lock
	refs  map[string]int           // per worktree (commit): Checkouts not yet released

	// pruning serialises Prune: directories it finds renamed for removal
	// or half-built and unreferenced are its own or a crash's leftovers.
	pruning sync.Mutex
}

// NewCache returns a Cache rooted at dir, which is created on first use.
func NewCache(dir string) *Cache {
	return &Cache{dir: dir, locks: map[string]chan struct{}{}, refs: map[string]int{}}
}

// Checkout returns the path of a clean worktree (files only, no .git) of
// ref.Commit from r, building it on first use: the clone of r is fetched
// only when it lacks the commit, and the tree is written to a temporary
// directory that is renamed into place, so a crash never leaves a partial
// tree under <dir>/worktrees/<commit>. ref.Name is not used; an annotated
// tag's hash is peeled to its commit, which names the worktree.
//
// The caller must treat the worktree as read-only and call release when
// it no longer reads it (release is idempotent); until then Prune keeps
// it. A Checkout that built a worktree then prunes the cache to
// MaxWorktrees and CloneTTL before it returns. Checkouts of one URL are
// serialised; ctx bounds waiting for that and the fetch. A commit the
// remote does not have is ErrRefNotFound.
func (c *Cache) Checkout(ctx context.Context, r Remote, ref Ref) (dir string, release func(), err error) {
	if !IsFullHash(ref.Commit) {
		return "", nil, fmt.Errorf("check out %s: %q is not a 40-hex commit hash", api.RedactURL(r.URL), ref.Commit)
	}
	ep, err := r.endpoint()
	if err != nil {
		return "", nil, err
	}
	want := plumbing.NewHash(strings.ToLower(ref.Commit))
	dir, release, built, err := c.checkoutLocked(ctx, ep, want)
	if err != nil {
		return "", nil, err
	}
	if built {
		c.autoPrune()
	}
	return dir, release, nil
}

// checkoutLocked is Checkout with the clone's lock held; built reports
// that the worktree was written, not found.
func (c *Cache) checkoutLocked(ctx context.Context, ep endpoint, want plumbing.Hash) (dir string, release func(), built bool, err error) {
	// No shortcut to a worktree built before: it is returned only once
	// this URL's clone has the commit (fetched with these credentials
	// when it lacks it), so a GitRepo cannot read a commit of a remote it
	// does not name, by hash, from a tree another GitRepo built.
	unlock, err := c.lock(ctx, ep.url)
	if err != nil {
		return "", nil, false, fmt.Errorf("check out %s from %s: %w", want, ep.url, err)
	}
	defer unlock()

	dir, release, built, err = c.checkout(ctx, ep, want)
	var corrupt *corruptError
	if errors.As(err, &corrupt) && ctx.Err() == nil {
		// A clone that cannot be read (a crash mid-fetch can leave a
		// truncated pack index behind, which go-git then trusts) is only
		// a cache: start it over from the remote, once.
		if rmErr := os.RemoveAll(c.clonePath(ep.url)); rmErr != nil {
			return "", nil, false, errors.Join(err, fmt.Errorf("remove broken clone of %s: %w", ep.url, rmErr))
		}
		dir, release, built, err = c.checkout(ctx, ep, want)
	}
	return dir, release, built, err
}

// checkout is Checkout with the clone's lock held. The worktree is
// referenced (acquire) before it is looked up or built, so Prune neither
// removes it nor its temporary directory.
func (c *Cache) checkout(ctx context.Context, ep endpoint, want plumbing.Hash) (dir string, release func(), built bool, err error) {
	repo, err := c.openClone(ep.url)
	if err != nil {
		return "", nil, false, err
	}
	commit, err := c.ensureCommit(ctx, repo, ep, want)
	if err != nil {
		return "", nil, false, err
	}
	release = c.acquire(commit.Hash.String())
	if dir, ok := c.existing(commit.Hash); ok {
		return dir, release, false, nil
	}
	if dir, err = c.build(ctx, repo, commit, ep.url); err != nil {
		release()
		return "", nil, false, err
	}
	c.touch(dir)
	return dir, release, true, nil
}

// corruptError marks a failure to read an object the clone claims to
// have: the clone is damaged, not the remote.
type corruptError struct{ err error }

func (e *corruptError) Error() string { return e.err.Error() }
func (e *corruptError) Unwrap() error { return e.err }

// corrupt wraps err, a failure reading the clone's objects, as a
// corruptError; a missing object stays plumbing.ErrObjectNotFound.
func corrupt(err error) error {
	if err == nil || errors.Is(err, plumbing.ErrObjectNotFound) {
		return err
	}
	return &corruptError{err}
}

// existing returns the worktree of commit if it was built, marking it used.
func (c *Cache) existing(commit plumbing.Hash) (string, bool) {
	dir := filepath.Join(c.dir, worktreesDir, commit.String())
	if _, err := os.Stat(dir); err != nil {
		return "", false
	}
	c.touch(dir)
	return dir, true
}

// lock serialises work on one clone; the returned func marks the clone
// used (for CloneTTL) and releases it.
func (c *Cache) lock(ctx context.Context, url string) (func(), error) {
	dir := c.clonePath(url)
	ch := c.lockOf(dir)
	select {
	case ch <- struct{}{}:
		return func() { c.touch(dir); <-ch }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for another checkout: %w", ctx.Err())
	}
}

// openClone opens the bare clone of url, creating it (atomically, by
// rename) when missing and recreating it when it cannot be opened. An
// existing clone's packs are merged first when there are too many
// (consolidatePacks); a failed merge is reported to OnPruneError and the
// clone is used as it is.
func (c *Cache) openClone(url string) (*git.Repository, error) {
	dir := c.clonePath(url)
	if repo, err := openBare(dir); err == nil {
		if err := removeOrphanIndexes(dir); err != nil {
			return nil, err
		}
		merged, err := consolidatePacks(dir)
		if err != nil && c.OnPruneError != nil {
			c.OnPruneError(err) // the clone works, only slower
		}
		if merged {
			return openBare(dir)
		}
		return repo, nil
	} else if !errors.Is(err, git.ErrRepositoryNotExists) {
		if err := os.RemoveAll(dir); err != nil {
			return nil, fmt.Errorf("remove broken clone of %s: %w", url, err)
		}
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return nil, fmt.Errorf("create clone of %s: %w", url, err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), tmpPrefix)
	if err != nil {
		return nil, fmt.Errorf("create clone of %s: %w", url, err)
	}
	defer func() { _ = os.RemoveAll(tmp) }() // a no-op once renamed
	repo, err := git.PlainInit(tmp, true)
	if err != nil {
		return nil, fmt.Errorf("create clone of %s: %w", url, err)
	}
	if _, err := repo.CreateRemote(&config.RemoteConfig{Name: git.DefaultRemoteName, URLs: []string{url}}); err != nil {
		return nil, fmt.Errorf("create clone of %s: %w", url, err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return nil, fmt.Errorf("create clone of %s: %w", url, err)
	}
	repo, err = openBare(dir)
	if err != nil {
		return nil, fmt.Errorf("open clone of %s: %w", url, err)
	}
	return repo, nil
}

// largeObject is the size from which go-git streams an object from its
// pack instead of reading it whole into memory (and its object cache):
// repository files are untrusted, and writeTree must see a blob's size
// before its content is read. objectCache bounds that cache.
const (
	largeObject = 1 << 20
	objectCache = 16 << 20
)

// openBare opens the bare clone in dir with go-git's streaming of large
// objects, and a smaller object cache than its default of 96 MiB per
// clone.
func openBare(dir string) (*git.Repository, error) {
	return git.Open(bareStorage(dir), nil)
}

// bareStorage is the object storage of the bare clone in dir, as openBare
// opens it.
func bareStorage(dir string) *filesystem.Storage {
	return filesystem.NewStorageWithOptions(osfs.New(dir), cache.NewObjectLRU(objectCache),
		filesystem.Options{LargeObjectThreshold: largeObject})
}

func (c *Cache) clonePath(url string) string {
	sum := sha256.Sum256([]byte(url))
	return filepath.Join(c.dir, reposDir, hex.EncodeToString(sum[:]))
}

// removeOrphanIndexes deletes pack indexes whose pack is missing, and
// temporary pack files: go-git writes pack-X.idx in place before renaming
// the pack to pack-X.pack, so a crash in between leaves an index, maybe
// truncated, that the next fetch of the same pack would keep and trust.
func removeOrphanIndexes(clone string) error {
	packDir := filepath.Join(clone, "objects", "pack")
	entries, err := os.ReadDir(packDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", packDir, err)
	}
	var errs []error
	for _, e := range entries {
		name := e.Name()
		orphan := strings.HasPrefix(name, "tmp_")
		if base, ok := strings.CutSuffix(name, ".idx"); ok {
			_, statErr := os.Stat(filepath.Join(packDir, base+".pack"))
			orphan = errors.Is(statErr, fs.ErrNotExist)
		}
		if orphan {
			errs = append(errs, os.Remove(filepath.Join(packDir, name)))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("clean up interrupted fetch: %w", err)
	}
	return nil
}

// ensureCommit returns the commit want names (peeling annotated tags),
// fetching branches and tags when the clone lacks it and then, as a last
// resort, the hash itself (servers allowing it serve unadvertised commits).
func (c *Cache) ensureCommit(ctx context.Context, repo *git.Repository, ep endpoint, want plumbing.Hash) (*object.Commit, error) {
	if commit, err := peel(repo, want); err == nil || !errors.Is(err, plumbing.ErrObjectNotFound) {
		return commit, err
	}
	err := ep.fetch(ctx, repo, "+refs/heads/*:refs/remotes/origin/*", "+refs/tags/*:refs/tags/*")
	if err != nil {
		return nil, err
	}
	if commit, err := peel(repo, want); err == nil || !errors.Is(err, plumbing.ErrObjectNotFound) {
		return commit, err
	}
	spec := config.RefSpec(want.String() + ":refs/flotilla/" + want.String())
	if err := ep.fetch(ctx, repo, spec); err != nil && (errors.Is(err, ErrAuth) || isRateLimited(err) || ctx.Err() != nil) {
		return nil, err
	} // any other failure: the server does not serve the hash, so it is not found
	if commit, err := peel(repo, want); err == nil || !errors.Is(err, plumbing.ErrObjectNotFound) {
		return commit, err
	}
	return nil, &RefNotFoundError{Kind: "commit", Name: want.String(), URL: ep.url}
}

// fetch fetches specs into repo; being up to date is not an error.
func (ep endpoint) fetch(ctx context.Context, repo *git.Repository, specs ...config.RefSpec) error {
	err := repo.FetchContext(ctx, &git.FetchOptions{
		RemoteName:      git.DefaultRemoteName,
		RefSpecs:        specs,
		Auth:            ep.auth,
		InsecureSkipTLS: ep.insecure,
		CABundle:        ep.caBundle,
		Tags:            git.NoTags, // the specs name the tags wanted
	})
	if err == nil || errors.Is(err, git.NoErrAlreadyUpToDate) {
		return nil
	}
	if errors.Is(err, transport.ErrEmptyRemoteRepository) {
		return nil // nothing to fetch: the commit will not be found
	}
	return ep.classify("fetch", err)
}

// peel returns the commit h names, following annotated tags. A missing
// object is plumbing.ErrObjectNotFound.
func peel(repo *git.Repository, h plumbing.Hash) (*object.Commit, error) {
	for range maxTagDepth {
		obj, err := repo.Storer.EncodedObject(plumbing.AnyObject, h)
		if err != nil {
			return nil, fmt.Errorf("read object %s: %w", h, corrupt(err))
		}
		switch obj.Type() {
		case plumbing.CommitObject:
			commit, err := object.DecodeCommit(repo.Storer, obj)
			if err != nil {
				return nil, fmt.Errorf("read commit %s: %w", h, corrupt(err))
			}
			return commit, nil
		case plumbing.TagObject:
			tag, err := object.DecodeTag(repo.Storer, obj)
			if err != nil {
				return nil, fmt.Errorf("read tag %s: %w", h, corrupt(err))
			}
			h = tag.Target
		default:
			return nil, fmt.Errorf("object %s is a %s, not a commit", h, obj.Type())
		}
	}
	return nil, fmt.Errorf("tag %s: more than %d nested tags", h, maxTagDepth)
}

// build writes commit's tree to a temporary directory and renames it into
// place. When another URL built the same commit meanwhile, that tree wins.
func (c *Cache) build(ctx context.Context, repo *git.Repository, commit *object.Commit, url string) (string, error) {
	parent := filepath.Join(c.dir, worktreesDir)
	dir := filepath.Join(parent, commit.Hash.String())
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return "", fmt.Errorf("check out %s from %s: %w", commit.Hash, url, err)
	}
	tmp, err := os.MkdirTemp(parent, tmpPrefix+commit.Hash.String()+"-")
	if err != nil {
		return "", fmt.Errorf("check out %s from %s: %w", commit.Hash, url, err)
	}
	defer func() { _ = os.RemoveAll(tmp) }() // a no-op once renamed
	limit := sizelimit.Limit{Max: c.MaxCheckoutSize, Flag: sizelimit.CheckoutFlag}
	if limit.Max <= 0 {
		limit.Max = sizelimit.DefaultCheckout
	}
	if err := writeTree(ctx, repo.Storer, commit, tmp, sizelimit.NewBudget(limit)); err != nil {
		return "", fmt.Errorf("check out %s from %s: %w", commit.Hash, url, err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		if existing, ok := c.existing(commit.Hash); ok {
			return existing, nil
		}
		return "", fmt.Errorf("check out %s from %s: %w", commit.Hash, url, err)
	}
	return dir, nil
}
