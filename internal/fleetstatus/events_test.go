package fleetstatus

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/flotilla-gitops/flotilla/internal/status"
)

func TestTransitions(t *testing.T) {
	base := Observation{LatestCommit: "c1", Commit: "c1", LastRollout: "rollout/a", ReadyCount: "2/2"}
	with := func(mod func(*Observation)) Observation {
		o := base
		mod(&o)
		return o
	}
	tests := []struct {
		name string
		prev *Observation
		next Observation
		want []Event
	}{
		{name: "first observation: no news", prev: nil, next: with(func(o *Observation) { o.Error = "boom" })},
		{name: "nothing changed", prev: &base, next: base},
		{name: "new commit", prev: &base, next: with(func(o *Observation) { o.LatestCommit = "c2" }),
			want: []Event{{"Normal", ReasonGotNewCommit, "c2"}}},
		{name: "new chart version", prev: &base, next: with(func(o *Observation) { o.LatestCommit, o.HelmOp = "1.2.3", true }),
			want: []Event{{"Normal", ReasonGotNewChartVersion, "1.2.3"}}},
		{name: "remote check fails", prev: &base, next: with(func(o *Observation) {
			o.PollFailures, o.Error = 1, "ls-remote https://git.example/r.git: connection refused"
		}), want: []Event{
			{"Warning", ReasonFailedToCheckCommit, "ls-remote https://git.example/r.git: connection refused"},
			{"Warning", ReasonRolloutFailed, "ls-remote https://git.example/r.git: connection refused"},
		}},
		{name: "remote check keeps failing: no new event",
			prev: &Observation{PollFailures: 1, Error: "x"}, next: Observation{PollFailures: 2, Error: "x"}},
		{name: "rollout starts", prev: &base, next: with(func(o *Observation) { o.Rollout = "rollout/b" }),
			want: []Event{{"Normal", ReasonRolloutStarted, "rollout rollout/b started"}}},
		{name: "rollout succeeds", prev: &Observation{LatestCommit: "c1", Rollout: "rollout/b", LastRollout: "rollout/a"},
			next: with(func(o *Observation) { o.LastRollout = "rollout/b" }),
			want: []Event{{"Normal", ReasonRolloutSucceeded, "rollout rollout/b finished: 2/2 bundle deployments ready"}}},
		{name: "rollout halts", prev: &base, next: with(func(o *Observation) {
			o.LastRollout, o.Halts = "rollout/b", "bundle web halted: 2 clusters failed"
		}), want: []Event{{"Warning", ReasonRolloutFailed, "bundle web halted: 2 clusters failed"}}},
		{name: "partition waits for approval", prev: &Observation{Approvals: []string{"a/p1"}},
			next: Observation{Approvals: []string{"a/p1", "b/p2"}},
			want: []Event{{"Normal", ReasonWaitingForApproval, "waiting for approval: b/p2"}}},
		{name: "drift detected, then corrected",
			prev: &base, next: with(func(o *Observation) { o.Modified, o.Drifted = 1, "bundle a on cluster c1" }),
			want: []Event{{"Warning", ReasonDriftDetected, "drift on bundle a on cluster c1"}}},
		{name: "drift corrected", prev: &Observation{Modified: 1, Corrections: 1}, next: Observation{Corrections: 3},
			want: []Event{{"Normal", ReasonDriftCorrected, "2 drift corrections made"}}},
		{name: "deletions held", prev: &base, next: with(func(o *Observation) { o.DeletionsHeld = "3 uninstalls held" }),
			want: []Event{{"Warning", ReasonDeletionsHeld, "3 uninstalls held"}}},
		{name: "policy violation", prev: &base, next: with(func(o *Observation) {
			o.PolicyViolation = `Policy team-a/strict: allowedRepoPatterns [^https://git.example.com/] do not match repo "https://x"`
		}), want: []Event{{"Warning", ReasonPolicyViolation, `Policy team-a/strict: allowedRepoPatterns [^https://git.example.com/] do not match repo "https://x"`}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Transitions(tt.prev, tt.next))
		})
	}
}

func TestObserve(t *testing.T) {
	d := dep("a", "c1", status.Modified)
	d.Corrections = 2
	st := gitRepo(func(g *status.GitRepo) {
		g.Waits = []status.Wait{{Bundle: "a", Kind: status.WaitApproval, Partition: "p2"}, {Bundle: "a", Kind: status.WaitApproval, Partition: "p1"},
			{Bundle: "a", Kind: status.WaitApproval, Partition: "p1"}}
	}, d, dep("a", "c2", status.Ready))
	o := Observe(st)
	assert.Equal(t, []string{"a/p1", "a/p2"}, o.Approvals)
	assert.Equal(t, 1, o.Modified)
	assert.Equal(t, 2, o.Corrections)
	assert.Equal(t, "bundle a on cluster c1", o.Drifted)
	assert.Equal(t, "1/2", o.ReadyCount)
}
