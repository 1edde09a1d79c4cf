package workflows

import (
	"reflect"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/flotilla-gitops/flotilla/activities"
	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/policy"
)

// versionPolicy: the GitRepo checks its spec against its namespace's
// GitRepoRestrictions and Policies (activities.CheckPolicy) before it
// resolves or starts a rollout, and rolls out the spec with their
// defaults. Runs recorded before it never check.
const versionPolicy = "policy"

// policyOptions: a failed read of the policies holds the step (nothing
// runs unchecked) and is tried again at the next poll, sync or change,
// instead of blocking the loop, and with it a delete.
var policyOptions = workflow.ActivityOptions{
	StartToCloseTimeout: 30 * time.Second,
	RetryPolicy:         &temporal.RetryPolicy{InitialInterval: 500 * time.Millisecond, MaximumInterval: 5 * time.Second, MaximumAttempts: 5},
}

// PolicyState is what the GitRepo knows of its namespace's policies.
type PolicyState struct {
	// Decision is the last check's: the spec as it rolls out, or the
	// violation. Generation is the spec generation it checked.
	Decision   *policy.Decision `json:"decision,omitempty"`
	Generation int64            `json:"generation,omitempty"`
	// Due: the policies changed since (SignalPolicyChanged).
	Due bool `json:"due,omitempty"`
	// Held: a rollout was due and did not start (a violation, or the
	// policies could not be read); it starts once a check allows it.
	Held bool `json:"held,omitempty"`
	// Failed is set while Error is the failure to read the policies.
	Failed bool `json:"failed,omitempty"`
}

// spec is the spec as it rolls out: with the policies' defaults once
// they were checked for the current generation.
func (g *gitRepo) spec() api.GitRepoSpec {
	if d := g.s.Policy.Decision; d != nil && g.s.Policy.Generation == g.s.Generation {
		return d.Spec
	}
	return g.s.GitRepo.Spec
}

// violation is the last check's violation, if any.
func (g *gitRepo) violation() *policy.Violation {
	if d := g.s.Policy.Decision; d != nil {
		return d.Violation
	}
	return nil
}

// policyChanged takes SignalPolicyChanged: check again, at once.
func (g *gitRepo) policyChanged() {
	if g.policy {
		g.s.Policy.Due, g.s.ResolveDue, g.fresh = true, true, true
	}
}

// refused checks the spec when the spec or the policies changed since
// the last check, and reports whether nothing may run now: the spec
// violates a policy, or the policies could not be read.
func (g *gitRepo) refused(ctx workflow.Context) bool {
	if !g.policy {
		return false
	}
	p := &g.s.Policy
	if p.Decision != nil && !p.Due && p.Generation == g.s.Generation && !p.Failed {
		return p.Decision.Violation != nil
	}
	gen := g.s.Generation
	p.Due = false // a change that comes meanwhile sets it again
	d, err := g.checkPolicy(ctx)
	if err != nil {
		g.s.Error, p.Failed = "policy: "+activityMessage(err), true
		g.upsert(ctx)
		return true
	}
	g.takeDecision(ctx, d, gen)
	return d.Violation != nil
}

// checkPolicy runs activities.CheckPolicy on the applied spec.
func (g *gitRepo) checkPolicy(ctx workflow.Context) (policy.Decision, error) {
	in := activities.CheckPolicyInput{GitRepo: g.ref}
	if g.helmOp() && g.s.HelmOp != nil {
		in.HelmOp = g.s.HelmOp
	} else {
		spec := g.s.GitRepo.Spec
		in.Spec = &spec
	}
	var a *activities.Activities
	var d policy.Decision
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, policyOptions), a.CheckPolicy, in).Get(ctx, &d)
	return d, err
}

// takeDecision keeps a check's decision for spec generation gen: a
// changed effective spec or verdict is a change to roll out (or to
// supersede the running rollout for), and a rollout held for the policy
// starts once it is allowed.
func (g *gitRepo) takeDecision(ctx workflow.Context, d policy.Decision, gen int64) {
	p := &g.s.Policy
	recovered := p.Failed
	if recovered {
		g.s.Error, p.Failed = "", false
	}
	prev := p.Decision
	p.Decision, p.Generation = &d, gen
	wasRefused := prev != nil && prev.Violation != nil
	//workflowcheck:ignore deterministic: equality does not depend on map order
	if prev != nil && (!reflect.DeepEqual(prev.Spec, d.Spec) || wasRefused != (d.Violation != nil)) {
		g.s.Dirty = true
	}
	if d.Violation == nil && p.Held {
		g.s.Dirty, p.Held = true, false
	}
	if d.Violation != nil {
		workflow.GetLogger(ctx).Info("Refused by policy", "gitrepo", g.ref.String(), "violation", d.Violation.Error())
	}
	if recovered || wasRefused || d.Violation != nil {
		g.upsert(ctx) // the state shown in search attributes changes
	}
}

// hold skips a rollout that was due: it starts once a check allows it.
func (g *gitRepo) hold(ctx workflow.Context) {
	g.s.Dirty, g.s.RetryDue, g.s.Repair = false, false, false
	g.s.Policy.Held = true
	g.upsert(ctx)
}
