package activities

import (
	"context"

	"github.com/flotilla-gitops/flotilla/internal/gitsource"
)

// lsRemote resolves the GitRepo's branch or revision on the remote.
func (a *Activities) lsRemote(ctx context.Context, r gitsource.Remote, in ResolveInput) (gitsource.Ref, error) {
	return gitsource.Resolve(ctx, r, in.Spec.Branch, in.Spec.Revision)
}
