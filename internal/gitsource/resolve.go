package gitsource

import (
	"context"
	"errors"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/storage/memory"
)

// DefaultBranch is followed when neither branch nor revision is given and
// the remote does not advertise HEAD (Fleet's default).
const DefaultBranch = "master"

// peeledSuffix marks the advertised commit an annotated tag points to.
const peeledSuffix = "^{}"

// Ref is a resolved Git reference.
type Ref struct {
	// Name is the full reference ("refs/heads/main", "refs/tags/v1") or,
	// for a revision given as a commit hash, the hash itself.
	Name string
	// Commit is the 40-hex commit the reference points to.
	Commit string
	// Tag is the hash of the annotated tag object the remote advertises
	// for Name (its peeled entry is Commit); empty for a branch, a hash,
	// a lightweight tag, and a tag of a server that advertises no peeled
	// entries (Commit is then the tag object's hash).
	Tag string
}

// Resolve returns the commit the remote's reference points to, with one
// ls-remote and no clone.
//
//   - revision, when set, wins over branch. A full 40-hex commit hash is
//     returned as is, after the ls-remote that proves the credentials read
//     the repository (Checkout finds out whether the commit exists). Otherwise it names a tag (preferred) or a branch,
//     short ("v1") or full ("refs/tags/v1"); short hashes are not resolved.
//   - branch names refs/heads/<branch>.
//   - Neither: the branch the remote's HEAD points to, or DefaultBranch
//     when the remote advertises no HEAD.
//
// An annotated tag resolves to its commit through the peeled ("^{}") entry
// that git servers advertise. A server that advertises no peeled entries
// (go-git's own) yields the tag object's hash instead; Cache.Checkout peels
// it. Errors are ErrRefNotFound (a *RefNotFoundError), ErrAuth,
// ErrRepositoryNotFound or transport failures, and name the URL without
// credentials.
//
// Resolve always asks the remote; Answers.Resolve shares answers.
func Resolve(ctx context.Context, r Remote, branch, revision string) (Ref, error) {
	var once Answers
	ans, err := once.Resolve(ctx, r, branch, revision, 0)
	return ans.Ref, err
}

// list is `git ls-remote` with peeled tags.
func (ep endpoint) list(ctx context.Context) ([]*plumbing.Reference, error) {
	remote := git.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: git.DefaultRemoteName, URLs: []string{ep.url}})
	refs, err := remote.ListContext(ctx, &git.ListOptions{
		Auth:            ep.auth,
		InsecureSkipTLS: ep.insecure,
		CABundle:        ep.caBundle,
		PeelingOption:   git.AppendPeeled,
	})
	if errors.Is(err, transport.ErrEmptyRemoteRepository) {
		return nil, nil // no refs: whatever was asked for is not found
	}
	if err != nil {
		return nil, ep.classify("list references of", err)
	}
	return refs, nil
}

// selectRef picks the reference Resolve documents from an ls-remote result.
func selectRef(refs []*plumbing.Reference, branch, revision, url string) (Ref, error) {
	hashes := map[plumbing.ReferenceName]plumbing.Hash{}
	peeled := map[plumbing.ReferenceName]plumbing.Hash{}
	var head *plumbing.Reference
	for _, ref := range refs {
		name := ref.Name()
		switch {
		case name == plumbing.HEAD:
			head = ref
		case ref.Type() != plumbing.HashReference:
		case strings.HasSuffix(string(name), peeledSuffix):
			peeled[plumbing.ReferenceName(strings.TrimSuffix(string(name), peeledSuffix))] = ref.Hash()
		default:
			hashes[name] = ref.Hash()
		}
	}
	lookup := func(name plumbing.ReferenceName) (Ref, bool) {
		h, ok := hashes[name]
		if !ok {
			return Ref{}, false
		}
		if p, ok := peeled[name]; ok {
			return Ref{Name: name.String(), Commit: p.String(), Tag: h.String()}, true
		}
		return Ref{Name: name.String(), Commit: h.String()}, true
	}

	if revision != "" {
		for _, name := range revisionCandidates(revision) {
			if ref, ok := lookup(name); ok {
				return ref, nil
			}
		}
		return Ref{}, &RefNotFoundError{Kind: "revision", Name: revision, URL: url}
	}
	var want plumbing.ReferenceName
	switch {
	case branch != "":
		want = plumbing.NewBranchReferenceName(strings.TrimPrefix(branch, "refs/heads/"))
	case head != nil && head.Type() == plumbing.SymbolicReference:
		want = head.Target()
	case head != nil:
		return Ref{Name: plumbing.HEAD.String(), Commit: head.Hash().String()}, nil
	default:
		want = plumbing.NewBranchReferenceName(DefaultBranch)
	}
	if ref, ok := lookup(want); ok {
		return ref, nil
	}
	return Ref{}, &RefNotFoundError{Kind: "branch", Name: want.Short(), URL: url}
}

// revisionCandidates lists the references a revision may name, in git's
// rev-parse order: a full reference name, then a tag, then a branch.
func revisionCandidates(revision string) []plumbing.ReferenceName {
	if strings.HasPrefix(revision, "refs/") {
		return []plumbing.ReferenceName{plumbing.ReferenceName(revision)}
	}
	return []plumbing.ReferenceName{
		plumbing.NewTagReferenceName(revision),
		plumbing.NewBranchReferenceName(revision),
	}
}

// IsFullHash reports whether s is a 40-hex SHA-1.
func IsFullHash(s string) bool {
	if len(s) != 40 {
		return false
	}
	for _, c := range strings.ToLower(s) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
