package rollout_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/rollout"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

const watchRepo = "fleet-default/app"

// watchedEntry is bundle b's inventory entry on cluster c, at ID "s-<b>:1"
// with options "opts-<b>".
func watchedEntry(b, c string) rollout.InventoryEntry {
	return rollout.InventoryEntry{Bundle: b, Cluster: c, Release: b, Namespace: "ns-" + b, DeploymentID: "s-" + b + ":1",
		OptionsKey: "opts-" + b}
}

// appliedDeployment is bundle b on cluster c, applied at the ID of its
// watchedEntry.
func appliedDeployment(b, c string) status.Deployment {
	return status.Deployment{Bundle: b, Cluster: c, Release: b, Namespace: "ns-" + b, DeploymentID: "s-" + b + ":1",
		AppliedDeploymentID: "s-" + b + ":1", State: status.Ready}
}

// watched is what the watch set lists for watchedEntry(b, ...).
func watched(b string) protocol.WatchedRelease {
	return protocol.WatchedRelease{Bundle: b, Release: b, Namespace: "ns-" + b, DeploymentID: "s-" + b + ":1", OptionsKey: "opts-" + b}
}

func TestWatchSets(t *testing.T) {
	tests := []struct {
		name string
		inv  []rollout.InventoryEntry
		deps []status.Deployment
		// edit changes the one entry and deployment of the case.
		editEntry func(*rollout.InventoryEntry)
		editDep   func(*status.Deployment)
		want      []rollout.ClusterWatch
	}{
		{name: "an applied deployment with its entry is watched",
			want: []rollout.ClusterWatch{{Cluster: "c1", Set: protocol.WatchSet{GitRepo: watchRepo,
				Releases: []protocol.WatchedRelease{watched("a")}}}}},
		{name: "a deployment whose state is not live is still watched when applied",
			editDep: func(d *status.Deployment) { d.State = status.NotReady },
			want: []rollout.ClusterWatch{{Cluster: "c1", Set: protocol.WatchSet{GitRepo: watchRepo,
				Releases: []protocol.WatchedRelease{watched("a")}}}}},
		{name: "not applied at its deployment ID yet",
			editDep: func(d *status.Deployment) { d.AppliedDeploymentID = "s-a:0" }},
		{name: "never applied",
			editDep: func(d *status.Deployment) { d.AppliedDeploymentID, d.State = "", status.WaitApplied }},
		{name: "no deployment ID",
			editDep:   func(d *status.Deployment) { d.DeploymentID, d.AppliedDeploymentID = "", "" },
			editEntry: func(e *rollout.InventoryEntry) { e.DeploymentID = "" }},
		{name: "the entry records another deployment ID",
			editEntry: func(e *rollout.InventoryEntry) { e.DeploymentID = "s-a:0" }},
		{name: "the entry has no options key",
			editEntry: func(e *rollout.InventoryEntry) { e.OptionsKey = "" }},
		{name: "the entry names another release",
			editEntry: func(e *rollout.InventoryEntry) { e.Release = "a-old" }},
		{name: "the entry names another namespace",
			editEntry: func(e *rollout.InventoryEntry) { e.Namespace = "elsewhere" }},
		{name: "no entry for the bundle on the cluster",
			editEntry: func(e *rollout.InventoryEntry) { e.Cluster = "c2" }},
		{name: "an entry without a deployment is not watched",
			deps: []status.Deployment{}},
		{name: "grouped per cluster, clusters sorted, releases sorted by bundle",
			inv: []rollout.InventoryEntry{watchedEntry("b", "c2"), watchedEntry("c", "c1"), watchedEntry("a", "c2"),
				watchedEntry("a", "c1"), watchedEntry("b", "c1")},
			deps: []status.Deployment{appliedDeployment("c", "c1"), appliedDeployment("b", "c2"), appliedDeployment("a", "c1"),
				appliedDeployment("a", "c2"), appliedDeployment("b", "c1")},
			want: []rollout.ClusterWatch{
				{Cluster: "c1", Set: protocol.WatchSet{GitRepo: watchRepo,
					Releases: []protocol.WatchedRelease{watched("a"), watched("b"), watched("c")}}},
				{Cluster: "c2", Set: protocol.WatchSet{GitRepo: watchRepo,
					Releases: []protocol.WatchedRelease{watched("a"), watched("b")}}},
			}},
		{name: "a cluster whose releases are all unapplied has no set",
			inv: []rollout.InventoryEntry{watchedEntry("a", "c1"), watchedEntry("a", "c2")},
			deps: []status.Deployment{appliedDeployment("a", "c1"),
				{Bundle: "a", Cluster: "c2", Release: "a", Namespace: "ns-a", DeploymentID: "s-a:1", State: status.Pending}},
			want: []rollout.ClusterWatch{{Cluster: "c1", Set: protocol.WatchSet{GitRepo: watchRepo,
				Releases: []protocol.WatchedRelease{watched("a")}}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inv, deps := tt.inv, tt.deps
			if inv == nil {
				e := watchedEntry("a", "c1")
				if tt.editEntry != nil {
					tt.editEntry(&e)
				}
				inv = []rollout.InventoryEntry{e}
			}
			if deps == nil {
				d := appliedDeployment("a", "c1")
				if tt.editDep != nil {
					tt.editDep(&d)
				}
				deps = []status.Deployment{d}
			}
			got := rollout.WatchSets(watchRepo, inv, deps)
			if tt.want == nil {
				assert.Empty(t, got)
				return
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestClusterWatchHash(t *testing.T) {
	set := func(edit func(*protocol.WatchedRelease)) rollout.ClusterWatch {
		w := rollout.ClusterWatch{Cluster: "c1", Set: protocol.WatchSet{GitRepo: watchRepo,
			Releases: []protocol.WatchedRelease{watched("a"), watched("b")}}}
		if edit != nil {
			edit(&w.Set.Releases[1])
		}
		return w
	}
	base := set(nil).Hash()
	assert.NotEmpty(t, base)
	assert.Equal(t, base, set(nil).Hash(), "an equal set hashes equal")
	assert.Equal(t, base, rollout.WatchSets(watchRepo,
		[]rollout.InventoryEntry{watchedEntry("b", "c1"), watchedEntry("a", "c1")},
		[]status.Deployment{appliedDeployment("b", "c1"), appliedDeployment("a", "c1")})[0].Hash(),
		"WatchSets' order does not depend on the input's")

	changes := map[string]func(*protocol.WatchedRelease){
		"deployment ID": func(r *protocol.WatchedRelease) { r.DeploymentID = "s-b:2" },
		"options key":   func(r *protocol.WatchedRelease) { r.OptionsKey = "opts-b2" },
	}
	for name, edit := range changes {
		assert.NotEqual(t, base, set(edit).Hash(), "a changed %s changes the hash", name)
	}
	fewer := set(nil)
	fewer.Set.Releases = fewer.Set.Releases[:1]
	assert.NotEqual(t, base, fewer.Hash(), "a release fewer changes the hash")
	other := set(nil)
	other.Set.GitRepo = "fleet-default/other"
	assert.NotEqual(t, base, other.Hash(), "another GitRepo's set hashes differently")
}

func TestMarkRepairs(t *testing.T) {
	const id = "s-app:1"
	edited := status.ModifiedStatus{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns-app", Name: "edited", Patch: `{"data":{"a":"b"}}`}
	gone := status.ModifiedStatus{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns-app", Name: "gone", Missing: true}
	orphan := status.ModifiedStatus{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns-app", Name: "extra", Delete: true}
	tests := []struct {
		name string
		live *status.LiveReport
		// wantID is the deployment ID the target wants (id when empty).
		wantID string
		want   []string
	}{
		{name: "no live report", live: nil},
		{name: "no drift", live: &status.LiveReport{DeploymentID: id, Resources: 2, Ready: 2}},
		{name: "modified and missing are repaired, orphans are not Helm's",
			live: &status.LiveReport{DeploymentID: id, Modified: 1, Missing: 1, Orphaned: 1, ModifiedStatus: []status.ModifiedStatus{edited, gone, orphan}},
			want: []string{"ConfigMap ns-app/edited", "ConfigMap ns-app/gone"}},
		{name: "orphans alone need no repair",
			live: &status.LiveReport{DeploymentID: id, Orphaned: 1, ModifiedStatus: []status.ModifiedStatus{orphan}}},
		{name: "an incomplete list says so",
			live: &status.LiveReport{DeploymentID: id, Missing: 11, Incomplete: true, ModifiedStatus: []status.ModifiedStatus{gone}},
			want: []string{"ConfigMap ns-app/gone", "..."}},
		{name: "a report about another deployment ID is stale",
			live: &status.LiveReport{DeploymentID: "s-app:0", Missing: 1, ModifiedStatus: []status.ModifiedStatus{gone}}},
		{name: "the target wants a new deployment ID: it deploys anyway",
			live:   &status.LiveReport{DeploymentID: id, Missing: 1, ModifiedStatus: []status.ModifiedStatus{gone}},
			wantID: "s-app:2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := watchedEntry("app", "c1")
			e.Live = tt.live
			b := rollout.Bundle{Name: "app", Release: "app", Namespace: "ns-app", DeploymentID: id}
			if tt.wantID != "" {
				b.DeploymentID = tt.wantID
			}
			other := rollout.Bundle{Name: "other", DeploymentID: "s-other:1"}
			targets := rollout.Targets{Matched: []rollout.TargetCluster{
				{Name: "c1", Bundles: []rollout.Bundle{b, other}},
				{Name: "c2", Bundles: []rollout.Bundle{b}},
			}}
			rollout.MarkRepairs(&targets, []rollout.InventoryEntry{e, watchedEntry("other", "c1")})
			assert.Equal(t, tt.want, targets.Matched[0].Bundles[0].Repair)
			assert.Nil(t, targets.Matched[0].Bundles[1].Repair, "a bundle without a report")
			assert.Nil(t, targets.Matched[1].Bundles[0].Repair, "the same bundle on a cluster that did not drift")
		})
	}
}

func TestVouched(t *testing.T) {
	const id = "s-abc:h1"
	unit := rollout.Unit{Cluster: "c1", Bundle: rollout.Bundle{Name: "app", Release: "app", Namespace: "ns", DeploymentID: id}, PrevID: id}
	clean := &status.LiveReport{Bundle: "app", Release: "app", Namespace: "ns", DeploymentID: id, Resources: 3, Ready: 3}
	with := func(f func(u *rollout.Unit, l *status.LiveReport)) (rollout.Unit, *status.LiveReport) {
		u, l := unit, *clean
		f(&u, &l)
		return u, &l
	}
	for _, tt := range []struct {
		name string
		unit rollout.Unit
		live *status.LiveReport
		want bool
	}{
		{name: "runs its ID, watch saw it all Ready", unit: unit, live: clean, want: true},
		{name: "no live report", unit: unit},
		{name: "a new deployment ID", unit: func() rollout.Unit {
			u, _ := with(func(u *rollout.Unit, _ *status.LiveReport) { u.PrevID = "s-old:h0" })
			return u
		}(), live: clean},
		{name: "never deployed", unit: func() rollout.Unit {
			u, _ := with(func(u *rollout.Unit, _ *status.LiveReport) { u.PrevID = "" })
			return u
		}(), live: clean},
		{name: "repair asked", unit: func() rollout.Unit {
			u, _ := with(func(u *rollout.Unit, _ *status.LiveReport) { u.Bundle.Repair = []string{"x"} })
			return u
		}(), live: clean},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d, ok := rollout.Vouched(tt.unit, tt.live, status.Deployment{})
			assert.Equal(t, tt.want, ok)
			if ok {
				assert.Equal(t, status.Deployment{Bundle: "app", Cluster: "c1", Release: "app", Namespace: "ns", DeploymentID: id,
					AppliedDeploymentID: id, State: status.Ready, Resources: 3, ReadyResources: 3}, d)
			}
		})
	}
	for name, change := range map[string]func(l *status.LiveReport){
		"report about another ID": func(l *status.LiveReport) { l.DeploymentID = "s-old:h0" },
		"modified":                func(l *status.LiveReport) { l.Modified = 1 },
		"missing":                 func(l *status.LiveReport) { l.Missing, l.Ready = 1, 2 },
		"orphaned":                func(l *status.LiveReport) { l.Orphaned = 1 },
		"not ready":               func(l *status.LiveReport) { l.NotReady, l.Ready = 1, 2 },
		"unknown":                 func(l *status.LiveReport) { l.Unknown, l.Ready = 1, 2 },
		"error":                   func(l *status.LiveReport) { l.Error = "cannot read release" },
		"fewer ready than exist":  func(l *status.LiveReport) { l.Ready = 2 },
	} {
		t.Run(name, func(t *testing.T) {
			_, l := with(func(_ *rollout.Unit, l *status.LiveReport) { change(l) })
			_, ok := rollout.Vouched(unit, l, status.Deployment{})
			assert.False(t, ok)
		})
	}
}
