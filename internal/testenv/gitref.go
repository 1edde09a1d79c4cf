package testenv

import (
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
)

// CommitToRef records a commit on the full ref name (such as
// "refs/pull/1/head", where a Git host serves a pull request's head) and
// returns its hash. A ref that does not exist yet is created at the
// commit HEAD resolves to first, so the commit's parent is the default
// branch's tip, as a pull request's first commit would be.
func (r *GitRepo) CommitToRef(t testing.TB, ref string, files map[string]string, message string) string {
	t.Helper()
	name := plumbing.ReferenceName(ref)
	if _, err := r.resolve(name); err != nil {
		if err := r.createRef(name); err != nil {
			t.Fatalf("testenv: create %s in %s: %v", ref, r.name, err)
		}
	}
	return r.mustCommit(t, name, files, nil, message)
}
