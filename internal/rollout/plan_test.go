package rollout

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/outcome"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

func bundles(names ...string) []Bundle {
	var out []Bundle
	for _, n := range names {
		out = append(out, Bundle{Name: n, Release: n, Namespace: "default", DeploymentID: "s-" + n + ":h"})
	}
	return out
}

func targets(registered []string, matched ...string) Targets {
	r := Targets{Registered: registered}
	for _, m := range matched {
		r.Matched = append(r.Matched, TargetCluster{Name: m})
	}
	return r
}

// each gives every matched cluster the same bundles.
func each(tr Targets, bs []Bundle) Targets {
	for i := range tr.Matched {
		tr.Matched[i].Bundles = bs
	}
	return tr
}

func entry(b, c string) InventoryEntry {
	return InventoryEntry{Bundle: b, Cluster: c, Release: b, Namespace: "default", DeploymentID: "s-" + b + ":old"}
}

func TestMakePlan(t *testing.T) {
	all := []string{"c1", "c2", "c3"}
	tests := []struct {
		name        string
		bundles     []Bundle
		targets     Targets
		inv         []InventoryEntry
		keepAll     bool
		wantDeploy  map[string][]string
		wantCleanup map[string][]string
		wantDropped int
		wantInv     int
	}{
		{
			name:       "first rollout deploys every bundle on every match",
			bundles:    bundles("a", "b"),
			targets:    targets(all, "c1", "c2"),
			wantDeploy: map[string][]string{"c1": {"a", "b"}, "c2": {"a", "b"}},
			wantInv:    4,
		},
		{
			name:        "untargeted cluster is cleaned",
			bundles:     bundles("a"),
			targets:     targets(all, "c1"),
			inv:         []InventoryEntry{entry("a", "c1"), entry("a", "c2")},
			wantDeploy:  map[string][]string{"c1": {"a"}},
			wantCleanup: map[string][]string{"c2": {"a"}},
			wantInv:     2, // c2 stays until its cleanup succeeds
		},
		{
			name:        "bundle removed from Git is cleaned",
			bundles:     bundles("a"),
			targets:     targets(all, "c1"),
			inv:         []InventoryEntry{entry("a", "c1"), entry("b", "c1")},
			wantDeploy:  map[string][]string{"c1": {"a"}},
			wantCleanup: map[string][]string{"c1": {"b"}},
			wantInv:     2,
		},
		{
			name:        "unregistered cluster is left alone but remembered",
			bundles:     bundles("a"),
			targets:     targets([]string{"c1"}, "c1"),
			inv:         []InventoryEntry{entry("a", "c1"), entry("a", "gone")},
			wantDeploy:  map[string][]string{"c1": {"a"}},
			wantDropped: 1,
			wantInv:     2,
		},
		{
			name:       "renamed bundle keeping its release is not uninstalled",
			bundles:    []Bundle{{Name: "new", Release: "app", Namespace: "default", DeploymentID: "s-new:h"}},
			targets:    targets(all, "c1"),
			inv:        []InventoryEntry{{Bundle: "old", Cluster: "c1", Release: "app", Namespace: "default"}},
			wantDeploy: map[string][]string{"c1": {"new"}},
			wantInv:    1,
		},
		{
			name:        "delete cleans everything",
			targets:     targets(all),
			inv:         []InventoryEntry{entry("a", "c1"), entry("a", "c2")},
			keepAll:     true,
			wantCleanup: map[string][]string{"c1": {"a"}, "c2": {"a"}},
			wantInv:     2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := MakePlan(each(tt.targets, tt.bundles), tt.inv, PlanOptions{KeepAll: tt.keepAll})
			deploy, cleanup := map[string][]string{}, map[string][]string{}
			for _, w := range p.Work {
				for _, b := range w.Deploy {
					deploy[w.Cluster] = append(deploy[w.Cluster], b.Name)
				}
				for _, e := range w.Cleanup {
					cleanup[w.Cluster] = append(cleanup[w.Cluster], e.Bundle)
					assert.Equal(t, tt.keepAll, e.KeepResources)
				}
			}
			if tt.wantDeploy == nil {
				tt.wantDeploy = map[string][]string{}
			}
			if tt.wantCleanup == nil {
				tt.wantCleanup = map[string][]string{}
			}
			assert.Equal(t, tt.wantDeploy, deploy)
			assert.Equal(t, tt.wantCleanup, cleanup)
			assert.Len(t, p.Dropped, tt.wantDropped)
			assert.Len(t, p.Inventory, tt.wantInv)
		})
	}
}

