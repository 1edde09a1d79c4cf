package rollout

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/outcome"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

func TestBackoff_Delay(t *testing.T) {
	s, m := time.Second, time.Minute
	tests := []struct {
		name    string
		backoff Backoff
		want    []time.Duration // for attempts 1, 2, …
	}{
		// Defaults: 30 s doubling, capped at 10 min.
		{name: "defaults", want: []time.Duration{30 * s, m, 2 * m, 4 * m, 8 * m, 10 * m, 10 * m, 10 * m, 10 * m, 10 * m, 10 * m, 10 * m}},
		// Custom values double from Initial up to Max.
		{name: "custom", backoff: Backoff{Initial: s, Max: 5 * s},
			want: []time.Duration{s, 2 * s, 4 * s, 5 * s, 5 * s, 5 * s, 5 * s, 5 * s, 5 * s, 5 * s, 5 * s, 5 * s}},
		// Only one set: the other is the default.
		{name: "custom initial", backoff: Backoff{Initial: 4 * m},
			want: []time.Duration{4 * m, 8 * m, 10 * m, 10 * m, 10 * m, 10 * m, 10 * m, 10 * m, 10 * m, 10 * m, 10 * m, 10 * m}},
		{name: "custom max", backoff: Backoff{Max: 90 * s},
			want: []time.Duration{30 * s, m, 90 * s, 90 * s, 90 * s, 90 * s, 90 * s, 90 * s, 90 * s, 90 * s, 90 * s, 90 * s}},
		// Initial above Max: Max.
		{name: "initial above max", backoff: Backoff{Initial: m, Max: 10 * s},
			want: []time.Duration{10 * s, 10 * s, 10 * s, 10 * s, 10 * s, 10 * s, 10 * s, 10 * s, 10 * s, 10 * s, 10 * s, 10 * s}},
		// Negative values are unset.
		{name: "negative", backoff: Backoff{Initial: -s, Max: -s},
			want: []time.Duration{30 * s, m, 2 * m, 4 * m, 8 * m, 10 * m, 10 * m, 10 * m, 10 * m, 10 * m, 10 * m, 10 * m}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []time.Duration
			for attempts := 1; attempts <= len(tt.want); attempts++ {
				got = append(got, tt.backoff.Delay(attempts))
			}
			assert.Equal(t, tt.want, got)
		})
	}
	t.Run("no cap in practice", func(t *testing.T) {
		// A Max too large to reach never overflows into a negative delay.
		b := Backoff{Initial: time.Hour, Max: math.MaxInt64}
		prev := time.Hour
		for attempts := 1; attempts <= 100; attempts++ {
			d := b.Delay(attempts)
			require.GreaterOrEqual(t, d, prev, "attempt %d", attempts)
			prev = d
		}
		assert.Equal(t, time.Duration(math.MaxInt64), prev)
	})
}

// tracked is a tracker of bundle a on c1, whose inventory entry records
// prev (nil: no failure).
func tracked(prev *Failure, backoff Backoff) *Tracker {
	p := deployAll(bundles("a"), []string{"c1"}, []InventoryEntry{entry("a", "c1")})
	p.Inventory[0].Failure = prev
	return NewTracker(p, backoff)
}

// result is a's result on c1 at deployment ID id.
func result(id string, st status.State, class outcome.Class) status.Deployment {
	return status.Deployment{Bundle: "a", Cluster: "c1", Release: "a", Namespace: "default", DeploymentID: id,
		State: st, Outcome: class, Message: "cluster c1: " + string(st)}
}

