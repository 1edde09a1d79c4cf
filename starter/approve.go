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
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "approve NAME",
		Short: "Let a rollout's partition that requires approval start",
		Long: `Approve lets the running rollout of GitRepo NAME start a partition whose
rolloutStrategy sets requireApproval: true. Without --partition it releases
every partition that is waiting for approval now; with --partition it
releases that partition (also ahead of time, before the rollout reaches it).
--bundle restricts the approval to one bundle.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			repo := args[0]
			return g.withClient(cmd.Context(), timeout, func(ctx context.Context, c client.Client) error {
				st, err := gitRepoStatus(ctx, c, g.Namespace, repo)
				if err != nil {
					return err
				}
				if st.Rollout == "" {
					return fmt.Errorf("GitRepo %s/%s has no rollout running; nothing waits for approval", g.Namespace, repo)
				}
				h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
					WorkflowID:   st.Rollout,
					UpdateName:   protocol.UpdateApprove,
					Args:         []any{protocol.Approve{Partition: partition, Bundle: bundle}},
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
				fmt.Fprintf(cmd.OutOrStdout(), "rollout %s: approved %s\n", st.Rollout, strings.Join(res.Approved, ", "))
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&partition, "partition", "", "the partition to approve (default: every partition waiting for approval)")
	cmd.Flags().StringVar(&bundle, "bundle", "", "approve only this bundle's partition")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "give up after this long")
	return cmd
}
