package status

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestOutOfContact(t *testing.T) {
	seen := time.Date(2026, 11, 29, 10, 0, 0, 0, time.FixedZone("CET", 3600))
	c := ClusterContact{Cluster: "edge-1", Lost: true, LastSeen: seen, Reason: "its agent sent no heartbeat"}
	const lost = "cluster edge-1 is out of contact (last seen 2026-11-29T09:00:00Z): its agent sent no heartbeat; last known "
	for _, tc := range []struct {
		state       State
		wantState   State
		wantMessage string
	}{
		{Ready, WaitApplied, lost + "Ready"},
		{NotReady, WaitApplied, lost + "NotReady"},
		{Modified, WaitApplied, lost + "Modified"},
		// What these say is still true.
		{ErrApplied, ErrApplied, "was"},
		{WaitApplied, WaitApplied, "was; cluster edge-1 is out of contact (last seen 2026-11-29T09:00:00Z): its agent sent no heartbeat"},
		{OutOfSync, OutOfSync, "was"},
		// Not started: it waits for the cluster (a retry rollout queued
		// for an offline agent), and says so.
		{Pending, WaitApplied, "was; cluster edge-1 is out of contact (last seen 2026-11-29T09:00:00Z): its agent sent no heartbeat"},
	} {
		d := Deployment{Bundle: "b", Cluster: "edge-1", State: tc.state, Message: "was"}
		got := d.OutOfContact(c)
		assert.Equal(t, tc.wantState, got.State, tc.state)
		assert.Equal(t, tc.wantMessage, got.Message, tc.state)
	}
	assert.Equal(t, "cluster edge-1 is out of contact", ClusterContact{Cluster: "edge-1", Lost: true}.Describe(),
		"no last contact known, no reason")
}

func TestWithContacts(t *testing.T) {
	deps := []Deployment{{Bundle: "a", Cluster: "c1", State: Ready}, {Bundle: "a", Cluster: "c2", State: Ready},
		{Bundle: "b", Cluster: "c2", State: NotReady}}
	assert.Equal(t, deps, WithContacts(deps, nil))
	got := WithContacts(deps, []ClusterContact{{Cluster: "c0", Lost: true}, {Cluster: "c2", Lost: true}})
	assert.Equal(t, []State{Ready, WaitApplied, WaitApplied}, []State{got[0].State, got[1].State, got[2].State})
	assert.Equal(t, Ready, deps[1].State, "deps itself is unchanged")
	assert.Equal(t, WaitApplied, Summarize(got).State)
}

func TestSetContact(t *testing.T) {
	a, b := ClusterContact{Cluster: "a", Lost: true}, ClusterContact{Cluster: "b", Lost: true, Reason: "x"}
	var lost []ClusterContact
	var changed bool
	lost, changed = SetContact(lost, b)
	assert.True(t, changed)
	lost, changed = SetContact(lost, a)
	assert.True(t, changed)
	assert.Equal(t, []ClusterContact{a, b}, lost, "sorted by cluster")
	lost, changed = SetContact(lost, b)
	assert.False(t, changed, "the same again")
	b2 := b
	b2.Reason = "y"
	lost, changed = SetContact(lost, b2)
	assert.True(t, changed)
	assert.Equal(t, []ClusterContact{a, b2}, lost)
	lost, changed = SetContact(lost, ClusterContact{Cluster: "c"})
	assert.False(t, changed, "regained where never lost")
	lost, changed = SetContact(lost, ClusterContact{Cluster: "a"})
	assert.True(t, changed)
	assert.Equal(t, []ClusterContact{b2}, lost)
}
