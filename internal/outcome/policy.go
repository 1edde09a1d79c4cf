package outcome

// Policy is what one failure class means for a deployment: the state it
// shows, how Flotilla tries again, and how it is told. Every decision
// about a class (in the rollout's tracker and scheduler, the workflow
// that runs the deploys and the deploy activity) reads its row here
// rather than listing classes, so a class's policy changes in one place.
type Policy struct {
	// State is the deployment state a step that ended with the class
	// shows, a status.State value ("" for OK: a deployment that was
	// applied shows its readiness). It is spelled as a string because
	// status imports outcome (a Deployment carries its Class) and
	// imports point one way; status.StateOf gives it typed, and status's
	// tests check every row names one of status.States.
	State string
	// Retry is how the step is tried again.
	Retry Retry
	// Failed: the bundle itself failed on the cluster (tried and refused,
	// or it failed Flotilla's checks), as opposed to not having been
	// tried.
	Failed bool
	// ClusterWide: the failure is the cluster's, not the bundle's (it
	// did not answer, or refused the credentials), so the cluster's other
	// work (its cleanups) waits as well.
	ClusterWide bool
	// StartsAtOnce: a new rollout starts a deployment whose recorded
	// failure has this class at once rather than when the failure backoff
	// is over: a cluster that is back (its agent online again) gets what
	// it missed now. The backoff still paces the retries the GitRepo
	// starts for it.
	StartsAtOnce bool
	// Note is what a deployment's message says before the error, if
	// anything.
	Note string
	// Log is the message of the deploy activity's log line for a bundle
	// that failed with the class; operators and the end-to-end tests
	// search for these.
	Log string
}

// Retry is how a failed step is tried again. There are two pauses, not
// one per class: the rollout's own short pause (1 s doubling to 15 s,
// workflows' retryBackoff) and the GitRepo's failure backoff
// (rollout.Backoff: 30 s doubling to 10 min unless configured), the same
// for every class that waits on it.
type Retry string

// The ways a step is tried again.
const (
	// NoRetry: nothing tries the step again on its own; a new commit or
	// a sync does.
	NoRetry Retry = ""
	// RetrySoon: the rollout tries the step again itself after a short
	// pause, likely to succeed once the cluster or the store is back (the
	// old Transient). A rollout that gives up records the cluster as not
	// reached (Unreachable), and the GitRepo retries it on the failure
	// backoff.
	RetrySoon Retry = "Soon"
	// RetryAfterBackoff: the result is recorded as a failure at its
	// deployment ID, which keeps showing, and that ID is not deployed to
	// the cluster again until the failure backoff is over (a new ID is
	// tried at once).
	RetryAfterBackoff Retry = "AfterBackoff"
)

// Log lines of the deploy activity.
const (
	logNotDeployed = "Bundle not deployed"
	logFailed      = "Bundle failed"
)

// Deployment states, as status names them (see Policy.State).
const (
	waitApplied = "WaitApplied"
	errApplied  = "ErrApplied"
)

// All lists every class, OK first; the policy table has a row for each
// and no other.
var All = []Class{OK, Unreachable, Unauthorized, BundleFailed, Invalid, ContentUnavailable, Refused}

// policies is the table: one row per class.
var policies = map[Class]Policy{
	OK: {},
	Unreachable: {State: waitApplied, Retry: RetrySoon, ClusterWide: true, StartsAtOnce: true,
		Log: logNotDeployed},
	// Slower than Unreachable only in that the rollout does not retry it
	// itself: the credentials must be fixed first.
	Unauthorized: {State: waitApplied, Retry: RetryAfterBackoff, ClusterWide: true, Log: logNotDeployed},
	BundleFailed: {State: errApplied, Retry: RetryAfterBackoff, Failed: true, Log: logFailed},
	// Nothing was applied, but the same objects fail the same checks:
	// like BundleFailed.
	Invalid: {State: errApplied, Retry: RetryAfterBackoff, Failed: true, Log: logFailed},
	// Not StartsAtOnce, as it was not before the table; a rollout that
	// gives up records these as Unreachable anyway.
	ContentUnavailable: {State: waitApplied, Retry: RetrySoon, Note: "content unavailable",
		Log: "Content unavailable"},
	// Nothing was tried, and the same spec is refused again: nothing
	// retries it; a change of the spec or of the policy does.
	Refused: {State: errApplied, Failed: true, Note: "refused by policy", Log: "Bundle refused by policy"},
}

// Unclassified is the policy of a class this code does not know (a
// result from a newer worker, or a step that failed without a class):
// the bundle shows ErrApplied and nothing retries it on its own, which
// is what such a class got before the table.
var Unclassified = Policy{State: errApplied, Log: logFailed}

// Policy is the class's row of the table; Unclassified when it has none.
func (c Class) Policy() Policy {
	if p, ok := policies[c]; ok {
		return p
	}
	return Unclassified
}

// Transient reports whether a retry within the same rollout, after a short
// pause, is likely to succeed (the cluster or the store was briefly away).
func (c Class) Transient() bool { return c.Policy().Retry == RetrySoon }

// Failed reports whether the bundle itself failed on the cluster
// (ErrApplied), as opposed to not having been tried.
func (c Class) Failed() bool { return c.Policy().Failed }
