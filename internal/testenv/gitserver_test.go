package testenv

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/pktline"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/capability"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/go-git/go-git/v5/storage/memory"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestGitServer_Clone(t *testing.T) {
	srv := NewGitServer(t, GitServerOptions{})
	files := map[string]string{"README.md": "hello\n", "charts/app/values.yaml": "replicas: 1\n"}

	tests := []struct {
		name    string
		repo    string
		withGit bool // clone from URL() as is, or with ".git" cut off
	}{
		{name: "plain name", repo: "app", withGit: true},
		{name: "plain name without .git", repo: "app2", withGit: false},
		{name: "nested name", repo: "org/app", withGit: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			repo := srv.CreateRepo(t, tt.repo, files)
			url := repo.URL()
			if !tt.withGit {
				url = strings.TrimSuffix(url, ".git")
			}
			assert.Equal(t, srv.URL()+"/"+tt.repo+".git", repo.URL())

			clone := cloneInMemory(t, url, nil)
			head, err := clone.Head()
			require.NoError(t, err)
			assert.Equal(t, plumbing.Master, head.Name())
			assert.Equal(t, repo.Head(t), head.Hash().String())
			assert.Equal(t, files, commitFiles(t, clone, head.Hash()))

			refs := lsRemote(t, url, nil)
			assert.Equal(t, repo.Head(t), refs["refs/heads/master"])
			assert.Equal(t, "-> refs/heads/master", refs["HEAD"])
		})
	}
}

func TestGitRepo_ChangesAreFetched(t *testing.T) {
	srv := NewGitServer(t, GitServerOptions{})
	initial := map[string]string{"a.txt": "a\n", "dir/b.txt": "b\n", "dir/sub/c.txt": "c\n"}

	tests := []struct {
		name   string
		change func(t *testing.T, r *GitRepo) string // makes the change, returns the new commit
		want   map[string]string
	}{
		{
			name: "commit adds and overwrites",
			change: func(t *testing.T, r *GitRepo) string {
				return r.Commit(t, map[string]string{"a.txt": "A\n", "dir/new/d.txt": "d\n"}, "update")
			},
			want: map[string]string{"a.txt": "A\n", "dir/b.txt": "b\n", "dir/sub/c.txt": "c\n", "dir/new/d.txt": "d\n"},
		},
		{
			name: "delete a file",
			change: func(t *testing.T, r *GitRepo) string {
				return r.Delete(t, "remove b", "dir/b.txt")
			},
			want: map[string]string{"a.txt": "a\n", "dir/sub/c.txt": "c\n"},
		},
		{
			name: "delete a directory",
			change: func(t *testing.T, r *GitRepo) string {
				return r.Delete(t, "remove dir", "dir")
			},
			want: map[string]string{"a.txt": "a\n"},
		},
		{
			name: "push",
			change: func(t *testing.T, r *GitRepo) string {
				return r.Push(t, map[string]string{"dir/sub/c.txt": "C\n", "new/dir/e.txt": "e\n"}, "pushed")
			},
			want: map[string]string{"a.txt": "a\n", "dir/b.txt": "b\n", "dir/sub/c.txt": "C\n", "new/dir/e.txt": "e\n"},
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			repo := srv.CreateRepo(t, fmt.Sprintf("fetch-%d", i), initial)
			clone := cloneInMemory(t, repo.URL(), nil)
			before := repo.Head(t)

			got := tt.change(t, repo)

			assert.Equal(t, got, repo.Head(t))
			require.NoError(t, clone.FetchContext(t.Context(), &git.FetchOptions{}))
			ref, err := clone.Reference(plumbing.NewRemoteReferenceName("origin", "master"), true)
			require.NoError(t, err)
			assert.Equal(t, got, ref.Hash().String())
			assert.Equal(t, tt.want, commitFiles(t, clone, ref.Hash()))
			c, err := clone.CommitObject(ref.Hash())
			require.NoError(t, err)
			assert.Equal(t, []plumbing.Hash{plumbing.NewHash(before)}, c.ParentHashes)
		})
	}
}

