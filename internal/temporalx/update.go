package temporalx

import (
	"context"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/flotilla-gitops/flotilla/internal/protocol"
)

// UpdateWithStart sends an update to an entity workflow, starting it
// first (on queue, with input and attrs) when it does not run, and waits
// for the update's result.
func UpdateWithStart(ctx context.Context, c client.Client, queue, id, update string, arg, out any,
	wf string, input any, attrs ...temporal.SearchAttributeUpdate) error {
	op := c.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
		ID:                       id,
		TaskQueue:                queue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		TypedSearchAttributes:    temporal.NewSearchAttributes(attrs...),
	}, wf, input)
	h, err := c.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: op,
		UpdateOptions: client.UpdateWorkflowOptions{
			UpdateName:   update,
			Args:         []any{arg},
			WaitForStage: client.WorkflowUpdateStageCompleted,
		},
	})
	if err != nil {
		return err
	}
	return h.Get(ctx, out)
}

// ApplyCluster sends a ClusterApply to a cluster's entity workflow,
// starting the workflow for a new cluster, and returns the record.
func ApplyCluster(ctx context.Context, c client.Client, queue, name string, a protocol.ClusterApply) (protocol.ClusterRecord, error) {
	var rec protocol.ClusterRecord
	err := UpdateWithStart(ctx, c, queue, protocol.ClusterID(name), protocol.UpdateApply, a, &rec,
		protocol.ClusterWorkflow, protocol.ClusterStart{Record: protocol.ClusterRecord{Name: name}},
		KeyCluster.ValueSet([]string{name}))
	return rec, err
}

// ApplySecret stores a sealed Secret in its entity workflow, starting the
// workflow for a new Secret, and returns the record.
func ApplySecret(ctx context.Context, c client.Client, queue string, rec protocol.SecretRecord) (protocol.SecretRecord, error) {
	var out protocol.SecretRecord
	start := protocol.SecretStart{Record: protocol.SecretRecord{Namespace: rec.Namespace, Name: rec.Name}}
	err := UpdateWithStart(ctx, c, queue, protocol.SecretID(rec.Namespace, rec.Name), protocol.UpdateApply, rec, &out,
		protocol.SecretWorkflow, start)
	return out, err
}
