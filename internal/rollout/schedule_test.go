package rollout

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/outcome"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/status"
	"github.com/flotilla-gitops/flotilla/internal/strategy"
)

// t0 is the workflow time the scheduler tests start at.
var t0 = time.Date(2025, 1, 6, 12, 0, 0, 0, time.UTC)

// part is a partition of clusters (sorted, as strategy.Compute makes them).
func part(name string, maxUnavailable int, clusters ...string) strategy.Partition {
	return strategy.Partition{Name: name, MaxUnavailable: maxUnavailable, Clusters: clusters}
}

// limits is a strategy without a failure threshold.
func limits(maxUnavailable int, parts ...strategy.Partition) strategy.Plan {
	return strategy.Plan{MaxUnavailable: maxUnavailable, FailureThreshold: strategy.NoFailureThreshold, Partitions: parts}
}

// halting is a strategy with a failure threshold and one partition.
func halting(maxUnavailable, threshold int, rollback bool, clusters ...string) strategy.Plan {
	return strategy.Plan{MaxUnavailable: maxUnavailable, FailureThreshold: threshold, RollbackOnFailure: rollback,
		Partitions: []strategy.Partition{part("all", 100, clusters...)}}
}

// forA is the strategy of bundle a.
func forA(plan strategy.Plan) []BundleStrategy { return []BundleStrategy{{Bundle: "a", Plan: plan}} }

// approvalPlan has partitions p1 (c1) and p2 (the other clusters), which
// requires approval; maxUnavailablePartitions 1 lets only the approval
// hold p2.
func approvalPlan(p2 ...string) strategy.Plan {
	p := limits(100, part("p1", 100, "c1"), part("p2", 100, p2...))
	p.Partitions[1].RequireApproval, p.MaxUnavailablePartitions = true, 1
	return p
}

// maxUnavailableWaits is bundle a's wait for its maxUnavailable of limit
// with clusters list ("c1, c2") waiting.
func maxUnavailableWaits(limit int, list string) []status.Wait {
	return []status.Wait{{Bundle: "a", Kind: status.WaitMaxUnavailable, Clusters: strings.Split(list, ", "),
		Message: fmt.Sprintf("bundle a: maxUnavailable %d reached; waiting: %s", limit, list)}}
}

// deployAll plans every bundle on every cluster, as a rollout does.
func deployAll(bs []Bundle, clusters []string, inv []InventoryEntry) Plan {
	return MakePlan(each(targets(clusters, clusters...), bs), inv, PlanOptions{})
}

// current is an inventory entry already at the bundle's deployment ID.
func current(b, c string) InventoryEntry {
	e := entry(b, c)
	e.DeploymentID = "s-" + b + ":h"
	return e
}

// failing is an inventory entry whose deploys of the bundle's deployment
// ID failed, with the next retry due at next.
func failing(b, c string, next time.Time) InventoryEntry {
	e := entry(b, c)
	e.Failure = &Failure{DeploymentID: "s-" + b + ":h", Class: outcome.BundleFailed, Attempts: 2, Next: next,
		Message: "boom", State: status.ErrApplied}
	return e
}

// key splits "bundle@cluster".
func key(unit string) status.Key {
	b, c, _ := strings.Cut(unit, "@")
	return status.Key{Bundle: b, Cluster: c}
}

func keys(units []Unit) []string {
	var out []string
	for _, u := range units {
		out = append(out, u.Bundle.Name+"@"+u.Cluster)
	}
	return out
}

func phases(ps []status.PartitionStatus) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Bundle+"/"+p.Name+":"+p.Phase)
	}
	return out
}

// step is one event of a rollout followed by a decision of the scheduler.
type step struct {
	// at is the time of the step, from t0.
	at time.Duration
	// Units ("bundle@cluster") that finished: Ready; ErrApplied; still
	// NotReady (not final); NotReady past the ready timeout; given up on.
	ready, failed, notReady, timedOut, gaveUp []string
	// approve is a (bundle, partition) approval.
	approve []string
	// states updates what stateOf reports ("bundle@cluster").
	states map[string]status.State

	// What is expected: the halts CheckFailures makes after the events,
	// then Next's starts, waits, partition phases ("bundle/name:Phase",
	// unchecked when nil) and wake (from t0; 0: none).
	halts  []status.Halt
	start  []string
	waits  []status.Wait
	phases []string
	wake   time.Duration
}

// run applies the step's events to s, then checks CheckFailures and Next.
func (st step) run(t *testing.T, s *Scheduler, states map[string]status.State) {
	t.Helper()
	finish := func(units []string, state status.State, final bool) {
		for _, u := range units {
			k := key(u)
			s.Finish(status.Deployment{Bundle: k.Bundle, Cluster: k.Cluster, State: state}, final)
		}
	}
	finish(st.ready, status.Ready, true)
	finish(st.failed, status.ErrApplied, true)
	finish(st.notReady, status.NotReady, false)
	finish(st.timedOut, status.NotReady, true)
	for _, u := range st.gaveUp {
		s.GiveUp(key(u).Bundle, key(u).Cluster)
	}
	if len(st.approve) == 2 {
		require.NotEmpty(t, s.Approve(st.approve[0], st.approve[1], protocol.Identity{}, t0))
	}
	for u, state := range st.states {
		states[u] = state
	}
	assert.Equal(t, st.halts, s.CheckFailures(), "halts")
	d := s.Next(t0.Add(st.at), func(b, c string) (status.State, bool) {
		state, ok := states[b+"@"+c]
		return state, ok
	})
	assert.Equal(t, st.start, keys(d.Start), "started")
	assert.Equal(t, st.waits, d.Waits, "waits")
	if st.phases != nil {
		assert.Equal(t, st.phases, phases(d.Partitions), "partition phases")
	}
	var wake time.Time
	if st.wake != 0 {
		wake = t0.Add(st.wake)
	}
	assert.Equal(t, wake, d.Wake, "wake")
	for _, u := range st.start {
		assert.True(t, s.Running(key(u).Bundle, key(u).Cluster), "%s runs once started", u)
	}
}

