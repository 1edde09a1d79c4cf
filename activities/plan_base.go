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
	// Kind is api.KindHelmOp when the name is a HelmOp's (ReadPlanBase).
	Kind string          `json:"kind,omitempty"`
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

// ReadPlanBase asks the GitRepo's workflow for its PlanBase, or, when no
// GitRepo has the name, the HelmOp's (PlanBase.Kind says which). Neither
// applied is a non-retryable ErrTypeGitRepoNotFound naming the GitRepo.
func (a *Activities) ReadPlanBase(ctx context.Context, ref GitRepoRef) (PlanBase, error) {
	base, err := a.queryPlanBase(ctx, ref)
	if errors.Is(err, errNotApplied) && ref.Kind == "" {
		helmOp := GitRepoRef{Namespace: ref.Namespace, Name: ref.Name, Kind: api.KindHelmOp}
		if base, err = a.queryPlanBase(ctx, helmOp); err == nil {
			base.Kind = api.KindHelmOp
			return base, nil
		}
	}
	if errors.Is(err, errNotApplied) {
		return PlanBase{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s not found", ref.Title()), ErrTypeGitRepoNotFound, nil)
	}
	return base, err
}

// errNotApplied: no workflow answers for the entity, or it has no spec.
var errNotApplied = errors.New("not applied")

func (a *Activities) queryPlanBase(ctx context.Context, ref GitRepoRef) (PlanBase, error) {
	v, err := a.Client.QueryWorkflow(ctx, ref.WorkflowID(), "", protocol.QueryPlanBase)
	var nf *serviceerror.NotFound
	var qf *serviceerror.QueryFailed // the workflow runs, but nothing is applied
	if errors.As(err, &nf) || errors.As(err, &qf) {
		return PlanBase{}, errNotApplied
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
