// Package verifytest makes signing keys and signs Git commits and tags
// in tests, the way `git commit -S` does with gpg or ssh-keygen.
package verifytest

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/hiddeco/sshsig"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"
)

// Signer signs a payload, returning the armored signature git stores.
type Signer interface {
	Sign(t testing.TB, payload []byte) string
	// Fingerprint is how gitverify names the key.
	Fingerprint() string
	// Public is the key as a verify Secret holds it.
	Public(t testing.TB) []byte
}

// PGPKey is an OpenPGP key.
type PGPKey struct{ Entity *openpgp.Entity }

// NewPGPKey makes an OpenPGP key for "name <email>".
func NewPGPKey(t testing.TB, name, email string) PGPKey {
	t.Helper()
	e, err := openpgp.NewEntity(name, "", email, nil)
	require.NoError(t, err)
	return PGPKey{e}
}

// Public is the armored public key.
func (k PGPKey) Public(t testing.TB) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := armor.Encode(&buf, openpgp.PublicKeyType, nil)
	require.NoError(t, err)
	require.NoError(t, k.Entity.Serialize(w))
	require.NoError(t, w.Close())
	return buf.Bytes()
}

// Fingerprint is the primary key's fingerprint in upper-case hex.
func (k PGPKey) Fingerprint() string { return fmt.Sprintf("%X", k.Entity.PrimaryKey.Fingerprint) }

// Sign makes an armored detached signature.
func (k PGPKey) Sign(t testing.TB, payload []byte) string {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, openpgp.ArmoredDetachSign(&buf, k.Entity, bytes.NewReader(payload), nil))
	return buf.String()
}

// SSHKey is an ed25519 SSH key with a comment.
type SSHKey struct {
	Signer    ssh.Signer
	Comment   string
	Namespace string // default "git"
}

// NewSSHKey makes an ed25519 key.
func NewSSHKey(t testing.TB, comment string) SSHKey {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	s, err := ssh.NewSignerFromKey(priv)
	require.NoError(t, err)
	return SSHKey{Signer: s, Comment: comment}
}

// Public is the authorized_keys line with the comment.
func (k SSHKey) Public(testing.TB) []byte {
	line := bytes.TrimSpace(ssh.MarshalAuthorizedKey(k.Signer.PublicKey()))
	return append(line, []byte(" "+k.Comment+"\n")...)
}

// Fingerprint is the key's SHA256 fingerprint.
func (k SSHKey) Fingerprint() string { return ssh.FingerprintSHA256(k.Signer.PublicKey()) }

// Sign makes an armored SSH signature in k.Namespace (default "git").
func (k SSHKey) Sign(t testing.TB, payload []byte) string {
	t.Helper()
	ns := k.Namespace
	if ns == "" {
		ns = "git"
	}
	sig, err := sshsig.Sign(bytes.NewReader(payload), k.Signer, sshsig.HashSHA512, ns)
	require.NoError(t, err)
	return string(sshsig.Armor(sig))
}

// encoder is a commit or a tag.
type encoder interface {
	EncodeWithoutSignature(o plumbing.EncodedObject) error
}

// Payload is what a signature of a commit or tag covers.
func Payload(t testing.TB, obj encoder) []byte {
	t.Helper()
	o := &plumbing.MemoryObject{}
	require.NoError(t, obj.EncodeWithoutSignature(o))
	r, err := o.Reader()
	require.NoError(t, err)
	b, err := io.ReadAll(r)
	require.NoError(t, err)
	return b
}

// SignCommit sets c's signature by s (nil: unsigned).
func SignCommit(t testing.TB, c *object.Commit, s Signer) *object.Commit {
	t.Helper()
	c.PGPSignature = signature(t, c, s)
	return c
}

// SignTag sets tag's signature by s (nil: unsigned).
func SignTag(t testing.TB, tag *object.Tag, s Signer) *object.Tag {
	t.Helper()
	tag.PGPSignature = signature(t, tag, s)
	return tag
}

// signature is s's signature of obj ("" when s is nil).
func signature(t testing.TB, obj encoder, s Signer) string {
	t.Helper()
	if s == nil {
		return ""
	}
	return s.Sign(t, Payload(t, obj))
}

// when is the author, committer and tagger time of the objects made here.
var when = time.Unix(1700000000, 0).UTC()

// Commit adds a commit signed by s (nil: unsigned) to the repository in
// dir (a bare repository, e.g. testenv.GitRepo.Dir()) on branch, with
// the tree of the branch's head and that head as its parent, and moves
// the branch to it. It returns the commit's hash.
func Commit(t testing.TB, dir, branch, message string, s Signer) string {
	t.Helper()
	repo, err := git.PlainOpen(dir)
	require.NoError(t, err)
	name := plumbing.NewBranchReferenceName(branch)
	head, err := repo.Reference(name, true)
	require.NoError(t, err)
	parent, err := repo.CommitObject(head.Hash())
	require.NoError(t, err)
	sig := object.Signature{Name: "dev", Email: "dev@example.com", When: parent.Committer.When.Add(time.Second)}
	c := &object.Commit{Author: sig, Committer: sig, Message: message + "\n", TreeHash: parent.TreeHash,
		ParentHashes: []plumbing.Hash{parent.Hash}}
	h := store(t, repo, SignCommit(t, c, s))
	require.NoError(t, repo.Storer.SetReference(plumbing.NewHashReference(name, h)))
	return h.String()
}

// Tag adds the annotated tag name of commit, signed by s (nil: unsigned),
// to the repository in dir, replacing any tag of that name.
func Tag(t testing.TB, dir, name, commit string, s Signer) {
	t.Helper()
	repo, err := git.PlainOpen(dir)
	require.NoError(t, err)
	tag := &object.Tag{Name: name, Tagger: object.Signature{Name: "dev", Email: "dev@example.com", When: when},
		Message: "release " + name + "\n", TargetType: plumbing.CommitObject, Target: plumbing.NewHash(commit)}
	h := store(t, repo, SignTag(t, tag, s))
	require.NoError(t, repo.Storer.SetReference(plumbing.NewHashReference(plumbing.NewTagReferenceName(name), h)))
}

// store writes a commit or tag into repo's object store.
func store(t testing.TB, repo *git.Repository, obj interface {
	Encode(o plumbing.EncodedObject) error
}) plumbing.Hash {
	t.Helper()
	o := repo.Storer.NewEncodedObject()
	require.NoError(t, obj.Encode(o))
	h, err := repo.Storer.SetEncodedObject(o)
	require.NoError(t, err)
	return h
}
