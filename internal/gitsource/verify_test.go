package gitsource

import (
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

func TestCache_Signed(t *testing.T) {
	srv := testenv.NewGitServer(t, testenv.GitServerOptions{})
	repo := srv.CreateRepo(t, "app", map[string]string{"a": "1\n"})
	first := repo.Head(t)
	pushAnnotatedTag(t, repo.URL(), "v1")
	repo.Tag(t, "light")
	remote := Remote{URL: repo.URL()}
	cache := NewCache(t.TempDir())

	// A branch: the commit, no tag.
	branch := resolve(t, remote, "master", "")
	s, err := cache.Signed(t.Context(), remote, branch)
	require.NoError(t, err)
	assert.Equal(t, first, s.Commit.Hash.String())
	assert.Nil(t, s.Tag)

	// An annotated tag: its object, and the commit it peels to.
	tagged := resolve(t, remote, "", "v1")
	s, err = cache.Signed(t.Context(), remote, tagged)
	require.NoError(t, err)
	assert.Equal(t, first, s.Commit.Hash.String())
	require.NotNil(t, s.Tag)
	assert.Equal(t, "v1", s.Tag.Name)
	assert.Equal(t, "release v1\n", s.Tag.Message)

	// A lightweight tag has no tag object.
	s, err = cache.Signed(t.Context(), remote, resolve(t, remote, "", "light"))
	require.NoError(t, err)
	assert.Equal(t, first, s.Commit.Hash.String())
	assert.Nil(t, s.Tag)

	// The tag moves to a new commit: the clone's old copy is not used.
	second := repo.Commit(t, map[string]string{"a": "2\n"}, "second")
	server, err := git.PlainOpen(repo.Dir())
	require.NoError(t, err)
	require.NoError(t, server.DeleteTag("v1"))
	sig := &object.Signature{Name: "t", Email: "t@example.com", When: time.Unix(1700000100, 0)}
	_, err = server.CreateTag("v1", plumbing.NewHash(second), &git.CreateTagOptions{Tagger: sig, Message: "release v1 again"})
	require.NoError(t, err)
	s, err = cache.Signed(t.Context(), remote, resolve(t, remote, "", "v1"))
	require.NoError(t, err)
	assert.Equal(t, second, s.Commit.Hash.String())
	require.NotNil(t, s.Tag)
	assert.Equal(t, "release v1 again\n", s.Tag.Message)

	// A commit the remote does not have.
	_, err = cache.Signed(t.Context(), remote, Ref{Name: "refs/heads/master", Commit: hashOf('d')})
	assert.ErrorIs(t, err, ErrRefNotFound)
}

// A clone that cannot be read is cloned again, as for Checkout: otherwise
// no commit would be verified again.
func TestCache_SignedCorruptClone(t *testing.T) {
	cache, remote, ref, _ := checkedOut(t, map[string]string{"a": "1\n"})
	idx, _ := packFiles(t, cache.clonePath(remote.URL))
	require.Len(t, idx, 1)
	truncateHalf(t, idx[0])

	s, err := cache.Signed(t.Context(), remote, ref)
	require.NoError(t, err)
	assert.Equal(t, ref.Commit, s.Commit.Hash.String())
}

// A tag re-created at the same commit: Signed reads the tag object the
// remote advertises (Ref.Tag, as resolved from a server that advertises
// peeled tags), never the clone's copy of the old one.
func TestCache_SignedReadsAdvertisedTag(t *testing.T) {
	srv := testenv.NewGitServer(t, testenv.GitServerOptions{})
	repo := srv.CreateRepo(t, "app", map[string]string{"a": "1\n"})
	first := repo.Head(t)
	remote := Remote{URL: repo.URL()}
	cache := NewCache(t.TempDir())
	server, err := git.PlainOpen(repo.Dir())
	require.NoError(t, err)
	sig := &object.Signature{Name: "t", Email: "t@example.com", When: time.Unix(1700000100, 0)}
	tagV1 := func(message string) Ref {
		t.Helper()
		if err := server.DeleteTag("v1"); err != nil {
			require.ErrorIs(t, err, git.ErrTagNotFound)
		}
		tag, err := server.CreateTag("v1", plumbing.NewHash(first), &git.CreateTagOptions{Tagger: sig, Message: message})
		require.NoError(t, err)
		return Ref{Name: "refs/tags/v1", Commit: first, Tag: tag.Hash().String()}
	}

	for _, message := range []string{"one", "two"} {
		s, err := cache.Signed(t.Context(), remote, tagV1(message))
		require.NoError(t, err)
		assert.Equal(t, first, s.Commit.Hash.String())
		require.NotNil(t, s.Tag)
		assert.Equal(t, message+"\n", s.Tag.Message)
	}

	// A tag object that does not peel to the advertised commit.
	ref := tagV1("three")
	ref.Commit = hashOf('d')
	_, err = cache.Signed(t.Context(), remote, ref)
	assert.ErrorContains(t, err, "peels to "+first+", not to the advertised "+hashOf('d'))
}
