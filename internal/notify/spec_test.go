package notify

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSpec_Matches(t *testing.T) {
	rollout := Event{Type: RolloutFailed, Severity: Error, Namespace: "ns", GitRepo: "app-a", RepoURL: "https://git.example/o/r",
		Commit: "abc", Bundles: []string{"app-a-web", "app-a-db"}, Clusters: []string{"dev-1", "prod-2"}}
	offline := Event{Type: ClusterOffline, Severity: Warning, Namespace: "ns", Clusters: []string{"prod-2"}}
	history := Event{Type: History, Severity: Info, Namespace: "ns", GitRepo: "app-a"}
	drift := Event{Type: DriftDetected, Severity: Warning, Namespace: "ns", GitRepo: "app-a", Commit: "abc", RepoURL: "https://git.example/o/r"}
	tests := []struct {
		name string
		spec Spec
		ev   Event
		want bool
	}{
		{"empty spec takes every type", Spec{Provider: Webhook}, rollout, true},
		{"empty spec leaves History out", Spec{Provider: Webhook}, history, false},
		{"History when listed", Spec{Provider: Webhook, EventTypes: []Type{History}}, history, true},
		{"type not listed", Spec{Provider: Webhook, EventTypes: []Type{RolloutSucceeded}}, rollout, false},
		{"type listed", Spec{Provider: Webhook, EventTypes: []Type{RolloutSucceeded, RolloutFailed}}, rollout, true},
		{"severity below minimum", Spec{Provider: Webhook, Severity: Error}, offline, false},
		{"severity at minimum", Spec{Provider: Webhook, Severity: Warning}, offline, true},
		{"severity above minimum", Spec{Provider: Webhook, Severity: Warning}, rollout, true},
		{"suspended", Spec{Provider: Webhook, Suspend: true}, rollout, false},
		{"gitRepo glob matches", Spec{Provider: Webhook, GitRepos: []string{"app-*"}}, rollout, true},
		{"gitRepo glob misses", Spec{Provider: Webhook, GitRepos: []string{"infra-*"}}, rollout, false},
		{"gitRepo filter drops a cluster event", Spec{Provider: Webhook, GitRepos: []string{"*"}}, offline, false},
		{"one of several bundles matches", Spec{Provider: Webhook, Bundles: []string{"*-db"}}, rollout, true},
		{"no bundle matches", Spec{Provider: Webhook, Bundles: []string{"*-cache"}}, rollout, false},
		{"one of several clusters matches", Spec{Provider: Webhook, Clusters: []string{"prod-*"}}, rollout, true},
		{"no cluster matches", Spec{Provider: Webhook, Clusters: []string{"staging-*"}}, rollout, false},
		{"cluster filter on a cluster event", Spec{Provider: Webhook, Clusters: []string{"prod-*"}}, offline, true},
		{"all filters pass", Spec{Provider: Slack, GitRepos: []string{"app-a"}, Bundles: []string{"app-a-web"}, Clusters: []string{"dev-1"}, Severity: Error}, rollout, true},
		{"status provider takes a rollout event", Spec{Provider: GitHub}, rollout, true},
		{"status provider skips other types", Spec{Provider: GitLab}, drift, false},
		{"status provider skips listed non-rollout types", Spec{Provider: Gitea, EventTypes: []Type{DriftDetected}}, drift, false},
		{"status provider needs a commit", Spec{Provider: GitHub}, Event{Type: RolloutStarted, GitRepo: "a", RepoURL: "https://x/o/r"}, false},
		{"status provider skips cluster events", Spec{Provider: GitHub}, offline, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.spec.Matches(tt.ev))
		})
	}
}

func TestCloudEventType(t *testing.T) {
	assert.Equal(t, "dev.flotilla.rollout-failed", CloudEventType(RolloutFailed))
	assert.Equal(t, "dev.flotilla.cluster-offline", CloudEventType(ClusterOffline))
	assert.Equal(t, "dev.flotilla.history", CloudEventType(History))
}
