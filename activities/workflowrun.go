package activities

import (
	"context"
	"errors"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
)

// WorkflowRunInput names a workflow whose latest run to look up.
type WorkflowRunInput struct {
	WorkflowID string `json:"workflowID"`
}

// WorkflowRunResult tells whether the workflow's latest run is open, and
// how it closed otherwise ("Terminated", "Completed", "NotFound", ...).
type WorkflowRunResult struct {
	Running bool   `json:"running"`
	Status  string `json:"status"`
}

// WorkflowRun looks up a workflow's latest run: a GitRepo run that
// adopted a rollout from its previous run learns that the rollout ended
// without reporting (terminated, say), which no event tells it.
func (a *Activities) WorkflowRun(ctx context.Context, in WorkflowRunInput) (WorkflowRunResult, error) {
	desc, err := a.Client.DescribeWorkflowExecution(ctx, in.WorkflowID, "")
	if nf := (*serviceerror.NotFound)(nil); errors.As(err, &nf) {
		return WorkflowRunResult{Status: "NotFound"}, nil
	}
	if err != nil {
		return WorkflowRunResult{}, fmt.Errorf("describe workflow %s: %w", in.WorkflowID, err)
	}
	st := desc.GetWorkflowExecutionInfo().GetStatus()
	return WorkflowRunResult{Running: st == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, Status: st.String()}, nil
}
