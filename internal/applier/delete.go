package applier

import (
	"context"
	"errors"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
)

// ErrNotFound: the resource has no workflow (never applied, or deleted
// and gone).
var ErrNotFound = errors.New("not found")

// WorkflowID is the ID of the workflow that holds a resource of kind;
// "" for a kind without one (GitRepoRestriction, Policy).
func WorkflowID(kind, namespace, name string) string {
	switch kind {
	case api.KindGitRepo:
		return protocol.GitRepoID(namespace, name)
	case api.KindHelmOp:
		return protocol.HelmOpID(namespace, name)
	case api.KindSecret:
		return protocol.SecretID(namespace, name)
	case api.KindConfigMap:
		return protocol.ConfigMapID(namespace, name)
	case api.KindClusterGroup:
		return protocol.ClusterGroupID(name)
	case api.KindCluster:
		return protocol.ClusterID(name)
	}
	return ""
}

// Delete asks the resource's workflow to end, as `flotilla delete` does: a
// GitRepo or HelmOp uninstalls its releases first (or forgets them with
// spec.keepResources). It returns at once; Ended tells when the deletion
// is over. A resource without a workflow is ErrNotFound.
func (a *Applier) Delete(ctx context.Context, kind, namespace, name string) error {
	if kind == api.KindGitRepoRestriction || kind == api.KindPolicy {
		return deletePolicy(ctx, a.Temporal, a.TaskQueue, kind, namespace, name)
	}
	if kind == api.KindNotification {
		return deleteNotification(ctx, a.Temporal, namespace, name)
	}
	id := WorkflowID(kind, namespace, name)
	if id == "" {
		return fmt.Errorf("delete %s %s/%s: %w", kind, namespace, name, ErrUnsupported)
	}
	err := a.Temporal.SignalWorkflow(ctx, id, "", protocol.SignalDelete, nil)
	if nf := (*serviceerror.NotFound)(nil); errors.As(err, &nf) {
		return fmt.Errorf("delete %s %s/%s: %w", kind, namespace, name, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("delete %s %s/%s: %w", kind, namespace, name, err)
	}
	return nil
}

// Ended reports whether the resource's workflow is not running (its
// deletion finished, or it never existed). Kinds without a workflow have
// always ended.
func (a *Applier) Ended(ctx context.Context, kind, namespace, name string) (bool, error) {
	id := WorkflowID(kind, namespace, name)
	if id == "" {
		return true, nil
	}
	d, err := a.Temporal.DescribeWorkflowExecution(ctx, id, "")
	if nf := (*serviceerror.NotFound)(nil); errors.As(err, &nf) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("describe the workflow of %s %s/%s: %w", kind, namespace, name, err)
	}
	return d.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, nil
}
