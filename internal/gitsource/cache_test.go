package gitsource

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/memory"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/sizelimit"
	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

// readTree returns every regular file below dir (slash path → content).
func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		files[filepath.ToSlash(rel)] = string(b)
		return err
	}))
	return files
}

func resolve(t *testing.T, r Remote, branch, revision string) Ref {
	t.Helper()
	ref, err := Resolve(t.Context(), r, branch, revision)
	require.NoError(t, err)
	return ref
}

func TestCache_Checkout(t *testing.T) {
	srv := testenv.NewGitServer(t, testenv.GitServerOptions{})
	v1 := map[string]string{"app/fleet.yaml": "namespace: app\n", "app/cm.yaml": "kind: ConfigMap\n"}
	repo := srv.CreateRepo(t, "app", v1)
	remote := Remote{URL: repo.URL()}
	cache := NewCache(t.TempDir())

	first := resolve(t, remote, "", "")
	dir, _, err := cache.Checkout(t.Context(), remote, first)
	require.NoError(t, err)
	assert.Equal(t, first.Commit, filepath.Base(dir))
	assert.Equal(t, v1, readTree(t, dir))
	assert.NoDirExists(t, filepath.Join(dir, ".git"))

	// A second checkout reuses the tree: a marker written into it survives.
	marker := filepath.Join(dir, "marker")
	require.NoError(t, os.WriteFile(marker, nil, 0o600))
	again, _, err := cache.Checkout(t.Context(), remote, first)
	require.NoError(t, err)
	assert.Equal(t, dir, again)
	assert.FileExists(t, marker)

	// A new commit is fetched; the old tree stays.
	second := repo.Delete(t, "drop cm", "app/cm.yaml")
	repo.Commit(t, map[string]string{"app/new.yaml": "new\n"}, "add new")
	ref := resolve(t, remote, "master", "")
	dir2, _, err := cache.Checkout(t.Context(), remote, ref)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"app/fleet.yaml": "namespace: app\n", "app/new.yaml": "new\n"}, readTree(t, dir2))
	assert.FileExists(t, marker)

	// An older commit fetched along the way needs no fetch of its own.
	dir3, _, err := cache.Checkout(t.Context(), remote, Ref{Name: second, Commit: second})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"app/fleet.yaml": "namespace: app\n"}, readTree(t, dir3))

	entries, err := os.ReadDir(filepath.Join(cache.dir, reposDir))
	require.NoError(t, err)
	assert.Len(t, entries, 1, "one clone per URL")
}

// TestCache_CheckoutSize checks that a commit over MaxCheckoutSize is
// refused with a *sizelimit.Error and leaves no worktree, and that
// raising the limit checks it out.
func TestCache_CheckoutSize(t *testing.T) {
	repo := testenv.NewGitServer(t, testenv.GitServerOptions{}).CreateRepo(t, "app", map[string]string{
		"app/cm.yaml": "kind: ConfigMap\n", "big.bin": strings.Repeat("x", 64<<10)})
	remote := Remote{URL: repo.URL()}
	cache := NewCache(t.TempDir())
	cache.MaxCheckoutSize = 32 << 10
	ref := resolve(t, remote, "", "")
	_, _, err := cache.Checkout(t.Context(), remote, ref)
	var se *sizelimit.Error
	require.ErrorAs(t, err, &se)
	assert.ErrorContains(t, err, "the commit's files together, up to big.bin: over the limit of 32Ki (raise it with flotilla-worker --max-checkout-size)")
	entries, err := os.ReadDir(filepath.Join(cache.dir, worktreesDir))
	require.NoError(t, err)
	assert.Empty(t, entries, "no worktree, not even a partial one")

	cache.MaxCheckoutSize = 1 << 20
	dir, _, err := cache.Checkout(t.Context(), remote, ref)
	require.NoError(t, err)
	assert.FileExists(t, filepath.Join(dir, "big.bin"))
}

