package testenv

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-git/go-billy/v5/memfs"
	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-billy/v5/util"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/go-git/go-git/v5/storage/memory"
)

// GitServerOptions configures NewGitServer.
type GitServerOptions struct {
	// Username and Password turn on HTTP basic authentication when either is
	// non-empty: every request without exactly these credentials gets 401
	// with "WWW-Authenticate: Basic". Optional: default no authentication.
	Username string
	// Password is the basic-auth password; see Username.
	Password string
	// Authorize, when set, decides instead of Username and Password
	// whether a request is authenticated (a test checking minted tokens).
	Authorize func(req *http.Request) bool
	// Middleware wraps the server's handler: a test counts requests, or
	// answers some itself (429, delays). Optional.
	Middleware func(http.Handler) http.Handler
	// TLS serves https with a certificate for 127.0.0.1 signed by a test
	// CA (CAPEM).
	TLS bool
	// AllowReachableSHA1InWant advertises allow-reachable-sha1-in-want,
	// as GitHub and GitLab do, so clients fetch a commit by hash: a pull
	// request's head, reachable only from refs/pull/N/head. Optional:
	// default off, as go-git's server.
	AllowReachableSHA1InWant bool
}

// GitServer is an in-process Git server that speaks the smart HTTP protocol
// (version 0) on 127.0.0.1, in pure Go on top of go-git's server transport.
// It serves git-upload-pack (clone, fetch, ls-remote) and git-receive-pack
// (push) for bare repositories created with CreateRepo, and decodes gzip
// request bodies. The dumb HTTP protocol is not served.
//
// go-git clients and the git CLI can ls-remote, clone, fetch and push.
// Limitations, all from go-git's server side: only protocol version 0 (a
// git CLI asking for version 2 falls back); no multi_ack, so every
// negotiation round of a fetch is answered with NAK and an incremental
// fetch may receive objects the client already has (correct, not minimal);
// no side-band, so no progress messages; no shallow clones (--depth); no
// atomic pushes; pushes must not be thin, which the server asks of the git
// CLI with "no-thin".
//
// Requests are recorded and written to the test log only if the test fails.
type GitServer struct {
	opts GitServerOptions
	dir  string
	http *httptest.Server

	mu    sync.Mutex
	repos map[string]*GitRepo

	log gitRequestLog
}

// GitRepo is a bare repository served by a GitServer. Its helpers write
// commits directly into the repository, without a worktree, and are safe to
// call while the server is serving: every read and write of the repository,
// whether by a helper or by a request, holds the repository's lock.
type GitRepo struct {
	server *GitServer
	name   string
	dir    string
	mu     sync.Mutex
}

// NewGitServer starts a GitServer on a free port of 127.0.0.1. The server is
// closed and its repositories removed when t finishes.
func NewGitServer(t testing.TB, opts GitServerOptions) *GitServer {
	t.Helper()
	s := &GitServer{opts: opts, dir: t.TempDir(), repos: map[string]*GitRepo{}}
	var h http.Handler = http.HandlerFunc(s.serveHTTP)
	if opts.Middleware != nil {
		h = opts.Middleware(h)
	}
	if opts.TLS {
		s.http = httptest.NewTLSServer(h)
	} else {
		s.http = httptest.NewServer(h)
	}
	t.Cleanup(func() {
		s.http.Close()
		if t.Failed() {
			s.log.dump(t)
		}
	})
	return s
}

// URL returns the server's base URL, http://127.0.0.1:PORT (https with
// TLS), without a trailing slash.
func (s *GitServer) URL() string { return s.http.URL }

// CAPEM returns the PEM certificate a client must trust to reach a TLS
// server (nil without TLS).
func (s *GitServer) CAPEM() []byte {
	if s.http.Certificate() == nil {
		return nil
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.http.Certificate().Raw})
}

// Auth returns the credentials a go-git client needs for this server, or nil
// when the server does not require authentication.
func (s *GitServer) Auth() transport.AuthMethod {
	if !s.authEnabled() {
		return nil
	}
	return &githttp.BasicAuth{Username: s.opts.Username, Password: s.opts.Password}
}

