package activities

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/cluster"
	"github.com/flotilla-gitops/flotilla/internal/gitsource"
	"github.com/flotilla-gitops/flotilla/internal/gitverify"
	"github.com/flotilla-gitops/flotilla/internal/gitverify/verifytest"
	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

// TestDecide: what each mode requires of a reference's tag and commit,
// and how a refusal names the commit, the tag, the key and why.
func TestDecide(t *testing.T) {
	alice := verifytest.NewPGPKey(t, "Alice", "alice@example.com")
	bob := verifytest.NewSSHKey(t, "bob@laptop")
	eve := verifytest.NewSSHKey(t, "eve")
	keys, err := gitverify.ParseKeys("Secret ns/keys", map[string][]byte{"a.asc": alice.Public(t), "ssh": bob.Public(t)})
	require.NoError(t, err)

	when := time.Unix(1700000000, 0).UTC()
	person := object.Signature{Name: "dev", Email: "dev@example.com", When: when}
	commit := func(s verifytest.Signer) *object.Commit {
		return verifytest.SignCommit(t, &object.Commit{Author: person, Committer: person, Message: "m\n",
			TreeHash: plumbing.NewHash(strings.Repeat("a", 40))}, s)
	}
	tag := func(s verifytest.Signer) *object.Tag {
		return verifytest.SignTag(t, &object.Tag{Name: "v1", Tagger: person, Message: "release\n",
			TargetType: plumbing.CommitObject, Target: plumbing.NewHash(strings.Repeat("a", 40))}, s)
	}
	const hash = "0123456789012345678901234567890123456789"
	branch := gitsource.Ref{Name: "refs/heads/main", Commit: hash}
	tagRef := gitsource.Ref{Name: "refs/tags/v1", Commit: hash}
	aliceSays := alice.Fingerprint() + " (Alice <alice@example.com>)"
	bobSays := bob.Fingerprint() + " (bob@laptop)"

	tests := []struct {
		name     string
		mode     string
		ref      gitsource.Ref
		signed   gitsource.Signed
		verified string
		rejected *Rejection
	}{
		{"HEAD signed", api.VerifyHEAD, branch, gitsource.Signed{Commit: commit(alice)}, aliceSays, nil},
		{"HEAD ssh signed", api.VerifyHEAD, branch, gitsource.Signed{Commit: commit(bob)}, bobSays, nil},
		{"HEAD unsigned", api.VerifyHEAD, branch, gitsource.Signed{Commit: commit(nil)}, "",
			&Rejection{Commit: hash, Reason: "not signed"}},
		{"HEAD untrusted", api.VerifyHEAD, branch, gitsource.Signed{Commit: commit(eve)}, "",
			&Rejection{Commit: hash, Key: eve.Fingerprint(), Reason: "signed by a key that is not in Secret ns/keys"}},
		{"HEAD ignores an unsigned tag", api.VerifyHEAD, tagRef, gitsource.Signed{Commit: commit(alice), Tag: tag(nil)}, aliceSays, nil},
		{"Tag signed, commit unsigned", api.VerifyTag, tagRef, gitsource.Signed{Commit: commit(nil), Tag: tag(bob)},
			"tag v1: " + bobSays, nil},
		{"Tag lightweight", api.VerifyTag, tagRef, gitsource.Signed{Commit: commit(alice)}, "",
			&Rejection{Commit: hash, Tag: "v1", Reason: "tag v1 is lightweight (not signed)"}},
		{"Tag unsigned", api.VerifyTag, tagRef, gitsource.Signed{Commit: commit(alice), Tag: tag(nil)}, "",
			&Rejection{Commit: hash, Tag: "v1", Reason: "not signed"}},
		{"Tag untrusted", api.VerifyTag, tagRef, gitsource.Signed{Commit: commit(alice), Tag: tag(eve)}, "",
			&Rejection{Commit: hash, Tag: "v1", Key: eve.Fingerprint(), Reason: "signed by a key that is not in Secret ns/keys"}},
		{"TagAndHEAD both", api.VerifyTagAndHEAD, tagRef, gitsource.Signed{Commit: commit(alice), Tag: tag(bob)},
			"tag v1: " + bobSays + ", commit: " + aliceSays, nil},
		{"TagAndHEAD commit unsigned", api.VerifyTagAndHEAD, tagRef, gitsource.Signed{Commit: commit(nil), Tag: tag(bob)}, "",
			&Rejection{Commit: hash, Reason: "not signed"}},
		{"TagAndHEAD tag unsigned", api.VerifyTagAndHEAD, tagRef, gitsource.Signed{Commit: commit(alice), Tag: tag(nil)}, "",
			&Rejection{Commit: hash, Tag: "v1", Reason: "not signed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := decide(keys, tt.mode, tt.ref, tt.signed)
			assert.Equal(t, tt.verified, v.verified)
			assert.Equal(t, tt.rejected, v.rejected)
		})
	}
}

