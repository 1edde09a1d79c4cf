package gitsource

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Defaults of a Cache's bounds (flags --git-cache-worktrees and
// --git-cache-clone-ttl).
const (
	// DefaultMaxWorktrees worktrees are kept besides those in use: the
	// recent commits of many GitRepos, so re-renders (refills, retries)
	// mostly find theirs, while the disk a cache takes stays under 32
	// times --max-checkout-size. A tree pruned too early is rebuilt from
	// its clone without a fetch.
	DefaultMaxWorktrees = 32
	// DefaultCloneTTL: a clone unused for a day belongs to a remote no
	// GitRepo polls any more (polled ones are used at each new commit or
	// at least each rollback, and a later use clones again).
	DefaultCloneTTL = 24 * time.Hour
)

// staleClone: a temporary clone directory (openClone's, renamed into
// place milliseconds after it is made) older than this was left by a
// crash.
const staleClone = time.Hour

// removingPrefix names directories Prune renamed out of place and
// deletes: a crash while deleting leaves no partial tree or clone under
// its real name.
const removingPrefix = ".rm-"

// acquire references the worktree name until the returned func is
// called (once; later calls do nothing), which also marks it used.
func (c *Cache) acquire(name string) func() {
	c.mu.Lock()
	if c.refs == nil {
		c.refs = map[string]int{}
	}
	c.refs[name]++
	c.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.touch(filepath.Join(c.dir, worktreesDir, name))
			if c.refs[name]--; c.refs[name] <= 0 {
				delete(c.refs, name)
			}
		})
	}
}

// lockOf returns the lock of the clone in dir.
func (c *Cache) lockOf(dir string) chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.locks == nil {
		c.locks = map[string]chan struct{}{}
	}
	ch, ok := c.locks[dir]
	if !ok {
		ch = make(chan struct{}, 1)
		c.locks[dir] = ch
	}
	return ch
}

// touch marks dir used now: Prune orders worktrees and times clones out
// by their modification time, which survives restarts. Best effort.
func (c *Cache) touch(dir string) {
	now := c.clock()
	_ = os.Chtimes(dir, now, now)
}

func (c *Cache) clock() time.Time {
	if c.now != nil {
		return c.now()
	}
	return time.Now()
}

// Prune removes the worktrees no Checkout holds (not yet released) beyond
// the keep most recently used, held ones counting towards keep; the
// half-built worktrees and clones a crash left behind; and the clones
// unused for CloneTTL that no operation is using. It never waits for a
// fetch.
func (c *Cache) Prune(keep int) error {
	c.pruning.Lock()
	defer c.pruning.Unlock()
	return errors.Join(c.pruneWorktrees(max(keep, 0)), c.pruneClones())
}

// PruneEvery prunes the cache as a Checkout that built a worktree does,
// every interval until ctx is done, reporting failures to OnPruneError:
// without it a controller whose GitRepos stop changing (or are deleted)
// would keep their clones until some other commit is checked out. A
// non-positive interval is min(CloneTTL/2, 1 h).
func (c *Cache) PruneEvery(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		ttl := c.CloneTTL
		if ttl <= 0 {
			ttl = DefaultCloneTTL
		}
		interval = min(ttl/2, time.Hour)
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.autoPrune()
		}
	}
}

// autoPrune is the prune after a Checkout built a worktree.
func (c *Cache) autoPrune() {
	keep := c.MaxWorktrees
	if keep <= 0 {
		keep = DefaultMaxWorktrees
	}
	if err := c.Prune(keep); err != nil && c.OnPruneError != nil {
		c.OnPruneError(err)
	}
}

// pruneWorktrees is Prune's part for worktrees. Under mu, so that no
// Checkout references a tree between the check and the rename, it
// renames the trees to remove; it deletes them after.
func (c *Cache) pruneWorktrees(keep int) error {
	parent := filepath.Join(c.dir, worktreesDir)
	entries, errs, err := listPruning(parent)
	if err != nil {
		return fmt.Errorf("prune worktrees: %w", err)
	}
	type tree struct {
		name string
		used time.Time
	}
	var trees []tree
	var halfBuilt []string
	for _, e := range entries {
		switch name := e.Name(); {
		case strings.HasPrefix(name, tmpPrefix):
			halfBuilt = append(halfBuilt, name)
		default:
			info, err := e.Info()
			if err != nil {
				errs = append(errs, err)
				continue
			}
			trees = append(trees, tree{name, info.ModTime()})
		}
	}
	slices.SortFunc(trees, func(a, b tree) int { return b.used.Compare(a.used) })
	var doomed []string
	c.mu.Lock()
	for _, name := range halfBuilt {
		// .tmp-<commit>-<random>: built while its commit is referenced.
		commit, _, _ := strings.Cut(strings.TrimPrefix(name, tmpPrefix), "-")
		if c.refs[commit] == 0 {
			doomed = append(doomed, name)
		}
	}
	kept := 0
	for _, t := range trees {
		if c.refs[t.name] > 0 || kept < keep {
			kept++
			continue
		}
		if err := os.Rename(filepath.Join(parent, t.name), filepath.Join(parent, removingPrefix+t.name)); err != nil {
			errs = append(errs, err)
			continue
		}
		doomed = append(doomed, removingPrefix+t.name)
	}
	c.mu.Unlock()
	for _, name := range doomed {
		errs = append(errs, os.RemoveAll(filepath.Join(parent, name)))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("prune worktrees: %w", err)
	}
	return nil
}

// listPruning lists parent for Prune (nothing when it does not exist
// yet): it deletes the directories a Prune renamed but did not finish
// deleting, returning the failures in errs, and returns the other entries.
func listPruning(parent string) (rest []fs.DirEntry, errs []error, err error) {
	entries, err := os.ReadDir(parent)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), removingPrefix) {
			errs = append(errs, os.RemoveAll(filepath.Join(parent, e.Name())))
		} else {
			rest = append(rest, e)
		}
	}
	return rest, errs, nil
}

// pruneClones is Prune's part for clones: it removes each clone unused
// for CloneTTL whose lock it gets without waiting (a clone in use is
// kept).
func (c *Cache) pruneClones() error {
	parent := filepath.Join(c.dir, reposDir)
	entries, errs, err := listPruning(parent)
	if err != nil {
		return fmt.Errorf("prune clones: %w", err)
	}
	ttl := c.CloneTTL
	if ttl <= 0 {
		ttl = DefaultCloneTTL
	}
	now := c.clock()
	cutoff := now.Add(-ttl)
	for _, e := range entries {
		if name := e.Name(); !strings.HasPrefix(name, tmpPrefix) {
			errs = append(errs, c.pruneClone(parent, name, cutoff))
		} else if info, err := e.Info(); err == nil && info.ModTime().Before(now.Add(-staleClone)) {
			errs = append(errs, os.RemoveAll(filepath.Join(parent, name)))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("prune clones: %w", err)
	}
	return nil
}

// pruneClone removes the clone parent/name if it was last used before
// cutoff and is not in use.
func (c *Cache) pruneClone(parent, name string, cutoff time.Time) error {
	dir := filepath.Join(parent, name)
	ch := c.lockOf(dir)
	select {
	case ch <- struct{}{}:
		defer func() { <-ch }()
	default:
		return nil // in use, so not idle
	}
	info, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !info.ModTime().Before(cutoff) {
		return nil
	}
	gone := filepath.Join(parent, removingPrefix+name)
	if err := os.Rename(dir, gone); err != nil {
		return err
	}
	return os.RemoveAll(gone)
}
