package testenv

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/subtle"
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
	"github.com/go-git/go-git/v5/plumbing/format/pktline"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/capability"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/go-git/go-git/v5/plumbing/transport/server"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/go-git/go-git/v5/storage/memory"
)

const (
	// maxLoggedGitRequests bounds the request log a GitServer prints when a
	// test fails.
	maxLoggedGitRequests = 200
	// capabilityNoThin asks a pushing client for a self-contained pack;
	// go-git has no constant for it.
	capabilityNoThin capability.Capability = "no-thin"
)

// GitServerOptions configures NewGitServer.
type GitServerOptions struct {
	// Username and Password turn on HTTP basic authentication when either is
	// non-empty: every request without exactly these credentials gets 401
	// with "WWW-Authenticate: Basic". Optional: default no authentication.
	Username string
	// Password is the basic-auth password; see Username.
	Password string
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
	s.http = httptest.NewServer(http.HandlerFunc(s.serveHTTP))
	t.Cleanup(func() {
		s.http.Close()
		if t.Failed() {
			s.log.dump(t)
		}
	})
	return s
}

// URL returns the server's base URL, http://127.0.0.1:PORT, without a
// trailing slash.
func (s *GitServer) URL() string { return s.http.URL }

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

// gitReply is a fully buffered HTTP response. Requests are answered only after
// the repository work is done, so a slow client never holds a repository
// lock and a failure can still become a 500.
type gitReply struct {
	status      int
	contentType string
	body        []byte
	// failure is logged but not sent: the client learns of it from body.
	failure error
}

func gitTextReply(status int, msg string) gitReply {
	return gitReply{status: status, contentType: "text/plain; charset=utf-8", body: []byte(msg + "\n")}
}