// keySecrets is a SecretSource holding one Secret's data, or none.
type keySecrets struct {
	name  string
	data  map[string][]byte
	reads int
}

func (k *keySecrets) Load(string, string) (string, string, error) { return "", "", cluster.ErrNotFound }

func (k *keySecrets) SecretData(_ context.Context, _, name string) (string, map[string][]byte, error) {
	k.reads++
	if name != k.name {
		return "", nil, cluster.ErrNotFound
	}
	return "Opaque", k.data, nil
}

// TestResolveCommit_Verify: ResolveCommit with spec.verify against a Git
// server: a signed commit is verified, an unsigned one rejected, Tag mode
// checks the annotated tag the revision names, a verdict is remembered,
// and a missing keys Secret is a non-retryable error naming it.
func TestResolveCommit_Verify(t *testing.T) {
	alice := verifytest.NewPGPKey(t, "Alice", "alice@example.com")
	bob := verifytest.NewSSHKey(t, "bob@laptop")
	srv := testenv.NewGitServer(t, testenv.GitServerOptions{})
	repo := srv.CreateRepo(t, "app", map[string]string{"fleet.yaml": "namespace: app\n"})
	secrets := &keySecrets{name: "keys", data: map[string][]byte{"alice.asc": alice.Public(t), "ssh": bob.Public(t)}}
	a := &Activities{Secrets: secrets, Git: gitsource.NewCache(t.TempDir())}
	ref := GitRepoRef{Namespace: "ns", Name: "app"}
	spec := api.GitRepoSpec{Repo: repo.URL(), Branch: "master", Verify: &api.VerifySpec{SecretRef: &api.LocalObjectReference{Name: "keys"}}}
	in := ResolveInput{GitRepo: ref, Spec: spec}

	signed := verifytest.Commit(t, repo.Dir(), "master", "signed", bob)
	res, err := a.ResolveCommit(t.Context(), in)
	require.NoError(t, err)
	assert.Equal(t, signed, res.Commit)
	assert.Nil(t, res.Rejected)
	assert.Equal(t, bob.Fingerprint()+" (bob@laptop)", res.Verified)

	unsigned := verifytest.Commit(t, repo.Dir(), "master", "unsigned", nil)
	res, err = a.ResolveCommit(t.Context(), in)
	require.NoError(t, err)
	assert.Equal(t, &Rejection{Commit: unsigned, Reason: "not signed"}, res.Rejected)
	assert.Empty(t, res.Verified)

	// The verdict is remembered: checking again needs no clone (this
	// one's cache cannot even be created).
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	noClone := &Activities{Secrets: secrets, Git: gitsource.NewCache(filepath.Join(file, "cache"))}
	_, rejected, err := noClone.verify(t.Context(), gitsource.Remote{URL: repo.URL()}, in,
		gitsource.Ref{Name: "refs/heads/master", Commit: unsigned})
	require.NoError(t, err)
	assert.Equal(t, &Rejection{Commit: unsigned, Reason: "not signed"}, rejected)

	// Tag mode: the revision's annotated tag must be signed.
	verifytest.Tag(t, repo.Dir(), "v1", unsigned, alice)
	verifytest.Tag(t, repo.Dir(), "v0", signed, nil)
	tagged := in
	tagged.Spec.Revision, tagged.Spec.Verify = "v1", &api.VerifySpec{Mode: api.VerifyTag, SecretRef: spec.Verify.SecretRef}
	res, err = a.ResolveCommit(t.Context(), tagged)
	require.NoError(t, err)
	assert.Nil(t, res.Rejected)
	assert.Equal(t, "tag v1: "+alice.Fingerprint()+" (Alice <alice@example.com>)", res.Verified)

	tagged.Spec.Revision = "v0"
	res, err = a.ResolveCommit(t.Context(), tagged)
	require.NoError(t, err)
	require.NotNil(t, res.Rejected)
	assert.Equal(t, "v0", res.Rejected.Tag)
	assert.Equal(t, "not signed", res.Rejected.Reason)

	// Tag mode following a branch: nothing names a tag.
	tagged.Spec.Revision = ""
	res, err = a.ResolveCommit(t.Context(), tagged)
	require.NoError(t, err)
	require.NotNil(t, res.Rejected)
	assert.Contains(t, res.Rejected.Reason, "needs revision to name a tag")

	// A missing keys Secret fails non-retryably, naming it.
	in.Spec.Verify = &api.VerifySpec{SecretRef: &api.LocalObjectReference{Name: "nope"}}
	_, err = a.ResolveCommit(t.Context(), in)
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "%v", err)
	assert.True(t, appErr.NonRetryable())
	assert.Equal(t, ErrTypeSecretNotFound, appErr.Type())
	assert.Contains(t, err.Error(), `GitRepo ns/app: verify.secretRef "nope": no such secret in namespace ns`)

	// Keys that are not keys: named by entry, content not repeated.
	secrets.data = map[string][]byte{"junk": []byte("hunter2")}
	in.Spec.Verify = spec.Verify
	_, err = a.ResolveCommit(t.Context(), in)
	require.True(t, errors.As(err, &appErr), "%v", err)
	assert.True(t, appErr.NonRetryable())
	assert.Contains(t, err.Error(), `key "junk"`)
	assert.NotContains(t, err.Error(), "hunter2")
}

