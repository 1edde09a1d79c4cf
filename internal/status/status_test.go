package status_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/flotilla-gitops/flotilla/internal/status"
)

func TestSummarize(t *testing.T) {
	deps := []status.Deployment{
		{Bundle: "a", Cluster: "c1", State: status.Ready, Resources: 2, ReadyResources: 2},
		{Bundle: "b", Cluster: "c1", State: status.Ready, Resources: 1, ReadyResources: 1},
		{Bundle: "a", Cluster: "c2", State: status.ErrApplied, Message: "cluster c2: bad label"},
		{Bundle: "b", Cluster: "c2", State: status.NotReady, Message: "cluster c2: Deployment x: 0/1", Resources: 1},
		{Bundle: "a", Cluster: "c3", State: status.WaitApplied, Message: "cluster c3: unreachable"},
		{Bundle: "b", Cluster: "c3", State: status.WaitApplied, Message: "cluster c3: unreachable"},
	}
	s := status.Summarize(deps)
	assert.Equal(t, status.ErrApplied, s.State, "the worst state wins")
	assert.Equal(t, 2, s.Ready)
	assert.Equal(t, 6, s.Desired)
	assert.Equal(t, 1, s.ReadyClusters)
	assert.Equal(t, 3, s.Clusters)
	assert.Equal(t, 4, s.Resources)
	assert.Equal(t, 3, s.ReadyResources)
	assert.Equal(t, "ErrApplied(1) [cluster c2: bad label]; WaitApplied(2) [cluster c3: unreachable]; NotReady(1) [cluster c2: Deployment x: 0/1]",
		s.Message, "messages are grouped by state, most severe first, each once")

	// Order does not matter.
	reversed := make([]status.Deployment, len(deps))
	for i, d := range deps {
		reversed[len(deps)-1-i] = d
	}
	assert.Equal(t, s, status.Summarize(reversed))
}

func TestSummarize_EmptyIsReadyAndMessagesAreBounded(t *testing.T) {
	assert.Equal(t, status.Ready, status.Summarize(nil).State)
	var deps []status.Deployment
	for i := range 15 {
		deps = append(deps, status.Deployment{Bundle: "a", Cluster: string(rune('a' + i)), State: status.NotReady,
			Message: "cluster " + string(rune('a'+i)) + ": not ready"})
	}
	s := status.Summarize(deps)
	assert.Contains(t, s.Message, "NotReady(15)")
	assert.Contains(t, s.Message, "...")
	assert.NotContains(t, s.Message, "cluster o:", "at most MaxMessages messages are quoted")
}
