package activities

import (
	"context"

	"go.uber.org/zap"

	"github.com/flotilla-gitops/flotilla/internal/gitsource"
)

// unchanged reports whether commit changes nothing the GitRepo reads since
// in.Since: no file under its paths or bundles, nor any file they
// reference (gitsource.Cache.Touches, on the controller's shared clone).
// A comparison that fails counts as a change, so the commit is rendered as
// before; only the caller's cancellation is an error.
func (a *Activities) unchanged(ctx context.Context, r gitsource.Remote, in ResolveInput, commit string) (bool, error) {
	if a.Git == nil {
		return false, nil
	}
	paths := in.Spec.EffectivePaths()
	if len(in.Spec.Bundles) > 0 {
		paths = nil // bundles replace the walk of paths, as in Fleet
	}
	touched, err := a.Git.Touches(ctx, r, in.Since, commit, gitsource.Inputs{Paths: paths, Bundles: in.Spec.Bundles})
	if err != nil {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		a.Logger.Info("Commits not compared: rendering", zap.String("gitrepo", in.GitRepo.String()),
			zap.String("since", in.Since), zap.String("commit", commit), zap.Error(err))
		return false, nil
	}
	return !touched, nil
}
