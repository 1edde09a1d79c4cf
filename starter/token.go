package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/flotilla-gitops/flotilla/internal/cluster"
	"github.com/flotilla-gitops/flotilla/internal/output"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/temporalx"
)

func newClusterTokenCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Create, list and revoke single-use registration tokens for agents (pull mode)",
	}
	cmd.AddCommand(newTokenCreateCommand(g), newTokenListCommand(g), newTokenRevokeCommand(g))
	return cmd
}

func newTokenCreateCommand(g *globals) *cobra.Command {
	var ttl time.Duration
	cmd := &cobra.Command{
		Use:   "create [--ttl DURATION]",
		Short: "Create a registration token; an agent registers its cluster with it once",
		Long: `Create prints a new registration token. Give it to one agent (in $FLOTILLA_REGISTRATION_TOKEN
or --registration-token-file); the agent registers its cluster with it, and the token is
then used up. Unknown, expired, revoked and used tokens are rejected. Temporal stores only
a hash of a hash of the token's secret, never the token.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if ttl < time.Minute {
				return errors.New("--ttl must be at least 1m")
			}
			tok, err := cluster.NewToken()
			if err != nil {
				return err
			}
			return g.withClient(cmd.Context(), time.Minute, func(ctx context.Context, c client.Client) error {
				_, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: protocol.ClusterTokenID(tok.ID), TaskQueue: g.TaskQueue},
					protocol.ClusterTokenWorkflow, protocol.TokenStart{ID: tok.ID, Verifier: tok.Verifier, TTL: ttl})
				if err != nil {
					return fmt.Errorf("create registration token: %w", err)
				}
				f, _ := g.format()
				if f == output.Table {
					fmt.Fprintln(cmd.OutOrStdout(), tok.Value)
					fmt.Fprintf(cmd.ErrOrStderr(), "Registration token %s, valid for %s (single use). Start the agent with\n"+
						"  FLOTILLA_REGISTRATION_TOKEN=<token> flotilla-worker agent --cluster NAME --temporal-address ADDR\n", tok.ID, ttl)
					return nil
				}
				return output.Print(cmd.OutOrStdout(), f, map[string]any{"id": tok.ID, "token": tok.Value,
					"expiresAt": time.Now().Add(ttl).UTC().Format(time.RFC3339)}, output.Rows{})
			})
		},
	}
	cmd.Flags().DurationVar(&ttl, "ttl", 24*time.Hour, "how long the token stays valid")
	return cmd
}

func newTokenListCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List registration tokens not yet used or expired",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, _ := g.format()
			return g.withClient(cmd.Context(), time.Minute, func(ctx context.Context, c client.Client) error {
				var sts []protocol.TokenStatus
				err := temporalx.EachWorkflow(ctx, c, temporalx.RunningOfType(protocol.ClusterTokenWorkflow), func(id string) error {
					var st protocol.TokenStatus
					if err := query(ctx, c, id, id, &st); err != nil {
						return err
					}
					sts = append(sts, st)
					return nil
				})
				if err != nil {
					return err
				}
				sort.Slice(sts, func(i, j int) bool { return sts[i].CreatedAt.Before(sts[j].CreatedAt) })
				rows := output.Rows{Header: []string{"ID", "CREATED", "EXPIRES", "LAST REFUSAL"}}
				for _, st := range sts {
					rows.Rows = append(rows.Rows, []string{st.ID, st.CreatedAt.UTC().Format(time.RFC3339), st.ExpiresAt.UTC().Format(time.RFC3339), st.Refused})
				}
				return output.Print(cmd.OutOrStdout(), f, sts, rows)
			})
		},
	}
}

func newTokenRevokeCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke an unused registration token",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withClient(cmd.Context(), time.Minute, func(ctx context.Context, c client.Client) error {
				if err := c.SignalWorkflow(ctx, protocol.ClusterTokenID(args[0]), "", protocol.SignalDelete, nil); err != nil {
					return notFound(err, "registration token "+args[0]+" (unknown, used or expired)")
				}
				fmt.Fprintf(cmd.OutOrStdout(), "registration token %s revoked\n", args[0])
				return nil
			})
		},
	}
}