func TestGitRepo_BranchAndTag(t *testing.T) {
	srv := NewGitServer(t, GitServerOptions{})
	repo := srv.CreateRepo(t, "app", map[string]string{"v.txt": "1\n"})
	first := repo.Head(t)

	repo.Tag(t, "v1")
	repo.Branch(t, "release")
	onRelease := repo.CommitTo(t, "release", map[string]string{"v.txt": "2\n"}, "release change")

	refs := lsRemote(t, repo.URL(), nil)
	assert.Equal(t, first, refs["refs/heads/master"])
	assert.Equal(t, first, refs["refs/tags/v1"])
	assert.Equal(t, onRelease, refs["refs/heads/release"])
	assert.Equal(t, first, repo.Head(t), "a commit to another branch must not move HEAD")

	clone := cloneInMemory(t, repo.URL(), nil)
	assert.Equal(t, map[string]string{"v.txt": "2\n"}, commitFiles(t, clone, plumbing.NewHash(onRelease)))
}

func TestGitRepo_PushThenCommit(t *testing.T) {
	srv := NewGitServer(t, GitServerOptions{Username: "flotilla", Password: "s3cret"})
	repo := srv.CreateRepo(t, "app", map[string]string{"a.txt": "a\n"})

	pushed := repo.Push(t, map[string]string{"b.txt": "b\n"}, "pushed")
	assert.Equal(t, pushed, repo.Head(t))

	// The helper must see the objects the push wrote to the repository.
	committed := repo.Commit(t, map[string]string{"c.txt": "c\n"}, "after push")
	clone := cloneInMemory(t, repo.URL(), srv.Auth())
	c, err := clone.CommitObject(plumbing.NewHash(committed))
	require.NoError(t, err)
	assert.Equal(t, []plumbing.Hash{plumbing.NewHash(pushed)}, c.ParentHashes)
	assert.Equal(t, map[string]string{"a.txt": "a\n", "b.txt": "b\n", "c.txt": "c\n"}, commitFiles(t, clone, c.Hash))
}

func TestGitServer_BasicAuth(t *testing.T) {
	srv := NewGitServer(t, GitServerOptions{Username: "flotilla", Password: "s3cret"})
	repo := srv.CreateRepo(t, "private", map[string]string{"a.txt": "a\n"})

	tests := []struct {
		name    string
		auth    transport.AuthMethod
		wantErr error
	}{
		{name: "no credentials", auth: nil, wantErr: transport.ErrAuthenticationRequired},
		{name: "wrong password", auth: &githttp.BasicAuth{Username: "flotilla", Password: "nope"}, wantErr: transport.ErrAuthenticationRequired},
		{name: "wrong user", auth: &githttp.BasicAuth{Username: "other", Password: "s3cret"}, wantErr: transport.ErrAuthenticationRequired},
		{name: "right credentials", auth: srv.Auth()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, listErr := newGitRemote(repo.URL()).ListContext(t.Context(), &git.ListOptions{Auth: tt.auth})
			_, cloneErr := git.CloneContext(t.Context(), memory.NewStorage(), nil, &git.CloneOptions{URL: repo.URL(), Auth: tt.auth})
			if tt.wantErr != nil {
				assert.ErrorIs(t, listErr, tt.wantErr)
				assert.ErrorIs(t, cloneErr, tt.wantErr)
				return
			}
			assert.NoError(t, listErr)
			assert.NoError(t, cloneErr)
		})
	}

	t.Run("challenge", func(t *testing.T) {
		resp := httpGet(t, repo.URL()+"/info/refs?service=git-upload-pack")
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
		assert.Contains(t, resp.Header.Get("WWW-Authenticate"), "Basic")
	})
}

func TestGitServer_SmartHTTP(t *testing.T) {
	srv := NewGitServer(t, GitServerOptions{})
	repo := srv.CreateRepo(t, "app", map[string]string{"a.txt": "a\n"})

	for _, service := range []string{transport.UploadPackServiceName, transport.ReceivePackServiceName} {
		t.Run("advertisement "+service, func(t *testing.T) {
			resp := httpGet(t, repo.URL()+"/info/refs?service="+service)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			assert.Equal(t, "application/x-"+service+"-advertisement", resp.Header.Get("Content-Type"))
			body := readBody(t, resp)
			header := pktLine(t, "# service="+service+"\n") + "0000"
			assert.True(t, strings.HasPrefix(body, header), "body starts %q", body[:min(len(body), 40)])
			assert.Contains(t, body, repo.Head(t)+" refs/heads/master")
		})
	}

	t.Run("dumb protocol refused", func(t *testing.T) {
		resp := httpGet(t, repo.URL()+"/info/refs")
		assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	})
	t.Run("unknown repository", func(t *testing.T) {
		resp := httpGet(t, srv.URL()+"/missing.git/info/refs?service=git-upload-pack")
		assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	})

	t.Run("gzip upload-pack request", func(t *testing.T) {
		var raw bytes.Buffer
		enc := pktline.NewEncoder(&raw)
		require.NoError(t, enc.Encodef("want %s ofs-delta\n", repo.Head(t)))
		require.NoError(t, enc.Flush())
		require.NoError(t, enc.Encodef("done\n"))
		var zipped bytes.Buffer
		zw := gzip.NewWriter(&zipped)
		_, err := zw.Write(raw.Bytes())
		require.NoError(t, err)
		require.NoError(t, zw.Close())

		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, repo.URL()+"/git-upload-pack", &zipped)
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/x-git-upload-pack-request")
		req.Header.Set("Content-Encoding", "gzip")
		resp := httpDo(t, req)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, "application/x-git-upload-pack-result", resp.Header.Get("Content-Type"))
		assert.True(t, strings.HasPrefix(readBody(t, resp), "0008NAK\nPACK"))
	})
}

