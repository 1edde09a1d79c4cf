package workflows

import (
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/flotilla-gitops/flotilla/activities"
	"github.com/flotilla-gitops/flotilla/internal/history"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

// ErrTypeInvalidRollback is the error type of a rollback the GitRepo
// refuses (no commit, not applied, being deleted, a HelmOp).
const ErrTypeInvalidRollback = "InvalidRollback"

// Pin is the commit `flotilla rollback --to` pinned the GitRepo to: every
// rollout rolls it out, through the GitRepo's strategy, until `flotilla
// resume` clears it. Checks of the remote still record the newest commit
// (LatestCommit) but never roll it out.
type Pin struct {
	Commit string            `json:"commit"`
	By     protocol.Identity `json:"by,omitzero"`
	At     time.Time         `json:"at"`
}

// target is the commit a rollout starting now rolls out: the pinned one,
// else the newest the remote gave.
func (g *gitRepo) target() string {
	if g.s.Pin != nil {
		return g.s.Pin.Commit
	}
	return g.s.LatestCommit
}

// validateRollback refuses a rollback without a commit-like argument, of
// a GitRepo not applied or being deleted, or of a HelmOp. A refusal adds
// nothing to the history.
func (g *gitRepo) validateRollback(_ workflow.Context, in protocol.Rollback) error {
	invalid := func(msg string) error {
		return temporal.NewNonRetryableApplicationError("rollback of "+g.ref.Title()+": "+msg, ErrTypeInvalidRollback, nil)
	}
	commit := strings.TrimSpace(in.Commit)
	switch {
	case g.helmOp():
		return invalid("a HelmOp rolls back by its version (spec.helm.version), not by commit")
	case g.s.GitRepo == nil:
		return invalid("it is not applied")
	case g.s.Deleting:
		return invalid("it is being deleted")
	case commit == "":
		return invalid("commit is required (--to)")
	case len(commit) < 4 || len(commit) > 40 || strings.Trim(strings.ToLower(commit), "0123456789abcdef") != "":
		return invalid(fmt.Sprintf("commit %q is not a commit hash (4 to 40 hex digits)", commit))
	}
	return nil
}

// rollback pins the GitRepo to in.Commit, once the repository shows it
// has that commit (FindCommit, which also expands an abbreviated hash),
// and makes its rollout due: it supersedes a running rollout, lifts a
// pause, and goes through the strategy (partitions, approvals, windows)
// as any rollout does.
func (g *gitRepo) rollback(ctx workflow.Context, in protocol.Rollback) (protocol.RollbackResult, error) {
	var a *activities.Activities
	var found activities.FindCommitResult
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, gitOptions), a.FindCommit,
		activities.FindCommitInput{GitRepo: g.ref, Spec: g.spec(), Commit: strings.TrimSpace(in.Commit)}).Get(ctx, &found)
	if err != nil {
		return protocol.RollbackResult{}, temporal.NewNonRetryableApplicationError(
			"rollback of "+g.ref.Title()+" to "+in.Commit+": "+activityMessage(err), ErrTypeInvalidRollback, nil)
	}
	if g.s.Deleting {
		return protocol.RollbackResult{}, temporal.NewNonRetryableApplicationError(
			"rollback of "+g.ref.Title()+": it is being deleted", ErrTypeInvalidRollback, nil)
	}
	g.s.Pin = &Pin{Commit: found.Commit, By: in.Identity, At: workflow.Now(ctx).UTC()}
	g.s.Paused, g.s.Dirty = false, true
	g.due(history.Trigger{Kind: history.TriggerRollback, Identity: in.Identity})
	workflow.GetLogger(ctx).Info("Pinned by rollback", "commit", found.Commit)
	g.upsert(ctx)
	return protocol.RollbackResult{Commit: found.Commit,
		Rollout: protocol.RolloutID(g.ref.Namespace, g.ref.Name, found.Commit, g.s.Generation)}, nil
}

// unpin clears the pin (resume): the GitRepo follows its branch (or
// spec.revision) again from the next check of the remote.
func (g *gitRepo) unpin() {
	if g.s.Pin == nil {
		return
	}
	g.s.Pin = nil
	g.checkDue(history.Trigger{Kind: history.TriggerResume})
}

// pinned is the pin as status shows it.
func (g *gitRepo) pinned() *status.Pin {
	if g.s.Pin == nil {
		return nil
	}
	return &status.Pin{Commit: g.s.Pin.Commit, By: g.s.Pin.By.String(), At: g.s.Pin.At}
}
