package workflows

import (
	"fmt"
	"slices"
	"strings"

	"go.temporal.io/sdk/workflow"

	"github.com/flotilla-gitops/flotilla/internal/rollout"
	"github.com/flotilla-gitops/flotilla/internal/status"
	"github.com/flotilla-gitops/flotilla/internal/temporalx"
	"github.com/flotilla-gitops/flotilla/internal/webhook"
)

// searchAttrs are the search attribute values that change over a
// GitRepo's life; upsert writes them only when they differ.
type searchAttrs struct{ state, commit, clusters string }

// upsert keeps the workflow's search attributes current.
func (g *gitRepo) upsert(ctx workflow.Context) {
	sum := status.Summarize(g.shown()) //workflowcheck:ignore order-independent counts
	state := string(sum.State)
	if g.s.Error != "" || g.violation() != nil {
		state = "Error"
	}
	clusters := rollout.ClustersOf(g.s.Deployments)
	if !fitsClusterAttr(clusters) {
		// Too many for the 2 KiB attribute: the rollout's batches list
		// them.
		clusters = []string{}
	}
	// The Temporal UI shows this line on the GitRepo's page (details
	// are no command: they change without a trace in the history).
	details := fmt.Sprintf("%s at %s: %d/%d clusters ready", state, shortCommit(g.s.Commit), sum.ReadyClusters, sum.Clusters)
	if v := g.violation(); v != nil {
		details += "; " + v.Error()
	}
	if g.s.Error != "" {
		details += "; " + g.s.Error
	}
	if n := len(g.s.Guarded); n > 0 {
		details += fmt.Sprintf("; %d uninstall(s) held by the deletion guard until `flotilla approve %s --deletions`", n, g.ref.Name)
	}
	if details != g.details {
		g.details = details
		workflow.SetCurrentDetails(ctx, details)
	}
	want := searchAttrs{state: state, commit: g.s.Commit, clusters: strings.Join(clusters, ",")}
	if want == g.attrs {
		return
	}
	g.attrs = want
	repo := ""
	if g.s.GitRepo != nil {
		repo = g.s.GitRepo.Spec.Repo
	}
	_ = workflow.UpsertTypedSearchAttributes(ctx,
		temporalx.KeyGitRepo.ValueSet(g.ref.String()),
		temporalx.KeyRepoURL.ValueSet(webhook.SearchKey(repo)),
		temporalx.KeyState.ValueSet(state),
		temporalx.KeyCommit.ValueSet(g.s.Commit),
		temporalx.KeyCluster.ValueSet(clusters),
	)
}

func (g *gitRepo) status() (status.GitRepo, error) {
	st := status.GitRepo{Kind: g.ref.Kind, Namespace: g.ref.Namespace, Name: g.ref.Name, Commit: g.s.Commit, LatestCommit: g.s.LatestCommit,
		Generation: g.s.Generation, ObservedGeneration: g.s.ObservedGeneration, Paused: g.s.Paused, Deleting: g.s.Deleting,
		Rollout: g.running, LastRollout: g.s.LastRollout, Error: g.s.Error, Syncs: g.s.Syncs,
		PollFailures: g.s.PollFailures, WebhookCommit: g.s.WebhookCommit, ManagedBy: g.s.ManagedBy}
	if !g.s.LastWebhookTime.IsZero() {
		t := g.s.LastWebhookTime
		st.LastWebhookTime = &t
	}
	if !g.s.LatestCommitSeen.IsZero() {
		t := g.s.LatestCommitSeen
		st.LatestCommitSeen = &t
	}
	if d := g.pollingInterval(); d > 0 {
		st.PollingInterval = d.String()
	}
	if !g.s.NextCheck.IsZero() {
		t := g.s.NextCheck
		st.NextCheck, st.NextCheckReason = &t, g.s.NextCheckReason
	}
	st.RenderedCommit, st.Verified = g.s.RenderedCommit, g.s.Verified
	st.Pinned = g.pinned()
	if r := g.s.Rejected; r != nil {
		st.Rejected = &status.RejectedCommit{Commit: r.Commit, Tag: r.Tag, Key: r.Key, Reason: r.Reason}
	}
	if g.s.GitRepo != nil {
		st.Repo, st.Branch, st.Revision = g.s.GitRepo.Spec.Repo, g.s.GitRepo.Spec.Branch, g.s.GitRepo.Spec.Revision
	}
	if g.helmOp() {
		st.Version = g.s.Commit
	}
	outOfSync := g.s.Paused && (g.s.LatestCommit != g.s.Commit || g.s.Generation != g.s.ObservedGeneration)
	for _, d := range g.shown() {
		if outOfSync && d.State == status.Ready {
			d.State, d.Message = status.OutOfSync, "GitRepo is paused"
		}
		st.Deployments = append(st.Deployments, d)
	}
	st.Halts, st.Waits = g.s.Halts, g.s.Waits
	st.Warnings = append(slices.Clip(g.s.GitWarnings), g.s.Warnings...)
	if d := g.s.Policy.Decision; d != nil {
		if d.Violation != nil {
			st.PolicyViolation = d.Violation.Error()
		}
		st.Warnings = append(slices.Clip(d.Notes), st.Warnings...)
	}
	st.Watched = len(rollout.LiveReports(g.s.Inventory))
	st.Finish() //workflowcheck:ignore order-independent: Finish sorts what it builds
	// Settled: nothing runs and nothing is due, or nothing can run until
	// the remote answers (no commit known yet).
	st.Settled = g.running == "" && !g.s.ResolveDue && (!g.s.Dirty || g.s.Paused || g.s.LatestCommit == "")
	return st, nil
}

// shown are the deployments as status shows them: those on clusters out
// of contact are not known to be Ready.
func (g *gitRepo) shown() []status.Deployment {
	return status.WithContacts(g.s.Deployments, g.s.OutOfContact)
}

func shortCommit(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	if c == "" {
		return "no commit"
	}
	return c
}
