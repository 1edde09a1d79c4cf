package gitsource

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// Signed is what a signature check reads of a resolved reference.
type Signed struct {
	// Commit is the commit the reference resolves to.
	Commit *object.Commit
	// Tag is the annotated tag the reference names (the outermost, when
	// tags point at tags); nil for a branch, a hash or a lightweight tag.
	Tag *object.Tag
}

// Signed reads ref's commit and, when ref.Name is a tag (refs/tags/…),
// the tag's object from the shared clone of r, fetching what the clone
// lacks (as Checkout does). A lightweight tag leaves Signed.Tag nil.
func (c *Cache) Signed(ctx context.Context, r Remote, ref Ref) (Signed, error) {
	if !IsFullHash(ref.Commit) {
		return Signed{}, fmt.Errorf("read %s: %q is not a 40-hex object hash", ref.Name, ref.Commit)
	}
	ep, err := r.endpoint()
	if err != nil {
		return Signed{}, err
	}
	unlock, err := c.lock(ctx, ep.url)
	if err != nil {
		return Signed{}, fmt.Errorf("read %s from %s: %w", ref.Commit, ep.url, err)
	}
	defer unlock()
	s, err := c.signed(ctx, ep, ref)
	var bad *corruptError
	if errors.As(err, &bad) && ctx.Err() == nil {
		// An unreadable clone is only a cache: start it over, once (as
		// Checkout does), or no commit would ever be verified again.
		if rmErr := os.RemoveAll(c.clonePath(ep.url)); rmErr != nil {
			return Signed{}, errors.Join(err, rmErr)
		}
		s, err = c.signed(ctx, ep, ref)
	}
	return s, err
}

// signed is Signed with the clone's lock held.
func (c *Cache) signed(ctx context.Context, ep endpoint, ref Ref) (Signed, error) {
	repo, err := c.openClone(ep.url)
	if err != nil {
		return Signed{}, err
	}
	commit, err := c.ensureCommit(ctx, repo, ep, plumbing.NewHash(strings.ToLower(ref.Commit)))
	if err != nil {
		return Signed{}, err
	}
	s := Signed{Commit: commit}
	if name := plumbing.ReferenceName(ref.Name); name.IsTag() {
		s.Tag, err = tagObject(ctx, repo, ep, name, commit.Hash)
	}
	return s, err
}

// tagObject returns the annotated tag name points to in the clone,
// fetching the tag when the clone's copy is missing or peels to another
// commit than want (the tag moved); nil for a lightweight tag.
func tagObject(ctx context.Context, repo *git.Repository, ep endpoint, name plumbing.ReferenceName, want plumbing.Hash) (*object.Tag, error) {
	tag, target, err := readTag(repo, name)
	if err == nil && target == want {
		return tag, nil
	}
	if err != nil && !errors.Is(err, plumbing.ErrReferenceNotFound) {
		return nil, err
	}
	spec := config.RefSpec("+" + name.String() + ":" + name.String())
	if err := ep.fetch(ctx, repo, spec); err != nil {
		return nil, err
	}
	tag, _, err = readTag(repo, name)
	if errors.Is(err, plumbing.ErrReferenceNotFound) {
		return nil, &RefNotFoundError{Kind: "tag", Name: name.Short(), URL: ep.url}
	}
	return tag, err
}

// readTag reads the clone's tag ref: its annotated tag object (nil when
// lightweight) and the commit it peels to.
func readTag(repo *git.Repository, name plumbing.ReferenceName) (*object.Tag, plumbing.Hash, error) {
	ref, err := repo.Storer.Reference(name)
	if err != nil {
		return nil, plumbing.ZeroHash, err
	}
	commit, err := peel(repo, ref.Hash())
	if err != nil {
		return nil, plumbing.ZeroHash, err
	}
	obj, err := repo.Storer.EncodedObject(plumbing.AnyObject, ref.Hash())
	if err != nil {
		return nil, plumbing.ZeroHash, fmt.Errorf("read tag %s: %w", name.Short(), corrupt(err))
	}
	if obj.Type() != plumbing.TagObject {
		return nil, commit.Hash, nil
	}
	tag, err := object.DecodeTag(repo.Storer, obj)
	if err != nil {
		return nil, plumbing.ZeroHash, fmt.Errorf("read tag %s: %w", name.Short(), corrupt(err))
	}
	return tag, commit.Hash, nil
}
