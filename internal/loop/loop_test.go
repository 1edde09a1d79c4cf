package loop

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestDecide(t *testing.T) {
	running := Rollout{Running: true, Started: true}
	starting := Rollout{Running: true}
	stopping := Rollout{Running: true, Started: true, Superseding: true}
	// base is an applied GitRepo whose remote answered, with nothing due.
	base := func(f func(*State)) State {
		s := State{Applied: true, CommitKnown: true, CarryRollout: true}
		if f != nil {
			f(&s)
		}
		return s
	}
	for _, tc := range []struct {
		name string
		s    State
		want Action
	}{
		{"never applied: waits for a spec", State{}, Wait},
		{"never applied, deleted: ends", State{Deleting: true}, End},
		{"idle, nothing due: waits", base(nil), Wait},
		{"a poll or push: checks the remote", base(func(s *State) { s.ResolveDue = true }), Resolve},
		{"checks the remote before superseding", base(func(s *State) { s.ResolveDue, s.Changed, s.Rollout = true, true, running }), Resolve},
		{"deleting: does not check the remote", base(func(s *State) { s.ResolveDue, s.Deleting = true, true }), Delete},
		{"a change while idle: starts", base(func(s *State) { s.Changed = true }), Start},
		{"a change before the remote answered: waits", base(func(s *State) { s.Changed, s.CommitKnown = true, false }), Wait},
		{"a change while paused: waits", base(func(s *State) { s.Changed, s.Paused = true, true }), Wait},
		{"a retry while idle: starts", base(func(s *State) { s.RetryDue = true }), Start},
		{"a retry while paused: waits", base(func(s *State) { s.RetryDue, s.Paused = true, true }), Wait},
		{"a change while a rollout runs: supersedes", base(func(s *State) { s.Changed, s.Rollout = true, running }), Supersede},
		{"a change while paused does not supersede", base(func(s *State) { s.Changed, s.Paused, s.Rollout = true, true, running }), Wait},
		{"a retry never supersedes", base(func(s *State) { s.RetryDue, s.Rollout = true, running }), Wait},
		{"a rollout not started yet cannot be superseded", base(func(s *State) { s.Changed, s.Rollout = true, starting }), Wait},
		{"a rollout asked to stop once is not asked again", base(func(s *State) { s.Changed, s.Rollout = true, stopping }), Wait},
		{"deleting while a rollout runs: supersedes it", base(func(s *State) { s.Deleting, s.Rollout = true, running }), Supersede},
		{"deleting, the rollout stopping: waits for it", base(func(s *State) { s.Deleting, s.Rollout = true, stopping }), Wait},
		{"deleting while idle: removes", base(func(s *State) { s.Deleting = true }), Delete},
		{"deleting wins over a due rollout", base(func(s *State) { s.Deleting, s.Changed = true, true }), Delete},
		{"history full while idle: continues as new", base(func(s *State) { s.HistoryFull = true }), ContinueAsNew},
		{"a due rollout starts before continuing as new", base(func(s *State) { s.HistoryFull, s.Changed = true, true }), Start},
		{"history full while a rollout runs: continues as new", base(func(s *State) { s.HistoryFull, s.Rollout = true, running }), ContinueAsNew},
		{"history full while a rollout stops: continues as new", base(func(s *State) { s.HistoryFull, s.Rollout = true, stopping }), ContinueAsNew},
		{"history full, the rollout not started: waits for its start", base(func(s *State) { s.HistoryFull, s.Rollout = true, starting }), Wait},
		{"history full, a rollout runs, older run: waits", base(func(s *State) { s.HistoryFull, s.Rollout, s.CarryRollout = true, running, false }), Wait},
		{"history full, a change to supersede first", base(func(s *State) { s.HistoryFull, s.Changed, s.Rollout = true, true, running }), Supersede},
		{"history full while deleting: removes first", base(func(s *State) { s.HistoryFull, s.Deleting, s.Rollout = true, true, stopping }), Wait},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want.String(), Decide(tc.s).String())
		})
	}
}

// TestDecide_PollsNeverChurn walks every state in which only the remote
// was checked and found nothing new (no change, no retry): whatever runs,
// the loop never starts or supersedes a rollout.
func TestDecide_PollsNeverChurn(t *testing.T) {
	for _, r := range []Rollout{{}, {Running: true}, {Running: true, Started: true}, {Running: true, Started: true, Superseding: true}} {
		for _, paused := range []bool{false, true} {
			for _, full := range []bool{false, true} {
				s := State{Applied: true, CommitKnown: true, CarryRollout: true, Rollout: r, Paused: paused, HistoryFull: full}
				got := Decide(s)
				assert.NotContains(t, []Action{Start, Supersede}, got, "%+v", s)
			}
		}
	}
}
