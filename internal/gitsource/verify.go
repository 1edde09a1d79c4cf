package gitsource

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/go-git/go-git/v5"
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
// the tag object the remote advertised for it (ref.Tag, or ref.Commit when
// the remote advertises no peeled entries) from the shared clone of r,
// fetching what the clone lacks (as Checkout does). The tag is read by
// that hash, never through the clone's own (possibly stale) tag reference:
// a tag re-created at the same commit is the new object. A lightweight tag
// leaves Signed.Tag nil.
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
	if ref.Tag != "" && !IsFullHash(ref.Tag) {
		return Signed{}, fmt.Errorf("read %s: tag %q is not a 40-hex object hash", ref.Name, ref.Tag)
	}
	repo, err := c.openClone(ep.url)
	if err != nil {
		return Signed{}, err
	}
	advertised := plumbing.NewHash(strings.ToLower(ref.Commit))
	if ref.Tag != "" {
		advertised = plumbing.NewHash(strings.ToLower(ref.Tag))
	}
	// Peeling the advertised object fetches it (and the commit) if needed.
	commit, err := c.ensureCommit(ctx, repo, ep, advertised)
	if err != nil {
		return Signed{}, err
	}
	if ref.Tag != "" && !strings.EqualFold(commit.Hash.String(), ref.Commit) {
		return Signed{}, fmt.Errorf("read %s: tag object %s peels to %s, not to the advertised %s",
			ref.Name, advertised, commit.Hash, ref.Commit)
	}
	s := Signed{Commit: commit}
	if plumbing.ReferenceName(ref.Name).IsTag() {
		s.Tag, err = tagAt(repo, advertised)
	}
	return s, err
}

// tagAt reads the annotated tag object h names in the clone; nil when h
// is a commit (a lightweight tag).
func tagAt(repo *git.Repository, h plumbing.Hash) (*object.Tag, error) {
	obj, err := repo.Storer.EncodedObject(plumbing.AnyObject, h)
	if err != nil {
		return nil, fmt.Errorf("read tag %s: %w", h, corrupt(err))
	}
	if obj.Type() != plumbing.TagObject {
		return nil, nil
	}
	tag, err := object.DecodeTag(repo.Storer, obj)
	if err != nil {
		return nil, fmt.Errorf("read tag %s: %w", h, corrupt(err))
	}
	return tag, nil
}
