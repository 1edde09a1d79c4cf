// Package loop decides what the entity workflow of a GitRepo (or HelmOp)
// does next. It is pure: the workflow describes its state, Decide names one
// action, and the workflow carries it out and asks again when something
// changed. Every rule about when a rollout starts, is superseded, is
// retried, or when the run continues as new lives here, with table tests,
// instead of in conditions spread over timers and signal handlers.
//
// The rules that keep a GitRepo running for a year:
//
//   - A rollout starts for a change (a new commit, spec, cluster or group
//     change, a sync) or for the retry of failed deployments, never because
//     a poll found deployments that have not settled: those are what the
//     running or last rollout is already working on, and the clusters'
//     watches report how they settle.
//   - Only a change supersedes a running rollout. A retry waits for it
//     (the next rollout retries whatever is still due).
//   - The run continues as new when its history reaches its budget, also
//     while a rollout runs: the rollout reports to the new run.
package loop

// Action is the one thing the loop does next.
type Action int

// The loop's actions, in the order Decide considers them.
const (
	// Wait: nothing to do until the state changes.
	Wait Action = iota
	// End: the GitRepo was deleted before it was ever applied.
	End
	// Resolve: ask the remote which commit the branch is at.
	Resolve
	// Supersede: ask the running rollout to stop starting work.
	Supersede
	// Delete: start the rollout that removes what the GitRepo deployed,
	// then end.
	Delete
	// Start: start a rollout of the latest commit and spec.
	Start
	// ContinueAsNew: end this run and carry the state to a new one.
	ContinueAsNew
)

func (a Action) String() string {
	switch a {
	case End:
		return "End"
	case Resolve:
		return "Resolve"
	case Supersede:
		return "Supersede"
	case Delete:
		return "Delete"
	case Start:
		return "Start"
	case ContinueAsNew:
		return "ContinueAsNew"
	}
	return "Wait"
}

// State is what the loop knows when it decides.
type State struct {
	// Applied: a spec was applied.
	Applied bool
	// Deleting: a delete was asked for.
	Deleting bool
	// Paused: no rollout starts (a running one is not superseded for a
	// change either).
	Paused bool
	// ResolveDue: the remote is to be checked now (a poll, a push, a sync).
	ResolveDue bool
	// Changed: a change waits to be rolled out: a new commit, spec,
	// cluster or group change, or a sync.
	Changed bool
	// RetryDue: the backoff of a failed deployment is over, or the last
	// rollout stopped where clusters had to become Ready and one did: a
	// rollout goes on once none runs.
	RetryDue bool
	// CommitKnown: the remote answered once (there is a commit to roll out).
	CommitKnown bool
	// Rollout is the rollout in flight, if any.
	Rollout Rollout
	// HistoryFull: the run's history reached its budget.
	HistoryFull bool
	// CarryRollout: the run may continue as new while a rollout runs (the
	// rollout reports to whichever run is current). Runs recorded before
	// this was possible continue as new only when idle.
	CarryRollout bool
}

// Rollout is the state of the rollout in flight.
type Rollout struct {
	// Running: a rollout was started and has not reported its end.
	Running bool
	// Started: its workflow started, so it can be signalled.
	Started bool
	// Superseding: it was asked to stop.
	Superseding bool
}

// Decide names what the loop does next, most urgent first.
func Decide(s State) Action {
	r := s.Rollout
	idle := !r.Running
	switch {
	case !s.Applied && s.Deleting:
		return End
	case !s.Applied:
		return Wait
	case s.ResolveDue && !s.Deleting:
		return Resolve
	case s.supersedes():
		return Supersede
	case idle && s.Deleting:
		return Delete
	case idle && s.RolloutDue():
		return Start
	case s.continuesAsNew():
		return ContinueAsNew
	}
	return Wait
}

// supersedes reports whether the running rollout is to be asked to stop:
// a change (not a retry) or a delete came, and it can be signalled.
func (s State) supersedes() bool {
	r := s.Rollout
	return r.Running && r.Started && !r.Superseding && (s.Deleting || (s.Changed && !s.Paused))
}

// continuesAsNew reports whether the run may continue as new now: its
// history is full and no rollout runs, or one runs that the new run can
// adopt.
func (s State) continuesAsNew() bool {
	r := s.Rollout
	return s.HistoryFull && (!r.Running || (s.CarryRollout && r.Started && !s.Deleting))
}

// RolloutDue reports whether a rollout should start once none runs: a
// change or a retry waits, the GitRepo is not paused, and there is a
// commit to roll out.
func (s State) RolloutDue() bool {
	return (s.Changed || s.RetryDue) && !s.Paused && s.CommitKnown
}