// schedCase is a rollout of bundles over clusters and the steps it goes
// through.
type schedCase struct {
	name       string
	bundles    []Bundle
	clusters   []string
	strategies []BundleStrategy
	inv        []InventoryEntry
	steps      []step
}

func (tc schedCase) run(t *testing.T) {
	t.Run(tc.name, func(t *testing.T) {
		p := deployAll(tc.bundles, tc.clusters, tc.inv)
		s := NewScheduler(p, tc.strategies, p.Inventory, t0)
		states := map[string]status.State{}
		for i, st := range tc.steps {
			t.Run(fmt.Sprintf("step %d", i), func(t *testing.T) { st.run(t, s, states) })
		}
	})
}

func TestScheduler_Next(t *testing.T) {
	abc := []string{"c1", "c2", "c3"}
	windowed := func(maxUnavailable int, from, to time.Duration, clusters ...string) []BundleStrategy {
		return []BundleStrategy{{Bundle: "a", Plan: limits(maxUnavailable, part("all", 100, clusters...)),
			Windows: []strategy.Interval{{Start: t0.Add(from), End: t0.Add(to)}}}}
	}
	windowWait := func(until string) []status.Wait {
		w := status.Wait{Bundle: "a", Kind: status.WaitWindow, Partition: "all", Until: until,
			Message: "bundle a: partition all waits for a deployment window"}
		if until != "" {
			w.Message += " opening " + until
		}
		return []status.Wait{w}
	}
	dependsOnA := func(accepted ...status.State) []BundleStrategy {
		return []BundleStrategy{{Bundle: "b", Plan: limits(100, part("all", 100, "c1", "c2")),
			DependsOn: []Dependency{{Describe: "a", Bundles: []string{"a"}, AcceptedStates: accepted}}}}
	}
	dependsOnWait := func(why string, clusters ...string) status.Wait {
		return status.Wait{Bundle: "b", Kind: status.WaitDependsOn, Clusters: clusters,
			Message: "bundle b: " + why + "; waiting: " + strings.Join(clusters, ", ")}
	}
	waitsForApproval := []status.Wait{{Bundle: "a", Kind: status.WaitApproval, Partition: "p2",
		Message: "bundle a: partition p2 waits for approval"}}
	paused := bundles("a")
	paused[0].Paused = true

	cases := []schedCase{
		{
			// Without a strategy every unit starts at once, bundles in
			// name order, clusters in name order.
			name: "default strategy starts everything at once", bundles: bundles("b", "a"), clusters: abc,
			steps: []step{{start: []string{"a@c1", "a@c2", "a@c3", "b@c1", "b@c2", "b@c3"},
				phases: []string{"a/all:Rolling", "b/all:Rolling"}}},
		},
		{
			// maxUnavailable bounds the units in flight; the others wait,
			// listed on one MaxUnavailable wait; a unit Ready frees a slot.
			name: "maxUnavailable limits starts; Ready frees a slot", bundles: bundles("a"), clusters: abc,
			strategies: forA(limits(1, part("all", 100, abc...))),
			steps: []step{
				{start: []string{"a@c1"}, waits: maxUnavailableWaits(1, "c2, c3")},
				{waits: maxUnavailableWaits(1, "c2, c3")}, // no event: nothing more starts
				{ready: []string{"a@c1"}, start: []string{"a@c2"}, waits: maxUnavailableWaits(1, "c3")},
				{ready: []string{"a@c2"}, start: []string{"a@c3"}, phases: []string{"a/all:Rolling"}},
				{ready: []string{"a@c3"}, phases: []string{"a/all:Done"}},
			},
		},
		{
			// A unit applied but not Ready yet is still unavailable.
			name: "a unit still NotReady keeps its slot", bundles: bundles("a"), clusters: abc,
			strategies: forA(limits(1, part("all", 100, abc...))),
			steps: []step{
				{start: []string{"a@c1"}, waits: maxUnavailableWaits(1, "c2, c3")},
				{notReady: []string{"a@c1"}, waits: maxUnavailableWaits(1, "c2, c3")},
			},
		},
		{
			// Without a failureThreshold a failed unit stays unavailable
			// (Fleet): the rollout stalls behind it and never halts.
			name: "without failureThreshold a failed unit keeps its slot", bundles: bundles("a"), clusters: abc,
			strategies: forA(limits(1, part("all", 100, abc...))),
			steps: []step{
				{start: []string{"a@c1"}, waits: maxUnavailableWaits(1, "c2, c3")},
				{failed: []string{"a@c1"}, waits: maxUnavailableWaits(1, "c2, c3")},
			},
		},
		{
			// With a failureThreshold a failure it tolerates counts against
			// the threshold, not against maxUnavailable.
			name: "a failure the threshold tolerates frees its slot", bundles: bundles("a"), clusters: abc,
			strategies: forA(halting(1, 1, false, abc...)),
			steps: []step{
				{start: []string{"a@c1"}, waits: maxUnavailableWaits(1, "c2, c3")},
				{failed: []string{"a@c1"}, start: []string{"a@c2"}, waits: maxUnavailableWaits(1, "c3")},
			},
		},
		{
			// Partitions start in order: with maxUnavailablePartitions 0 a
			// partition starts once every one before it is updated and
			// Ready.
			name: "partitions start in order", bundles: bundles("a"), clusters: abc,
			strategies: forA(limits(100, part("p1", 100, "c1"), part("p2", 100, "c2", "c3"))),
			steps: []step{
				{start: []string{"a@c1"}, phases: []string{"a/p1:Rolling", "a/p2:Pending"},
					waits: []status.Wait{{Bundle: "a", Kind: status.WaitMaxUnavailablePartitions, Partition: "p2",
						Message: "bundle a: partition p2 waits: 1 earlier partition(s) not yet updated and Ready (maxUnavailablePartitions 0)"}}},
				{ready: []string{"a@c1"}, start: []string{"a@c2", "a@c3"}, phases: []string{"a/p1:Done", "a/p2:Rolling"}},
			},
		},
		{
			// maxUnavailablePartitions 1: a partition starts while at most
			// one before it is unavailable.
			name: "maxUnavailablePartitions lets partitions overlap", bundles: bundles("a"), clusters: abc,
			strategies: []BundleStrategy{{Bundle: "a", Plan: func() strategy.Plan {
				p := limits(100, part("p1", 100, "c1"), part("p2", 100, "c2"), part("p3", 100, "c3"))
				p.MaxUnavailablePartitions = 1
				return p
			}()}},
			steps: []step{
				{start: []string{"a@c1", "a@c2"}, phases: []string{"a/p1:Rolling", "a/p2:Rolling", "a/p3:Pending"},
					waits: []status.Wait{{Bundle: "a", Kind: status.WaitMaxUnavailablePartitions, Partition: "p3",
						Message: "bundle a: partition p3 waits: 2 earlier partition(s) not yet updated and Ready (maxUnavailablePartitions 1)"}}},
				{ready: []string{"a@c1"}, start: []string{"a@c3"}, phases: []string{"a/p1:Done", "a/p2:Rolling", "a/p3:Rolling"}},
			},
		},
		{
			// A partition's maxUnavailable bounds its own units in flight,
			// below the bundle's limit.
			name: "partition maxUnavailable", bundles: bundles("a"), clusters: abc,
			strategies: forA(limits(100, part("p1", 1, abc...))),
			steps: []step{
				{start: []string{"a@c1"}, waits: []status.Wait{{Bundle: "a", Kind: status.WaitPartitionMaxUnavailable,
					Partition: "p1", Clusters: []string{"c2", "c3"},
					Message: "bundle a: partition p1 maxUnavailable 1 reached; waiting: c2, c3"}}},
				{ready: []string{"a@c1"}, start: []string{"a@c2"}, waits: []status.Wait{{Bundle: "a",
					Kind: status.WaitPartitionMaxUnavailable, Partition: "p1", Clusters: []string{"c3"},
					Message: "bundle a: partition p1 maxUnavailable 1 reached; waiting: c3"}}},
			},
		},
		{
			// requireApproval holds a partition, even when the partitions
			// before it allow it to start, until it is approved.
			name: "requireApproval waits for Approve", bundles: bundles("a"), clusters: abc,
			strategies: forA(approvalPlan("c2", "c3")),
			steps: []step{
				{start: []string{"a@c1"}, phases: []string{"a/p1:Rolling", "a/p2:WaitingForApproval"},
					waits: waitsForApproval},
				{ready: []string{"a@c1"}, phases: []string{"a/p1:Done", "a/p2:WaitingForApproval"},
					waits: waitsForApproval},
				{approve: []string{"a", "p2"}, start: []string{"a@c2", "a@c3"}, phases: []string{"a/p1:Done", "a/p2:Rolling"}},
			},
		},
		{
			// Units already at their deployment ID start at once (a no-op
			// that confirms readiness), even in a partition that waits
			// for approval.
			name: "up-to-date units start even while their partition waits for approval", bundles: bundles("a"), clusters: abc,
			inv:        []InventoryEntry{current("a", "c2")},
			strategies: forA(approvalPlan("c2", "c3")),
			steps:      []step{{start: []string{"a@c1", "a@c2"}, waits: waitsForApproval}},
		},
		{
			// A partition with nothing to change needs no approval.
			name: "an up-to-date partition needs no approval", bundles: bundles("a"), clusters: []string{"c1", "c2"},
			inv:        []InventoryEntry{current("a", "c2")},
			strategies: forA(approvalPlan("c2")),
			steps:      []step{{start: []string{"a@c1", "a@c2"}, phases: []string{"a/p1:Rolling", "a/p2:Rolling"}}},
		},
		{
			// Up-to-date units do not take a slot of maxUnavailable.
			name: "up-to-date units do not count against maxUnavailable", bundles: bundles("a"), clusters: abc,
			inv:        []InventoryEntry{current("a", "c1")},
			strategies: forA(limits(1, part("all", 100, abc...))),
			steps: []step{
				{start: []string{"a@c1", "a@c2"}, waits: maxUnavailableWaits(1, "c3")},
				{ready: []string{"a@c1"}, waits: maxUnavailableWaits(1, "c3")},
			},
		},
		{
			// Outside every window a partition waits for the next one to
			// open: Until names it and Wake asks to decide again then.
			name: "closed window waits until it opens", bundles: bundles("a"), clusters: []string{"c1", "c2"},
			strategies: windowed(100, time.Hour, 2*time.Hour, "c1", "c2"),
			steps: []step{
				{waits: windowWait("2025-01-06T13:00:00Z"), wake: time.Hour, phases: []string{"a/all:WaitingForWindow"}},
				{at: 59 * time.Minute, waits: windowWait("2025-01-06T13:00:00Z"), wake: time.Hour},
				{at: time.Hour, start: []string{"a@c1", "a@c2"}, phases: []string{"a/all:Rolling"}},
			},
		},
		{
			// With no window ahead the wait has no Until and no Wake.
			name: "no window ahead waits without a wake", bundles: bundles("a"), clusters: []string{"c1"},
			strategies: windowed(100, -2*time.Hour, -time.Hour, "c1"),
			steps:      []step{{waits: windowWait("")}},
		},
		{
			// Inside a window the partition starts; once started it keeps
			// starting units after the window closes.
			name: "open window starts the partition", bundles: bundles("a"), clusters: []string{"c1", "c2"},
			strategies: windowed(1, -time.Hour, time.Hour, "c1", "c2"),
			steps: []step{
				{start: []string{"a@c1"}, waits: maxUnavailableWaits(1, "c2")},
				{at: 2 * time.Hour, ready: []string{"a@c1"}, start: []string{"a@c2"}},
			},
		},
		{
			// dependsOn: a unit starts once the bundles it depends on are
			// Ready (the default accepted state) on the same cluster.
			name: "dependsOn waits for the dependency to be Ready", bundles: bundles("a", "b"), clusters: []string{"c1", "c2"},
			strategies: dependsOnA(),
			steps: []step{
				{start: []string{"a@c1", "a@c2"}, waits: []status.Wait{dependsOnWait("dependency a is not deployed to the cluster", "c1", "c2")}},
				{states: map[string]status.State{"a@c1": status.NotReady, "a@c2": status.WaitApplied},
					waits: []status.Wait{dependsOnWait("waiting for dependency a to be Ready", "c1", "c2")}},
				{states: map[string]status.State{"a@c1": status.Ready}, start: []string{"b@c1"},
					waits: []status.Wait{dependsOnWait("waiting for dependency a to be Ready", "c2")}},
			},
		},
		{
			// acceptedStates replace Ready as the states that release the
			// dependent bundle.
			name: "dependsOn with acceptedStates", bundles: bundles("a", "b"), clusters: []string{"c1", "c2"},
			strategies: dependsOnA(status.Ready, status.Modified),
			steps: []step{{states: map[string]status.State{"a@c1": status.Modified, "a@c2": status.NotReady},
				start: []string{"a@c1", "a@c2", "b@c1"},
				waits: []status.Wait{dependsOnWait("waiting for dependency a to be Ready or Modified", "c2")}}},
		},
		{
			// A dependsOn entry that selects no bundle never releases.
			name: "dependsOn selecting no bundle waits", bundles: bundles("b"), clusters: []string{"c1"},
			strategies: []BundleStrategy{{Bundle: "b", Plan: limits(100, part("all", 100, "c1")),
				DependsOn: []Dependency{{Describe: "selector app=db"}}}},
			steps: []step{{waits: []status.Wait{dependsOnWait("dependency selector app=db matches no bundle", "c1")}}},
		},
		{
			// A paused bundle keeps its clusters at their deployment: they
			// are held, on one Paused wait.
			name: "paused bundle is held", bundles: paused, clusters: []string{"c1", "c2"},
			inv: []InventoryEntry{entry("a", "c1"), entry("a", "c2")},
			steps: []step{{waits: []status.Wait{{Bundle: "a", Kind: status.WaitPaused, Clusters: []string{"c1", "c2"},
				Message: "bundle a is paused; holding at their current deployment: c1, c2"}}}},
		},
		{
			// A paused bundle's up-to-date units still confirm readiness.
			name: "paused bundle's up-to-date unit starts", bundles: paused, clusters: []string{"c1", "c2"},
			inv: []InventoryEntry{current("a", "c1"), entry("a", "c2")},
			steps: []step{{start: []string{"a@c1"}, waits: []status.Wait{{Bundle: "a", Kind: status.WaitPaused,
				Clusters: []string{"c2"}, Message: "bundle a is paused; holding at their current deployment: c2"}}}},
		},
	}
	for _, tc := range cases {
		tc.run(t)
	}
}

