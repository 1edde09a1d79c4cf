package history

import (
	"strings"
	"time"

	"github.com/flotilla-gitops/flotilla/internal/outcome"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

// Kind is what an entry records.
type Kind string

// Entry kinds.
const (
	// KindRollout: a rollout of a commit (and spec).
	KindRollout Kind = "rollout"
	// KindCorrection: a cluster's watch corrected drift (correctDrift),
	// restoring a release at the deployment ID it runs.
	KindCorrection Kind = "correction"
	// KindRollback: a rollout of a commit `flotilla rollback --to` pinned.
	KindRollback Kind = "rollback"
)

// TriggerKind says why a rollout or correction started.
type TriggerKind string

// Trigger kinds.
const (
	// TriggerPoll: a poll of the remote found a new commit.
	TriggerPoll TriggerKind = "poll"
	// TriggerWebhook: a push webhook (Trigger.Delivery names it).
	TriggerWebhook TriggerKind = "webhook"
	// TriggerSync: `flotilla sync` (Trigger.Identity says who).
	TriggerSync TriggerKind = "sync"
	// TriggerRetry: the backoff of a failed deployment ended, or a
	// cluster the last rollout waited for became Ready.
	TriggerRetry TriggerKind = "retry"
	// TriggerDrift: drift was repaired (a cluster's correctDrift, or a
	// rollout restoring drifted releases).
	TriggerDrift TriggerKind = "drift"
	// TriggerSpec: the spec changed (`flotilla apply`).
	TriggerSpec TriggerKind = "spec"
	// TriggerClusters: clusters or cluster groups changed.
	TriggerClusters TriggerKind = "clusters"
	// TriggerRollback: `flotilla rollback --to` (Identity says who).
	TriggerRollback TriggerKind = "rollback"
	// TriggerResume: `flotilla resume` lifted a pause or a pin.
	TriggerResume TriggerKind = "resume"
)

// Trigger is what started a rollout or correction.
type Trigger struct {
	Kind TriggerKind `json:"kind"`
	// Delivery is the webhook delivery's ID (TriggerWebhook).
	Delivery string `json:"delivery,omitempty"`
	// Identity is who asked (sync, rollback, resume).
	Identity protocol.Identity `json:"identity,omitzero"`
}

// String renders the trigger for people: "poll", "webhook 7f3a9c01…",
// "sync by alice@laptop".
func (t Trigger) String() string {
	s := string(t.Kind)
	if s == "" {
		s = "unknown"
	}
	if t.Delivery != "" {
		d := t.Delivery
		if len(d) > 8 {
			d = d[:8] + "…"
		}
		s += " " + d
	}
	if who := t.Identity.String(); who != "" {
		s += " by " + who
	}
	return s
}

// Outcome is how an entry ended.
type Outcome string

// Outcomes, from a rollout's result (OutcomeOf).
const (
	// Succeeded: every deployment it touched is Ready (or settling).
	Succeeded Outcome = "succeeded"
	// Failed: nothing was rolled out (the commit could not be rendered,
	// the rollout failed), or every deployment it changed failed.
	Failed Outcome = "failed"
	// Halted: a bundle's rollout halted on failures (and was rolled back
	// where the strategy says so).
	Halted Outcome = "halted"
	// Superseded: a newer change stopped it early.
	Superseded Outcome = "superseded"
	// Waiting: it ended with deployments held back (an approval, a
	// window, a dependency); the next rollout goes on from there.
	Waiting Outcome = "waiting"
	// Partial: some deployments failed, others succeeded.
	Partial Outcome = "partial"
)

// Approval is one partition approved for the rollout, and by whom.
type Approval struct {
	Bundle    string            `json:"bundle"`
	Partition string            `json:"partition"`
	Identity  protocol.Identity `json:"identity,omitzero"`
	At        time.Time         `json:"at,omitzero"`
}

// Row is what happened to one release on one cluster. Rows are kept only
// for releases that changed (a new deployment ID) or are not Ready;
// Entry.Counts counts every release.
type Row struct {
	Cluster string       `json:"cluster"`
	Bundle  string       `json:"bundle"`
	Release string       `json:"release,omitempty"`
	State   status.State `json:"state"`
	// DeploymentID is Fleet's "<manifest ID>:<options hash>"; ManifestID
	// (the digest of the rendered manifests) is filled by Expand, not
	// stored: it is DeploymentID's first half.
	DeploymentID string        `json:"deploymentID,omitempty"`
	ManifestID   string        `json:"manifestID,omitempty"`
	Class        outcome.Class `json:"class,omitempty"`
	Message      string        `json:"message,omitempty"`
}

// Failed reports whether the row is a failure (ErrApplied, or any state
// with a failure class).
func (r Row) Failed() bool { return r.State == status.ErrApplied || r.Class != outcome.OK }

// Counts counts an entry's releases by how they ended.
type Counts struct {
	// OK are Ready (or NotReady: applied, still settling).
	OK int `json:"ok"`
	// Failed are ErrApplied or carry a failure class.
	Failed int `json:"failed,omitempty"`
	// Other are pending, waiting or out of sync.
	Other int `json:"other,omitempty"`
}

// Entry is one rollout, correction or rollback.
type Entry struct {
	// Seq numbers the GitRepo's entries from 1, increasing.
	Seq     int64   `json:"seq"`
	Kind    Kind    `json:"kind"`
	Commit  string  `json:"commit,omitempty"`
	Trigger Trigger `json:"trigger"`
	// Start and End are workflow times (UTC).
	Start   time.Time `json:"start"`
	End     time.Time `json:"end,omitzero"`
	Outcome Outcome   `json:"outcome"`
	// Approvals are the partitions approved for this rollout.
	Approvals []Approval `json:"approvals,omitempty"`
	// Clusters are the rows of releases that changed or are not Ready.
	Clusters []Row  `json:"clusters,omitempty"`
	Counts   Counts `json:"counts"`
	// Trimmed: rows of this (old) entry were dropped to keep the history
	// within RowBudget; Counts still count them.
	Trimmed bool `json:"trimmed,omitempty"`
	// Rollout is the rollout workflow's ID.
	Rollout string `json:"rollout,omitempty"`
	Message string `json:"message,omitempty"`
	// Retries counts the retry rollouts folded into this entry (Fold):
	// they ended as it did, so End, rows and message are the last one's.
	Retries int `json:"retries,omitempty"`
}

// Fold folds e into the newest entry of entries when e is a retry that
// changed nothing worth a line of its own: a rollout retried by the
// failure backoff (TriggerRetry) of the same commit and kind, ending
// with the same outcome, that outcome not Succeeded. A failing commit
// retried for days is then one entry with its retry count, not a
// thousand lines that push everything else out. It reports whether it
// folded; entries is changed in place then.
func Fold(entries []Entry, e Entry) bool {
	if len(entries) == 0 || e.Trigger.Kind != TriggerRetry || e.Outcome == Succeeded {
		return false
	}
	last := &entries[len(entries)-1]
	if last.Commit != e.Commit || last.Kind != e.Kind || last.Outcome != e.Outcome {
		return false
	}
	last.End, last.Clusters, last.Counts, last.Message, last.Rollout = e.End, e.Clusters, e.Counts, e.Message, e.Rollout
	if len(e.Approvals) > 0 {
		last.Approvals = e.Approvals // the commit's approvals, kept by every rollout of it
	}
	last.Retries++
	return true
}

// Failures are the entry's failed rows.
func (e Entry) Failures() []Row {
	var out []Row
	for _, r := range e.Clusters {
		if r.Failed() {
			out = append(out, r)
		}
	}
	return out
}

// Expand fills what entries do not store (Row.ManifestID), for readers.
func Expand(entries []Entry) []Entry {
	out := make([]Entry, len(entries))
	for i, e := range entries {
		if len(e.Clusters) > 0 {
			rows := make([]Row, len(e.Clusters))
			for j, r := range e.Clusters {
				r.ManifestID, _, _ = strings.Cut(r.DeploymentID, ":")
				rows[j] = r
			}
			e.Clusters = rows
		}
		out[i] = e
	}
	return out
}