func TestTracker_Record(t *testing.T) {
	const id = "s-a:h"
	failed := result(id, status.ErrApplied, outcome.BundleFailed)
	earlier := &Failure{DeploymentID: id, Class: outcome.BundleFailed, Attempts: 1, Next: t0.Add(-time.Hour),
		Message: "cluster c1: ErrApplied", State: status.ErrApplied}
	run := func(attempts int, next time.Duration, res status.Deployment) *Failure {
		return &Failure{DeploymentID: res.DeploymentID, Class: res.Outcome, Attempts: attempts, Next: t0.Add(next),
			Message: res.Message, State: res.State}
	}
	applied := func(res status.Deployment, id string) status.Deployment {
		res.AppliedDeploymentID = id
		return res
	}
	rolledBack := applied(result(id, status.OutOfSync, ""), "s-a:old")
	rolledBack.Rollback = outcome.RolledBack
	rolledBackReady := rolledBack
	rolledBackReady.State = status.Ready
	tests := []struct {
		name    string
		prev    *Failure
		backoff Backoff
		res     status.Deployment
		want    *Failure
		// wantID is the entry's deployment ID after the result.
		wantID string
	}{
		// A first failure: attempt 1, next retry after Initial (30 s).
		{name: "BundleFailed starts a run", res: failed, want: run(1, 30*time.Second, failed), wantID: "s-a:old"},
		// The same ID failing again: attempt 2, after 60 s.
		{name: "same ID again doubles", prev: earlier, res: failed, want: run(2, time.Minute, failed), wantID: "s-a:old"},
		// The backoff stops at Max.
		{name: "capped at Max", prev: &Failure{DeploymentID: id, Attempts: 9}, res: failed,
			want: run(10, 10*time.Minute, failed), wantID: "s-a:old"},
		{name: "custom backoff", prev: earlier, backoff: Backoff{Initial: time.Second, Max: time.Hour}, res: failed,
			want: run(2, 2*time.Second, failed), wantID: "s-a:old"},
		// A new deployment ID starts its own run.
		{name: "new ID restarts at 1", prev: &Failure{DeploymentID: "s-a:old", Attempts: 5}, res: failed,
			want: run(1, 30*time.Second, failed), wantID: "s-a:old"},
		// Invalid bundles and refused credentials are retried with the
		// backoff too.
		{name: "Invalid", res: result(id, status.ErrApplied, outcome.Invalid),
			want: run(1, 30*time.Second, result(id, status.ErrApplied, outcome.Invalid)), wantID: "s-a:old"},
		{name: "Unauthorized", prev: earlier, res: result(id, status.WaitApplied, outcome.Unauthorized),
			want: run(2, time.Minute, result(id, status.WaitApplied, outcome.Unauthorized)), wantID: "s-a:old"},
		// Transient failures are retried within the rollout: the run of
		// failures is left as it was.
		{name: "Unreachable", prev: earlier, res: result(id, status.WaitApplied, outcome.Unreachable), want: earlier,
			wantID: "s-a:old"},
		{name: "ContentUnavailable", prev: earlier, res: result(id, status.WaitApplied, outcome.ContentUnavailable),
			want: earlier, wantID: "s-a:old"},
		// Applied at its ID: Ready, or waiting for readiness, ends the run
		// and records the applied ID.
		{name: "Ready clears", prev: earlier, res: applied(result(id, status.Ready, ""), id), wantID: id},
		{name: "NotReady clears", prev: earlier, res: applied(result(id, status.NotReady, ""), id), wantID: id},
		// A rollback changes what runs, not whether the ID failed.
		{name: "rollback keeps the run", prev: earlier, res: rolledBack, want: earlier, wantID: "s-a:old"},
		{name: "rollback reported Ready keeps the run", prev: earlier, res: rolledBackReady, want: earlier, wantID: "s-a:old"},
		// A failure that applied the ID records it as applied.
		{name: "failed after applying", res: applied(failed, id), want: run(1, 30*time.Second, failed), wantID: id},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := tracked(tt.prev, tt.backoff)
			tr.Record([]status.Deployment{tt.res}, t0)
			require.Len(t, tr.Inventory, 1)
			assert.Equal(t, tt.want, tr.Inventory[0].Failure)
			assert.Equal(t, tt.wantID, tr.Inventory[0].DeploymentID)

			// The deployment is the result, showing a new run of failures.
			want := tt.res
			if tt.want != nil && tt.want != tt.prev {
				want.Attempts, want.NextRetry = tt.want.Attempts, tt.want.Next.Format(time.RFC3339)
			}
			got, ok := tr.Deployment(tt.res.Key())
			require.True(t, ok)
			assert.Equal(t, want, got)
		})
	}
}

