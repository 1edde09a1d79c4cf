package activities

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/rollout"
)

// ErrTypeGitRepoNotFound: the GitRepo a plan names is not applied.
const ErrTypeGitRepoNotFound = "GitRepoNotFound"

// PlanBase is what a GitRepo runs now, as a plan compares a change with
// it (the answer of protocol.QueryPlanBase).
type PlanBase struct {
	Spec api.GitRepoSpec `json:"spec"`
	// Commit is the commit the GitRepo last rolled out (empty: none yet);
	// LatestCommit the newest its remote showed.
	Commit       string `json:"commit,omitempty"`
	LatestCommit string `json:"latestCommit,omitempty"`
	Paused       bool   `json:"paused,omitempty"`
	// Inventory is every release the GitRepo may run, on which cluster
	// (a running rollout's planned releases included).
	Inventory []rollout.InventoryEntry `json:"inventory,omitempty"`
}

// ReadPlanBase asks the GitRepo's workflow for its PlanBase. A GitRepo
// that is not applied is a non-retryable ErrTypeGitRepoNotFound naming
// it.
func (a *Activities) ReadPlanBase(ctx context.Context, ref GitRepoRef) (PlanBase, error) {
	v, err := a.Client.QueryWorkflow(ctx, ref.WorkflowID(), "", protocol.QueryPlanBase)
	var nf *serviceerror.NotFound
	var qf *serviceerror.QueryFailed // the workflow runs, but nothing is applied
	if errors.As(err, &nf) || errors.As(err, &qf) {
		return PlanBase{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s not found", ref.Title()), ErrTypeGitRepoNotFound, nil)
	}
	if err != nil {
		return PlanBase{}, fmt.Errorf("query %s: %w", ref.Title(), err)
	}
	var base PlanBase
	if err := v.Get(&base); err != nil {
		return PlanBase{}, fmt.Errorf("read %s: %w", ref.Title(), err)
	}
	return base, nil
}
