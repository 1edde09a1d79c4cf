package testenv

import (
	"context"
	"errors"
	"testing"

	"github.com/flotilla-gitops/flotilla/internal/gitsource"
)

// TestCommitToRef: a commit on refs/pull/1/head (not a branch) is
// fetched by hash only from a server advertising
// allow-reachable-sha1-in-want, as GitHub's does.
func TestCommitToRef(t *testing.T) {
	for _, allow := range []bool{false, true} {
		s := NewGitServer(t, GitServerOptions{AllowReachableSHA1InWant: allow})
		r := s.CreateRepo(t, "acme/app", map[string]string{"a": "1"})
		base := r.Head(t)
		head := r.CommitToRef(t, "refs/pull/1/head", map[string]string{"a": "2"}, "pr")
		if head == base || r.Head(t) != base {
			t.Fatalf("CommitToRef moved HEAD or made no commit: base %s head %s HEAD %s", base, head, r.Head(t))
		}
		_, _, err := gitsource.NewCache(t.TempDir()).Checkout(context.Background(), gitsource.Remote{URL: r.URL()},
			gitsource.Ref{Name: head, Commit: head})
		switch {
		case allow && err != nil:
			t.Fatalf("with allow-reachable-sha1-in-want: %v", err)
		case !allow && !errors.Is(err, gitsource.ErrRefNotFound):
			t.Fatalf("without it: got %v, want ErrRefNotFound", err)
		}
	}
}