func TestCache_CheckoutMissingCommit(t *testing.T) {
	srv := testenv.NewGitServer(t, testenv.GitServerOptions{Username: "alice", Password: secret})
	repo := srv.CreateRepo(t, "app", map[string]string{"a": "a\n"})
	cache := NewCache(t.TempDir())
	remote := Remote{URL: repo.URL(), Auth: &Auth{Username: "alice", Password: secret}}

	missing := hashOf('e')
	_, _, err := cache.Checkout(t.Context(), remote, Ref{Name: missing, Commit: missing})
	require.ErrorIs(t, err, ErrRefNotFound)
	assert.EqualError(t, err, `commit "`+missing+`" not found in `+repo.URL())

	withUserinfo := Remote{URL: strings.Replace(repo.URL(), "://", "://alice:"+secret+"@", 1)}
	_, _, err = cache.Checkout(t.Context(), withUserinfo, Ref{Name: missing, Commit: missing})
	require.ErrorIs(t, err, ErrRefNotFound)
	assert.NotContains(t, err.Error(), secret)

	_, _, err = cache.Checkout(t.Context(), remote, Ref{Name: "main", Commit: "main"})
	require.ErrorContains(t, err, "not a 40-hex commit hash")
}

func TestCache_Auth(t *testing.T) {
	srv := testenv.NewGitServer(t, testenv.GitServerOptions{Username: "alice", Password: secret})
	repo := srv.CreateRepo(t, "private", map[string]string{"a": "a\n"})
	good := Remote{URL: repo.URL(), Auth: &Auth{Username: "alice", Password: secret}}
	bad := Remote{URL: repo.URL(), Auth: &Auth{Username: "alice", Password: "wrong-" + secret}}
	cache := NewCache(t.TempDir())
	ref := resolve(t, good, "", "")

	_, _, err := cache.Checkout(t.Context(), bad, ref)
	require.ErrorIs(t, err, ErrAuth)
	assert.NotContains(t, err.Error(), secret)

	dir, release, err := cache.Checkout(t.Context(), good, ref)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"a": "a\n"}, readTree(t, dir))
	release()

	// Once the clone has the commit, rebuilding its tree needs no server:
	// bad credentials would fail any request.
	require.NoError(t, cache.Prune(0))
	require.NoDirExists(t, dir)
	dir, _, err = cache.Checkout(t.Context(), bad, ref)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"a": "a\n"}, readTree(t, dir))

	// Credentials are not stored in the clone.
	clones, err := filepath.Glob(filepath.Join(cache.dir, reposDir, "*", "config"))
	require.NoError(t, err)
	require.Len(t, clones, 1)
	cfg, err := os.ReadFile(clones[0])
	require.NoError(t, err)
	assert.NotContains(t, string(cfg), secret)
}

func TestCache_AnnotatedTag(t *testing.T) {
	srv := testenv.NewGitServer(t, testenv.GitServerOptions{})
	repo := srv.CreateRepo(t, "app", map[string]string{"a": "tagged\n"})
	tagged := repo.Head(t)
	pushAnnotatedTag(t, repo.URL(), "v2")
	repo.Commit(t, map[string]string{"a": "later\n"}, "later")
	remote := Remote{URL: repo.URL()}

	// go-git's server advertises no peeled tags, so Resolve returns the tag
	// object; Checkout peels it (TestSelectRef covers peeled entries).
	ref := resolve(t, remote, "", "v2")
	assert.Equal(t, "refs/tags/v2", ref.Name)
	dir, _, err := NewCache(t.TempDir()).Checkout(t.Context(), remote, ref)
	require.NoError(t, err)
	assert.Equal(t, tagged, filepath.Base(dir))
	assert.Equal(t, map[string]string{"a": "tagged\n"}, readTree(t, dir))
}

func pushAnnotatedTag(t *testing.T, url, name string) {
	t.Helper()
	clone, err := git.CloneContext(t.Context(), memory.NewStorage(), nil, &git.CloneOptions{URL: url})
	require.NoError(t, err)
	head, err := clone.Head()
	require.NoError(t, err)
	sig := &object.Signature{Name: "t", Email: "t@example.com", When: time.Unix(1700000000, 0)}
	_, err = clone.CreateTag(name, head.Hash(), &git.CreateTagOptions{Tagger: sig, Message: "release " + name})
	require.NoError(t, err)
	spec := config.RefSpec("refs/tags/" + name + ":refs/tags/" + name)
	require.NoError(t, clone.PushContext(t.Context(), &git.PushOptions{RefSpecs: []config.RefSpec{spec}}))
}

