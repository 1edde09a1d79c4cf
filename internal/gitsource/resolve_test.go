package gitsource

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

func hashOf(c byte) string { return strings.Repeat(string(c), 40) }

func TestSelectRef(t *testing.T) {
	hashRef := func(name string, c byte) *plumbing.Reference {
		return plumbing.NewHashReference(plumbing.ReferenceName(name), plumbing.NewHash(hashOf(c)))
	}
	headTo := func(target string) *plumbing.Reference {
		return plumbing.NewSymbolicReference(plumbing.HEAD, plumbing.ReferenceName(target))
	}
	all := []*plumbing.Reference{
		headTo("refs/heads/main"),
		hashRef("refs/heads/main", 'a'),
		hashRef("refs/heads/master", 'b'),
		hashRef("refs/heads/v1", 'c'), // a branch named like a tag
		hashRef("refs/tags/v1", 'd'),  // lightweight
		hashRef("refs/tags/v2", 'e'),  // annotated: tag object
		hashRef("refs/tags/v2^{}", 'f'),
	}
	tests := []struct {
		name     string
		refs     []*plumbing.Reference
		branch   string
		revision string
		want     Ref
		wantErr  string // exact message; empty: no error
	}{
		{name: "default branch from HEAD", refs: all, want: Ref{"refs/heads/main", hashOf('a'), ""}},
		{name: "named branch", refs: all, branch: "master", want: Ref{"refs/heads/master", hashOf('b'), ""}},
		{name: "full branch name", refs: all, branch: "refs/heads/master", want: Ref{"refs/heads/master", hashOf('b'), ""}},
		{name: "lightweight tag wins over branch", refs: all, revision: "v1", want: Ref{"refs/tags/v1", hashOf('d'), ""}},
		{name: "revision wins over branch", refs: all, branch: "main", revision: "v1", want: Ref{"refs/tags/v1", hashOf('d'), ""}},
		{name: "annotated tag is peeled, its object kept", refs: all, revision: "v2", want: Ref{"refs/tags/v2", hashOf('f'), hashOf('e')}},
		{name: "revision names a branch", refs: all, revision: "master", want: Ref{"refs/heads/master", hashOf('b'), ""}},
		{name: "revision as full reference", refs: all, revision: "refs/heads/v1", want: Ref{"refs/heads/v1", hashOf('c'), ""}},
		{
			name: "no HEAD falls back to master",
			refs: []*plumbing.Reference{hashRef("refs/heads/main", 'a'), hashRef("refs/heads/master", 'b')},
			want: Ref{"refs/heads/master", hashOf('b'), ""},
		},
		{
			name: "detached HEAD",
			refs: []*plumbing.Reference{plumbing.NewHashReference(plumbing.HEAD, plumbing.NewHash(hashOf('9')))},
			want: Ref{"HEAD", hashOf('9'), ""},
		},
		{
			name:    "no HEAD and no master",
			refs:    []*plumbing.Reference{hashRef("refs/heads/main", 'a')},
			wantErr: `branch "master" not found in https://host/r.git`,
		},
		{
			name:    "HEAD points to a missing branch",
			refs:    []*plumbing.Reference{headTo("refs/heads/gone")},
			wantErr: `branch "gone" not found in https://host/r.git`,
		},
		{name: "empty remote", wantErr: `branch "master" not found in https://host/r.git`},
		{name: "missing branch", refs: all, branch: "x", wantErr: `branch "x" not found in https://host/r.git`},
		{name: "missing revision", refs: all, revision: "v9", wantErr: `revision "v9" not found in https://host/r.git`},
		{name: "short hash is not resolved", refs: all, revision: "aaaaaaa", wantErr: `revision "aaaaaaa" not found in https://host/r.git`},
		{name: "peeled entry is not a reference", refs: all, revision: "v2^{}", wantErr: `revision "v2^{}" not found in https://host/r.git`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := selectRef(tt.refs, tt.branch, tt.revision, "https://host/r.git")
			if tt.wantErr != "" {
				require.ErrorIs(t, err, ErrRefNotFound)
				assert.EqualError(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestResolve(t *testing.T) {
	srv := testenv.NewGitServer(t, testenv.GitServerOptions{})
	repo := srv.CreateRepo(t, "app", map[string]string{"a.yaml": "a: 1\n"})
	first := repo.Head(t)
	repo.Tag(t, "v1")
	repo.Branch(t, "release")
	second := repo.Commit(t, map[string]string{"a.yaml": "a: 2\n"}, "second")
	onRelease := repo.CommitTo(t, "release", map[string]string{"r.yaml": "r\n"}, "release")
	remote := Remote{URL: repo.URL()}

	tests := []struct {
		name     string
		branch   string
		revision string
		want     Ref
		wantErr  string
	}{
		{name: "default branch is the server's HEAD", want: Ref{"refs/heads/master", second, ""}},
		{name: "named branch", branch: "release", want: Ref{"refs/heads/release", onRelease, ""}},
		{name: "tag", revision: "v1", want: Ref{"refs/tags/v1", first, ""}},
		{name: "branch as revision", revision: "release", want: Ref{"refs/heads/release", onRelease, ""}},
		{name: "commit hash is returned as is", revision: strings.ToUpper(first), want: Ref{first, first, ""}},
		{name: "missing branch", branch: "nope", wantErr: `branch "nope" not found in ` + repo.URL()},
		{name: "missing tag", revision: "v9", wantErr: `revision "v9" not found in ` + repo.URL()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Resolve(t.Context(), remote, tt.branch, tt.revision)
			if tt.wantErr != "" {
				require.ErrorIs(t, err, ErrRefNotFound)
				var nf *RefNotFoundError
				require.ErrorAs(t, err, &nf)
				assert.EqualError(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestResolve_DefaultBranchIsNotAlwaysMaster(t *testing.T) {
	srv := testenv.NewGitServer(t, testenv.GitServerOptions{})
	repo := srv.CreateRepo(t, "app", map[string]string{"a": "a\n"})
	repo.Branch(t, "main")
	onMain := repo.CommitTo(t, "main", map[string]string{"b": "b\n"}, "on main")
	setHEAD(t, repo, "refs/heads/main")

	got, err := Resolve(t.Context(), Remote{URL: repo.URL()}, "", "")
	require.NoError(t, err)
	assert.Equal(t, Ref{Name: "refs/heads/main", Commit: onMain}, got)
}

// setHEAD points the served repository's HEAD at target. No request is in
// flight, so writing behind the server's back is safe here.
func setHEAD(t *testing.T, repo *testenv.GitRepo, target string) {
	t.Helper()
	bare, err := git.PlainOpen(repo.Dir())
	require.NoError(t, err)
	require.NoError(t, bare.Storer.SetReference(plumbing.NewSymbolicReference(plumbing.HEAD, plumbing.ReferenceName(target))))
}

func TestResolve_Auth(t *testing.T) {
	srv := testenv.NewGitServer(t, testenv.GitServerOptions{Username: "alice", Password: secret})
	repo := srv.CreateRepo(t, "private", map[string]string{"a": "a\n"})

	got, err := Resolve(t.Context(), Remote{URL: repo.URL(), Auth: &Auth{Username: "alice", Password: secret}}, "", "")
	require.NoError(t, err)
	assert.Equal(t, repo.Head(t), got.Commit)

	withUserinfo := strings.Replace(repo.URL(), "://", "://alice:"+secret+"@", 1)
	got, err = Resolve(t.Context(), Remote{URL: withUserinfo}, "master", "")
	require.NoError(t, err, "credentials in the URL are used")
	assert.Equal(t, repo.Head(t), got.Commit)

	tests := []struct {
		name   string
		remote Remote
	}{
		{name: "wrong password", remote: Remote{URL: repo.URL(), Auth: &Auth{Username: "alice", Password: "wrong-" + secret}}},
		{name: "wrong password in URL", remote: Remote{URL: strings.Replace(repo.URL(), "://", "://alice:wrong-"+secret+"@", 1)}},
		{name: "no credentials", remote: Remote{URL: repo.URL()}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Resolve(t.Context(), tt.remote, "", "")
			require.ErrorIs(t, err, ErrAuth)
			assert.NotContains(t, err.Error(), secret)
			assert.Contains(t, err.Error(), repo.URL())
		})
	}
}

func TestResolve_Failures(t *testing.T) {
	srv := testenv.NewGitServer(t, testenv.GitServerOptions{})

	_, err := Resolve(t.Context(), Remote{URL: srv.URL() + "/missing.git"}, "", "")
	require.ErrorIs(t, err, ErrRepositoryNotFound)

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = Resolve(ctx, Remote{URL: srv.URL() + "/missing.git"}, "", "")
	require.Error(t, err)
	assert.ErrorIs(t, err, context.Canceled)

	// A server that accepts connections and never answers.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { _ = conn.Close() })
		}
	}()
	ctx, cancel = context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	_, err = Resolve(ctx, Remote{URL: "http://" + ln.Addr().String() + "/silent.git"}, "", "")
	require.ErrorIs(t, err, context.DeadlineExceeded, "ctx bounds the request")
}
