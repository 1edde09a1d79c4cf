package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/flotilla-gitops/flotilla/internal/history"
	"github.com/flotilla-gitops/flotilla/internal/output"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
)

// newHistoryCommand builds `flotilla history NAME`: the GitRepo's
// rollouts, corrections and rollbacks, oldest first.
func newHistoryCommand(g *globals) *cobra.Command {
	var cluster, bundle string
	var limit int
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "history NAME|helmop/NAME",
		Short: "List a GitRepo's rollouts, drift corrections and rollbacks, with triggers, approvals and outcomes",
		Long: `History lists every rollout, drift correction and rollback of GitRepo NAME,
oldest first: its commit, what triggered it (poll, webhook delivery, sync and
who asked, retry, drift, spec, clusters, rollback, resume), when it started
and how long it took, how it ended, and how many releases ended ok or failed.
Under each entry, indented: the partitions approved and by whom, and each
failure with its class. The GitRepo keeps its newest 1,000 entries; rows of
old entries are trimmed first.

--cluster and --bundle keep the entries with a release on that cluster or of
that bundle (and only those rows); --limit keeps the newest N entries.
-o json|yaml prints the entries as the GitRepo keeps them.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, _ := g.format() // validated in PersistentPreRunE
			return g.withClient(cmd.Context(), timeout, func(ctx context.Context, c client.Client) error {
				entries, err := queryHistory(ctx, c, g.Namespace, args[0])
				if err != nil {
					return err
				}
				entries = history.Filter(entries, cluster, bundle)
				if limit > 0 && len(entries) > limit {
					entries = entries[len(entries)-limit:]
				}
				return printHistory(cmd.OutOrStdout(), f, entries)
			})
		},
	}
	cmd.Flags().StringVar(&cluster, "cluster", "", "only entries with a release on this cluster")
	cmd.Flags().StringVar(&bundle, "bundle", "", "only entries with a release of this bundle")
	cmd.Flags().IntVar(&limit, "limit", 0, "only the newest N entries (0: all)")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "give up after this long")
	return cmd
}

// queryHistory asks the GitRepo (or HelmOp) workflow for its history.
func queryHistory(ctx context.Context, c client.Client, namespace, repo string) ([]history.Entry, error) {
	e := parseEntity(namespace, repo)
	v, err := c.QueryWorkflow(ctx, e.id(), "", protocol.QueryHistory)
	if err != nil {
		return nil, notFound(err, e.title())
	}
	var entries []history.Entry
	if err := v.Get(&entries); err != nil {
		return nil, fmt.Errorf("%s: read history: %w", e.title(), err)
	}
	return entries, nil
}

// printHistory writes entries as a table with indented detail lines, or
// as JSON or YAML.
func printHistory(w io.Writer, f output.Format, entries []history.Entry) error {
	if f != output.Table {
		if entries == nil {
			entries = []history.Entry{}
		}
		return output.Print(w, f, entries, output.Rows{})
	}
	if len(entries) == 0 {
		_, err := fmt.Fprintln(w, "No history yet.")
		return err
	}
	rows := output.Rows{Header: []string{"SEQ", "STARTED", "DURATION", "KIND", "COMMIT", "TRIGGER", "OUTCOME", "CLUSTERS"}}
	for _, e := range entries {
		rows.Rows = append(rows.Rows, []string{strconv.FormatInt(e.Seq, 10), e.Start.UTC().Format(time.RFC3339),
			duration(e), string(e.Kind), short(e.Commit), e.Trigger.String(), outcomeText(e), counts(e)})
		for _, line := range historyDetails(e) {
			rows.Rows = append(rows.Rows, []string{"", "  " + line})
		}
	}
	return output.Print(w, f, nil, rows)
}

// outcomeText is the entry's outcome, with the retries folded into it
// ("failed, 9 retries").
func outcomeText(e history.Entry) string {
	switch e.Retries {
	case 0:
		return string(e.Outcome)
	case 1:
		return string(e.Outcome) + ", 1 retry"
	}
	return fmt.Sprintf("%s, %d retries", e.Outcome, e.Retries)
}

// historyDetails are an entry's indented lines: approvals, failures,
// and its message when nothing else explains a failure.
func historyDetails(e history.Entry) []string {
	var out []string
	for _, a := range e.Approvals {
		s := "approved " + a.Bundle + "/" + a.Partition
		if who := a.Identity.String(); who != "" {
			s += " by " + who
		}
		if !a.At.IsZero() {
			s += " at " + a.At.UTC().Format(time.RFC3339)
		}
		out = append(out, s)
	}
	failures := e.Failures()
	for _, r := range failures {
		s := fmt.Sprintf("%s %s: %s", r.Cluster, r.Bundle, r.FailureClass())
		if r.Message != "" {
			s += " " + historyLine(r.Message)
		}
		out = append(out, s)
	}
	if e.Message != "" && (len(failures) == 0 || e.Kind == history.KindCorrection) {
		out = append(out, historyLine(e.Message))
	}
	if e.Kind == history.KindCorrection {
		for _, r := range e.Clusters {
			out = append(out, "corrected "+r.Cluster+" "+r.Bundle)
		}
	}
	return out
}

func duration(e history.Entry) string {
	if e.End.IsZero() || e.Start.IsZero() {
		return "-"
	}
	return e.End.Sub(e.Start).Round(time.Second).String()
}

func counts(e history.Entry) string {
	s := fmt.Sprintf("%d ok", e.Counts.OK)
	if e.Counts.Failed > 0 {
		s += fmt.Sprintf(", %d failed", e.Counts.Failed)
	}
	if e.Counts.Other > 0 {
		s += fmt.Sprintf(", %d other", e.Counts.Other)
	}
	return s
}

func historyLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return s
}
