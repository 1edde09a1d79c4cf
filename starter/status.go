package main

import (
	"context"
	"fmt"
	"io"
	"reflect"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/flotilla-gitops/flotilla/internal/output"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

func newStatusCommand(g *globals) *cobra.Command {
	var watch bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "status NAME",
		Short: "Show a GitRepo's commit and the state of every bundle on every cluster",
		Long: `Status shows the GitRepo's commit and, per bundle and cluster, the state (Ready, NotReady,
WaitApplied, ErrApplied, Pending, OutOfSync), ready/total resources and a message naming the
cluster. With --watch it prints every change until the rollout settles, then exits 0.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, _ := g.format() // validated in PersistentPreRunE
			return g.withClient(cmd.Context(), timeout, func(ctx context.Context, c client.Client) error {
				if !watch {
					st, err := gitRepoStatus(ctx, c, g.Namespace, args[0])
					if err != nil {
						return err
					}
					return printStatus(cmd.OutOrStdout(), f, st)
				}
				_, err := waitSettled(ctx, c, g.Namespace, args[0], func(st status.GitRepo) bool { return true },
					func(st status.GitRepo) error { return printStatus(cmd.OutOrStdout(), f, st) })
				return err
			})
		},
	}
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "print changes until the rollout settles")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "give up after this long (0: no limit; with --watch)")
	return cmd
}

// waitSettled polls the GitRepo's status until ready(st) holds and it is
// settled, calling changed for every distinct status on the way.
func waitSettled(ctx context.Context, c client.Client, namespace, name string, ready func(status.GitRepo) bool,
	changed func(status.GitRepo) error) (status.GitRepo, error) {
	var last *status.GitRepo
	for {
		st, err := gitRepoStatus(ctx, c, namespace, name)
		if err != nil {
			if ctx.Err() != nil {
				return st, fmt.Errorf("GitRepo %s/%s did not settle: %w", namespace, name, ctx.Err())
			}
			return st, err
		}
		if last == nil || !reflect.DeepEqual(*last, st) {
			if changed != nil {
				if err := changed(st); err != nil {
					return st, err
				}
			}
			last = &st
		}
		if st.Settled && ready(st) {
			return st, nil
		}
		select {
		case <-ctx.Done():
			return st, fmt.Errorf("GitRepo %s/%s did not settle: %w", namespace, name, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func printStatus(w io.Writer, f output.Format, st status.GitRepo) error {
	if f != output.Table {
		return output.Print(w, f, st, output.Rows{})
	}
	ref := st.Branch
	if st.Revision != "" {
		ref = st.Revision
	}
	if ref == "" {
		ref = "HEAD"
	}
	fmt.Fprintf(w, "GitRepo:  %s/%s\nRepo:     %s (%s)\nCommit:   %s", st.Namespace, st.Name, st.Repo, ref, short(st.Commit))
	if st.LatestCommit != "" && st.LatestCommit != st.Commit {
		fmt.Fprintf(w, " (latest %s)", short(st.LatestCommit))
	}
	fmt.Fprintf(w, "\nState:    %s  %d/%d bundle deployments ready, %d/%d clusters ready, %d/%d resources ready\n",
		displayState(st), st.Summary.Ready, st.Summary.Desired, st.Summary.ReadyClusters, st.Summary.Clusters,
		st.Summary.ReadyResources, st.Summary.Resources)
	if st.Rollout != "" {
		fmt.Fprintf(w, "Rollout:  %s (running)\n", st.Rollout)
	} else if st.LastRollout != "" {
		fmt.Fprintf(w, "Rollout:  %s\n", st.LastRollout)
	}
	if st.Error != "" {
		fmt.Fprintf(w, "Error:    %s\n", st.Error)
	}
	if st.Summary.Message != "" {
		fmt.Fprintf(w, "Message:  %s\n", st.Summary.Message)
	}
	rows := output.Rows{Header: []string{"BUNDLE", "CLUSTER", "STATE", "RESOURCES", "RELEASE", "MESSAGE"}}
	for _, d := range st.Deployments {
		rows.Rows = append(rows.Rows, []string{d.Bundle, d.Cluster, string(d.State),
			fmt.Sprintf("%d/%d", d.ReadyResources, d.Resources), d.Namespace + "/" + d.Release, d.Message})
	}
	if len(rows.Rows) > 0 {
		fmt.Fprintln(w)
		if err := output.Print(w, f, nil, rows); err != nil {
			return err
		}
	}
	fmt.Fprintln(w)
	return nil
}