// CreateRepo creates a bare repository called name, served at
// URL()/<name>.git, with HEAD pointing at refs/heads/master and one initial
// commit on master holding files (path → content; "a/b.yaml" creates
// directory a). name may contain slashes ("org/app") and a ".git" suffix,
// which is dropped. CreateRepo fails the test if the name is invalid or
// already taken.
func (s *GitServer) CreateRepo(t testing.TB, name string, files map[string]string) *GitRepo {
	t.Helper()
	name = strings.TrimSuffix(name, ".git")
	if err := validateRepoName(name); err != nil {
		t.Fatalf("testenv: create git repo: %v", err)
	}
	r := &GitRepo{server: s, name: name, dir: filepath.Join(s.dir, filepath.FromSlash(name)+".git")}

	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.repos[name]; ok {
		t.Fatalf("testenv: create git repo: %q already exists", name)
	}
	_, err := git.PlainInitWithOptions(r.dir, &git.PlainInitOptions{
		Bare:        true,
		InitOptions: git.InitOptions{DefaultBranch: plumbing.Master},
	})
	if err != nil {
		t.Fatalf("testenv: create git repo %q: %v", name, err)
	}
	if _, err := r.commit(plumbing.Master, files, nil, "initial commit"); err != nil {
		t.Fatalf("testenv: create git repo %q: %v", name, err)
	}
	s.repos[name] = r
	return r
}

// URL returns the repository's clone URL, http://127.0.0.1:PORT/<name>.git.
// The server also accepts the URL without ".git".
func (r *GitRepo) URL() string { return r.server.URL() + "/" + r.name + ".git" }

// Dir returns the path of the bare repository on disk. Callers must not
// write to it while the server is in use.
func (r *GitRepo) Dir() string { return r.dir }

// Head returns the hash of the commit HEAD resolves to (master unless a push
// changed it).
func (r *GitRepo) Head(t testing.TB) string {
	t.Helper()
	h, err := r.resolve(plumbing.HEAD)
	if err != nil {
		t.Fatalf("testenv: head of %s: %v", r.name, err)
	}
	return h.String()
}

// Commit writes files (path → content, overwriting existing ones) on the
// branch HEAD points to and returns the new commit's hash.
func (r *GitRepo) Commit(t testing.TB, files map[string]string, message string) string {
	t.Helper()
	return r.mustCommit(t, "", files, nil, message)
}

// CommitTo is Commit on branch (a short name such as "release"); the branch
// must exist, see Branch.
func (r *GitRepo) CommitTo(t testing.TB, branch string, files map[string]string, message string) string {
	t.Helper()
	return r.mustCommit(t, plumbing.NewBranchReferenceName(branch), files, nil, message)
}

// Delete removes paths (files, or directories with everything below them)
// on the branch HEAD points to and returns the new commit's hash. It fails
// the test if a path does not exist.
func (r *GitRepo) Delete(t testing.TB, message string, paths ...string) string {
	t.Helper()
	return r.mustCommit(t, "", nil, paths, message)
}

// Branch creates branch name (a short name) at the commit HEAD resolves to.
// It fails the test if the branch exists.
func (r *GitRepo) Branch(t testing.TB, name string) {
	t.Helper()
	if err := r.createRef(plumbing.NewBranchReferenceName(name)); err != nil {
		t.Fatalf("testenv: create branch %s in %s: %v", name, r.name, err)
	}
}

// Tag creates the lightweight tag name at the commit HEAD resolves to. It
// fails the test if the tag exists.
func (r *GitRepo) Tag(t testing.TB, name string) {
	t.Helper()
	if err := r.createRef(plumbing.NewTagReferenceName(name)); err != nil {
		t.Fatalf("testenv: create tag %s in %s: %v", name, r.name, err)
	}
}

// Push changes the repository the way a user would: it clones URL() over
// HTTP with go-git (using the server's credentials), commits files on the
// default branch of the clone and pushes back over HTTP. It returns the
// pushed commit's hash.
func (r *GitRepo) Push(t testing.TB, files map[string]string, message string) string {
	t.Helper()
	h, err := r.push(t.Context(), files, message)
	if err != nil {
		t.Fatalf("testenv: push to %s: %v", r.URL(), err)
	}
	return h.String()
}

