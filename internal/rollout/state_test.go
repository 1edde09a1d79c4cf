package rollout

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/outcome"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

// scheduledState is a rollout's State of bundle a on clusters under
// strategy st, scheduled at t0.
func scheduledState(t *testing.T, clusters []string, inv []InventoryEntry, st Strategy) *State {
	t.Helper()
	p := deployAll(bundles("a"), clusters, inv)
	s := NewState(p, Backoff{})
	st.Inventory = p.Inventory
	s.Schedule(p, st, t0)
	return s
}

func stateOf(t *testing.T, s *State, unit string) status.Deployment {
	t.Helper()
	d, ok := s.Deployment(key(unit))
	require.True(t, ok, unit)
	return d
}

// The State is the one home of a rollout's progress: reports move units
// on, failures beyond the threshold halt the bundle once, and a
// superseded rollout records no failure and halts nothing.
func TestState_ReportsDriveTheSchedule(t *testing.T) {
	clusters := []string{"c1", "c2", "c3"}
	for _, tc := range []struct {
		name       string
		supersede  bool
		wantHalted bool
		wantRetry  bool
	}{
		{"failures halt", false, true, true},
		{"superseded: no failure recorded, no halt", true, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := scheduledState(t, clusters, nil, Strategy{Strategies: forA(halting(1, 0, false, clusters...))})
			step := s.Next(t0)
			require.Equal(t, []string{"a@c1"}, keys(step.Start))
			for _, u := range step.Start {
				s.Start(u)
			}
			assert.Equal(t, status.WaitApplied, stateOf(t, s, "a@c1").State)
			assert.True(t, s.Busy())
			if tc.supersede {
				s.Supersede()
			}
			halted := s.Report(Report{Cluster: "c1", GaveUp: true, Bundles: []string{"a"}, Message: "cluster c1: unreachable"}, t0)
			assert.Equal(t, tc.wantHalted, len(halted) == 1, "%+v", halted)
			assert.False(t, s.Busy())
			e := s.Inventory()
			i := 0
			for i < len(e) && e[i].Cluster != "c1" {
				i++
			}
			require.Less(t, i, len(e))
			assert.Equal(t, tc.wantRetry, e[i].Failure != nil, "a cluster given up on is retried on the backoff unless superseded")
			if tc.wantHalted {
				assert.Empty(t, s.Next(t0).Start, "a halted bundle starts nothing more")
				assert.Len(t, s.Halts(), 1)
			}
		})
	}
}

// Units the clusters' watches vouch for settle without a deploy, except
// on a cluster whose agent is offline; a unit on an offline cluster says
// its deploy waits in the agent's queue.
func TestState_VouchedAndOffline(t *testing.T) {
	clusters := []string{"c1", "c2"}
	inv := []InventoryEntry{current("a", "c1"), current("a", "c2")}
	for i := range inv {
		inv[i].Live = &status.LiveReport{Bundle: "a", Release: inv[i].Release, Namespace: inv[i].Namespace,
			DeploymentID: inv[i].DeploymentID, Resources: 1, Ready: 1}
	}
	s := scheduledState(t, clusters, inv, Strategy{Strategies: forA(limits(100, part("all", 100, clusters...))),
		Vouch: true, Offline: []string{"c2"}, Pickup: 2 * time.Minute, RetryUnreachable: true})
	step := s.Next(t0)
	assert.True(t, step.Vouched)
	assert.Equal(t, []string{"a@c2"}, keys(step.Start), "an offline agent's watch vouches for nothing")
	assert.Equal(t, status.Ready, stateOf(t, s, "a@c1").State, "vouched: settled as the watch saw it")
	// c2 runs its ID already: its no-op deploy confirms its state, so it
	// is not marked as starting.
	s.Start(step.Start[0])
	assert.NotEqual(t, status.WaitApplied, stateOf(t, s, "a@c2").State)

	// A new deployment ID on the offline cluster says where it waits.
	s2 := scheduledState(t, clusters, nil, Strategy{Strategies: forA(limits(100, part("all", 100, clusters...))),
		Offline: []string{"c2"}, Pickup: 2 * time.Minute})
	for _, u := range s2.Next(t0).Start {
		s2.Start(u)
	}
	assert.Equal(t, "cluster c2: agent offline; the deploy waits up to 2m0s in task queue cluster/c2, then is tried again when the agent is back",
		stateOf(t, s2, "a@c2").Message)
	assert.Empty(t, stateOf(t, s2, "a@c1").Message)
}