// TestTracker_RecordRun follows one deployment ID through a run of
// failures across rollouts, then a fix and a new ID.
func TestTracker_RecordRun(t *testing.T) {
	tr := tracked(nil, Backoff{})
	steps := []struct {
		at       time.Duration
		res      status.Deployment
		attempts int // 0: no failure recorded
		next     string
	}{
		{at: 0, res: result("s-a:h", status.ErrApplied, outcome.BundleFailed), attempts: 1, next: "2025-01-06T12:00:30Z"},
		{at: time.Minute, res: result("s-a:h", status.ErrApplied, outcome.BundleFailed), attempts: 2, next: "2025-01-06T12:02:00Z"},
		{at: 5 * time.Minute, res: result("s-a:h", status.WaitApplied, outcome.Unreachable), attempts: 2, next: "2025-01-06T12:02:00Z"},
		{at: 6 * time.Minute, res: result("s-a:h", status.ErrApplied, outcome.BundleFailed), attempts: 3, next: "2025-01-06T12:08:00Z"},
		{at: 10 * time.Minute, res: result("s-a:h", status.Ready, "")},
		{at: 20 * time.Minute, res: result("s-a:h", status.ErrApplied, outcome.BundleFailed), attempts: 1, next: "2025-01-06T12:20:30Z"},
		{at: 30 * time.Minute, res: result("s-a:new", status.ErrApplied, outcome.BundleFailed), attempts: 1, next: "2025-01-06T12:30:30Z"},
	}
	for i, st := range steps {
		tr.Record([]status.Deployment{st.res}, t0.Add(st.at))
		f := tr.Inventory[0].Failure
		if st.attempts == 0 {
			assert.Nil(t, f, "step %d", i)
			continue
		}
		require.NotNil(t, f, "step %d", i)
		assert.Equal(t, st.attempts, f.Attempts, "step %d", i)
		assert.Equal(t, st.next, f.Next.Format(time.RFC3339), "step %d", i)
	}
}

func TestTracker_Forget(t *testing.T) {
	// Bundle old was renamed new, keeping its release app, and both are
	// in the inventory; b was removed from Git; a is deployed as before.
	app := func(b string) InventoryEntry {
		return InventoryEntry{Bundle: b, Cluster: "c1", Release: "app", Namespace: "default"}
	}
	plan := func() Plan {
		return Plan{
			Inventory: []InventoryEntry{entry("a", "c1"), entry("b", "c1"), entry("b", "c2"), app("new"), app("old")},
			Deployments: []status.Deployment{{Bundle: "a", Cluster: "c1", Release: "a", Namespace: "default"},
				{Bundle: "new", Cluster: "c1", Release: "app", Namespace: "default"}},
		}
	}
	tests := []struct {
		name    string
		cluster string
		removed []string
		want    []string // remaining entries, "bundle@cluster"
	}{
		// A cleaned release leaves the cluster's inventory, not another's.
		{name: "cleaned release", cluster: "c1", removed: []string{"default/b"},
			want: []string{"a@c1", "b@c2", "new@c1", "old@c1"}},
		// The cleanup of the old bundle's release drops its entry but not
		// the new bundle's, which deploys the same release.
		{name: "release still wanted", cluster: "c1", removed: []string{"default/app"},
			want: []string{"a@c1", "b@c1", "b@c2", "new@c1"}},
		{name: "other cluster", cluster: "c2", removed: []string{"default/b"},
			want: []string{"a@c1", "b@c1", "new@c1", "old@c1"}},
		{name: "nothing removed", cluster: "c1",
			want: []string{"a@c1", "b@c1", "b@c2", "new@c1", "old@c1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			track := NewTracker(plan(), Backoff{})
			track.Forget(tt.cluster, tt.removed)
			var got []string
			for _, e := range track.Inventory {
				got = append(got, e.Bundle+"@"+e.Cluster)
			}
			assert.Equal(t, tt.want, got)

			// Results still reach their entries.
			track.Record([]status.Deployment{{Bundle: "new", Cluster: "c1", Release: "app", Namespace: "default",
				DeploymentID: "s-new:h", AppliedDeploymentID: "s-new:h", State: status.Ready}}, t0)
			for _, e := range track.Inventory {
				if e.Bundle == "new" {
					assert.Equal(t, "s-new:h", e.DeploymentID)
				} else {
					assert.NotEqual(t, "s-new:h", e.DeploymentID, "%s@%s", e.Bundle, e.Cluster)
				}
			}
		})
	}
}