func (s *GitServer) serveHTTP(w http.ResponseWriter, req *http.Request) {
	rep, err := s.handle(req)
	if err != nil {
		rep = gitTextReply(http.StatusInternalServerError, err.Error())
		rep.failure = err
	}
	s.log.add(req, rep.status, rep.failure)
	if rep.status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Basic realm="testenv"`)
	}
	w.Header().Set("Content-Type", rep.contentType)
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(rep.status)
	_, _ = w.Write(rep.body) // a client that went away is not the server's failure
}

func (s *GitServer) handle(req *http.Request) (gitReply, error) {
	if !s.authorized(req) {
		return gitTextReply(http.StatusUnauthorized, "authentication required"), nil
	}
	name, action, ok := splitGitPath(req.URL.Path)
	if !ok {
		return gitTextReply(http.StatusNotFound, "not found"), nil
	}
	repo := s.repo(name)
	if repo == nil {
		return gitTextReply(http.StatusNotFound, "repository not found"), nil
	}
	if action == "info/refs" {
		if req.Method != http.MethodGet {
			return gitTextReply(http.StatusMethodNotAllowed, "method not allowed"), nil
		}
		service := req.URL.Query().Get("service")
		if service != transport.UploadPackServiceName && service != transport.ReceivePackServiceName {
			return gitTextReply(http.StatusForbidden, "only the smart http protocol is served"), nil
		}
		body, err := repo.advertise(req.Context(), service)
		if err != nil {
			return gitReply{}, err
		}
		return gitReply{status: http.StatusOK, contentType: "application/x-" + service + "-advertisement", body: body}, nil
	}
	if req.Method != http.MethodPost {
		return gitTextReply(http.StatusMethodNotAllowed, "method not allowed"), nil
	}
	if ct := req.Header.Get("Content-Type"); ct != "application/x-"+action+"-request" {
		return gitTextReply(http.StatusUnsupportedMediaType, "unexpected content type "+ct), nil
	}
	body, err := gitRequestBody(req)
	if err != nil {
		return gitTextReply(http.StatusBadRequest, err.Error()), nil
	}
	if action == transport.UploadPackServiceName {
		out, err := repo.uploadPack(req.Context(), body)
		if err != nil {
			return gitReply{}, err
		}
		return gitReply{status: http.StatusOK, contentType: "application/x-git-upload-pack-result", body: out}, nil
	}
	out, failure, err := repo.receivePack(req.Context(), body)
	if err != nil {
		return gitReply{}, err
	}
	return gitReply{status: http.StatusOK, contentType: "application/x-git-receive-pack-result", body: out, failure: failure}, nil
}

func (s *GitServer) authEnabled() bool { return s.opts.Username != "" || s.opts.Password != "" }

func (s *GitServer) authorized(req *http.Request) bool {
	if !s.authEnabled() {
		return true
	}
	user, pass, ok := req.BasicAuth()
	userOK := subtle.ConstantTimeCompare([]byte(user), []byte(s.opts.Username)) == 1
	passOK := subtle.ConstantTimeCompare([]byte(pass), []byte(s.opts.Password)) == 1
	return ok && userOK && passOK
}

func (s *GitServer) repo(name string) *GitRepo {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.repos[name]
}

// splitGitPath splits a smart HTTP path such as /org/app.git/info/refs into
// the repository name ("org/app") and the action ("info/refs").
func splitGitPath(p string) (name, action string, ok bool) {
	for _, action := range []string{"info/refs", transport.UploadPackServiceName, transport.ReceivePackServiceName} {
		if prefix, found := strings.CutSuffix(p, "/"+action); found {
			return strings.TrimSuffix(strings.TrimPrefix(prefix, "/"), ".git"), action, true
		}
	}
	return "", "", false
}

func gitRequestBody(req *http.Request) (io.Reader, error) {
	switch enc := req.Header.Get("Content-Encoding"); enc {
	case "", "identity":
		return req.Body, nil
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			return nil, fmt.Errorf("read gzip request body: %w", err)
		}
		return zr, nil
	default:
		return nil, fmt.Errorf("unsupported content encoding %q", enc)
	}
}

// gitStorageLoader hands go-git's server the storage that a request opened under
// the repository lock.
type gitStorageLoader struct{ sto storer.Storer }

// Load returns the request's storage whatever the endpoint.
func (l gitStorageLoader) Load(*transport.Endpoint) (storer.Storer, error) { return l.sto, nil }

// advertise returns the smart HTTP reference advertisement for service: the
// "# service=" pkt-line, a flush and the references with capabilities.
func (r *GitRepo) advertise(ctx context.Context, service string) ([]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	srv := server.NewServer(gitStorageLoader{r.open()})
	var sess transport.Session
	var err error
	if service == transport.UploadPackServiceName {
		sess, err = srv.NewUploadPackSession(&transport.Endpoint{}, nil)
	} else {
		sess, err = srv.NewReceivePackSession(&transport.Endpoint{}, nil)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s session: %w", service, err)
	}
	ar, err := sess.AdvertisedReferencesContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("advertise references for %s: %w", service, err)
	}
	if service == transport.ReceivePackServiceName {
		// go-git's server cannot resolve deltas against objects outside the
		// pack, so ask the git CLI not to send thin packs.
		if err := ar.Capabilities.Add(capabilityNoThin); err != nil {
			return nil, fmt.Errorf("advertise no-thin: %w", err)
		}
	}
	var buf bytes.Buffer
	enc := pktline.NewEncoder(&buf)
	if err := enc.Encodef("# service=%s\n", service); err != nil {
		return nil, fmt.Errorf("encode service header: %w", err)
	}
	if err := enc.Flush(); err != nil {
		return nil, fmt.Errorf("encode service header: %w", err)
	}
	if err := ar.Encode(&buf); err != nil {
		return nil, fmt.Errorf("encode references for %s: %w", service, err)
	}
	return buf.Bytes(), nil
}

// uploadPack answers one stateless upload-pack request. go-git's decoder
// stops after the wants, so the haves and "done" are read here; haves the
// repository does not know are dropped. A round without "done" is a
// negotiation step and is answered with NAK, as a server without multi_ack
// does; the round with "done" gets NAK and the pack.
func (r *GitRepo) uploadPack(ctx context.Context, body io.Reader) ([]byte, error) {
	req := packp.NewUploadPackRequest()
	if err := req.Decode(body); err != nil {
		return nil, fmt.Errorf("decode upload-pack request: %w", err)
	}
	haves, done, err := decodeHaves(body)
	if err != nil {
		return nil, fmt.Errorf("decode upload-pack request: %w", err)
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	sto := r.open()
	for _, h := range haves {
		if sto.HasEncodedObject(h) == nil {
			req.Haves = append(req.Haves, h)
		}
	}
	var buf bytes.Buffer
	if !done {
		if err := pktline.NewEncoder(&buf).Encodef("NAK\n"); err != nil {
			return nil, fmt.Errorf("encode NAK: %w", err)
		}
		return buf.Bytes(), nil
	}
	sess, err := server.NewServer(gitStorageLoader{sto}).NewUploadPackSession(&transport.Endpoint{}, nil)
	if err != nil {
		return nil, fmt.Errorf("open upload-pack session: %w", err)
	}
	resp, err := sess.UploadPack(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("upload pack: %w", err)
	}
	// Encode closes the pack stream; this Close only matters when Encode
	// fails early, and its error adds nothing to Encode's.
	defer func() { _ = resp.Close() }()
	if err := resp.Encode(&buf); err != nil {
		return nil, fmt.Errorf("encode upload-pack response: %w", err)
	}
	return buf.Bytes(), nil
}

// decodeHaves reads the "have" lines that follow the wants, up to "done" or
// the end of the request.
func decodeHaves(body io.Reader) (haves []plumbing.Hash, done bool, err error) {
	sc := pktline.NewScanner(body)
	for sc.Scan() {
		line := string(bytes.TrimSuffix(sc.Bytes(), []byte("\n")))
		switch {
		case line == "": // flush-pkt between rounds of haves
		case line == "done":
			return haves, true, nil
		case strings.HasPrefix(line, "have ") && plumbing.IsHash(line[len("have "):]):
			haves = append(haves, plumbing.NewHash(line[len("have "):]))
		default:
			return nil, false, fmt.Errorf("unexpected pkt-line %q", line)
		}
	}
	return haves, false, sc.Err()
}

// receivePack answers one receive-pack (push) request. A command whose old
// value no longer matches the repository is refused, with the rest of the
// push: go-git's server would otherwise overwrite the reference and silently
// drop commits made in between. A push that failed but could still be
// reported to the client returns the report and the failure, for the log.
func (r *GitRepo) receivePack(ctx context.Context, body io.Reader) (out []byte, failure, err error) {
	req := packp.NewReferenceUpdateRequest()
	if err := req.Decode(body); err != nil {
		return nil, nil, fmt.Errorf("decode receive-pack request: %w", err)
	}
	if onlyRefDeletes(req.Commands) {
		req.Packfile = nil // deletions carry no pack
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	sto := r.open()
	rs, err := rejectStaleRefs(sto, req.Commands)
	if err != nil {
		return nil, nil, err
	}
	if rs != nil {
		failure = errors.New("push refused: stale old value")
	} else {
		sess, err := server.NewServer(gitStorageLoader{sto}).NewReceivePackSession(&transport.Endpoint{}, nil)
		if err != nil {
			return nil, nil, fmt.Errorf("open receive-pack session: %w", err)
		}
		rs, failure = sess.ReceivePack(ctx, req)
		if failure != nil {
			failure = fmt.Errorf("receive pack: %w", failure)
		}
		if rs == nil && failure != nil {
			return nil, nil, failure
		}
	}
	if rs == nil || !req.Capabilities.Supports(capability.ReportStatus) {
		return nil, failure, nil
	}
	if rs.UnpackStatus != "ok" && len(rs.CommandStatuses) == 0 {
		// Name every command, as git does, so the client shows why.
		for _, c := range req.Commands {
			rs.CommandStatuses = append(rs.CommandStatuses, &packp.CommandStatus{ReferenceName: c.Name, Status: "unpacker error"})
		}
	}
	var buf bytes.Buffer
	if err := rs.Encode(&buf); err != nil {
		return nil, nil, fmt.Errorf("encode report status: %w", err)
	}
	return buf.Bytes(), failure, nil
}

func onlyRefDeletes(cmds []*packp.Command) bool {
	for _, c := range cmds {
		if c.Action() != packp.Delete {
			return false
		}
	}
	return true
}

// rejectStaleRefs returns a report refusing every command when one of them
// expects an old value the reference no longer has, and nil otherwise.
func rejectStaleRefs(sto storer.ReferenceStorer, cmds []*packp.Command) (*packp.ReportStatus, error) {
	stale := map[plumbing.ReferenceName]bool{}
	for _, c := range cmds {
		if c.Old.IsZero() {
			continue // a create; go-git's server refuses existing references itself
		}
		ref, err := sto.Reference(c.Name)
		switch {
		case errors.Is(err, plumbing.ErrReferenceNotFound):
			stale[c.Name] = true
		case err != nil:
			return nil, fmt.Errorf("read %s: %w", c.Name, err)
		case ref.Hash() != c.Old:
			stale[c.Name] = true
		}
	}
	if len(stale) == 0 {
		return nil, nil
	}
	rs := &packp.ReportStatus{UnpackStatus: "ok"}
	for _, c := range cmds {
		status := "not updated: another reference was stale"
		if stale[c.Name] {
			status = "stale old value"
		}
		rs.CommandStatuses = append(rs.CommandStatuses, &packp.CommandStatus{ReferenceName: c.Name, Status: status})
	}
	return rs, nil
}

// gitRequestLog remembers the most recent requests a GitServer answered, so a
// failing test can show them.
type gitRequestLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *gitRequestLog) add(req *http.Request, status int, err error) {
	line := fmt.Sprintf("%s %s: %d", req.Method, req.URL.RequestURI(), status)
	if err != nil {
		line += ": " + err.Error()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.lines) == maxLoggedGitRequests {
		l.lines = append(l.lines[:0], l.lines[1:]...)
	}
	l.lines = append(l.lines, line)
}

func (l *gitRequestLog) dump(t testing.TB) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		t.Logf("git server: %s", line)
	}
}

// gitNameChar reports whether c may appear in a repository name segment.
func gitNameChar(c rune) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.'
}
