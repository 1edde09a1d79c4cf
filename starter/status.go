package main

import (
	"context"
	"fmt"
	"io"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/flotilla-gitops/flotilla/internal/api"
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
WaitApplied, ErrApplied, Pending, OutOfSync, Modified), ready/total resources and a message naming
the cluster, then the objects that differ from Git (see flotilla diff). With --watch it prints
every change until the rollout settles, then exits 0.`,
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
				return st, fmt.Errorf("%s did not settle: %w", parseEntity(namespace, name).title(), ctx.Err())
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
			return st, fmt.Errorf("%s did not settle: %w", parseEntity(namespace, name).title(), ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// printStatus prints a GitRepo's status: for people, its state, progress,
// unhealthy conditions, waits, halts, warnings, bundles, deployments and
// drifted objects; for -o json|yaml the whole status.
func printStatus(w io.Writer, f output.Format, st status.GitRepo) error {
	if len(st.Conditions) == 0 { // a worker that does not Finish
		st.Finish()
	}
	if f != output.Table {
		return output.Print(w, f, st, output.Rows{})
	}
	printHeader(w, st)
	shown := map[string]bool{"": true}
	if v := st.PolicyViolation; v != "" {
		fmt.Fprintf(w, "Refused:  %s (nothing is fetched or deployed until the spec or the policy changes)\n", v)
		shown[v] = true
	}
	if st.Error != "" {
		fmt.Fprintf(w, "Error:    %s\n", st.Error)
		shown[st.Error] = true
	}
	if st.Summary.Message != "" {
		fmt.Fprintf(w, "Message:  %s\n", st.Summary.Message)
		shown[st.Summary.Message] = true
	}
	printConditions(w, st, shown)
	printWaits(w, st.Waits)
	printHalts(w, st.Halts)
	printWarnings(w, st.Warnings)
	if err := printTables(w, f, st); err != nil {
		return err
	}
	printDrift(w, st)
	fmt.Fprintln(w)
	return nil
}

// printHeader prints what the GitRepo follows and where it stands.
func printHeader(w io.Writer, st status.GitRepo) {
	ref := st.Branch
	if st.Revision != "" {
		ref = st.Revision
	}
	if ref == "" {
		ref = "HEAD"
	}
	if st.Kind == api.KindHelmOp {
		fmt.Fprintf(w, "HelmOp:   %s/%s\nChart:    %s\nVersion:  %s", st.Namespace, st.Name, st.Repo, st.Version)
		if st.LatestCommit != "" && st.LatestCommit != st.Commit {
			fmt.Fprintf(w, " (latest match %s)", st.LatestCommit)
		}
	} else {
		fmt.Fprintf(w, "GitRepo:  %s/%s\nRepo:     %s (%s)\nCommit:   %s", st.Namespace, st.Name, st.Repo, ref, short(st.Commit))
		if st.LatestCommit != "" && st.LatestCommit != st.Commit {
			fmt.Fprintf(w, " (latest %s)", short(st.LatestCommit))
		}
		if st.RenderedCommit != "" && st.RenderedCommit != st.Commit {
			fmt.Fprintf(w, " (no change under paths since %s: not rendered again)", short(st.RenderedCommit))
		}
	}
	fmt.Fprintf(w, "\nState:    %s  %s bundle deployments ready, %s clusters ready, %d/%d resources ready\n",
		st.Display.State, st.Display.ReadyBundleDeployments, st.Display.ReadyClusters,
		st.Summary.ReadyResources, st.Summary.Resources)
	if st.Progress != "" {
		fmt.Fprintf(w, "Progress: %s\n", st.Progress)
	}
	printSource(w, st)
	if st.Watched > 0 && st.Watched < len(st.Deployments) {
		fmt.Fprintf(w, "Watched:  %d/%d deployments reported by their cluster's drift watch\n", st.Watched, len(st.Deployments))
	}
	if st.Rollout != "" {
		fmt.Fprintf(w, "Rollout:  %s (running)\n", st.Rollout)
	} else if st.LastRollout != "" {
		fmt.Fprintf(w, "Rollout:  %s\n", st.LastRollout)
	}
}

// printSource prints how the GitRepo's remote is checked: polling and its
// backoff, a Git host's request to wait, webhooks, and what spec.verify
// said of the newest commit.
func printSource(w io.Writer, st status.GitRepo) {
	if st.PollingInterval != "" {
		fmt.Fprintf(w, "Polling:  every %s", st.PollingInterval)
		if st.PollFailures > 0 {
			fmt.Fprintf(w, " (backing off: %d failed checks in a row)", st.PollFailures)
		}
		fmt.Fprintln(w)
	}
	if st.NextCheck != nil {
		fmt.Fprintf(w, "Waiting:  next check at %s (%s)\n", st.NextCheck.Format(time.RFC3339), st.NextCheckReason)
	}
	if st.WebhookCommit != "" && st.LastWebhookTime != nil {
		fmt.Fprintf(w, "Webhook:  %s at %s\n", short(st.WebhookCommit), st.LastWebhookTime.Format(time.RFC3339))
	}
	if st.Verified != "" {
		fmt.Fprintf(w, "Signed:   %s verified (%s)\n", short(st.LatestCommit), st.Verified)
	}
	if r := st.Rejected; r != nil {
		fmt.Fprintf(w, "Rejected: %s\n", r.Message())
	}
	printPinned(w, st)
}

// printTables prints the bundles and the deployments.
func printTables(w io.Writer, f output.Format, st status.GitRepo) error {
	if len(st.Bundles) > 0 {
		rows := output.Rows{Header: []string{"BUNDLE", "STATE", "CLUSTERS-READY", "RESOURCES-READY", "DEPLOYMENTS"}}
		for _, b := range st.Bundles {
			rows.Rows = append(rows.Rows, []string{b.Name, string(b.State), b.ReadyClusters,
				fmt.Sprintf("%d/%d", b.ResourceCounts.Ready, b.ResourceCounts.DesiredReady), b.Counts.String()})
		}
		fmt.Fprintln(w)
		if err := output.Print(w, f, nil, rows); err != nil {
			return err
		}
	}
	deps := slices.Clone(st.Deployments)
	status.Sort(deps)
	rows := output.Rows{Header: []string{"BUNDLE", "CLUSTER", "STATE", "RESOURCES", "RELEASE", "MESSAGE"}}
	for _, d := range deps {
		rows.Rows = append(rows.Rows, []string{d.Bundle, d.Cluster, string(d.State),
			fmt.Sprintf("%d/%d", d.ReadyResources, d.Resources), d.Namespace + "/" + d.Release, deploymentMessage(d)})
	}
	if len(rows.Rows) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	return output.Print(w, f, nil, rows)
}

// printConditions lists the conditions not in their happy state, each
// with its message unless the output shows that text already (the Error
// and Message lines) or the Halts section details it.
func printConditions(w io.Writer, st status.GitRepo, shown map[string]bool) {
	first := true
	for _, c := range st.Conditions {
		if c.Healthy() {
			continue
		}
		if first {
			fmt.Fprintln(w, "Conditions:")
			first = false
		}
		line := "  " + c.Type + "=" + c.Status
		if c.Reason != "" {
			line += " (" + c.Reason + ")"
		}
		detailed := (c.Type == status.ConditionRolloutHalted && len(st.Halts) > 0) ||
			(c.Type == status.ConditionGitPolling && c.Reason != status.ReasonPollFailed) || // the Waiting and Rejected lines
			(c.Type == status.ConditionPinned && st.Pinned != nil) // the Pinned line
		if !shown[c.Message] && !detailed {
			line += ": " + c.Message
			shown[c.Message] = true
		}
		fmt.Fprintln(w, line)
	}
}

// printWaits lists what holds the rollout back, by bundle and partition.
func printWaits(w io.Writer, waits []status.Wait) {
	if len(waits) == 0 {
		return
	}
	waits = slices.Clone(waits)
	sort.SliceStable(waits, func(i, j int) bool {
		a, b := waits[i], waits[j]
		if a.Bundle != b.Bundle {
			return a.Bundle < b.Bundle
		}
		if a.Partition != b.Partition {
			return a.Partition < b.Partition
		}
		return a.Kind < b.Kind
	})
	fmt.Fprintln(w, "Waits:")
	for _, wt := range waits {
		where := "bundle " + wt.Bundle
		if wt.Partition != "" {
			where += " partition " + wt.Partition
		}
		msg := wt.Message
		if msg == "" {
			msg = status.JoinClusters(wt.Clusters, wt.More)
		}
		if wt.Until != "" && !strings.Contains(msg, wt.Until) {
			msg = strings.TrimSpace(msg + " (until " + wt.Until + ")")
		}
		fmt.Fprintf(w, "  %s, %s: %s\n", where, wt.Kind, msg)
		if wt.Plan != "" { // what approving it does: flotilla approve --show
			fmt.Fprintf(w, "    plan: %s\n", wt.Plan)
		}
	}
}

// printHalts details each halted bundle.
func printHalts(w io.Writer, halts []status.Halt) {
	if len(halts) == 0 {
		return
	}
	halts = slices.Clone(halts)
	sort.SliceStable(halts, func(i, j int) bool { return halts[i].Bundle < halts[j].Bundle })
	fmt.Fprintln(w, "Halts:")
	for _, h := range halts {
		fmt.Fprintf(w, "  %s\n", h.Describe())
	}
}

// printWarnings lists what reading the repository ignored, as Fleet
// ignores it (unknown fleet.yaml keys, skipped raw YAML files).
func printWarnings(w io.Writer, warnings []string) {
	if len(warnings) == 0 {
		return
	}
	fmt.Fprintln(w, "Warnings:")
	for _, s := range warnings {
		fmt.Fprintf(w, "  %s\n", s)
	}
}

// deploymentMessage is a deployment's message, with the attempts of a
// failure that is retried and when the next attempt is due.
func deploymentMessage(d status.Deployment) string {
	if d.Attempts == 0 {
		return d.Message
	}
	retry := fmt.Sprintf("attempt %d failed", d.Attempts)
	if d.NextRetry != "" {
		retry += ", next retry " + d.NextRetry
	}
	if d.Message == "" {
		return retry
	}
	return d.Message + " (" + retry + ")"
}
