package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/flotilla-gitops/flotilla/internal/protocol"
)

// newApproveCommand builds `flotilla approve NAME [--partition P]`: it
// releases the running rollout's partitions that wait for approval
// (rolloutStrategy.partitions[].requireApproval), through an Update, so
// the answer says what was released or why nothing could be.
func newApproveCommand(g *globals) *cobra.Command {
	var partition, bundle string
	var deletions, show bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "approve NAME",
		Short: "Let a rollout's partition that requires approval start",
		Long: `Approve lets the running rollout of GitRepo NAME start a partition whose
rolloutStrategy sets requireApproval: true. Without --partition it releases
every partition that is waiting for approval now; with --partition it
releases that partition (also ahead of time, before the rollout reaches it).
--bundle restricts the approval to one bundle. The approval records who
approved (the CLI's identity: OS user@host, mTLS certificate subject, API
key name), and the answer says who was recorded.

With --show it approves nothing and prints, for each partition waiting for
approval (only --partition's and --bundle's when set), the plan of what
approving it would do: per cluster, each release installed, upgraded,
uninstalled or unchanged with the object diffs (as flotilla plan prints
them). -o json|yaml prints the rollout's answer as it is.

With --deletions it instead lets the uninstalls the deletion guard holds
go (the DeletionHeld condition, reason DeletionGuard: one rollout would
have removed more than the controller's --deletion-guard share of the
GitRepo's releases). It approves exactly the uninstalls held now; a new
rollout removes them. Uninstalls held because a target names a cluster
group or cluster that does not exist are not approvable: create it, or
edit the target.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			repo := args[0]
			if show {
				if deletions {
					return fmt.Errorf("--show prints the plans of partitions waiting for approval; it takes no --deletions")
				}
				f, _ := g.format() // validated in PersistentPreRunE
				return g.withClient(cmd.Context(), timeout, func(ctx context.Context, c client.Client) error {
					return showApprovalPlans(ctx, c, cmd.OutOrStdout(), f, g.Namespace, repo, protocol.Approve{Partition: partition, Bundle: bundle})
				})
			}
			if deletions {
				if partition != "" || bundle != "" {
					return fmt.Errorf("--deletions approves held uninstalls; it takes no --partition or --bundle")
				}
				return g.withClient(cmd.Context(), timeout, func(ctx context.Context, c client.Client) error {
					return approveDeletions(ctx, c, cmd, g.Namespace, repo, g.identity())
				})
			}
			return g.withClient(cmd.Context(), timeout, func(ctx context.Context, c client.Client) error {
				return approvePartitions(ctx, c, cmd, g.Namespace, repo,
					protocol.Approve{Partition: partition, Bundle: bundle, Identity: g.identity()})
			})
		},
	}
	cmd.Flags().StringVar(&partition, "partition", "", "the partition to approve (default: every partition waiting for approval)")
	cmd.Flags().StringVar(&bundle, "bundle", "", "approve only this bundle's partition")
	cmd.Flags().BoolVar(&show, "show", false, "print what approving the waiting partitions would do (their plans); approve nothing")
	cmd.Flags().BoolVar(&deletions, "deletions", false, "let the uninstalls the deletion guard holds go (see the DeletionHeld condition)")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "give up after this long")
	return cmd
}

// approveDeletions sends the approve-deletions update to GitRepo repo's
// workflow, as who, and prints what it let go.
func approveDeletions(ctx context.Context, c client.Client, cmd *cobra.Command, namespace, repo string, who protocol.Identity) error {
	e := parseEntity(namespace, repo)
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   e.id(),
		UpdateName:   protocol.UpdateApproveDeletions,
		Args:         []any{protocol.Approve{Identity: who}},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return fmt.Errorf("%s: %w", e.title(), unwrapUpdate(err))
	}
	var res protocol.ApproveResult
	if err := h.Get(ctx, &res); err != nil {
		return fmt.Errorf("%s: %w", e.title(), unwrapUpdate(err))
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%s: approved %d uninstall(s)%s; a rollout removes them:\n", e.title(), len(res.Approved), approvedBy(res))
	for _, a := range res.Approved {
		fmt.Fprintf(cmd.OutOrStdout(), "  %s\n", a)
	}
	return nil
}

// approvePartitions sends the approve update to GitRepo repo's running
// rollout and prints the partitions it released.
func approvePartitions(ctx context.Context, c client.Client, cmd *cobra.Command, namespace, repo string, a protocol.Approve) error {
	st, err := gitRepoStatus(ctx, c, namespace, repo)
	if err != nil {
		return err
	}
	if st.Rollout == "" {
		return fmt.Errorf("GitRepo %s/%s has no rollout running; nothing waits for approval", namespace, repo)
	}
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   st.Rollout,
		UpdateName:   protocol.UpdateApprove,
		Args:         []any{a},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return fmt.Errorf("rollout %s: %w", st.Rollout, unwrapUpdate(err))
	}
	var res protocol.ApproveResult
	if err := h.Get(ctx, &res); err != nil {
		return fmt.Errorf("rollout %s: %w", st.Rollout, unwrapUpdate(err))
	}
	if len(res.Approved) == 0 {
		fmt.Fprintf(cmd.OutOrStdout(), "rollout %s: no partition is waiting for approval\n", st.Rollout)
		return nil
	}
	fmt.Fprintf(cmd.OutOrStdout(), "rollout %s: approved %s%s\n", st.Rollout, strings.Join(res.Approved, ", "), approvedBy(res))
	return nil
}

// approvedBy is " by <who>" as the workflow recorded it, or nothing when
// it recorded nobody (a worker from before identities).
func approvedBy(res protocol.ApproveResult) string {
	if s := res.By.String(); s != "" {
		return " by " + s
	}
	return ""
}
