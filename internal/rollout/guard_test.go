package rollout

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/status"
)

func TestDeletionGuardTrips(t *testing.T) {
	g := DefaultDeletionGuard
	tests := []struct {
		name     string
		guard    DeletionGuard
		n, total int
		want     bool
	}{
		{"off", DeletionGuard{}, 12, 12, false},
		{"fewer than the minimum", g, 4, 4, false},
		{"at the share", g, 5, 20, false},
		{"over the share and the minimum", g, 6, 20, true},
		{"everything", g, 9, 12, true},
		{"100% never trips", DeletionGuard{On: true, Percent: 100, Min: 1}, 10, 10, false},
		{"0% trips on the minimum", DeletionGuard{On: true, Percent: 0, Min: 1}, 1, 100, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.guard.Trips(tt.n, tt.total))
		})
	}
}

func TestParseDeletionGuardPercent(t *testing.T) {
	for in, want := range map[string]float64{"25%": 25, "25": 25, "0": 0, "100%": 100, " 12.5% ": 12.5} {
		on, p, err := ParseDeletionGuardPercent(in)
		require.NoError(t, err, in)
		assert.True(t, on, in)
		assert.InDelta(t, want, p, 1e-9, in)
	}
	on, _, err := ParseDeletionGuardPercent("off")
	require.NoError(t, err)
	assert.False(t, on)
	for _, bad := range []string{"", "x", "-1", "101%", "NaN"} {
		_, _, err := ParseDeletionGuardPercent(bad)
		assert.Error(t, err, bad)
	}
}

// fourBundles is an inventory of bundles a..d on clusters c1..c3.
func fourBundles() []InventoryEntry {
	var inv []InventoryEntry
	for _, b := range []string{"a", "b", "c", "d"} {
		for _, c := range []string{"c1", "c2", "c3"} {
			inv = append(inv, entry(b, c))
		}
	}
	return inv
}

func cleanups(p Plan) int {
	n := 0
	for _, w := range p.Work {
		n += len(w.Cleanup)
	}
	return n
}

func TestDeletionGuardHoldsAPlanThatRemovesTooMuch(t *testing.T) {
	all := []string{"c1", "c2", "c3"}
	tr := each(targets(all, all...), bundles("a"))
	opts := PlanOptions{Guard: DefaultDeletionGuard, Bundles: []string{"a"}, Name: "repo"}

	p := MakePlan(tr, fourBundles(), opts)
	assert.Zero(t, cleanups(p), "nothing is uninstalled")
	assert.Len(t, p.Guarded, 9)
	assert.Len(t, p.Inventory, 12, "the held releases stay in the inventory")
	for _, w := range p.Work {
		assert.Len(t, w.Deploy, 1, "everything else deploys: %s", w.Cluster)
	}
	require.Len(t, p.Holds, 1)
	h := p.Holds[0]
	assert.Equal(t, status.WaitDeletionGuard, h.Kind)
	assert.Equal(t, all, h.Clusters)
	assert.Contains(t, h.Message, "9 of 12 release(s)")
	assert.Contains(t, h.Message, "more than 25%")
	assert.Contains(t, h.Message, "bundle removed")
	assert.Contains(t, h.Message, "flotilla approve repo --deletions")

	// Approved: they go.
	opts.Approved = map[ReleaseRef]bool{}
	for _, e := range p.Guarded {
		opts.Approved[e.Ref()] = true
	}
	p = MakePlan(tr, fourBundles(), opts)
	assert.Equal(t, 9, cleanups(p))
	assert.Empty(t, p.Guarded)
	assert.Empty(t, p.Holds)

	// A changed plan re-evaluates: six more (untargeted) are not approved.
	tr2 := each(targets(all, "c1"), bundles("a", "b", "c"))
	opts.Bundles = []string{"a", "b", "c"}
	opts.Approved = map[ReleaseRef]bool{entry("d", "c1").Ref(): true}
	p = MakePlan(tr2, fourBundles(), opts)
	assert.Equal(t, 1, cleanups(p), "the approved uninstall goes")
	assert.Len(t, p.Guarded, 8)
	require.Len(t, p.Holds, 1)
	assert.Contains(t, p.Holds[0].Message, "bundle removed, cluster untargeted")
}

func TestDeletionGuardLetsSmallOrKeptRemovalsGo(t *testing.T) {
	all := []string{"c1", "c2", "c3"}
	opts := PlanOptions{Guard: DefaultDeletionGuard}
	// 3 of 12: under the minimum of five.
	p := MakePlan(each(targets(all, all...), bundles("a", "b", "c")), fourBundles(), opts)
	assert.Equal(t, 3, cleanups(p))
	assert.Empty(t, p.Guarded)

	// keepResources removes nothing from the cluster: never held.
	inv := fourBundles()
	for i := range inv {
		inv[i].KeepResources = true
	}
	p = MakePlan(each(targets(all, all...), bundles("a")), inv, opts)
	assert.Equal(t, 9, cleanups(p))

	// Off: everything goes.
	p = MakePlan(each(targets(all, all...), bundles("a")), fourBundles(), PlanOptions{})
	assert.Equal(t, 9, cleanups(p))
}