func TestCache_ConcurrentCheckouts(t *testing.T) {
	srv := testenv.NewGitServer(t, testenv.GitServerOptions{})
	repo := srv.CreateRepo(t, "app", map[string]string{"a": "1\n"})
	c1 := repo.Head(t)
	c2 := repo.Commit(t, map[string]string{"a": "2\n"}, "2")
	remote := Remote{URL: repo.URL()}
	cache := NewCache(t.TempDir())

	var wg sync.WaitGroup
	dirs := make([]string, 8)
	errs := make([]error, 8)
	for i := range dirs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := []string{c1, c2}[i%2]
			dirs[i], _, errs[i] = cache.Checkout(t.Context(), remote, Ref{Name: c, Commit: c})
		}()
	}
	wg.Wait()
	for i := range dirs {
		require.NoError(t, errs[i])
		want := []string{"1\n", "2\n"}[i%2]
		assert.Equal(t, map[string]string{"a": want}, readTree(t, dirs[i]))
	}
	entries, err := os.ReadDir(filepath.Join(cache.dir, worktreesDir))
	require.NoError(t, err)
	assert.Len(t, entries, 2, "no temporary directories left")
}

func TestCache_Prune(t *testing.T) {
	srv := testenv.NewGitServer(t, testenv.GitServerOptions{})
	repo := srv.CreateRepo(t, "app", map[string]string{"a": "0\n"})
	remote := Remote{URL: repo.URL()}
	cache := NewCache(t.TempDir())
	require.NoError(t, cache.Prune(1), "nothing to prune yet")

	var dirs []string
	for i := range 3 {
		c := repo.Commit(t, map[string]string{"a": string(rune('1'+i)) + "\n"}, "c")
		dir, release, err := cache.Checkout(t.Context(), remote, Ref{Name: c, Commit: c})
		require.NoError(t, err)
		release()
		old := time.Now().Add(time.Duration(i-10) * time.Minute)
		require.NoError(t, os.Chtimes(dir, old, old))
		dirs = append(dirs, dir)
	}
	// Using the oldest makes it the most recent.
	_, release, err := cache.Checkout(t.Context(), remote, Ref{Name: filepath.Base(dirs[0]), Commit: filepath.Base(dirs[0])})
	require.NoError(t, err)
	release()
	crashed := filepath.Join(cache.dir, worktreesDir, tmpPrefix+"half-built")
	require.NoError(t, os.MkdirAll(crashed, 0o700))

	require.NoError(t, cache.Prune(2))
	assert.DirExists(t, dirs[0])
	assert.NoDirExists(t, dirs[1])
	assert.DirExists(t, dirs[2])
	assert.NoDirExists(t, crashed)
}

func TestEmptyRemote(t *testing.T) {
	srv := testenv.NewGitServer(t, testenv.GitServerOptions{})
	repo := srv.CreateRepo(t, "empty", map[string]string{"a": "a\n"})
	head := repo.Head(t)
	bare, err := git.PlainOpen(repo.Dir()) // no request in flight
	require.NoError(t, err)
	require.NoError(t, bare.Storer.RemoveReference("refs/heads/master"))
	remote := Remote{URL: repo.URL()}

	_, err = Resolve(t.Context(), remote, "", "")
	require.ErrorIs(t, err, ErrRefNotFound)
	assert.EqualError(t, err, `branch "master" not found in `+repo.URL())

	_, _, err = NewCache(t.TempDir()).Checkout(t.Context(), remote, Ref{Name: head, Commit: head})
	require.ErrorIs(t, err, ErrRefNotFound)
}

// packFiles returns the clone's pack-*.idx and pack-*.pack paths.
func packFiles(t *testing.T, clone string) (idx, pack []string) {
	t.Helper()
	idx, err := filepath.Glob(filepath.Join(clone, "objects", "pack", "pack-*.idx"))
	require.NoError(t, err)
	pack, err = filepath.Glob(filepath.Join(clone, "objects", "pack", "pack-*.pack"))
	require.NoError(t, err)
	return idx, pack
}

