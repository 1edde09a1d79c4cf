package workflows

import (
	"reflect"
	"slices"
	"strings"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/flotilla-gitops/flotilla/activities"
	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
)

// PolicyWorkflow is the entity workflow of one namespace's
// GitRepoRestrictions and Policies (ID policy/<namespace>). Applies and
// deletes change its record; every change tells the namespace's GitRepos
// and HelmOps (SignalPolicyChanged), which check their spec again
// (activities.CheckPolicy queries the record). It ends once its last
// document is deleted.
func PolicyWorkflow(ctx workflow.Context, in protocol.PolicyStart) error {
	p := &policyEntity{rec: in.Record}
	if err := p.register(ctx); err != nil {
		return err
	}
	for {
		if err := workflow.Await(ctx, func() bool { return p.notify || p.gone() || historyFull(ctx) }); err != nil {
			return err
		}
		if p.notify {
			if err := p.tell(ctx); err != nil {
				return err
			}
			continue
		}
		if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
			return err
		}
		if p.notify {
			continue // a change came with the end: tell it first
		}
		if p.gone() {
			return nil
		}
		return workflow.NewContinueAsNewError(ctx, PolicyWorkflow, protocol.PolicyStart{Record: p.rec})
	}
}

type policyEntity struct {
	rec    protocol.PolicyRecord
	notify bool
	// why is the last change, for the notification's log line.
	why string
}

// gone: documents were applied and the last one was deleted.
func (p *policyEntity) gone() bool {
	return p.rec.Generation > 0 && len(p.rec.Restrictions) == 0 && len(p.rec.Policies) == 0
}

func (p *policyEntity) tell(ctx workflow.Context) error {
	p.notify = false
	var a *activities.Activities
	return workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, registryOptions), a.NotifyNamespace,
		activities.NotifyNamespaceInput{Namespace: p.rec.Namespace, Reason: p.why, Signal: protocol.SignalPolicyChanged}).Get(ctx, nil)
}

func (p *policyEntity) register(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, protocol.QueryStatus, func() (protocol.PolicyRecord, error) { return p.rec, nil }); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, protocol.UpdateApply, p.apply,
		workflow.UpdateHandlerOptions{Validator: p.validateApply}); err != nil {
		return err
	}
	return workflow.SetUpdateHandlerWithOptions(ctx, protocol.UpdatePolicyDelete, p.remove,
		workflow.UpdateHandlerOptions{Validator: p.validateDelete})
}

func (p *policyEntity) validateApply(_ workflow.Context, a protocol.PolicyApply) error {
	var meta api.ObjectMeta
	var validate func() error
	switch {
	case (a.Restriction == nil) == (a.Policy == nil):
		return temporal.NewNonRetryableApplicationError("a policy apply holds exactly one GitRepoRestriction or Policy", "InvalidSpec", nil)
	case a.Restriction != nil:
		r := *a.Restriction
		meta, validate = r.Metadata, r.Validate
	default:
		pol := *a.Policy
		meta, validate = pol.Metadata, pol.Validate
	}
	if meta.Namespace != p.rec.Namespace {
		return temporal.NewNonRetryableApplicationError(meta.Namespace+"/"+meta.Name+" sent to the policy workflow of namespace "+
			p.rec.Namespace, "InvalidSpec", nil)
	}
	//workflowcheck:ignore deterministic: result does not depend on map order
	if err := validate(); err != nil {
		return temporal.NewNonRetryableApplicationError(err.Error(), "InvalidSpec", nil)
	}
	return nil
}

func (p *policyEntity) validateDelete(_ workflow.Context, d protocol.PolicyDelete) error {
	if d.Kind != api.KindGitRepoRestriction && d.Kind != api.KindPolicy {
		return temporal.NewNonRetryableApplicationError("a policy workflow holds no "+d.Kind, "InvalidSpec", nil)
	}
	return nil
}

func (p *policyEntity) apply(_ workflow.Context, a protocol.PolicyApply) (protocol.PolicyResult, error) {
	var res protocol.PolicyResult
	if a.Restriction != nil {
		r := *a.Restriction
		res.Created, res.Changed = upsertDoc(&p.rec.Restrictions, r, func(x api.GitRepoRestriction) string { return x.Metadata.Name })
		p.why = "applied GitRepoRestriction " + r.Metadata.Namespace + "/" + r.Metadata.Name
	} else {
		pol := *a.Policy
		res.Created, res.Changed = upsertDoc(&p.rec.Policies, pol, func(x api.Policy) string { return x.Metadata.Name })
		p.why = "applied Policy " + pol.Metadata.Namespace + "/" + pol.Metadata.Name
	}
	res.Found = true
	p.changed(&res)
	return res, nil
}

func (p *policyEntity) remove(_ workflow.Context, d protocol.PolicyDelete) (protocol.PolicyResult, error) {
	var res protocol.PolicyResult
	if d.Kind == api.KindGitRepoRestriction {
		res.Found = removeDoc(&p.rec.Restrictions, d.Name, func(x api.GitRepoRestriction) string { return x.Metadata.Name })
	} else {
		res.Found = removeDoc(&p.rec.Policies, d.Name, func(x api.Policy) string { return x.Metadata.Name })
	}
	res.Changed = res.Found
	p.why = "deleted " + d.Kind + " " + p.rec.Namespace + "/" + d.Name
	p.changed(&res)
	return res, nil
}

func (p *policyEntity) changed(res *protocol.PolicyResult) {
	if res.Changed {
		p.rec.Generation++
		p.notify = true
	}
	res.Generation = p.rec.Generation
}

// upsertDoc puts doc into the list sorted by name, replacing the one of
// its name; created: there was none, changed: the list changed.
func upsertDoc[T any](list *[]T, doc T, name func(T) string) (created, changed bool) {
	i, found := slices.BinarySearchFunc(*list, name(doc), func(x T, n string) int { return strings.Compare(name(x), n) })
	if !found {
		*list = slices.Insert(*list, i, doc)
		return true, true
	}
	//workflowcheck:ignore deterministic: equality does not depend on map order
	if reflect.DeepEqual((*list)[i], doc) {
		return false, false
	}
	(*list)[i] = doc
	return false, true
}

func removeDoc[T any](list *[]T, n string, name func(T) string) bool {
	i, found := slices.BinarySearchFunc(*list, n, func(x T, n string) int { return strings.Compare(name(x), n) })
	if found {
		*list = slices.Delete(*list, i, i+1)
	}
	return found
}
