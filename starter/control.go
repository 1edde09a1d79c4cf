package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

// newSignalCommand builds sync, pause, resume and delete: each signals a
// GitRepo, and with --wait follows it until it settles (or, for delete,
// until it is gone).
func newSignalCommand(g *globals, name, signal, short string, waitByDefault bool) *cobra.Command {
	var wait bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   name + " NAME|helmop/NAME",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			repo := args[0]
			e := parseEntity(g.Namespace, repo)
			id := e.id()
			return g.withClient(cmd.Context(), timeout, func(ctx context.Context, c client.Client) error {
				before, err := gitRepoStatus(ctx, c, g.Namespace, repo)
				if err != nil {
					return err
				}
				if err := c.SignalWorkflow(ctx, id, "", signal, nil); err != nil {
					return notFound(err, e.title())
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", e, pastTense(name))
				if !wait {
					return nil
				}
				if signal == protocol.SignalDelete {
					if err := c.GetWorkflow(ctx, id, "").Get(ctx, nil); err != nil {
						return fmt.Errorf("%s: %w", e.title(), err)
					}
					fmt.Fprintf(cmd.OutOrStdout(), "%s deleted\n", e)
					return nil
				}
				_, err = waitSettled(ctx, c, g.Namespace, repo, func(st status.GitRepo) bool {
					return signal != protocol.SignalSync || st.Syncs > before.Syncs
				}, nil)
				return err
			})
		},
	}
	cmd.Flags().BoolVar(&wait, "wait", waitByDefault, "wait until the GitRepo settles (delete: until its releases are removed)")
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Minute, "give up waiting after this long")
	return cmd
}

func pastTense(verb string) string {
	switch verb {
	case "sync":
		return "sync requested"
	case "delete":
		return "deletion requested"
	case "pause":
		return "paused"
	}
	return verb + "d"
}
