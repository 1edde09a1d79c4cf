package status_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/flotilla-gitops/flotilla/internal/status"
)

// fleet has n clusters running bundle "web", the first ready of them Ready.
func fleet(n, ready int) []status.Deployment {
	var deps []status.Deployment
	for i := range n {
		d := status.Deployment{Bundle: "web", Cluster: fmt.Sprintf("c%02d", i), State: status.OutOfSync}
		if i < ready {
			d.State = status.Ready
		}
		deps = append(deps, d)
	}
	return deps
}

func parts(bundle string, phases ...string) []status.PartitionStatus {
	var ps []status.PartitionStatus
	for i, ph := range phases {
		ps = append(ps, status.PartitionStatus{Bundle: bundle, Name: fmt.Sprintf("p%d", i+1), Index: i, Phase: ph})
	}
	return ps
}

func TestProgress(t *testing.T) {
	const (
		done     = status.PartitionDone
		approval = status.PartitionWaitingForApproval
		window   = status.PartitionWaitingForWindow
		pending  = status.PartitionPending
		rolling  = status.PartitionRolling
	)
	tests := []struct {
		name  string
		deps  []status.Deployment
		parts []status.PartitionStatus
		waits []status.Wait
		want  string
	}{
		{"nothing", nil, nil, nil, "0/0 clusters ready"},
		{"clusters only", fleet(50, 12), nil, nil, "12/50 clusters ready"},
		{"a partition waits for approval", fleet(50, 12), parts("web", done, approval, pending, pending),
			[]status.Wait{{Bundle: "web", Kind: status.WaitApproval, Partition: "p2"}},
			"12/50 clusters ready, partition 2/4 (p2) waiting for approval"},
		{"a partition rolls, held back by maxUnavailable", fleet(50, 30), parts("web", done, done, rolling, pending),
			[]status.Wait{{Bundle: "web", Kind: status.WaitMaxUnavailable, Clusters: []string{"c40"}}},
			"30/50 clusters ready, partition 3/4 (p3) rolling, held back by maxUnavailable"},
		{"a window, with the earliest opening", fleet(4, 2), parts("web", done, window),
			[]status.Wait{
				{Bundle: "web", Kind: status.WaitWindow, Partition: "p2", Until: "2026-09-01T10:00:00+02:00"},
				{Bundle: "web", Kind: status.WaitWindow, Partition: "p2", Until: "2026-09-01T09:00:00Z"},
			},
			"2/4 clusters ready, partition 2/2 (p2) waiting for window until 2026-09-01T10:00:00+02:00"},
		{"bundles in different places are named", fleet(4, 4),
			append(parts("web", done, approval), parts("db", rolling, pending)...), nil,
			"4/4 clusters ready, bundle db: partition 1/2 (p1) rolling, bundle web: partition 2/2 (p2) waiting for approval"},
		{"bundles in the same place share a phrase", fleet(4, 1),
			append(append(parts("web", done, approval), parts("db", done, approval)...), parts("api", done, done)...), nil,
			"1/4 clusters ready, bundles db, web: partition 2/2 (p2) waiting for approval"},
		{"every partition done", fleet(4, 4), parts("web", done, done), nil, "4/4 clusters ready"},
		{"waits without partitions, in a fixed order", fleet(3, 0), nil,
			[]status.Wait{
				{Bundle: "b", Kind: status.WaitMaxUnavailablePartitions},
				{Bundle: "a", Kind: status.WaitDependsOn},
				{Bundle: "c", Kind: status.WaitPaused},
				{Bundle: "a", Kind: status.WaitWindow, Until: "2026-09-01T09:00:00Z"},
				{Bundle: "a", Kind: status.WaitApproval, Partition: "p1"},
				{Bundle: "a", Kind: status.WaitPartitionMaxUnavailable},
				{Bundle: "a", Kind: "Quota"},
				{Bundle: "b", Kind: status.WaitMaxUnavailable},
				{Bundle: "a", Kind: status.WaitMaxUnavailable},
			},
			"0/3 clusters ready, paused, waiting for dependencies, waiting for window until 2026-09-01T09:00:00Z, " +
				"waiting for approval, held back by maxUnavailablePartitions, held back by maxUnavailable, " +
				"held back by the partition's maxUnavailable, held back by Quota"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, status.Progress(tt.deps, tt.parts, tt.waits))
			// The order of the arguments does not matter.
			deps, ps, ws := slices.Clone(tt.deps), slices.Clone(tt.parts), slices.Clone(tt.waits)
			slices.Reverse(deps)
			slices.Reverse(ps)
			slices.Reverse(ws)
			assert.Equal(t, tt.want, status.Progress(deps, ps, ws), "reversed")
		})
	}
}
