package activities

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/flotilla-gitops/flotilla/internal/gitsource"
	"github.com/flotilla-gitops/flotilla/internal/sizelimit"
)

// ResolveCommit asks the remote which commit the GitRepo's branch, tag or
// revision is at. For a commit new to the GitRepo it also checks the
// signatures spec.verify asks for, and whether the commit changes anything
// the GitRepo reads since in.Since (both read the controller's shared
// clone of the remote, fetched once for every GitRepo of it).
func (a *Activities) ResolveCommit(ctx context.Context, in ResolveInput) (ResolveResult, error) {
	if in.Spec.HelmOp != nil {
		return a.resolveChart(ctx, in)
	}
	r, warnings, err := a.remote(ctx, in.GitRepo, in.Spec)
	if err != nil {
		return ResolveResult{}, err
	}
	ref, err := a.lsRemote(ctx, r, in)
	if err != nil {
		return ResolveResult{}, gitError(in.GitRepo, err)
	}
	res := ResolveResult{Ref: ref.Name, Commit: ref.Commit, Warnings: warnings}
	if in.Spec.Verify != nil {
		res.Verified, res.Rejected, err = a.verify(ctx, r, in, ref)
		if err != nil {
			return ResolveResult{}, err
		}
		if res.Rejected != nil {
			return res, nil
		}
	}
	if in.Since != "" && in.Since != ref.Commit {
		res.Unchanged, err = a.unchanged(ctx, r, in, ref.Commit)
		if err != nil {
			return ResolveResult{}, err
		}
	}
	return res, nil
}

// gitError classifies a gitsource error as a Temporal error whose type
// workflows and the CLI match on.
func gitError(ref GitRepoRef, err error) error {
	msg := fmt.Sprintf("GitRepo %s: %v", ref, err)
	var rl *gitsource.RateLimitedError
	switch {
	case errors.As(err, &rl):
		return temporal.NewNonRetryableApplicationError(msg, ErrTypeGitRateLimited, nil,
			RateLimit{Host: rl.Host, RetryAt: rl.RetryAt, Reason: rl.Reason})
	case errors.Is(err, gitsource.ErrAuth):
		return temporal.NewNonRetryableApplicationError(msg, ErrTypeGitAuth, nil)
	case errors.Is(err, gitsource.ErrHostKey):
		return temporal.NewNonRetryableApplicationError(msg, ErrTypeGitHostKey, nil)
	case errors.Is(err, gitsource.ErrTLS):
		return temporal.NewNonRetryableApplicationError(msg, ErrTypeGitTLS, nil)
	case errors.Is(err, gitsource.ErrRefNotFound):
		return temporal.NewNonRetryableApplicationError(msg, ErrTypeRefNotFound, nil)
	case errors.Is(err, sizelimit.ErrTooLarge): // the commit is over --max-checkout-size
		return temporal.NewNonRetryableApplicationError(msg, ErrTypeInvalidBundle, nil)
	}
	return temporal.NewApplicationError(msg, "Git")
}