// Approvals kept from the rollout this one replaces release their
// partition at once; Mark shows a cluster's in-flight units.
func TestState_ApprovalsAndMark(t *testing.T) {
	clusters := []string{"c1", "c2"}
	p := deployAll(bundles("a"), clusters, nil)
	prev := NewState(p, Backoff{})
	prev.Schedule(p, Strategy{Strategies: forA(approvalPlan("c2")), Inventory: p.Inventory}, t0)
	assert.Equal(t, []string{"a@c1"}, keys(prev.Next(t0).Start))
	require.True(t, prev.HasPartition("a", "p2"))
	alice := protocol.Identity{User: "alice@laptop", APIKey: "ci-bot"}
	assert.Equal(t, []string{"c2"}, prev.PartitionClusters("a", "p2"))
	assert.Equal(t, []string{"a/p2"}, prev.Approve("a", "p2", alice, t0.Add(time.Minute)))
	approvals := prev.Approvals()
	require.Len(t, approvals, 1)
	assert.Equal(t, alice, approvals[0].By, "who approved is recorded")
	assert.Equal(t, t0.Add(time.Minute), approvals[0].At)
	assert.NotEmpty(t, approvals[0].Units)

	s := NewState(p, Backoff{})
	kept := s.Schedule(p, Strategy{Strategies: forA(approvalPlan("c2")), Inventory: p.Inventory, Approvals: approvals}, t0.Add(time.Hour))
	assert.Equal(t, []string{"a/p2"}, kept)
	assert.Equal(t, approvals, s.Approvals(), "a kept approval keeps its approver and time")
	step := s.Next(t0)
	assert.Equal(t, []string{"a@c1", "a@c2"}, keys(step.Start), "the approval carried over")
	for _, u := range step.Start {
		s.Start(u)
	}
	s.Mark("c2", nil, status.WaitApplied, outcome.Unreachable, "cluster c2: retrying")
	assert.Equal(t, "cluster c2: retrying", stateOf(t, s, "a@c2").Message)
	assert.True(t, s.Running("a", "c2"))
	assert.False(t, NewState(p, Backoff{}).Running("a", "c2"), "nothing runs before Schedule")
}

// A cleanup that keeps something on purpose (another owner's release, a
// namespace deleteNamespace keeps) is forgotten from the inventory like
// any removal, and what it kept is told, in order.
func TestState_KeptIsToldAndForgotten(t *testing.T) {
	inv := []InventoryEntry{entry("a", "c1"), entry("b", "c1")}
	s := NewState(MakePlan(each(targets([]string{"c1"}, "c1"), bundles("a")), inv, PlanOptions{}), Backoff{})
	require.Len(t, s.Inventory(), 2)
	s.Report(Report{Cluster: "c1", Removed: []string{"default/b"},
		Kept: []string{"cluster c1: bundle b: not removed: release default/b belongs to GitRepo ns/other"}}, t0)
	assert.Len(t, s.Inventory(), 1, "the release kept for its owner leaves this GitRepo's inventory")
	s.Report(Report{Cluster: "c1", Kept: []string{"cluster c1: bundle x: namespace default kept"}}, t0)
	assert.Equal(t, []string{"cluster c1: bundle b: not removed: release default/b belongs to GitRepo ns/other",
		"cluster c1: bundle x: namespace default kept"}, s.Kept())
}