func TestScheduler_FailureThreshold(t *testing.T) {
	abcd := []string{"c1", "c2", "c3", "c4"}
	halt := func(threshold int, failed ...string) []status.Halt {
		return []status.Halt{{Bundle: "a", Failed: failed, Threshold: threshold,
			Message: fmt.Sprintf("bundle a: rollout halted: %d cluster(s) failed (failureThreshold %d): %s",
				len(failed), threshold, strings.Join(failed, ", "))}}
	}
	cases := []schedCase{
		{
			// More failures than failureThreshold halt the bundle: the
			// halt is returned once and nothing more starts.
			name: "failures beyond the threshold halt the bundle", bundles: bundles("a"), clusters: abcd,
			strategies: forA(halting(2, 1, false, abcd...)),
			steps: []step{
				{start: []string{"a@c1", "a@c2"}, waits: maxUnavailableWaits(2, "c3, c4")},
				{failed: []string{"a@c1"}, start: []string{"a@c3"}, waits: maxUnavailableWaits(2, "c4")}, // tolerated
				{failed: []string{"a@c2"}, halts: halt(1, "c1", "c2"), phases: []string{"a/all:Halted"}},
				{ready: []string{"a@c3"}, phases: []string{"a/all:Halted"}}, // halted once; c4 never starts
			},
		},
		{
			// failureThreshold 0 halts at the first failure.
			name: "threshold 0 halts at the first failure", bundles: bundles("a"), clusters: abcd[:2],
			strategies: forA(halting(2, 0, false, abcd[:2]...)),
			steps: []step{
				{start: []string{"a@c1", "a@c2"}},
				{failed: []string{"a@c2"}, halts: halt(0, "c2")},
			},
		},
		{
			// Not Ready within the ready timeout is a failure.
			name: "a ready timeout counts as failed", bundles: bundles("a"), clusters: abcd[:2],
			strategies: forA(halting(2, 0, false, abcd[:2]...)),
			steps: []step{
				{start: []string{"a@c1", "a@c2"}},
				{notReady: []string{"a@c1"}}, // still waiting: not a failure
				{timedOut: []string{"a@c1"}, halts: halt(0, "c1")},
			},
		},
		{
			// A cluster that could not be reached fails its units; a unit
			// that never started cannot be given up on.
			name: "a unit given up on counts as failed", bundles: bundles("a"), clusters: abcd[:3],
			strategies: forA(halting(2, 0, false, abcd[:3]...)),
			steps: []step{
				{start: []string{"a@c1", "a@c2"}, waits: maxUnavailableWaits(2, "c3")},
				{gaveUp: []string{"a@c3"}, waits: maxUnavailableWaits(2, "c3")},
				{gaveUp: []string{"a@c1"}, halts: halt(0, "c1")},
			},
		},
		{
			// Without a failureThreshold failures never halt.
			name: "no threshold never halts", bundles: bundles("a"), clusters: abcd[:2],
			strategies: forA(limits(2, part("all", 100, abcd[:2]...))),
			steps: []step{
				{start: []string{"a@c1", "a@c2"}},
				{failed: []string{"a@c1", "a@c2"}, phases: []string{"a/all:Rolling"}},
			},
		},
	}
	for _, tc := range cases {
		tc.run(t)
	}
}