// checkedOut serves files as a repository, checks out its HEAD into a new
// cache and returns the cache, the remote, the ref and the worktree.
func checkedOut(t *testing.T, files map[string]string) (*Cache, Remote, Ref, string) {
	t.Helper()
	repo := testenv.NewGitServer(t, testenv.GitServerOptions{}).CreateRepo(t, "app", files)
	remote := Remote{URL: repo.URL()}
	cache := NewCache(t.TempDir())
	ref := resolve(t, remote, "", "")
	dir, _, err := cache.Checkout(t.Context(), remote, ref)
	require.NoError(t, err)
	return cache, remote, ref, dir
}

// truncateHalf cuts path to half its size, as a crash mid-write does.
func truncateHalf(t *testing.T, path string) {
	t.Helper()
	info, err := os.Stat(path)
	require.NoError(t, err)
	require.NoError(t, os.Truncate(path, info.Size()/2))
}

// The controller was killed while go-git wrote a fetched pack's index
// (written in place, before the pack is renamed into place). After the
// restart the same fetch produced the same pack, go-git kept the truncated
// index because it existed, and every checkout failed with "read object
// …: EOF" until the state directory was wiped.
func TestCache_InterruptedFetch(t *testing.T) {
	files := map[string]string{"app/fleet.yaml": "namespace: app\n"}
	cache, remote, ref, dir := checkedOut(t, files)

	// Put the clone back to the moment of the crash: no refs, no pack, a
	// half-written index, a temporary pack file.
	clone := cache.clonePath(remote.URL)
	idx, pack := packFiles(t, clone)
	require.Len(t, idx, 1)
	require.Len(t, pack, 1)
	require.NoError(t, os.Rename(pack[0], filepath.Join(clone, "objects", "pack", "tmp_pack_123")))
	truncateHalf(t, idx[0])
	require.NoError(t, os.RemoveAll(filepath.Join(clone, "refs", "remotes")))
	require.NoError(t, os.RemoveAll(filepath.Join(clone, "packed-refs")))
	require.NoError(t, os.RemoveAll(dir))

	// The fetch after the restart reads the pack through the index it
	// built in memory; the next process, or checkout, reads the file.
	for range 2 {
		dir, _, err := cache.Checkout(t.Context(), remote, ref)
		require.NoError(t, err)
		assert.Equal(t, files, readTree(t, dir))
		require.NoError(t, os.RemoveAll(dir))
	}
	_, err := os.Stat(filepath.Join(clone, "objects", "pack", "tmp_pack_123"))
	assert.ErrorIs(t, err, fs.ErrNotExist, "temporary pack removed")
}

// Other damage that makes the clone unreadable (here a truncated index of
// a complete pack) is repaired by cloning again: the clone is a cache, the
// remote has the objects.
func TestCache_CorruptClone(t *testing.T) {
	files := map[string]string{"app/fleet.yaml": "namespace: app\n", "app/cm.yaml": "kind: ConfigMap\n"}
	cache, remote, ref, dir := checkedOut(t, files)

	idx, _ := packFiles(t, cache.clonePath(remote.URL))
	require.Len(t, idx, 1)
	truncateHalf(t, idx[0])
	require.NoError(t, os.RemoveAll(dir))

	dir, _, err := cache.Checkout(t.Context(), remote, ref)
	require.NoError(t, err)
	assert.Equal(t, files, readTree(t, dir))
}

// TestCache_WorktreeIsScopedToItsRemote: a worktree built from one
// remote's commit is not handed to a Checkout naming another remote that
// lacks the commit (a GitRepo naming its own public repository and the
// hash of another GitRepo's private commit reads nothing).
func TestCache_WorktreeIsScopedToItsRemote(t *testing.T) {
	srv := testenv.NewGitServer(t, testenv.GitServerOptions{Username: "alice", Password: secret})
	private := srv.CreateRepo(t, "private", map[string]string{"secret.yaml": "token: abc\n"})
	public := srv.CreateRepo(t, "public", map[string]string{"a": "a\n"})
	auth := &Auth{Username: "alice", Password: secret}
	cache := NewCache(t.TempDir())
	ref := resolve(t, Remote{URL: private.URL(), Auth: auth}, "", "")
	_, _, err := cache.Checkout(t.Context(), Remote{URL: private.URL(), Auth: auth}, ref)
	require.NoError(t, err)

	_, _, err = cache.Checkout(t.Context(), Remote{URL: public.URL(), Auth: auth}, ref)
	require.ErrorIs(t, err, ErrRefNotFound, "the public remote does not have the private commit")
}
