package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/flotilla-gitops/flotilla/internal/protocol"
)

// newRollbackCommand builds `flotilla rollback NAME --to COMMIT`.
func newRollbackCommand(g *globals) *cobra.Command {
	var to string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "rollback NAME --to COMMIT",
		Short: "Roll a GitRepo out at an earlier commit and pin it there until `flotilla resume`",
		Long: `Rollback pins GitRepo NAME to COMMIT (a full or abbreviated hash of its
repository) and rolls that commit out through the GitRepo's rollout strategy:
partitions, approvals and deployment windows apply as to any rollout. A
rollout running now is superseded, and a pause is lifted.

While pinned, polls and webhooks still record the remote's newest commit
(flotilla status shows it, and the pin) but never roll it out; flotilla sync
rolls the pinned commit out again. flotilla resume clears the pin: the
GitRepo follows its branch (or spec.revision) again, and its next check of the
remote rolls out the head. The history records the rollback and who asked.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if to == "" {
				return errors.New("--to COMMIT is required")
			}
			return g.withClient(cmd.Context(), timeout, func(ctx context.Context, c client.Client) error {
				return rollback(ctx, c, cmd, g.Namespace, args[0], protocol.Rollback{Commit: to, Identity: g.identity()})
			})
		},
	}
	cmd.Flags().StringVar(&to, "to", "", "the commit to roll back to (full or abbreviated hash)")
	cmd.Flags().DurationVar(&timeout, "timeout", time.Minute, "give up after this long")
	return cmd
}

// rollback sends the rollback update and prints what was pinned.
func rollback(ctx context.Context, c client.Client, cmd *cobra.Command, namespace, repo string, rb protocol.Rollback) error {
	e := parseEntity(namespace, repo)
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   e.id(),
		UpdateName:   protocol.UpdateRollback,
		Args:         []any{rb},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return fmt.Errorf("%s: %w", e.title(), unwrapUpdate(err))
	}
	var res protocol.RollbackResult
	if err := h.Get(ctx, &res); err != nil {
		return fmt.Errorf("%s: %w", e.title(), unwrapUpdate(err))
	}
	who := ""
	if s := rb.Identity.String(); s != "" {
		who = " by " + s
	}
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "%s pinned to %s%s\n", e, res.Commit, who)
	if res.Rollout != "" {
		fmt.Fprintf(out, "rollout %s rolls it out through the GitRepo's strategy\n", res.Rollout)
	}
	fmt.Fprintf(out, "`flotilla resume %s` follows the branch again\n", repo)
	return nil
}