func TestTracker_MarkHoldSetState(t *testing.T) {
	newTracker := func() *Tracker {
		tr := targets([]string{"c1", "c2"}, "c1", "c2")
		p := MakePlan(each(tr, bundles("a", "b", "c")), nil, PlanOptions{})
		track := NewTracker(p, Backoff{})
		track.SetState(status.Key{Bundle: "c", Cluster: "c1"}, status.OutOfSync, "paused")
		return track
	}
	retry := &Failure{DeploymentID: "s-a:h", Class: outcome.BundleFailed, Attempts: 3, Next: t0.Add(2 * time.Minute),
		Message: "cluster c1: boom", State: status.ErrApplied}
	tests := []struct {
		name   string
		change func(*Tracker)
		want   map[string]string // changed deployments: "state: message"
	}{
		// Mark sets the state of the cluster's deployments, except
		// OutOfSync ones.
		{name: "Mark a cluster", change: func(tr *Tracker) { tr.Mark("c1", nil, nil, status.WaitApplied, outcome.Unreachable, "m") },
			want: map[string]string{"a@c1": "WaitApplied: m", "b@c1": "WaitApplied: m"}},
		// Only the bundles named...
		{name: "Mark bundles", change: func(tr *Tracker) {
			tr.Mark("c1", []string{"b", "c"}, nil, status.WaitApplied, outcome.Unreachable, "m")
		},
			want: map[string]string{"b@c1": "WaitApplied: m"}},
		// A deployment known to run its ID is never marked WaitApplied:
		// a no-op deploy confirms it.
		{name: "Mark skips applied", change: func(tr *Tracker) {
			tr.Record([]status.Deployment{{Bundle: "a", Cluster: "c1", Release: "a", Namespace: "default",
				DeploymentID: "s-a:h", AppliedDeploymentID: "s-a:h", State: status.Ready}}, t0)
			tr.Mark("c1", nil, nil, status.WaitApplied, outcome.Unreachable, "m")
		}, want: map[string]string{"a@c1": "Ready: ", "b@c1": "WaitApplied: m"}},
		// ... and only those in flight.
		{name: "Mark running", change: func(tr *Tracker) {
			tr.Mark("c2", nil, func(b, c string) bool { return b == "a" && c == "c2" }, status.NotReady, outcome.OK, "m")
		}, want: map[string]string{"a@c2": "NotReady: m"}},
		// SetState sets one deployment's; an unknown one is ignored.
		{name: "SetState", change: func(tr *Tracker) {
			tr.SetState(status.Key{Bundle: "b", Cluster: "c2"}, status.Ready, "")
			tr.SetState(status.Key{Bundle: "z", Cluster: "c2"}, status.Ready, "")
		}, want: map[string]string{"b@c2": "Ready: "}},
		// Hold shows the failure a unit waits to retry.
		{name: "Hold", change: func(tr *Tracker) {
			tr.Hold(Hold{Unit: Unit{Cluster: "c1", Bundle: bundles("a")[0], PrevID: "s-a:old"}, Retry: retry})
			d, _ := tr.Deployment(status.Key{Bundle: "a", Cluster: "c1"})
			assert.Equal(t, outcome.BundleFailed, d.Outcome)
			assert.Equal(t, 3, d.Attempts)
			assert.Equal(t, "2025-01-06T12:02:00Z", d.NextRetry)
			assert.Equal(t, "s-a:old", d.AppliedDeploymentID)
		}, want: map[string]string{"a@c1": "ErrApplied: cluster c1: boom"}},
		// A hold without a retry (a paused bundle) is not a failure.
		{name: "Hold without retry", change: func(tr *Tracker) {
			tr.Hold(Hold{Unit: Unit{Cluster: "c1", Bundle: bundles("a")[0]}, Reason: "bundle a is paused"})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := newTracker()
			before := map[string]string{}
			for _, d := range tr.Deployments {
				before[d.Bundle+"@"+d.Cluster] = string(d.State) + ": " + d.Message
			}
			tt.change(tr)
			got := map[string]string{}
			for _, d := range tr.Deployments {
				k := d.Bundle + "@" + d.Cluster
				if s := string(d.State) + ": " + d.Message; s != before[k] {
					got[k] = s
				}
			}
			if tt.want == nil {
				tt.want = map[string]string{}
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

// TestMakePlan_KnownState: a deployment the inventory says runs its ID
// starts in its last known state, not Pending; Record keeps that state.
func TestMakePlan_KnownState(t *testing.T) {
	inv := []InventoryEntry{{Bundle: "a", Cluster: "c1", Release: "a", Namespace: "default", DeploymentID: "s-a:h", State: status.NotReady},
		{Bundle: "b", Cluster: "c1", Release: "b", Namespace: "default", DeploymentID: "s-b:old", State: status.Ready}}
	p := MakePlan(each(targets([]string{"c1"}, "c1"), bundles("a", "b")), inv, PlanOptions{})
	require.Len(t, p.Deployments, 2)
	assert.Equal(t, status.NotReady, p.Deployments[0].State, "a runs its ID")
	assert.Equal(t, "s-a:h", p.Deployments[0].AppliedDeploymentID)
	assert.Equal(t, status.Pending, p.Deployments[1].State, "b changes")

	tr := NewTracker(p, Backoff{})
	tr.Record([]status.Deployment{{Bundle: "a", Cluster: "c1", Release: "a", Namespace: "default",
		DeploymentID: "s-a:h", AppliedDeploymentID: "s-a:h", State: status.Ready}}, t0)
	assert.Equal(t, status.Ready, tr.Inventory[0].State)
}

func TestTracker_GaveUpRetriesOnTheBackoff(t *testing.T) {
	now := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	p := Plan{
		Deployments: []status.Deployment{
			{Bundle: "a", Cluster: "c1", Release: "a", Namespace: "ns", DeploymentID: "m:1", State: status.WaitApplied},
			{Bundle: "b", Cluster: "c1", Release: "b", Namespace: "ns", DeploymentID: "m:2", AppliedDeploymentID: "m:2", State: status.Ready},
		},
		Inventory: []InventoryEntry{
			{Bundle: "a", Cluster: "c1", Release: "a", Namespace: "ns"},
			{Bundle: "b", Cluster: "c1", Release: "b", Namespace: "ns", DeploymentID: "m:2"},
		},
	}
	tr := NewTracker(p, Backoff{Initial: time.Minute, Max: time.Hour})
	tr.GaveUp("c1", []string{"a", "b"}, "", now)
	a, _ := tr.Deployment(status.Key{Bundle: "a", Cluster: "c1"})
	assert.Equal(t, status.WaitApplied, a.State)
	assert.Equal(t, outcome.Unreachable, a.Outcome)
	assert.Equal(t, "cluster c1: not reached", a.Message, "names the cluster")
	assert.Equal(t, "2026-11-01T00:01:00Z", a.NextRetry)
	require.NotNil(t, tr.Inventory[0].Failure)
	assert.Equal(t, now.Add(time.Minute), tr.Inventory[0].Failure.Next)
	assert.Equal(t, "m:1", tr.Inventory[0].Failure.DeploymentID)
	b, _ := tr.Deployment(status.Key{Bundle: "b", Cluster: "c1"})
	assert.Equal(t, status.Ready, b.State, "a deployment the cluster runs is not given up")
	assert.Nil(t, tr.Inventory[1].Failure)

	tr.GaveUp("c1", []string{"a"}, "cluster c1: connection refused", now.Add(time.Minute))
	assert.Equal(t, 2, tr.Inventory[0].Failure.Attempts)
	assert.Equal(t, now.Add(3*time.Minute), tr.Inventory[0].Failure.Next, "the backoff doubles")
}

// A deployment retried after a failure keeps showing the failure (state
// and message, noting the running attempt) until the attempt's outcome is
// known, instead of flapping to WaitApplied with an empty message; a
// deployment without a failure shows WaitApplied as its deploy starts.
func TestTracker_RetryKeepsTheFailureShown(t *testing.T) {
	now := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	const denied = "cluster c1: admission webhook denied the request"
	inv := []InventoryEntry{
		{Bundle: "a", Cluster: "c1", Release: "a", Namespace: "ns", DeploymentID: "m:0",
			Failure: &Failure{DeploymentID: "m:1", Class: outcome.BundleFailed, Attempts: 2, Next: now.Add(-time.Second), Message: denied, State: status.ErrApplied}},
		{Bundle: "a", Cluster: "c2", Release: "a", Namespace: "ns", DeploymentID: "m:0"},
	}
	b := Bundle{Name: "a", Release: "a", Namespace: "ns", DeploymentID: "m:1"}
	p := MakePlan(Targets{Registered: []string{"c1", "c2"}, Matched: []TargetCluster{
		{Name: "c1", Bundles: []Bundle{b}}, {Name: "c2", Bundles: []Bundle{b}}}}, inv, PlanOptions{})
	tr := NewTracker(p, Backoff{})
	c1 := status.Key{Bundle: "a", Cluster: "c1"}
	c2 := status.Key{Bundle: "a", Cluster: "c2"}
	d, _ := tr.Deployment(c1)
	assert.Equal(t, status.ErrApplied, d.State, "planned: the failure shows")
	assert.Equal(t, denied, d.Message)

	tr.Starting(c1, "")
	tr.Starting(c2, "")
	tr.Mark("c1", nil, nil, status.WaitApplied, outcome.OK, "")
	d, _ = tr.Deployment(c1)
	assert.Equal(t, status.ErrApplied, d.State, "retrying: still the failure")
	assert.Equal(t, denied+" (retrying now)", d.Message, "noted once")
	d, _ = tr.Deployment(c2)
	assert.Equal(t, status.WaitApplied, d.State, "no failure: WaitApplied")

	tr.Record([]status.Deployment{{Bundle: "a", Cluster: "c1", Release: "a", Namespace: "ns", DeploymentID: "m:1",
		AppliedDeploymentID: "m:1", State: status.Ready}}, now)
	d, _ = tr.Deployment(c1)
	assert.Equal(t, status.Ready, d.State, "the attempt's outcome replaces it")
	assert.Nil(t, tr.Inventory[0].Failure)
}
