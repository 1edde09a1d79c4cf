package status_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/status"
)

func TestDeploymentResourceCounts(t *testing.T) {
	base := status.Deployment{Bundle: "b", Cluster: "c", DeploymentID: "s-new:1", AppliedDeploymentID: "s-new:1",
		Resources: 10, ReadyResources: 6, Missing: 1, NotReadyResources: 2, Unknown: 1}
	applied := status.ResourceCounts{DesiredReady: 10, Ready: 6, Missing: 1, NotReady: 2, Unknown: 1}
	waiting := status.ResourceCounts{DesiredReady: 10, WaitApplied: 10}
	tests := []struct {
		name      string
		state     status.State
		appliedID string
		want      status.ResourceCounts
	}{
		{"Ready", status.Ready, "s-new:1", applied},
		{"NotReady", status.NotReady, "s-new:1", applied},
		{"Modified", status.Modified, "s-new:1", applied},
		{"OutOfSync (paused, the applied ID is the active one)", status.OutOfSync, "s-new:1", applied},
		{"WaitApplied", status.WaitApplied, "s-old:1", waiting},
		{"WaitApplied even if the IDs match", status.WaitApplied, "s-new:1", waiting},
		{"Pending", status.Pending, "", waiting},
		{"ErrApplied on a new ID is not applied", status.ErrApplied, "s-old:1", waiting},
		{"ErrApplied after applying (e.g. a readiness error) counts readiness", status.ErrApplied, "s-new:1", applied},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := base
			d.State, d.AppliedDeploymentID = tt.state, tt.appliedID
			got := d.ResourceCounts()
			assert.Equal(t, tt.want, got)
			assert.Zero(t, got.Modified, "no drift detection yet")
			assert.Zero(t, got.Orphaned, "no drift detection yet")
		})
	}
}

func TestResourceCountsAddAndJSON(t *testing.T) {
	c := status.ResourceCounts{Ready: 1, DesiredReady: 2, WaitApplied: 3, Modified: 4, Orphaned: 5, Missing: 6, Unknown: 7, NotReady: 8}
	c.Add(status.ResourceCounts{Ready: 10, DesiredReady: 20, WaitApplied: 30, Modified: 40, Orphaned: 50, Missing: 60, Unknown: 70, NotReady: 80})
	assert.Equal(t, status.ResourceCounts{Ready: 11, DesiredReady: 22, WaitApplied: 33, Modified: 44, Orphaned: 55, Missing: 66,
		Unknown: 77, NotReady: 88}, c)

	b, err := json.Marshal(status.ResourceCounts{Ready: 1})
	require.NoError(t, err)
	assert.JSONEq(t, `{"ready":1,"desiredReady":0,"waitApplied":0,"modified":0,"orphaned":0,"missing":0,"unknown":0,"notReady":0}`,
		string(b), "Fleet's names, every field present")
}

func TestCountStates(t *testing.T) {
	var deps []status.Deployment
	for i, s := range status.States {
		for range i + 1 {
			deps = append(deps, status.Deployment{State: s})
		}
	}
	c := status.CountStates(deps)
	for i, s := range status.States {
		assert.Equal(t, i+1, c.Get(s), s)
	}
	assert.Equal(t, len(deps), c.DesiredReady)
	assert.Equal(t, "ErrApplied(1) WaitApplied(2) Modified(3) OutOfSync(4) Pending(5) NotReady(6) Ready(7)", c.String())
	assert.Equal(t, "ErrApplied(1) Ready(2)", status.CountStates([]status.Deployment{
		{State: status.Ready}, {State: status.ErrApplied}, {State: status.Ready}}).String(), "zeros are left out")

	b, err := json.Marshal(status.StateCounts{})
	require.NoError(t, err)
	assert.JSONEq(t, `{"ready":0,"notReady":0,"waitApplied":0,"errApplied":0,"outOfSync":0,"pending":0,"modified":0,"desiredReady":0}`,
		string(b), "every state present in JSON")
}

func TestLimitClusters(t *testing.T) {
	names := []string{"c3", "c1", "c2", "c1"}
	list, more := status.LimitClusters(names)
	assert.Equal(t, []string{"c1", "c2", "c3"}, list, "sorted, each once")
	assert.Zero(t, more)
	assert.Equal(t, []string{"c3", "c1", "c2", "c1"}, names, "the input is not modified")
	assert.Equal(t, "c1, c2, c3", status.JoinClusters(list, more))

	var many []string
	for i := range 15 {
		many = append(many, string(rune('z'-i)))
	}
	list, more = status.LimitClusters(many)
	assert.Len(t, list, status.MaxMessages)
	assert.Equal(t, "l", list[0])
	assert.Equal(t, 5, more)
	assert.Equal(t, "l, m, n, o, p, q, r, s, t, u and 5 more", status.JoinClusters(list, more))
	assert.Equal(t, "3 clusters", status.JoinClusters(nil, 3))
}