func (r *GitRepo) push(ctx context.Context, files map[string]string, message string) (plumbing.Hash, error) {
	auth := r.server.Auth()
	fs := memfs.New()
	clone, err := git.CloneContext(ctx, memory.NewStorage(), fs, &git.CloneOptions{URL: r.URL(), Auth: auth})
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("clone: %w", err)
	}
	wt, err := clone.Worktree()
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("open worktree: %w", err)
	}
	for p, content := range files {
		clean, err := cleanGitPath(p)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		if err := util.WriteFile(fs, clean, []byte(content), 0o644); err != nil {
			return plumbing.ZeroHash, fmt.Errorf("write %s: %w", p, err)
		}
		if _, err := wt.Add(clean); err != nil {
			return plumbing.ZeroHash, fmt.Errorf("add %s: %w", p, err)
		}
	}
	sig := gitSignature()
	h, err := wt.Commit(message, &git.CommitOptions{Author: &sig, Committer: &sig})
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("commit: %w", err)
	}
	if err := clone.PushContext(ctx, &git.PushOptions{Auth: auth}); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("push %s: %w", h, err)
	}
	return h, nil
}

func (r *GitRepo) mustCommit(t testing.TB, branch plumbing.ReferenceName, writes map[string]string, deletes []string, message string) string {
	t.Helper()
	h, err := r.commit(branch, writes, deletes, message)
	if err != nil {
		t.Fatalf("testenv: commit to %s: %v", r.name, err)
	}
	return h.String()
}

// open returns a fresh storage for the repository. Every operation opens its
// own, so no object index cached by one survives a pack written by another.
func (r *GitRepo) open() *filesystem.Storage {
	return filesystem.NewStorage(osfs.New(r.dir), cache.NewObjectLRUDefault())
}

func (r *GitRepo) resolve(name plumbing.ReferenceName) (plumbing.Hash, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ref, err := storer.ResolveReference(r.open(), name)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("resolve %s: %w", name, err)
	}
	return ref.Hash(), nil
}

func (r *GitRepo) createRef(name plumbing.ReferenceName) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	sto := r.open()
	if _, err := sto.Reference(name); err == nil {
		return fmt.Errorf("%s already exists", name)
	}
	head, err := storer.ResolveReference(sto, plumbing.HEAD)
	if err != nil {
		return fmt.Errorf("resolve HEAD: %w", err)
	}
	if err := sto.SetReference(plumbing.NewHashReference(name, head.Hash())); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}

// commit records one commit on branch (the branch HEAD points to when
// empty) whose tree is the branch's tree with deletes removed and writes
// applied. A branch that does not exist yet gets a root commit only when it
// is the branch HEAD points to, as in a new repository.
func (r *GitRepo) commit(branch plumbing.ReferenceName, writes map[string]string, deletes []string, message string) (plumbing.Hash, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sto := r.open()
	head, err := sto.Reference(plumbing.HEAD)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("read HEAD: %w", err)
	}
	if branch == "" {
		branch = head.Target()
	}
	files := map[string]object.TreeEntry{}
	var parents []plumbing.Hash
	tip, err := sto.Reference(branch)
	switch {
	case errors.Is(err, plumbing.ErrReferenceNotFound) && branch == head.Target():
	case err != nil:
		return plumbing.ZeroHash, fmt.Errorf("read %s: %w", branch, err)
	default:
		parents = []plumbing.Hash{tip.Hash()}
		if err := readGitTree(sto, tip.Hash(), files); err != nil {
			return plumbing.ZeroHash, err
		}
	}
	if err := applyGitChanges(sto, files, writes, deletes); err != nil {
		return plumbing.ZeroHash, err
	}
	treeHash, err := writeGitTree(sto, files)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	sig := gitSignature()
	c := &object.Commit{Author: sig, Committer: sig, Message: message, TreeHash: treeHash, ParentHashes: parents}
	h, err := storeGitObject(sto, c)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("store commit: %w", err)
	}
	if err := sto.SetReference(plumbing.NewHashReference(branch, h)); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("update %s: %w", branch, err)
	}
	return h, nil
}

// readGitTree flattens the tree of commit into files, keyed by slash path.
func readGitTree(sto storer.EncodedObjectStorer, commit plumbing.Hash, files map[string]object.TreeEntry) error {
	c, err := object.GetCommit(sto, commit)
	if err != nil {
		return fmt.Errorf("read commit %s: %w", commit, err)
	}
	tree, err := c.Tree()
	if err != nil {
		return fmt.Errorf("read tree of %s: %w", commit, err)
	}
	w := object.NewTreeWalker(tree, true, nil)
	defer w.Close()
	for {
		name, entry, err := w.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("walk tree of %s: %w", commit, err)
		}
		if entry.Mode != filemode.Dir {
			files[name] = entry
		}
	}
}