// rollbackScheduler runs bundle a over c1..c6 and halts it: c1 and c4
// end Ready, c2 and c3 fail, c4 is a new install, c5 was up to date and
// c6 waits for the retry of its failure (so counts as failed).
func rollbackScheduler(t *testing.T, rollback bool, threshold int) (*Scheduler, []status.Halt) {
	t.Helper()
	clusters := []string{"c1", "c2", "c3", "c4", "c5", "c6"}
	inv := []InventoryEntry{entry("a", "c1"), entry("a", "c2"), entry("a", "c3"), current("a", "c5"),
		failing("a", "c6", t0.Add(time.Minute))}
	p := deployAll(bundles("a"), clusters, inv)
	s := NewScheduler(p, forA(halting(10, threshold, rollback, clusters...)), p.Inventory, t0)
	d := s.Next(t0, func(string, string) (status.State, bool) { return "", false })
	require.Equal(t, []string{"a@c1", "a@c2", "a@c3", "a@c4", "a@c5"}, keys(d.Start))
	for c, st := range map[string]status.State{"c1": status.Ready, "c2": status.ErrApplied, "c3": status.ErrApplied,
		"c4": status.Ready, "c5": status.Ready} {
		s.Finish(status.Deployment{Bundle: "a", Cluster: c, State: st}, true)
	}
	require.False(t, s.Busy())
	return s, s.CheckFailures()
}

