package fleetstatus

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

func TestProjectCluster(t *testing.T) {
	seen := time.Date(2026, 1, 1, 10, 30, 42, 0, time.UTC)
	repos := []status.GitRepo{
		gitRepo(nil, dep("a", "c1", status.Ready), dep("a", "c2", status.Ready)),
		gitRepo(func(g *status.GitRepo) { g.Name = "other" }, dep("b", "c1", status.NotReady)),
	}
	tests := []struct {
		name        string
		rec         protocol.ClusterRecord
		wantDisplay ClusterDisplay
		wantReady   string
		wantReason  string
		wantSeen    string
		wantRepos   [2]int // ready, desired
	}{
		{name: "push mode, one bundle not ready", rec: protocol.ClusterRecord{Name: "c1", KubeconfigHash: "h"},
			wantDisplay: ClusterDisplay{ReadyBundles: "1/2", State: "NotReady"}, wantReady: "False", wantReason: "NotReady", wantRepos: [2]int{1, 2}},
		{name: "push mode, all ready", rec: protocol.ClusterRecord{Name: "c2", KubeconfigHash: "h"},
			wantDisplay: ClusterDisplay{ReadyBundles: "1/1", State: "Ready"}, wantReady: "True", wantRepos: [2]int{1, 1}},
		{name: "agent seen, to the minute", rec: protocol.ClusterRecord{Name: "c2", Agent: &protocol.AgentRecord{LastSeen: &seen}},
			wantDisplay: ClusterDisplay{ReadyBundles: "1/1", State: "Ready"}, wantReady: "True", wantSeen: "2026-01-01T10:30:00Z", wantRepos: [2]int{1, 1}},
		{name: "agent never checked in", rec: protocol.ClusterRecord{Name: "c3", Agent: &protocol.AgentRecord{}},
			wantDisplay: ClusterDisplay{ReadyBundles: "0/0", State: "WaitCheckIn"}, wantReady: "False", wantReason: "WaitCheckIn"},
		{name: "agent offline", rec: protocol.ClusterRecord{Name: "c2", Agent: &protocol.AgentRecord{LastSeen: &seen, Offline: true}},
			wantDisplay: ClusterDisplay{ReadyBundles: "1/1", State: "Offline"}, wantReady: "False", wantReason: "Offline",
			wantSeen: "2026-01-01T10:30:00Z", wantRepos: [2]int{1, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ProjectCluster(ClusterInput{Record: tt.rec, GitRepos: repos, Generation: 4})
			assert.Equal(t, tt.wantDisplay, got.Display)
			assert.Equal(t, tt.wantReady, got.Conditions[0].Status)
			assert.Equal(t, tt.wantReason, got.Conditions[0].Reason)
			assert.Equal(t, int64(4), got.Conditions[0].ObservedGeneration)
			assert.Equal(t, tt.wantSeen, got.Agent.LastSeen)
			assert.Equal(t, tt.wantRepos, [2]int{got.ReadyGitRepos, got.DesiredReadyGitRepos})
		})
	}
}

func TestProjectCluster_Refused(t *testing.T) {
	refused := Condition{Type: status.ConditionAccepted, Status: status.ConditionFalse, Reason: "NameTaken",
		Message: "cluster name c2 is held by Cluster fleet-default/c2"}
	got := ProjectCluster(ClusterInput{Record: protocol.ClusterRecord{Name: "c2", KubeconfigHash: "h"}, Generation: 2,
		Overrides: []Condition{refused}})
	require.Len(t, got.Conditions, 2)
	assert.Equal(t, Condition{Type: status.ConditionReady, Status: status.ConditionFalse, Reason: "NameTaken",
		Message: refused.Message, ObservedGeneration: 2}, got.Conditions[0], "a refused Cluster is not Ready")
	refused.ObservedGeneration = 2
	assert.Equal(t, refused, got.Conditions[1])

	group := ProjectGroup(GroupInput{Generation: 3, Overrides: []Condition{refused}})
	assert.Equal(t, status.ConditionFalse, group.Conditions[0].Status)
	assert.Equal(t, "NameTaken", group.Conditions[0].Reason)
}

func TestProjectGroup(t *testing.T) {
	repos := []status.GitRepo{gitRepo(nil, dep("a", "c1", status.Ready), dep("a", "c2", status.ErrApplied), dep("a", "c3", status.Ready))}
	clusters := []protocol.ClusterRecord{
		{Name: "c1", KubeconfigHash: "h", Labels: map[string]string{"env": "prod"}},
		{Name: "c2", KubeconfigHash: "h", Labels: map[string]string{"env": "prod"}},
		{Name: "c3", KubeconfigHash: "h", Labels: map[string]string{"env": "dev"}},
	}
	prod := &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}
	got := ProjectGroup(GroupInput{Selector: prod, Clusters: clusters, GitRepos: repos, Generation: 2})
	assert.Equal(t, 2, got.ClusterCount)
	assert.Equal(t, 1, got.NonReadyClusterCount)
	assert.Equal(t, []string{"c2"}, got.NonReadyClusters)
	assert.Equal(t, ClusterGroupDisplay{ReadyClusters: "1/2", ReadyBundles: "1/2", State: "ErrApplied"}, got.Display)
	assert.Equal(t, "False", got.Conditions[0].Status)
	assert.Equal(t, "1 clusters not ready: c2", got.Conditions[0].Message)

	none := ProjectGroup(GroupInput{Clusters: clusters, GitRepos: repos})
	assert.Equal(t, 0, none.ClusterCount, "a group without a selector matches nothing, as in Fleet")
	bad := ProjectGroup(GroupInput{Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: "Bogus"}}},
		Clusters: clusters})
	assert.Equal(t, "InvalidSelector", bad.Conditions[0].Reason)
}