func TestGitServer_RejectsStalePush(t *testing.T) {
	srv := NewGitServer(t, GitServerOptions{})
	repo := srv.CreateRepo(t, "app", map[string]string{"a.txt": "a\n"})
	first := repo.Head(t)
	second := repo.Commit(t, map[string]string{"a.txt": "b\n"}, "second")
	third := repo.Commit(t, map[string]string{"a.txt": "c\n"}, "third")

	// Claim master is still at first and move it back to second: the
	// objects exist, so only the compare-and-swap can refuse it.
	upd := packp.NewReferenceUpdateRequest()
	require.NoError(t, upd.Capabilities.Set(capability.ReportStatus))
	upd.Commands = []*packp.Command{{Name: plumbing.Master, Old: plumbing.NewHash(first), New: plumbing.NewHash(second)}}
	var body bytes.Buffer
	require.NoError(t, upd.Encode(&body))
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, repo.URL()+"/git-receive-pack", &body)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-git-receive-pack-request")
	resp := httpDo(t, req)
	require.Equal(t, http.StatusOK, resp.StatusCode)

	rs := packp.NewReportStatus()
	require.NoError(t, rs.Decode(resp.Body))
	assert.Error(t, rs.Error())
	assert.Equal(t, third, repo.Head(t))
}

func TestGitServer_ConcurrentCommitsAndFetches(t *testing.T) {
	srv := NewGitServer(t, GitServerOptions{})
	repo := srv.CreateRepo(t, "app", map[string]string{"n.txt": "0\n"})

	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			for range 5 {
				clone, err := git.CloneContext(t.Context(), memory.NewStorage(), nil, &git.CloneOptions{URL: repo.URL()})
				if err != nil {
					errs <- fmt.Errorf("clone: %w", err)
					return
				}
				if _, err := clone.Head(); err != nil {
					errs <- fmt.Errorf("head of clone: %w", err)
					return
				}
			}
		})
	}
	var last string
	for i := range 10 {
		last = repo.Commit(t, map[string]string{"n.txt": fmt.Sprintf("%d\n", i+1)}, "bump")
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.NoError(t, err)
	}

	clone := cloneInMemory(t, repo.URL(), nil)
	assert.Equal(t, map[string]string{"n.txt": "10\n"}, commitFiles(t, clone, plumbing.NewHash(last)))
}