// TestVerify_TagVerdictBoundToTagObject: a Tag-mode verdict belongs to the
// tag object the remote advertises now, in that repository. The refs are
// what a server that advertises peeled tags (as git's does) resolves: the
// commit, and the tag object beside it.
func TestVerify_TagVerdictBoundToTagObject(t *testing.T) {
	alice := verifytest.NewPGPKey(t, "Alice", "alice@example.com")
	srv := testenv.NewGitServer(t, testenv.GitServerOptions{})
	repo := srv.CreateRepo(t, "app", map[string]string{"fleet.yaml": "namespace: app\n"})
	secrets := &keySecrets{name: "keys", data: map[string][]byte{"alice.asc": alice.Public(t)}}
	a := &Activities{Secrets: secrets, Git: gitsource.NewCache(t.TempDir())}
	in := ResolveInput{GitRepo: GitRepoRef{Namespace: "ns", Name: "app"}, Spec: api.GitRepoSpec{Repo: repo.URL(), Revision: "v1",
		Verify: &api.VerifySpec{Mode: api.VerifyTag, SecretRef: &api.LocalObjectReference{Name: "keys"}}}}
	remote := gitsource.Remote{URL: repo.URL()}
	commit := verifytest.Commit(t, repo.Dir(), "master", "release", nil)
	advertised := func() gitsource.Ref {
		server, err := git.PlainOpen(repo.Dir())
		require.NoError(t, err)
		tag, err := server.Reference(plumbing.NewTagReferenceName("v1"), false)
		require.NoError(t, err)
		return gitsource.Ref{Name: "refs/tags/v1", Commit: commit, Tag: tag.Hash().String()}
	}

	verifytest.Tag(t, repo.Dir(), "v1", commit, alice)
	signed := advertised()
	verified, rejected, err := a.verify(t.Context(), remote, in, signed)
	require.NoError(t, err)
	require.Nil(t, rejected)
	assert.Equal(t, "tag v1: "+alice.Fingerprint()+" (Alice <alice@example.com>)", verified)

	// v1 re-created unsigned at the same commit: the clone's copy of the
	// signed tag, and the verdict about it, do not count.
	verifytest.Tag(t, repo.Dir(), "v1", commit, nil)
	unsigned := advertised()
	require.NotEqual(t, signed.Tag, unsigned.Tag)
	verified, rejected, err = a.verify(t.Context(), remote, in, unsigned)
	require.NoError(t, err)
	assert.Empty(t, verified)
	assert.Equal(t, &Rejection{Commit: commit, Tag: "v1", Reason: "not signed"}, rejected)

	// The same tag object named by another repository is checked there
	// (here it cannot be reached), not taken from this one's verdict.
	other := gitsource.Remote{URL: "http://127.0.0.1:1/other.git"}
	_, _, err = a.verify(t.Context(), other, in, signed)
	require.Error(t, err)
}
