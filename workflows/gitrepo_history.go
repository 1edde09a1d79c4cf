package workflows

import (
	"encoding/json"
	"fmt"
	"strings"

	"go.temporal.io/sdk/workflow"

	"github.com/flotilla-gitops/flotilla/internal/history"
	"github.com/flotilla-gitops/flotilla/internal/notify"
	"github.com/flotilla-gitops/flotilla/internal/outcome"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

// versionHistory: a GitRepo keeps its history (issue 31): an entry per
// finished rollout and per drift correction a cluster reported, each also
// emitted as a notify.History event. Runs recorded before it keep none.
const versionHistory = "history"

// keepsHistory reports whether this run records history.
func (g *gitRepo) keepsHistory(ctx workflow.Context) bool {
	return workflow.GetVersion(ctx, versionHistory, workflow.DefaultVersion, 1) == 1
}

// due records why a rollout is due: the reason of the change the next
// rollout takes. A later reason replaces an earlier one, but a retry
// never replaces another reason.
func (g *gitRepo) due(t history.Trigger) {
	if t.Kind == history.TriggerRetry && g.s.Trigger != nil {
		return
	}
	g.s.Trigger = &t
}

// checkDue records why the remote is to be checked: a new commit the
// check finds is due for that reason.
func (g *gitRepo) checkDue(t history.Trigger) { g.s.CheckTrigger = &t }

// found takes the check's reason as the rollout's (take: a new commit).
func (g *gitRepo) found() {
	t := history.Trigger{Kind: history.TriggerPoll}
	if g.s.CheckTrigger != nil {
		t = *g.s.CheckTrigger
	}
	if g.s.Trigger == nil || g.s.Trigger.Kind == history.TriggerRetry {
		g.s.Trigger = &t
	}
}

// takeTrigger is the reason of the rollout starting now, and forgets it.
func (g *gitRepo) takeTrigger() history.Trigger {
	t := history.Trigger{Kind: history.TriggerRetry}
	if g.s.Trigger != nil {
		t = *g.s.Trigger
	}
	g.s.Trigger = nil
	return t
}

// rolloutStarted emits RolloutStarted for the rollout g.cur describes,
// unless the failure backoff started it: a retry of what failed tells
// only how it ended, and only when that changed (rolloutEnded), so a
// commit status does not flap between failure and pending.
func (g *gitRepo) rolloutStarted(ctx workflow.Context) {
	if g.cur.Trigger.Kind == history.TriggerRetry {
		return
	}
	g.emit(ctx, notify.Event{Type: notify.RolloutStarted, Commit: g.cur.Commit, Rollout: g.cur.ID,
		Message: fmt.Sprintf("%s: rolling out %s (%s)", g.ref.Title(), shortCommit(g.cur.Commit), g.cur.Trigger)})
}

// emit fills what every event of this GitRepo carries and emits it.
func (g *gitRepo) emit(ctx workflow.Context, ev notify.Event) {
	ev.Namespace, ev.GitRepo, ev.Kind = g.ref.Namespace, g.ref.Name, g.ref.Kind
	if ev.Kind == "" {
		ev.Kind = "GitRepo"
	}
	if g.s.GitRepo != nil {
		ev.RepoURL = g.s.GitRepo.Spec.Repo
	}
	g.events.emit(ctx, ev)
}

// record appends e to the history and emits it as a notify.History event.
func (g *gitRepo) record(ctx workflow.Context, e history.Entry) {
	g.s.HistorySeq++
	e.Seq = g.s.HistorySeq
	g.s.History = history.Append(g.s.History, e)
	data, err := json.Marshal(e) //workflowcheck:ignore an Entry holds no maps: its encoding is the same on every replay
	if err != nil {
		data = nil // an Entry always encodes; no Data rather than no event
	}
	g.emit(ctx, notify.Event{Type: notify.History, Commit: e.Commit, Rollout: e.Rollout, Data: data,
		Clusters: rowClusters(e.Clusters), Bundles: rowBundles(e.Clusters),
		Message: fmt.Sprintf("%s: %s %d of %s %s (%s)", g.ref.Title(), e.Kind, e.Seq, shortCommit(e.Commit), e.Outcome, e.Trigger)})
}

// rolloutEntry is the history entry of rollout g.cur, ended with res (or
// err).
func (g *gitRepo) rolloutEntry(ctx workflow.Context, res RolloutResult, err error, prev []status.Deployment) history.Entry {
	e := history.Entry{Kind: g.cur.Kind, Commit: g.cur.Commit, Trigger: g.cur.Trigger, Start: g.cur.Start,
		End: workflow.Now(ctx).UTC(), Rollout: g.cur.ID}
	if e.Kind == "" {
		e.Kind = history.KindRollout
	}
	if e.Commit == "" {
		e.Commit = res.Commit
	}
	failed := err != nil || res.Error != ""
	switch {
	case err != nil:
		e.Message = activityMessage(err)
	case res.Error != "":
		e.Message = res.Error
	default:
		e.Clusters, e.Counts = history.Rows(res.Deployments, prev)
	}
	for _, a := range res.Approvals {
		e.Approvals = append(e.Approvals, history.Approval{Bundle: a.Bundle, Partition: a.Partition, Identity: a.By, At: a.At})
	}
	e.Outcome = history.OutcomeOf(history.Result{Failed: failed, Superseded: res.Superseded,
		Halted: len(res.Halts) > 0, Waiting: len(res.Waits) > 0, Counts: e.Counts})
	if e.Message == "" && len(res.Halts) > 0 {
		e.Message = res.Halts[0].Message
	}
	return e
}

// rolloutEnded records the history entry of the rollout that ended and
// emits its events: succeeded, failed or halted, rolled back, deletions
// held. prev are the deployments before it, guarded the uninstalls held
// before it.
func (g *gitRepo) rolloutEnded(ctx workflow.Context, res RolloutResult, err error, prev []status.Deployment, guarded int) {
	if g.s.Deleting || !g.keepsHistory(ctx) {
		return
	}
	e := g.rolloutEntry(ctx, res, err, prev)
	// A retry that failed as the rollout before it did is folded into its
	// entry and tells nobody again: a failing commit retried for hours is
	// one line and one RolloutFailed, not one per attempt.
	repeat := history.Fold(g.s.History, e)
	if !repeat {
		g.record(ctx, e)
	}
	ev := notify.Event{Commit: e.Commit, Rollout: e.Rollout}
	failures := e.Failures()
	switch {
	case repeat:
	case e.Outcome == history.Succeeded:
		ev.Type, ev.Message = notify.RolloutSucceeded, fmt.Sprintf("%s: rolled out %s", g.ref.Title(), shortCommit(e.Commit))
	case e.Outcome == history.Failed, e.Outcome == history.Partial:
		ev.Type, ev.Severity = notify.RolloutFailed, notify.Error
		ev.Clusters, ev.Bundles = rowClusters(failures), rowBundles(failures)
		ev.Message = fmt.Sprintf("%s: rollout of %s failed: %s", g.ref.Title(), shortCommit(e.Commit), failureText(e, failures))
	case e.Outcome == history.Halted:
		ev.Type, ev.Severity = notify.RolloutHalted, notify.Warning
		ev.Clusters, ev.Bundles = rowClusters(failures), rowBundles(failures)
		ev.Message = fmt.Sprintf("%s: rollout of %s halted: %s", g.ref.Title(), shortCommit(e.Commit), e.Message)
	}
	if ev.Type != "" {
		g.emit(ctx, ev)
	}
	if back := rolledBack(res.Deployments); len(back) > 0 || (e.Kind == history.KindRollback && e.Outcome == history.Succeeded) {
		msg := fmt.Sprintf("%s: rolled back to %s", g.ref.Title(), shortCommit(e.Commit))
		if len(back) > 0 {
			msg = fmt.Sprintf("%s: %d release(s) rolled back to their previous deployment after the rollout of %s halted",
				g.ref.Title(), len(back), shortCommit(e.Commit))
		}
		g.emit(ctx, notify.Event{Type: notify.RolloutRolledBack, Severity: notify.Warning, Commit: e.Commit,
			Rollout: e.Rollout, Clusters: back, Message: msg})
	}
	if guarded == 0 && len(g.s.Guarded) > 0 {
		var clusters, bundles []string
		for _, r := range g.s.Guarded {
			clusters, bundles = append(clusters, r.Cluster), append(bundles, r.Bundle)
		}
		g.emit(ctx, notify.Event{Type: notify.DeletionHeld, Severity: notify.Warning, Commit: e.Commit, Rollout: e.Rollout,
			Clusters: clusters, Bundles: bundles,
			Message: fmt.Sprintf("%s: %d uninstall(s) held by the deletion guard until `flotilla approve %s --deletions`",
				g.ref.Title(), len(g.s.Guarded), g.ref.Name)})
	}
}

// failureText names the failed clusters and their class, or the
// rollout's error.
func failureText(e history.Entry, failures []history.Row) string {
	if len(failures) == 0 {
		return e.Message
	}
	return joinRows(failures, func(r history.Row) string { return r.Cluster + " " + r.Bundle + ": " + r.FailureClass() })
}

// joinRows lists the first five rows as each reads, then how many more.
func joinRows(rows []history.Row, each func(history.Row) string) string {
	var parts []string
	for i, r := range rows {
		if i == 5 {
			parts = append(parts, fmt.Sprintf("and %d more", len(rows)-i))
			break
		}
		parts = append(parts, each(r))
	}
	return strings.Join(parts, ", ")
}

// rolledBack lists the clusters where a halted rollout's rollback
// returned a release to its previous deployment.
func rolledBack(deps []status.Deployment) []string {
	var out []string
	for _, d := range deps {
		if d.Rollback == outcome.RolledBack {
			out = append(out, d.Cluster)
		}
	}
	return out
}

func rowClusters(rows []history.Row) []string {
	out := make([]string, 0, len(rows))
	for _, r := range rows {
		out = append(out, r.Cluster)
	}
	return out
}

func rowBundles(rows []history.Row) []string {
	out := make([]string, 0, len(rows))
	for _, r := range rows {
		out = append(out, r.Bundle)
	}
	return out
}

// historyQuery answers QueryHistory: the entries, oldest first, with what
// they do not store filled in (history.Expand).
func (g *gitRepo) historyQuery() ([]history.Entry, error) {
	return history.Expand(g.s.History), nil
}