func TestScheduler_Rollbacks(t *testing.T) {
	tests := []struct {
		name      string
		rollback  bool
		threshold int
		halted    bool
		want      []string // "cluster:previous ID"
	}{
		// A halted bundle with rollbackOnFailure rolls back the units this
		// rollout deployed that ran something before: not the new install
		// (c4), the up-to-date unit (c5) or the one waiting for its retry
		// (c6).
		{name: "halted with rollbackOnFailure", rollback: true, threshold: 2, halted: true,
			want: []string{"c1:s-a:old", "c2:s-a:old", "c3:s-a:old"}},
		// Without rollbackOnFailure a halted bundle stays as it is.
		{name: "halted without rollbackOnFailure", threshold: 2, halted: true},
		// A bundle that did not halt is never rolled back.
		{name: "not halted", rollback: true, threshold: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, halts := rollbackScheduler(t, tt.rollback, tt.threshold)
			assert.Equal(t, tt.halted, len(halts) == 1, "halted: %v", halts)
			var got []string
			for _, u := range s.Rollbacks(time.Time{}) {
				assert.Equal(t, "s-a:h", u.Bundle.DeploymentID)
				got = append(got, u.Cluster+":"+u.PrevID)
			}
			assert.Equal(t, tt.want, got)
			assert.Empty(t, s.Rollbacks(time.Time{}), "a bundle is rolled back once")
		})
	}
}

