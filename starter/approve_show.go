package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"go.temporal.io/sdk/client"

	"github.com/flotilla-gitops/flotilla/internal/output"
	"github.com/flotilla-gitops/flotilla/internal/plan"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
)

// showApprovalPlans prints the plans of the running rollout's partitions
// that wait for approval (only a.Bundle's, a.Partition's when set): what
// approving each would do. It approves nothing.
func showApprovalPlans(ctx context.Context, c client.Client, w io.Writer, f output.Format, namespace, repo string, a protocol.Approve) error {
	st, err := gitRepoStatus(ctx, c, namespace, repo)
	if err != nil {
		return err
	}
	if st.Rollout == "" {
		return fmt.Errorf("GitRepo %s/%s has no rollout running; nothing waits for approval", namespace, repo)
	}
	v, err := c.QueryWorkflow(ctx, st.Rollout, "", protocol.QueryPlan)
	if err != nil {
		return fmt.Errorf("rollout %s: asking for the plans of its approvals: %w", st.Rollout, err)
	}
	var plans plan.ApprovalPlans
	if err := v.Get(&plans); err != nil {
		return fmt.Errorf("rollout %s: reading the plans of its approvals: %w", st.Rollout, err)
	}
	plans.Partitions = filterPlans(plans.Partitions, a.Bundle, a.Partition)
	return printApprovalPlans(w, f, repo, plans)
}

// filterPlans keeps the plans of bundle's (when set) partition named
// partition (when set).
func filterPlans(plans []plan.PartitionPlan, bundle, partition string) []plan.PartitionPlan {
	out := []plan.PartitionPlan{}
	for _, pp := range plans {
		if (bundle == "" || pp.Bundle == bundle) && (partition == "" || pp.Partition == partition) {
			out = append(out, pp)
		}
	}
	return out
}

// printApprovalPlans prints plans in format f: for -o json|yaml the query
// answer as it is; for people, per waiting partition a header naming its
// clusters, its plan (printPlan) or why there is none, and the command
// that approves it.
func printApprovalPlans(w io.Writer, f output.Format, repo string, plans plan.ApprovalPlans) error {
	if f != output.Table {
		return output.Print(w, f, plans, output.Rows{})
	}
	if len(plans.Partitions) == 0 {
		_, err := fmt.Fprintf(w, "rollout %s: no partition is waiting for approval\n", plans.Rollout)
		return err
	}
	for i, pp := range plans.Partitions {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "rollout %s: bundle %s partition %s waits for approval", plans.Rollout, pp.Bundle, pp.Partition)
		if len(pp.Clusters) > 0 {
			fmt.Fprintf(w, " (%d cluster(s): %s)", len(pp.Clusters), strings.Join(pp.Clusters, ", "))
		}
		fmt.Fprintln(w)
		switch {
		case pp.State == plan.StatePlanned && pp.Plan != nil:
			if err := printPlan(w, output.Table, *pp.Plan); err != nil {
				return err
			}
		case pp.State == plan.StatePlanning:
			fmt.Fprintf(w, "plan: being made (workflow %s); ask again shortly\n", pp.Workflow)
		case pp.State == plan.StateFailed:
			fmt.Fprintf(w, "plan failed: %s (approving still works)\n", pp.Error)
		case pp.Summary != "":
			fmt.Fprintf(w, "plan: none (%s)\n", pp.Summary)
		default:
			fmt.Fprintln(w, "plan: none (the rollout started before approvals were planned)")
		}
		fmt.Fprintf(w, "approve: flotilla approve %s --bundle %s --partition %s\n", repo, pp.Bundle, pp.Partition)
	}
	return nil
}
