package temporalx

import (
	"context"
	"fmt"
	"strings"

	commonpb "go.temporal.io/api/common/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
)

// RunningOfType is the visibility query for running workflows of one type.
func RunningOfType(workflowType string) string {
	return fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus = 'Running'", workflowType)
}

// RunningOfTypes lists the running workflows of any of the types.
func RunningOfTypes(workflowTypes ...string) string {
	conds := make([]string, len(workflowTypes))
	for i, t := range workflowTypes {
		conds[i] = fmt.Sprintf("WorkflowType = '%s'", t)
	}
	return "(" + strings.Join(conds, " OR ") + ") AND ExecutionStatus = 'Running'"
}

// EachWorkflow calls fn with the ID of every workflow the visibility query
// lists, page by page, stopping at the first error.
func EachWorkflow(ctx context.Context, c client.Client, query string, fn func(id string) error) error {
	return EachExecution(ctx, c, query, func(e *commonpb.WorkflowExecution) error { return fn(e.GetWorkflowId()) })
}

// EachExecution calls fn with every execution (workflow ID and run ID) the
// visibility query lists, page by page, stopping at the first error. Each
// run is listed, so a workflow that continued as new comes once per run.
func EachExecution(ctx context.Context, c client.Client, query string, fn func(*commonpb.WorkflowExecution) error) error {
	return EachInfo(ctx, c, query, func(info *workflowpb.WorkflowExecutionInfo) error { return fn(info.GetExecution()) })
}

// EachInfo calls fn with what visibility lists of every execution the
// query matches (IDs, memo, search attributes), page by page, stopping at
// the first error.
func EachInfo(ctx context.Context, c client.Client, query string, fn func(*workflowpb.WorkflowExecutionInfo) error) error {
	var token []byte
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, NextPageToken: token})
		if err != nil {
			return fmt.Errorf("list workflows (%s): %w", query, err)
		}
		for _, e := range resp.GetExecutions() {
			if err := fn(e); err != nil {
				return err
			}
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return nil
		}
	}
}