func TestMakePlan_KeepsAppliedIDAndPausedClusters(t *testing.T) {
	tr := targets([]string{"c1", "c2"}, "c1", "c2")
	tr.Matched[1].Paused = true
	p := MakePlan(each(tr, bundles("a")), []InventoryEntry{entry("a", "c1"), entry("a", "c2"), entry("b", "c2")}, PlanOptions{})
	require.Len(t, p.Work, 2)
	assert.Equal(t, "c2", p.Work[1].Cluster)
	assert.Empty(t, p.Work[1].Deploy, "a paused cluster gets no deploys")
	assert.Empty(t, p.Work[1].Cleanup, "a paused cluster keeps what it runs")
	for _, d := range p.Deployments {
		if d.Cluster == "c2" {
			assert.Equal(t, status.OutOfSync, d.State)
		}
	}
	for _, e := range p.Inventory {
		if e.Bundle == "a" && e.Cluster == "c1" {
			assert.Equal(t, "s-a:old", e.DeploymentID, "the last applied ID is kept until the deploy reports")
		}
	}
}

func TestMakePlan_PerClusterOptionsAndTemplateErrors(t *testing.T) {
	tr := targets([]string{"c1", "c2"}, "c1", "c2")
	tr.Matched[0].Bundles = []Bundle{{Name: "a", Release: "a", Namespace: "dev", DeploymentID: "s-a:dev"}}
	tr.Matched[1].Bundles = nil
	tr.Errors = []status.Deployment{{Bundle: "a", Cluster: "c2", Release: "a", Namespace: "prod", State: status.ErrApplied,
		Message: "bundle a: cluster c2: helm.values: template failed"}}
	p := MakePlan(tr, []InventoryEntry{entry("a", "c2")}, PlanOptions{})
	require.Len(t, p.Work, 1, "nothing to do on c2: the failed bundle keeps what runs there")
	assert.Equal(t, "c1", p.Work[0].Cluster)
	assert.Equal(t, "s-a:dev", p.Work[0].Deploy[0].DeploymentID)
	assert.Equal(t, "dev", p.Work[0].Deploy[0].Namespace)
	require.Len(t, p.Deployments, 2)
	assert.Equal(t, status.ErrApplied, p.Deployments[1].State)
	assert.Contains(t, p.Deployments[1].Message, "cluster c2")
	assert.Len(t, p.Inventory, 2, "c2's release stays in the inventory")
}

