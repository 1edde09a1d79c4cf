package activities

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/flotilla-gitops/flotilla/internal/gitsource"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/temporalx"
	"github.com/flotilla-gitops/flotilla/internal/webhook"
)

// Bounds of telling the other GitRepos of a remote that a ref moved.
const (
	checkSignalTimeout     = 10 * time.Second
	checkSignalParallelism = 8
)

// lsRemote resolves the GitRepo's branch or revision on the remote
// through the controller's shared answers: a poll (in.MaxAge > 0) reuses
// an answer another GitRepo of the same remote and credentials got within
// its polling interval; webhooks, syncs and applies always ask. When this
// call's request finds the ref moved, the other GitRepos of the repository
// are told to check now (protocol.SignalCheck), so they take the shared
// answer at once instead of at their next poll.
func (a *Activities) lsRemote(ctx context.Context, r gitsource.Remote, in ResolveInput) (gitsource.Ref, error) {
	ans, err := a.answers.Resolve(ctx, r, in.Spec.Branch, in.Spec.Revision, in.MaxAge)
	if err != nil {
		return gitsource.Ref{}, err
	}
	if ans.Moved && in.Spec.Revision == "" && a.Client != nil {
		a.signalCheck(ctx, in, ans.Ref)
	}
	return ans.Ref, nil
}

// signalCheck sends SignalCheck to every running GitRepo whose normalised
// repository URL is in.Spec.Repo's, but in.GitRepo. It is best effort: a
// GitRepo not told finds the commit at its next poll.
func (a *Activities) signalCheck(ctx context.Context, in ResolveInput, ref gitsource.Ref) {
	ctx, cancel := context.WithTimeout(ctx, checkSignalTimeout)
	defer cancel()
	key := webhook.SearchKey(in.Spec.Repo)
	if strings.ContainsAny(key, `'"\`) {
		return // not a URL a GitRepo can have: no visibility query quotes it
	}
	self := in.GitRepo.WorkflowID()
	query := fmt.Sprintf("%s AND %s = '%s'", temporalx.RunningOfType(protocol.GitRepoWorkflow), temporalx.SearchAttrRepoURL, key)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(checkSignalParallelism)
	told := 0
	err := temporalx.EachWorkflow(ctx, a.Client, query, func(id string) error {
		if id == self {
			return nil
		}
		told++
		g.Go(func() error {
			// A GitRepo that ended since it was listed is no loss.
			_ = a.Client.SignalWorkflow(gctx, id, "", protocol.SignalCheck, protocol.Check{Ref: ref.Name, Commit: ref.Commit})
			return nil
		})
		return nil
	})
	_ = g.Wait() // the signals report nothing
	if err != nil {
		a.Logger.Debug("GitRepos of the repository not told to check", zap.String("gitrepo", in.GitRepo.String()), zap.Error(err))
		return
	}
	a.Logger.Debug("Told GitRepos of the repository to check", zap.String("gitrepo", in.GitRepo.String()),
		zap.String("ref", ref.Name), zap.String("commit", ref.Commit), zap.Int("gitrepos", told))
}
