package activities

import (
	"context"

	"github.com/flotilla-gitops/flotilla/internal/gitsource"
)

// unchanged reports whether commit changes nothing the GitRepo reads since
// in.Since.
func (a *Activities) unchanged(ctx context.Context, r gitsource.Remote, in ResolveInput, commit string) (bool, error) {
	return false, nil
}
