package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/flotilla-gitops/flotilla/internal/history"
	"github.com/flotilla-gitops/flotilla/internal/notify"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

// driftBatch gathers what one live signal (a batch of clusters' reports)
// changed about drift, so each change is told once, in one event per
// kind for the whole batch, never one per object or per report.
type driftBatch struct {
	// detected: releases that drifted (missing or modified objects) and
	// had not; corrected: releases whose watch corrected drift
	// (correctDrift) since the last report; conflicts: releases whose
	// correction failed (a new error).
	detected, corrected, conflicts []history.Row
}

// observe compares a release's new report r with its previous one.
func (b *driftBatch) observe(cluster string, old *status.LiveReport, r status.LiveReport) {
	if old != nil && old.DeploymentID != r.DeploymentID {
		old = nil // a report about what the release ran before
	}
	row := history.Row{Cluster: cluster, Bundle: r.Bundle, Release: r.Release, DeploymentID: r.DeploymentID, State: status.Ready}
	drifted := func(l *status.LiveReport) bool { return l != nil && l.Missing+l.Modified > 0 }
	if drifted(&r) && !drifted(old) {
		d := row
		d.State, d.Message = status.Modified, fmt.Sprintf("%d modified, %d missing", r.Modified, r.Missing)
		b.detected = append(b.detected, d)
	}
	prev := 0
	if old != nil {
		prev = old.Corrections
	}
	if r.Corrections > prev {
		b.corrected = append(b.corrected, row)
	}
	if r.Error != "" && (old == nil || old.Error != r.Error) {
		c := row
		c.State, c.Message = status.Modified, r.Error
		b.conflicts = append(b.conflicts, c)
	}
}

// driftObserved emits the batch's drift events and records its
// corrections in the history (one "correction" entry, trigger drift).
func (g *gitRepo) driftObserved(ctx workflow.Context, b *driftBatch) {
	if len(b.detected)+len(b.corrected)+len(b.conflicts) == 0 {
		return
	}
	commit := g.s.Commit
	if len(b.detected) > 0 {
		g.emit(ctx, notify.Event{Type: notify.DriftDetected, Severity: notify.Warning, Commit: commit,
			Clusters: rowClusters(b.detected), Bundles: rowBundles(b.detected),
			Message: fmt.Sprintf("%s: drift detected: %s", g.ref.Title(), describeRows(b.detected))})
	}
	if len(b.conflicts) > 0 {
		g.emit(ctx, notify.Event{Type: notify.DriftConflict, Severity: notify.Error, Commit: commit,
			Clusters: rowClusters(b.conflicts), Bundles: rowBundles(b.conflicts),
			Message: fmt.Sprintf("%s: drift could not be corrected: %s", g.ref.Title(), describeRows(b.conflicts))})
	}
	if len(b.corrected) == 0 {
		return
	}
	g.emit(ctx, notify.Event{Type: notify.DriftCorrected, Commit: commit,
		Clusters: rowClusters(b.corrected), Bundles: rowBundles(b.corrected),
		Message: fmt.Sprintf("%s: drift corrected: %s", g.ref.Title(), describeRows(b.corrected))})
	if !g.keepsHistory(ctx) {
		return
	}
	now := workflow.Now(ctx).UTC()
	g.record(ctx, history.Entry{Kind: history.KindCorrection, Commit: commit, Trigger: history.Trigger{Kind: history.TriggerDrift},
		Start: now, End: now, Outcome: history.Succeeded, Clusters: b.corrected, Counts: history.Counts{OK: len(b.corrected)},
		Message: "drift corrected by the clusters' watches (correctDrift)"})
}

// describeRows reads "cluster-1 app (2 modified, 0 missing), cluster-2 db".
func describeRows(rows []history.Row) string {
	return joinRows(rows, func(r history.Row) string {
		if r.Message != "" {
			return r.Cluster + " " + r.Bundle + " (" + r.Message + ")"
		}
		return r.Cluster + " " + r.Bundle
	})
}
