package gitsource

import (
	"context"
	"fmt"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
)

// minAbbrev is the shortest abbreviated hash FindCommit accepts (git's
// core.abbrev minimum).
const minAbbrev = 4

// FindCommit returns the full hash of the commit rev names in r's
// repository: a full or abbreviated (at least 4 hex digits) commit hash.
// It reads the shared clone of r, fetching its branches and tags when the
// clone does not know rev (and, for a full hash, the hash itself). A hash
// the repository does not have, or an abbreviation that names more than
// one object, is ErrRefNotFound (a *RefNotFoundError of Kind "commit").
// It does not check the commit out.
func (c *Cache) FindCommit(ctx context.Context, r Remote, rev string) (string, error) {
	rev = strings.ToLower(strings.TrimSpace(rev))
	if !isHexOf(rev, minAbbrev) {
		return "", fmt.Errorf("%q is not a commit hash (4 to 40 hex digits): %w", rev, ErrRefNotFound)
	}
	ep, err := r.endpoint()
	if err != nil {
		return "", err
	}
	unlock, err := c.lock(ctx, ep.url)
	if err != nil {
		return "", fmt.Errorf("find commit %s in %s: %w", rev, ep.url, err)
	}
	defer unlock()
	repo, err := c.openClone(ep.url)
	if err != nil {
		return "", err
	}
	if IsFullHash(rev) {
		commit, err := c.ensureCommit(ctx, repo, ep, plumbing.NewHash(rev))
		if err != nil {
			return "", err
		}
		return commit.Hash.String(), nil
	}
	find := func() (string, bool) {
		h, err := repo.ResolveRevision(plumbing.Revision(rev))
		if err != nil || !strings.HasPrefix(h.String(), rev) {
			return "", false
		}
		if commit, err := peel(repo, *h); err == nil {
			return commit.Hash.String(), true
		}
		return "", false
	}
	if h, ok := find(); ok {
		return h, nil
	}
	if err := ep.fetch(ctx, repo, "+refs/heads/*:refs/remotes/origin/*", "+refs/tags/*:refs/tags/*"); err != nil {
		return "", err
	}
	if h, ok := find(); ok {
		return h, nil
	}
	return "", &RefNotFoundError{Kind: "commit", Name: rev, URL: ep.url}
}

// isHexOf reports whether s is between minLen and 40 hex digits.
func isHexOf(s string, minLen int) bool {
	if len(s) < minLen || len(s) > 40 {
		return false
	}
	return !strings.ContainsFunc(s, func(c rune) bool { return (c < '0' || c > '9') && (c < 'a' || c > 'f') })
}