func TestScheduler_Halts(t *testing.T) {
	s, halts := rollbackScheduler(t, true, 2)
	want := status.Halt{Bundle: "a", Failed: []string{"c2", "c3", "c6"}, Threshold: 2,
		Message: "bundle a: rollout halted: 3 cluster(s) failed (failureThreshold 2): c2, c3, c6"}
	require.Equal(t, []status.Halt{want}, halts)
	tests := []struct {
		name        string
		deployments map[string]status.Deployment // by cluster
		rolledBack  []string
		errors      []string
	}{
		// Before any rollback reports, the halt is as CheckFailures made it.
		{name: "before the rollback", deployments: map[string]status.Deployment{"c1": {State: status.Ready}}},
		// Deployments whose Rollback is RolledBack name their cluster;
		// RollbackFailed ones give their message.
		{name: "after the rollback", deployments: map[string]status.Deployment{
			"c1": {State: status.OutOfSync, Rollback: outcome.RolledBack},
			"c2": {State: status.OutOfSync, Rollback: outcome.RollbackFailed, Message: "rollback failed: cluster c2: bundle a: boom"},
			"c3": {State: status.OutOfSync, Rollback: outcome.RolledBack},
			"c4": {State: status.Ready},
		}, rolledBack: []string{"c1", "c3"}, errors: []string{"rollback failed: cluster c2: bundle a: boom"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := s.Halts(func(k status.Key) (status.Deployment, bool) {
				d, ok := tt.deployments[k.Cluster]
				d.Bundle, d.Cluster = k.Bundle, k.Cluster
				return d, ok
			})
			h := want
			h.RolledBack, h.RollbackErrors = tt.rolledBack, tt.errors
			assert.Equal(t, []status.Halt{h}, got)
		})
	}
}

func TestScheduler_Holds(t *testing.T) {
	soon := t0.Add(time.Minute)
	paused := bundles("a")
	paused[0].Paused = true
	withID := func(e InventoryEntry, id string) InventoryEntry {
		f := *e.Failure
		f.DeploymentID = id
		e.Failure = &f
		return e
	}
	upToDateFailing := failing("a", "c1", soon)
	upToDateFailing.DeploymentID = "s-a:h"
	tests := []struct {
		name    string
		bundles []Bundle
		inv     []InventoryEntry
		holds   []Hold
		start   []string
		halted  bool // with failureThreshold 0: the hold counts as failed
	}{
		// A failure of the same deployment ID whose retry is ahead holds
		// the unit: it never starts and counts as failed.
		{name: "retry ahead is held", bundles: bundles("a"), inv: []InventoryEntry{failing("a", "c1", soon)},
			holds: []Hold{{Unit: Unit{Cluster: "c1", Bundle: bundles("a")[0], PrevID: "s-a:old"},
				Retry: failing("a", "c1", soon).Failure}},
			start: []string{"a@c2"}, halted: true},
		// A retry due now starts normally.
		{name: "retry due now starts", bundles: bundles("a"), inv: []InventoryEntry{failing("a", "c1", t0)},
			start: []string{"a@c1", "a@c2"}},
		// So does one that was due earlier.
		{name: "retry overdue starts", bundles: bundles("a"), inv: []InventoryEntry{failing("a", "c1", t0.Add(-time.Hour))},
			start: []string{"a@c1", "a@c2"}},
		// A new deployment ID is tried at once, whatever failed before.
		{name: "new deployment ID starts at once", bundles: bundles("a"),
			inv:   []InventoryEntry{withID(failing("a", "c1", soon), "s-a:older")},
			start: []string{"a@c1", "a@c2"}},
		// A unit already at its ID is not held: it confirms readiness.
		{name: "up-to-date unit is not held", bundles: bundles("a"), inv: []InventoryEntry{upToDateFailing},
			start: []string{"a@c1", "a@c2"}},
		// A paused bundle's units are held with the reason.
		{name: "paused bundle", bundles: paused, inv: []InventoryEntry{entry("a", "c1")},
			holds: []Hold{
				{Unit: Unit{Cluster: "c1", Bundle: paused[0], PrevID: "s-a:old"}, Reason: "bundle a is paused"},
				{Unit: Unit{Cluster: "c2", Bundle: paused[0]}, Reason: "bundle a is paused"},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clusters := []string{"c1", "c2"}
			p := deployAll(tt.bundles, clusters, tt.inv)
			s := NewScheduler(p, forA(halting(10, 0, false, clusters...)), p.Inventory, t0)
			assert.Equal(t, tt.holds, s.Holds())
			d := s.Next(t0, func(string, string) (status.State, bool) { return "", false })
			assert.Equal(t, tt.start, keys(d.Start))
			assert.Equal(t, tt.halted, len(s.CheckFailures()) == 1, "halted")
		})
	}
}

