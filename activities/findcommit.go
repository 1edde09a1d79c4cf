package activities

import (
	"context"

	"github.com/flotilla-gitops/flotilla/internal/api"
)

// FindCommitInput names a commit of a GitRepo's repository, full or
// abbreviated, for `flotilla rollback --to`.
type FindCommitInput struct {
	GitRepo GitRepoRef      `json:"gitRepo"`
	Spec    api.GitRepoSpec `json:"spec"`
	Commit  string          `json:"commit"`
}

// FindCommitResult is the full hash of the commit found.
type FindCommitResult struct {
	Commit string `json:"commit"`
}

// FindCommit checks that in.Commit is a commit of the GitRepo's repository
// (read with the GitRepo's credentials, through the controller's shared
// clone) and returns its full hash. A commit the repository does not have
// is ErrTypeRefNotFound (non-retryable), naming it.
func (a *Activities) FindCommit(ctx context.Context, in FindCommitInput) (FindCommitResult, error) {
	r, _, err := a.remote(ctx, in.GitRepo, in.Spec)
	if err != nil {
		return FindCommitResult{}, err
	}
	commit, err := a.Git.FindCommit(ctx, r, in.Commit)
	if err != nil {
		return FindCommitResult{}, gitError(in.GitRepo, err)
	}
	return FindCommitResult{Commit: commit}, nil
}