func TestGitServer_GitCLI(t *testing.T) {
	gitBin, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git not on PATH")
	}
	srv := NewGitServer(t, GitServerOptions{})
	big := strings.Repeat("a line long enough for git to store a change as a delta\n", 500)
	repo := srv.CreateRepo(t, "app", map[string]string{"big.txt": big, "dir/b.txt": "b\n"})
	home := t.TempDir()
	work := filepath.Join(t.TempDir(), "work")
	runIn := func(t *testing.T, dir, stdin string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), gitBin, args...)
		cmd.Dir = dir
		cmd.Stdin = strings.NewReader(stdin)
		cmd.Env = append(os.Environ(),
			"HOME="+home, "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0",
			"NO_PROXY=127.0.0.1", "no_proxy=127.0.0.1",
			"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.invalid",
			"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.invalid",
		)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git %s: %s", strings.Join(args, " "), out)
		return string(out)
	}
	run := func(t *testing.T, dir string, args ...string) string {
		t.Helper()
		return runIn(t, dir, "", args...)
	}

	t.Run("ls-remote", func(t *testing.T) {
		out := run(t, home, "ls-remote", repo.URL())
		assert.Contains(t, out, repo.Head(t)+"\trefs/heads/master")
		assert.Contains(t, out, repo.Head(t)+"\tHEAD")
	})
	t.Run("clone", func(t *testing.T) {
		run(t, home, "clone", "--quiet", repo.URL(), work)
		b, err := os.ReadFile(filepath.Join(work, "dir", "b.txt"))
		require.NoError(t, err)
		assert.Equal(t, "b\n", string(b))
	})
	t.Run("fetch", func(t *testing.T) {
		want := repo.Commit(t, map[string]string{"c.txt": "c\n"}, "for fetch")
		run(t, work, "fetch", "--quiet", "origin")
		assert.Equal(t, want, strings.TrimSpace(run(t, work, "rev-parse", "origin/master")))
	})
	t.Run("fetch with unknown local commits", func(t *testing.T) {
		// More haves than fit in one negotiation round, none of them known
		// to the server: the client needs several rounds of NAK.
		stream := "reset refs/heads/local\nfrom refs/heads/master^0\n\n"
		for i := range 40 {
			msg := fmt.Sprintf("local %d\n", i)
			stream += fmt.Sprintf("commit refs/heads/local\ncommitter t <t@example.invalid> %d +0000\ndata %d\n%s\n", i, len(msg), msg)
		}
		runIn(t, work, stream, "fast-import", "--quiet")
		want := repo.Commit(t, map[string]string{"e.txt": "e\n"}, "for second fetch")
		run(t, work, "fetch", "--quiet", "origin")
		assert.Equal(t, want, strings.TrimSpace(run(t, work, "rev-parse", "origin/master")))
		run(t, work, "reset", "--quiet", "--hard", "origin/master")
	})
	t.Run("push", func(t *testing.T) {
		// A small change to a large file: git sends a thin pack, with a
		// delta against an object only the server has, unless told no-thin.
		require.NoError(t, os.WriteFile(filepath.Join(work, "big.txt"), []byte(big+"one more\n"), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(work, "d.txt"), []byte("d\n"), 0o644))
		run(t, work, "add", "big.txt", "d.txt")
		run(t, work, "commit", "--quiet", "-m", "from git cli")
		run(t, work, "push", "--quiet", "origin", "master")
		assert.Equal(t, strings.TrimSpace(run(t, work, "rev-parse", "HEAD")), repo.Head(t))
	})
}

func cloneInMemory(t *testing.T, url string, auth transport.AuthMethod) *git.Repository {
	t.Helper()
	r, err := git.CloneContext(t.Context(), memory.NewStorage(), nil, &git.CloneOptions{URL: url, Auth: auth})
	require.NoError(t, err)
	return r
}

func newGitRemote(url string) *git.Remote {
	return git.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: "origin", URLs: []string{url}})
}

// lsRemote lists url's references: name → hash, or "-> target" for a
// symbolic reference.
func lsRemote(t *testing.T, url string, auth transport.AuthMethod) map[string]string {
	t.Helper()
	refs, err := newGitRemote(url).ListContext(t.Context(), &git.ListOptions{Auth: auth})
	require.NoError(t, err)
	got := map[string]string{}
	for _, ref := range refs {
		if ref.Type() == plumbing.SymbolicReference {
			got[ref.Name().String()] = "-> " + ref.Target().String()
			continue
		}
		got[ref.Name().String()] = ref.Hash().String()
	}
	return got
}

// commitFiles returns the files of commit h: path → content.
func commitFiles(t *testing.T, r *git.Repository, h plumbing.Hash) map[string]string {
	t.Helper()
	c, err := r.CommitObject(h)
	require.NoError(t, err)
	tree, err := c.Tree()
	require.NoError(t, err)
	got := map[string]string{}
	require.NoError(t, tree.Files().ForEach(func(f *object.File) error {
		content, err := f.Contents()
		got[f.Name] = content
		return err
	}))
	return got
}

func httpGet(t *testing.T, url string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	require.NoError(t, err)
	return httpDo(t, req)
}

func httpDo(t *testing.T, req *http.Request) *http.Response {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() {
		if err := resp.Body.Close(); err != nil && !errors.Is(err, io.EOF) {
			t.Errorf("close response body: %v", err)
		}
	})
	return resp
}

func readBody(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

func pktLine(t *testing.T, payload string) string {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, pktline.NewEncoder(&buf).EncodeString(payload))
	return buf.String()
}
