package history

import (
	"slices"

	"github.com/flotilla-gitops/flotilla/internal/outcome"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

// Bounds of a GitRepo's history. The state that carries it crosses
// continue-as-new as one payload (Temporal refuses payloads over 2 MiB),
// so the history is bounded in entries and in the bytes of its rows:
// TestAppend_StateSize measures 1,000 entries of 100 releases each.
const (
	// Limit is how many entries Append keeps: the newest.
	Limit = 1000
	// RowBudget bounds the rows of all entries (Row.size, about their
	// JSON length): past it, the oldest entries lose their rows of
	// releases that succeeded, then their failures (Entry.Trimmed).
	RowBudget = 256 << 10
	// MaxRows bounds one entry's rows (failures first); Counts count
	// every release.
	MaxRows = 200
	// MaxMessage bounds a message kept in an entry or row.
	MaxMessage = 300
)

// Append adds e to entries (oldest first) and returns them bounded: at
// most Limit entries, the oldest dropped, and rows within RowBudget. It
// truncates e's messages and rows (MaxMessage, MaxRows). entries is not
// modified in place beyond its backing array's reuse by append.
func Append(entries []Entry, e Entry) []Entry {
	e.Message = clip(e.Message)
	e.Clusters = capRows(e.Clusters)
	entries = append(entries, e)
	if n := len(entries) - Limit; n > 0 {
		entries = slices.Delete(entries, 0, n)
	}
	return trim(entries)
}

// capRows keeps failures first, then the others in order, up to MaxRows.
func capRows(rows []Row) []Row {
	out := make([]Row, 0, min(len(rows), MaxRows))
	for _, pass := range []bool{true, false} {
		for _, r := range rows {
			if r.Failed() == pass && len(out) < MaxRows {
				r.Message = clip(r.Message)
				out = append(out, r)
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func clip(s string) string {
	if len(s) <= MaxMessage {
		return s
	}
	return s[:MaxMessage] + "…"
}

// size is about the row's JSON length.
func (r Row) size() int {
	const keys = 90 // the field names, quotes and commas
	return keys + len(r.Cluster) + len(r.Bundle) + len(r.Release) + len(r.State) + len(r.DeploymentID) +
		len(r.Class) + len(r.Message)
}

func rowsSize(rows []Row) int {
	n := 0
	for _, r := range rows {
		n += r.size()
	}
	return n
}

// trim drops rows of the oldest entries until all rows fit RowBudget:
// first the rows of releases that did not fail, then the rest. The newest
// entry keeps its rows.
func trim(entries []Entry) []Entry {
	total := 0
	for _, e := range entries {
		total += rowsSize(e.Clusters)
	}
	for _, failuresToo := range []bool{false, true} {
		for i := 0; i < len(entries)-1 && total > RowBudget; i++ {
			e := &entries[i]
			if len(e.Clusters) == 0 {
				continue
			}
			before := rowsSize(e.Clusters)
			if failuresToo {
				e.Clusters = nil
			} else {
				e.Clusters = slices.DeleteFunc(slices.Clone(e.Clusters), func(r Row) bool { return !r.Failed() })
				if len(e.Clusters) == 0 {
					e.Clusters = nil
				}
			}
			e.Trimmed = true
			total -= before - rowsSize(e.Clusters)
		}
	}
	return entries
}

// Filter returns the entries with a row on cluster and of bundle (an
// empty argument matches any), each with only those rows; an entry with
// no rows (trimmed, or nothing changed) matches only when both are empty.
// Approvals are filtered by bundle.
func Filter(entries []Entry, cluster, bundle string) []Entry {
	if cluster == "" && bundle == "" {
		return entries
	}
	var out []Entry
	for _, e := range entries {
		rows := slices.DeleteFunc(slices.Clone(e.Clusters), func(r Row) bool {
			return (cluster != "" && r.Cluster != cluster) || (bundle != "" && r.Bundle != bundle)
		})
		if len(rows) == 0 {
			continue
		}
		e.Clusters = rows
		e.Approvals = slices.DeleteFunc(slices.Clone(e.Approvals), func(a Approval) bool { return bundle != "" && a.Bundle != bundle })
		out = append(out, e)
	}
	return out
}

// Rows are the rows of deps worth keeping, those whose deployment ID is
// not prev's for the same bundle and cluster, that are not Ready, or that
// were not Ready before (a retry that recovered names what it fixed), and
// the counts of all of deps.
func Rows(deps, prev []status.Deployment) ([]Row, Counts) {
	type was struct {
		id string
		ok bool
	}
	before := make(map[status.Key]was, len(prev))
	for _, d := range prev {
		before[d.Key()] = was{d.DeploymentID, settled(d)}
	}
	var rows []Row
	var c Counts
	for _, d := range deps {
		r := Row{Cluster: d.Cluster, Bundle: d.Bundle, Release: d.Release, State: d.State,
			DeploymentID: d.DeploymentID, Class: d.Outcome, Message: d.Message}
		ok := settled(d)
		switch {
		case r.Failed():
			c.Failed++
		case ok:
			c.OK++
		default:
			c.Other++
		}
		if old, seen := before[d.Key()]; !ok || !seen || old.id != d.DeploymentID || !old.ok {
			if ok {
				r.Message = ""
			}
			rows = append(rows, r)
		}
	}
	return rows, c
}

// settled reports whether d runs what it should without a failure
// (Ready, or NotReady while its objects become ready).
func settled(d status.Deployment) bool {
	r := Row{State: d.State, Class: d.Outcome}
	return !r.Failed() && (d.State == status.Ready || d.State == status.NotReady)
}

// Result is what OutcomeOf reads of a finished rollout.
type Result struct {
	// Failed: the rollout failed or rendered nothing (its error).
	Failed, Superseded, Halted bool
	// Waiting: deployments were held back when it ended.
	Waiting bool
	Counts  Counts
}

// OutcomeOf names how a rollout ended, most telling first: failed (no
// rollout, or only failures), superseded, halted, partial (failures next
// to successes), waiting, succeeded.
func OutcomeOf(r Result) Outcome {
	switch {
	case r.Failed || (r.Counts.Failed > 0 && r.Counts.OK == 0 && !r.Halted && !r.Superseded):
		return Failed
	case r.Superseded:
		return Superseded
	case r.Halted:
		return Halted
	case r.Counts.Failed > 0:
		return Partial
	case r.Waiting:
		return Waiting
	}
	return Succeeded
}

// FailureClass is the class a row shows for its failure: its outcome
// class, or ErrApplied's state when it carries none.
func (r Row) FailureClass() string {
	if r.Class != outcome.OK {
		return string(r.Class)
	}
	return string(r.State)
}
