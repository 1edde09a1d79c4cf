package activities

import (
	"context"
	"errors"

	"go.uber.org/zap"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/policy"
)

// CheckPolicyInput asks whether a GitRepo's spec, or a HelmOp, may roll
// out under the GitRepoRestrictions and Policies of its namespace.
// Exactly one of Spec and HelmOp is set.
type CheckPolicyInput struct {
	GitRepo GitRepoRef       `json:"gitRepo"`
	Spec    *api.GitRepoSpec `json:"spec,omitempty"`
	HelmOp  *api.HelmOp      `json:"helmOp,omitempty"`
}

// CheckPolicy reads the namespace's restrictions and policies from its
// PolicyWorkflow and decides (policy.Set): the spec as it rolls out (the
// defaults applied) or the violation. It runs before the GitRepo
// resolves, renders or deploys anything; a violation is a result, not an
// error.
func (a *Activities) CheckPolicy(ctx context.Context, in CheckPolicyInput) (policy.Decision, error) {
	set, err := policy.Load(ctx, a.Client, in.GitRepo.Namespace)
	if err != nil {
		return policy.Decision{}, err
	}
	var d policy.Decision
	switch {
	case in.HelmOp != nil:
		d = set.HelmOp(*in.HelmOp)
	case in.Spec != nil:
		d = set.GitRepo(*in.Spec)
	default:
		return policy.Decision{}, errors.New("CheckPolicy: neither a GitRepo spec nor a HelmOp")
	}
	if d.Violation != nil {
		a.Logger.Info("Refused by policy", zap.String("gitRepo", in.GitRepo.Title()), zap.String("rule", d.Violation.Rule),
			zap.String("message", d.Violation.Message))
	}
	return d, nil
}