func applyGitChanges(sto storer.EncodedObjectStorer, files map[string]object.TreeEntry, writes map[string]string, deletes []string) error {
	for _, p := range deletes {
		clean, err := cleanGitPath(p)
		if err != nil {
			return err
		}
		removed := false
		for name := range files {
			if name == clean || strings.HasPrefix(name, clean+"/") {
				delete(files, name)
				removed = true
			}
		}
		if !removed {
			return fmt.Errorf("delete %s: path not found", p)
		}
	}
	for p, content := range writes {
		clean, err := cleanGitPath(p)
		if err != nil {
			return err
		}
		obj := sto.NewEncodedObject()
		obj.SetType(plumbing.BlobObject)
		if err := writeGitObject(obj, []byte(content)); err != nil {
			return fmt.Errorf("write %s: %w", p, err)
		}
		h, err := sto.SetEncodedObject(obj)
		if err != nil {
			return fmt.Errorf("store %s: %w", p, err)
		}
		files[clean] = object.TreeEntry{Mode: filemode.Regular, Hash: h}
	}
	return nil
}

// gitTreeNode is one directory while a flat file list is turned into trees.
type gitTreeNode struct {
	files map[string]object.TreeEntry
	dirs  map[string]*gitTreeNode
}

func newGitTreeNode() *gitTreeNode {
	return &gitTreeNode{files: map[string]object.TreeEntry{}, dirs: map[string]*gitTreeNode{}}
}

// writeGitTree stores the nested trees for files and returns the root's hash.
func writeGitTree(sto storer.EncodedObjectStorer, files map[string]object.TreeEntry) (plumbing.Hash, error) {
	root := newGitTreeNode()
	for p, entry := range files {
		node := root
		parts := strings.Split(p, "/")
		for _, dir := range parts[:len(parts)-1] {
			if _, ok := node.files[dir]; ok {
				return plumbing.ZeroHash, fmt.Errorf("path %s: %s is a file", p, dir)
			}
			if node.dirs[dir] == nil {
				node.dirs[dir] = newGitTreeNode()
			}
			node = node.dirs[dir]
		}
		base := parts[len(parts)-1]
		if _, ok := node.dirs[base]; ok {
			return plumbing.ZeroHash, fmt.Errorf("path %s is a directory", p)
		}
		node.files[base] = entry
	}
	return root.store(sto)
}

func (n *gitTreeNode) store(sto storer.EncodedObjectStorer) (plumbing.Hash, error) {
	tree := &object.Tree{}
	for name, entry := range n.files {
		tree.Entries = append(tree.Entries, object.TreeEntry{Name: name, Mode: entry.Mode, Hash: entry.Hash})
	}
	for name, dir := range n.dirs {
		h, err := dir.store(sto)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		tree.Entries = append(tree.Entries, object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: h})
	}
	sort.Sort(object.TreeEntrySorter(tree.Entries))
	h, err := storeGitObject(sto, tree)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("store tree: %w", err)
	}
	return h, nil
}

// gitObjectEncoder is implemented by go-git objects that can be stored.
type gitObjectEncoder interface {
	Encode(plumbing.EncodedObject) error
}

func storeGitObject(sto storer.EncodedObjectStorer, v gitObjectEncoder) (plumbing.Hash, error) {
	obj := sto.NewEncodedObject()
	if err := v.Encode(obj); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("encode: %w", err)
	}
	return sto.SetEncodedObject(obj)
}

func writeGitObject(obj plumbing.EncodedObject, data []byte) error {
	w, err := obj.Writer()
	if err != nil {
		return err
	}
	if _, err := w.Write(data); err != nil {
		_ = w.Close() // the write error is the one worth reporting
		return err
	}
	return w.Close()
}

func cleanGitPath(p string) (string, error) {
	clean := path.Clean(strings.TrimPrefix(p, "/"))
	for _, seg := range strings.Split(clean, "/") {
		if seg == "." || seg == ".." || seg == ".git" {
			return "", fmt.Errorf("invalid path %q", p)
		}
	}
	return clean, nil
}

func validateRepoName(name string) error {
	if name == "" {
		return errors.New("empty repository name")
	}
	for _, seg := range strings.Split(name, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("invalid repository name %q", name)
		}
		for _, c := range seg {
			if !gitNameChar(c) {
				return fmt.Errorf("invalid repository name %q", name)
			}
		}
	}
	return nil
}

func gitSignature() object.Signature {
	return object.Signature{Name: "Flotilla Test", Email: "test@flotilla.invalid", When: time.Now()}
}

// gitNameChar reports whether c may appear in a repository name segment.
func gitNameChar(c rune) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.'
}