func TestScheduler_Approve(t *testing.T) {
	// Bundle a has two partitions that require approval; b has none.
	newScheduler := func() *Scheduler {
		p := deployAll(bundles("a", "b"), []string{"c1", "c2"}, nil)
		plan := limits(100, part("p1", 100, "c1"), part("p2", 100, "c2"))
		plan.Partitions[0].RequireApproval, plan.Partitions[1].RequireApproval = true, true
		return NewScheduler(p, forA(plan), nil, t0)
	}
	t.Run("Approve", func(t *testing.T) {
		tests := []struct {
			name              string
			bundle, partition string
			want              []string
		}{
			// Without a partition: the one each bundle waits on.
			{name: "next waiting partition", want: []string{"a/p1"}},
			{name: "next of a bundle", bundle: "a", want: []string{"a/p1"}},
			// Named: that partition, even ahead of its turn.
			{name: "named partition", bundle: "a", partition: "p2", want: []string{"a/p2"}},
			{name: "named in any bundle", partition: "p2", want: []string{"a/p2"}},
			// Nothing to approve: none returned.
			{name: "bundle without approvals", bundle: "b"},
			{name: "unknown partition", partition: "p9"},
			{name: "unknown bundle", bundle: "z"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				s := newScheduler()
				assert.Equal(t, tt.want, s.Approve(tt.bundle, tt.partition, protocol.Identity{}, t0))
				assert.Empty(t, s.Approve(tt.bundle, tt.partition, protocol.Identity{}, t0), "an approved partition is not approved again")
			})
		}
	})
	t.Run("Next", func(t *testing.T) {
		// Each approval releases one partition; a started partition is
		// never approved again.
		s := newScheduler()
		next := func() []string {
			return keys(s.Next(t0, func(string, string) (status.State, bool) { return status.Ready, true }).Start)
		}
		assert.Equal(t, []string{"b@c1", "b@c2"}, next())
		assert.Equal(t, []string{"a/p1"}, s.Approve("", "", protocol.Identity{}, t0))
		assert.Equal(t, []string{"a@c1"}, next())
		s.Finish(status.Deployment{Bundle: "a", Cluster: "c1", State: status.Ready}, true)
		assert.Empty(t, next(), "p2 still waits")
		assert.Equal(t, []string{"a/p2"}, s.Approve("", "", protocol.Identity{}, t0))
		assert.Equal(t, []string{"a@c2"}, next())
		assert.Empty(t, s.Approve("a", "p1", protocol.Identity{}, t0), "p1 started")
	})
	t.Run("HasPartition", func(t *testing.T) {
		s := newScheduler()
		tests := []struct {
			bundle, name string
			want         bool
		}{
			{"", "", true},      // some partition requires approval
			{"", "p2", true},    // by name, any bundle
			{"a", "p1", true},   // by bundle and name
			{"a", "p9", false},  // no such partition
			{"b", "", false},    // b's partition needs no approval
			{"b", "all", false}, // exists, but needs no approval
			{"zz", "p1", false}, // no such bundle
		}
		for _, tt := range tests {
			assert.Equal(t, tt.want, s.HasPartition(tt.bundle, tt.name), "HasPartition(%q, %q)", tt.bundle, tt.name)
		}
	})
}

func TestScheduler_RunningBusyReadyTimeout(t *testing.T) {
	clusters := []string{"c1", "c2"}
	p := deployAll(bundles("a", "b"), clusters, nil)
	plan := halting(10, 0, false, clusters...)
	plan.ReadyTimeout = 90 * time.Second
	s := NewScheduler(p, forA(plan), nil, t0)
	assert.False(t, s.Busy(), "nothing started")
	assert.Equal(t, 90*time.Second, s.ReadyTimeout("a"))
	assert.Zero(t, s.ReadyTimeout("b"), "the default strategy leaves the default timeout")
	s.Next(t0, nil)
	assert.True(t, s.Busy())
	assert.True(t, s.Running("a", "c1"))
	assert.False(t, s.Running("a", "c9"))
	for _, u := range []string{"a@c1", "a@c2", "b@c1", "b@c2"} {
		s.Finish(status.Deployment{Bundle: key(u).Bundle, Cluster: key(u).Cluster, State: status.Ready}, true)
	}
	assert.False(t, s.Running("a", "c1"))
	assert.False(t, s.Busy())
}

// Approvals carry over to a scheduler of the same change: a partition
// that deploys the same IDs to the same clusters is approved again; one
// whose deployment ID or clusters changed is not.
func TestScheduler_RestoreApprovals(t *testing.T) {
	parts := strategy.Plan{MaxUnavailable: 10, MaxUnavailablePartitions: 1, FailureThreshold: strategy.NoFailureThreshold,
		Partitions: []strategy.Partition{
			{Name: "p1", MaxUnavailable: 1, RequireApproval: true, Clusters: []string{"c1"}},
			{Name: "p2", MaxUnavailable: 1, RequireApproval: true, Clusters: []string{"c2", "c3"}},
		}}
	sched := func(ids map[string]string) *Scheduler {
		var p Plan
		for _, c := range []string{"c1", "c2", "c3"} {
			if id, ok := ids[c]; ok {
				p.Work = append(p.Work, ClusterWork{Cluster: c, Deploy: []Bundle{{Name: "app", DeploymentID: id}}})
			}
		}
		return NewScheduler(p, []BundleStrategy{{Bundle: "app", Plan: parts}}, nil, time.Now())
	}
	first := sched(map[string]string{"c1": "m:1", "c2": "m:1", "c3": "m:1"})
	require.Equal(t, []string{"app/p1", "app/p2"}, append(first.Approve("app", "p1", protocol.Identity{}, t0), first.Approve("app", "p2", protocol.Identity{}, t0)...))
	approvals := first.Approvals()
	require.Len(t, approvals, 2)

	same := sched(map[string]string{"c1": "m:1", "c2": "m:1", "c3": "m:1"})
	assert.Equal(t, []string{"app/p1", "app/p2"}, same.Restore(approvals), "the same change keeps its approvals")

	changedID := sched(map[string]string{"c1": "m:1", "c2": "m:2", "c3": "m:1"})
	assert.Equal(t, []string{"app/p1"}, changedID.Restore(approvals), "a changed deployment ID needs a new approval")

	lessClusters := sched(map[string]string{"c1": "m:1", "c2": "m:1"})
	assert.Equal(t, []string{"app/p1"}, lessClusters.Restore(approvals), "changed clusters need a new approval")

	assert.Empty(t, sched(map[string]string{"c1": "m:1"}).Restore(nil))
}