func TestMakePlan_CarriesFailure(t *testing.T) {
	failure := &Failure{DeploymentID: "s-a:h", Class: outcome.BundleFailed, Attempts: 2,
		Next: time.Date(2025, 1, 6, 12, 0, 30, 0, time.UTC), Message: "boom", State: status.ErrApplied}
	failed := entry("a", "c1")
	failed.Failure = failure
	tests := []struct {
		name    string
		bundle  Bundle
		paused  bool
		want    InventoryEntry // the desired entry
		cleaned bool           // the old entry is cleaned, with its failure
	}{
		// The desired entry of the same release keeps the applied ID and
		// the run of failures, so the scheduler can hold the retry.
		{name: "same release", bundle: bundles("a")[0], want: failed},
		// A paused cluster's entry keeps them too.
		{name: "paused cluster", bundle: bundles("a")[0], paused: true, want: failed},
		// A release moved to another namespace is a new release: nothing
		// applied, nothing failed; the old one is cleaned up.
		{name: "moved release", bundle: Bundle{Name: "a", Release: "a", Namespace: "prod", DeploymentID: "s-a:h"},
			want: InventoryEntry{Bundle: "a", Cluster: "c1", Release: "a", Namespace: "prod"}, cleaned: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := targets([]string{"c1"}, "c1")
			tr.Matched[0].Bundles, tr.Matched[0].Paused = []Bundle{tt.bundle}, tt.paused
			p := MakePlan(tr, []InventoryEntry{failed}, PlanOptions{})
			want := []InventoryEntry{tt.want}
			if tt.cleaned {
				want = []InventoryEntry{failed, tt.want}
				require.Len(t, p.Work, 1)
				assert.Equal(t, []InventoryEntry{failed}, p.Work[0].Cleanup)
			}
			assert.Equal(t, want, p.Inventory)
		})
	}
}

func TestMergeInventory(t *testing.T) {
	known := []InventoryEntry{{Bundle: "b", Cluster: "c1", Namespace: "ns", Release: "r", DeploymentID: "old"}}
	planned := []InventoryEntry{
		{Bundle: "b", Cluster: "c1", Namespace: "ns", Release: "r", DeploymentID: ""},
		{Bundle: "b", Cluster: "c2", Namespace: "ns", Release: "r"},
		{Bundle: "a", Cluster: "c1", Namespace: "ns", Release: "a"},
	}
	got := MergeInventory(known, planned)
	require.Len(t, got, 3)
	assert.Equal(t, "a", got[0].Bundle, "sorted")
	assert.Equal(t, "old", got[1].DeploymentID, "what was known wins")
	assert.Equal(t, "c2", got[2].Cluster, "a planned release joins")
	assert.Len(t, known, 1, "the input is not changed")
	assert.Equal(t, known, MergeInventory(known, nil))
}

// Absence is never a reason to remove: while a target names a group or
// cluster that is not found, the releases it no longer selects stay and
// the plan says why; what is still targeted deploys.
func TestMakePlan_MissingTargetHoldsUninstalls(t *testing.T) {
	inv := []InventoryEntry{entry("a", "c1"), entry("a", "c2"), entry("b", "c3")}
	tr := each(targets([]string{"c1", "c2", "c3"}, "c3"), bundles("b"))
	tr.Missing = []string{`clusterGroup "prod" not found`}
	p := MakePlan(tr, inv, PlanOptions{})
	for _, w := range p.Work {
		assert.Empty(t, w.Cleanup, "nothing is uninstalled on %s", w.Cluster)
	}
	require.Len(t, p.Work, 1)
	assert.Equal(t, "c3", p.Work[0].Cluster, "what is targeted still deploys")
	assert.Len(t, p.Held, 2)
	assert.Equal(t, []status.Wait{{Kind: status.WaitDeletionHeld, Clusters: []string{"c1", "c2"},
		Message: `2 uninstall(s) held on c1, c2: clusterGroup "prod" not found; nothing is removed until it exists or no target names it`}}, p.Holds)
	assert.Len(t, p.Inventory, 3, "the held releases stay in the inventory")

	tr.Missing = nil
	p = MakePlan(tr, inv, PlanOptions{})
	assert.Empty(t, p.Held, "once nothing is missing, untargeting uninstalls as before")
	assert.Empty(t, p.Holds)
	assert.Len(t, p.Work, 3)

	s := NewState(MakePlan(func() Targets { tr.Missing = []string{"x"}; return tr }(), inv, PlanOptions{}), Backoff{})
	s.Schedule(MakePlan(tr, inv, PlanOptions{}), Strategy{Strategies: []BundleStrategy{{Bundle: "b", Plan: limits(100, part("all", 100, "c3"))}}}, t0)
	assert.Contains(t, s.Next(t0).Waits[0].Message, "uninstall(s) held", "the rollout shows the hold")
}
