package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/applier"
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
		Use:   name + " NAME|helmop/NAME" + map[bool]string{true: "|clustergroup/NAME|policy/NAME|gitreporestriction/NAME|notification/NAME"}[signal == protocol.SignalDelete],
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			repo := args[0]
			if group, ok := clusterGroupArg(repo); ok && signal == protocol.SignalDelete {
				return deleteClusterGroup(cmd, g, group, wait, timeout)
			}
			if name, ok := notificationArg(repo); ok && signal == protocol.SignalDelete {
				return deleteRestriction(cmd, g, api.KindNotification, name, timeout)
			}
			if kind, name, ok := restrictionArg(repo); ok && signal == protocol.SignalDelete {
				return deleteRestriction(cmd, g, kind, name, timeout)
			}
			e := parseEntity(g.Namespace, repo)
			id := e.id()
			return g.withClient(cmd.Context(), timeout, func(ctx context.Context, c client.Client) error {
				before, err := gitRepoStatus(ctx, c, g.Namespace, repo)
				if err != nil {
					return err
				}
				if before.ManagedBy != "" && signal != protocol.SignalSync {
					// The spec in the management cluster is the truth:
					// pause, resume and delete change it there.
					return errors.New(protocol.ManagedMessage(e.title(), before.ManagedBy))
				}
				var arg any
				if signal == protocol.SignalSync {
					arg = protocol.Sync{Identity: g.identity()} // who asked, for the history
				}
				if err := c.SignalWorkflow(ctx, id, "", signal, arg); err != nil {
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

// clusterGroupArg reads "clustergroup/NAME" (or clustergroups/).
func clusterGroupArg(arg string) (string, bool) {
	return nameAfter(arg, "clustergroup/", "clustergroups/")
}

// nameAfter returns the non-empty rest of arg after the first of
// prefixes it starts with.
func nameAfter(arg string, prefixes ...string) (string, bool) {
	for _, p := range prefixes {
		if name, ok := strings.CutPrefix(arg, p); ok && name != "" {
			return name, true
		}
	}
	return "", false
}

// restrictionArg reads "policy/NAME" or "gitreporestriction/NAME" (or
// their plurals) as the kind and name of a namespace restriction.
func restrictionArg(arg string) (kind, name string, ok bool) {
	for prefix, kind := range map[string]string{"policy/": api.KindPolicy, "policies/": api.KindPolicy,
		"gitreporestriction/": api.KindGitRepoRestriction, "gitreporestrictions/": api.KindGitRepoRestriction} {
		if name, ok := strings.CutPrefix(arg, prefix); ok && name != "" {
			return kind, name, true
		}
	}
	return "", "", false
}

// deleteRestriction removes a Policy or GitRepoRestriction of the
// namespace; its GitRepos and HelmOps are checked again at once.
func deleteRestriction(cmd *cobra.Command, g *globals, kind, name string, timeout time.Duration) error {
	return g.withClient(cmd.Context(), timeout, func(ctx context.Context, c client.Client) error {
		if err := g.applier(c).Delete(ctx, kind, g.Namespace, name); err != nil {
			if errors.Is(err, applier.ErrNotFound) {
				return fmt.Errorf("%s %s/%s not found", kind, g.Namespace, name)
			}
			return err
		}
		fmt.Fprintf(cmd.OutOrStdout(), "%s/%s/%s deleted\n", strings.ToLower(kind), g.Namespace, name)
		return nil
	})
}

// deleteClusterGroup removes a cluster group; with wait, it returns once
// its workflow ended and the GitRepos were told. GitRepos whose targets
// name it then remove nothing there: they hold those uninstalls
// (DeletionHeld) until the group exists again or no target names it.
func deleteClusterGroup(cmd *cobra.Command, g *globals, name string, wait bool, timeout time.Duration) error {
	return endEntity(cmd, g, ending{id: protocol.ClusterGroupID(name), title: "ClusterGroup " + name, ref: "clustergroup/" + name,
		done: "deleted", requested: "deletion requested"}, wait, timeout)
}

// ending is an entity workflow that a delete signal ends: its ID, how
// messages name it, and what is printed once it ended or was asked to.
type ending struct{ id, title, ref, done, requested string }

// endEntity signals e's workflow to end and, with wait, waits (at most
// timeout) until it has.
func endEntity(cmd *cobra.Command, g *globals, e ending, wait bool, timeout time.Duration) error {
	return g.withClient(cmd.Context(), timeout, func(ctx context.Context, c client.Client) error {
		if err := c.SignalWorkflow(ctx, e.id, "", protocol.SignalDelete, nil); err != nil {
			return notFound(err, e.title)
		}
		if !wait {
			fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", e.ref, e.requested)
			return nil
		}
		if err := c.GetWorkflow(ctx, e.id, "").Get(ctx, nil); err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("%s: %s, but its workflow %s did not end within %s: %w", e.title, e.requested, e.id, timeout, err)
			}
			return fmt.Errorf("%s: %w", e.title, err)
		}
		fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", e.ref, e.done)
		return nil
	})
}