// With GateEveryStart a deployment window gates every unit's start: a
// partition that started before its window closed starts nothing more
// until the next opening (its units are Outside, with why), and a halted
// bundle's rollback waits for a window too. Without it (rollouts recorded
// before), only a partition's start is gated.
func TestScheduler_WindowsGateEveryStart(t *testing.T) {
	strategies := []BundleStrategy{{Bundle: "a", Plan: limits(1, part("all", 100, "c1", "c2", "c3")),
		Windows: []strategy.Interval{{Start: t0, End: t0.Add(10 * time.Minute)}, {Start: t0.Add(time.Hour), End: t0.Add(70 * time.Minute)}}}}
	p := deployAll(bundles("a"), []string{"c1", "c2", "c3"}, nil)
	newSched := func(gate bool) *Scheduler {
		s := NewScheduler(p, strategies, p.Inventory, t0)
		if gate {
			s.GateEveryStart()
		}
		return s
	}
	none := func(string, string) (status.State, bool) { return "", false }

	s := newSched(true)
	assert.Equal(t, []string{"a@c1"}, keys(s.Next(t0, none).Start))
	s.Finish(status.Deployment{Bundle: "a", Cluster: "c1", State: status.Ready}, true)
	d := s.Next(t0.Add(20*time.Minute), none)
	assert.Empty(t, d.Start, "the window closed: no unit starts")
	assert.Equal(t, t0.Add(time.Hour), d.Wake, "wakes at the next opening")
	require.Len(t, d.Outside, 2)
	assert.Equal(t, status.Key{Bundle: "a", Cluster: "c2"}, d.Outside[0].Key)
	assert.Equal(t, "cluster c2: bundle a is outside its deployment window; it opens 2025-01-06T13:00:00Z", d.Outside[0].Message)
	require.Len(t, d.Waits, 1)
	assert.Equal(t, status.WaitWindow, d.Waits[0].Kind)
	assert.Equal(t, "2025-01-06T13:00:00Z", d.Waits[0].Until)
	assert.Equal(t, "bundle a: outside its deployment window (next opening 2025-01-06T13:00:00Z); waiting: c2, c3", d.Waits[0].Message)
	assert.Equal(t, []string{"a@c2"}, keys(s.Next(t0.Add(time.Hour), none).Start), "the window opened")

	old := newSched(false)
	assert.Equal(t, []string{"a@c1"}, keys(old.Next(t0, none).Start))
	old.Finish(status.Deployment{Bundle: "a", Cluster: "c1", State: status.Ready}, true)
	assert.Equal(t, []string{"a@c2"}, keys(old.Next(t0.Add(20*time.Minute), none).Start), "partition gating only")
}

func TestScheduler_RollbackWaitsForWindow(t *testing.T) {
	strategies := []BundleStrategy{{Bundle: "a", Plan: halting(10, 0, true, "c1"),
		Windows: []strategy.Interval{{Start: t0, End: t0.Add(10 * time.Minute)}, {Start: t0.Add(time.Hour), End: t0.Add(70 * time.Minute)}}}}
	p := deployAll(bundles("a"), []string{"c1"}, []InventoryEntry{entry("a", "c1")})
	p.Inventory[0].DeploymentID = "old:1"
	s := NewScheduler(p, strategies, p.Inventory, t0)
	s.GateEveryStart()
	none := func(string, string) (status.State, bool) { return "", false }
	assert.Equal(t, []string{"a@c1"}, keys(s.Next(t0, none).Start))
	s.Finish(status.Deployment{Bundle: "a", Cluster: "c1", State: status.ErrApplied}, true)
	require.Len(t, s.CheckFailures(), 1)
	late := t0.Add(20 * time.Minute)
	d := s.Next(late, none)
	require.NotEmpty(t, d.Waits)
	assert.Equal(t, "bundle a: its rollback waits for a deployment window opening 2025-01-06T13:00:00Z", d.Waits[len(d.Waits)-1].Message)
	assert.Empty(t, s.Rollbacks(late), "no rollback outside the window")
	assert.Len(t, s.Rollbacks(t0.Add(time.Hour)), 1, "rolled back once it opens")
}

// RetryUnreachable starts a unit whose cluster could not be reached at
// once; a unit whose bundle failed still waits for its retry.
func TestScheduler_RetryUnreachable(t *testing.T) {
	inv := []InventoryEntry{entry("a", "c1"), entry("a", "c2")}
	p := deployAll(bundles("a"), []string{"c1", "c2"}, inv)
	id := p.Work[0].Deploy[0].DeploymentID
	for i, class := range []outcome.Class{outcome.Unreachable, outcome.BundleFailed} {
		p.Inventory[i].Failure = &Failure{DeploymentID: id, Class: class, Attempts: 1, Next: t0.Add(time.Hour), State: status.WaitApplied}
	}
	none := func(string, string) (status.State, bool) { return "", false }
	held := NewScheduler(p, nil, p.Inventory, t0)
	assert.Empty(t, keys(held.Next(t0, none).Start), "both wait for their retry")
	s := NewScheduler(p, nil, p.Inventory, t0)
	s.RetryUnreachable()
	assert.Equal(t, []string{"a@c1"}, keys(s.Next(t0, none).Start), "the unreachable cluster is tried at once")
	assert.Len(t, s.Holds(), 1, "the failed bundle still waits")
}
