package policy

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/temporalx"
)

// Verbs ApplyDocument answers with, as `flotilla apply` prints them.
const (
	Created    = "created"
	Configured = "configured"
	Unchanged  = "unchanged"
)

// ErrNotFound: DeleteDocument found no such document.
var ErrNotFound = errors.New("not found")

// ErrNotPolicy: the document is neither a GitRepoRestriction nor a Policy.
var ErrNotPolicy = errors.New("not a GitRepoRestriction or Policy")

// ApplyDocument stores d, a GitRepoRestriction or Policy decoded and
// validated by api.Decode, in its namespace's PolicyWorkflow (started on
// taskQueue when the namespace has none) and says what happened. The
// workflow validates again and tells the namespace's GitRepos and
// HelmOps when something changed. A document the workflow refuses comes
// back as its *temporal.ApplicationError.
func ApplyDocument(ctx context.Context, c client.Client, taskQueue string, d api.Document) (string, error) {
	var a protocol.PolicyApply
	var ns, kind, name string
	switch {
	case d.GitRepoRestriction != nil:
		r := *d.GitRepoRestriction
		r.Default()
		a.Restriction, kind, ns, name = &r, api.KindGitRepoRestriction, r.Metadata.Namespace, r.Metadata.Name
	case d.Policy != nil:
		p := *d.Policy
		p.Default()
		a.Policy, kind, ns, name = &p, api.KindPolicy, p.Metadata.Namespace, p.Metadata.Name
	default:
		return "", ErrNotPolicy
	}
	var res protocol.PolicyResult
	err := temporalx.UpdateWithStart(ctx, c, taskQueue, protocol.PolicyID(ns), protocol.UpdateApply, a, &res,
		protocol.PolicyWorkflow, protocol.PolicyStart{Record: protocol.PolicyRecord{Namespace: ns}})
	if err != nil {
		return "", fmt.Errorf("apply %s %s/%s: %w", kind, ns, name, err)
	}
	switch {
	case res.Created:
		return Created, nil
	case res.Changed:
		return Configured, nil
	}
	return Unchanged, nil
}

// DeleteDocument removes the GitRepoRestriction or Policy (kind) named
// namespace/name; the namespace's GitRepos and HelmOps are told. A
// document that is not stored is ErrNotFound (wrapped); callers that
// delete idempotently (a finalizer) treat it as done. The task queue
// (ApplyDocument's) is not needed: a delete never starts the workflow.
func DeleteDocument(ctx context.Context, c client.Client, _, kind, namespace, name string) error {
	if kind != api.KindGitRepoRestriction && kind != api.KindPolicy {
		return fmt.Errorf("delete %s %s/%s: %w", kind, namespace, name, ErrNotPolicy)
	}
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   protocol.PolicyID(namespace),
		UpdateName:   protocol.UpdatePolicyDelete,
		Args:         []any{protocol.PolicyDelete{Kind: kind, Name: name}},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	var res protocol.PolicyResult
	if err == nil {
		err = h.Get(ctx, &res)
	}
	if nf := (*serviceerror.NotFound)(nil); errors.As(err, &nf) || (err == nil && !res.Found) {
		return fmt.Errorf("delete %s %s/%s: %w", kind, namespace, name, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("delete %s %s/%s: %w", kind, namespace, name, err)
	}
	return nil
}

// Load reads the restrictions and policies of namespace from its
// PolicyWorkflow; a namespace without one has none (an empty Set).
func Load(ctx context.Context, c client.Client, namespace string) (Set, error) {
	v, err := c.QueryWorkflow(ctx, protocol.PolicyID(namespace), "", protocol.QueryStatus)
	if nf := (*serviceerror.NotFound)(nil); errors.As(err, &nf) {
		return Set{}, nil
	}
	if err != nil {
		return Set{}, fmt.Errorf("read the policies of namespace %s: %w", namespace, err)
	}
	var rec protocol.PolicyRecord
	if err := v.Get(&rec); err != nil {
		return Set{}, fmt.Errorf("read the policies of namespace %s: %w", namespace, err)
	}
	return Set{Restrictions: rec.Restrictions, Policies: rec.Policies}, nil
}
