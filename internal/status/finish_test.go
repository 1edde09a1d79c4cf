package status_test

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/status"
)

const templateErr = `bundle app: cluster c2: template: fleet.yaml:3: map has no entry for key "region"`

// mix is two clusters and two bundles: c1 runs both Ready; on c2 app failed
// to render and db is not ready.
func mix() []status.Deployment {
	return []status.Deployment{
		{Bundle: "app", Cluster: "c1", DeploymentID: "s-a:1", AppliedDeploymentID: "s-a:1", State: status.Ready,
			Resources: 2, ReadyResources: 2},
		{Bundle: "db", Cluster: "c1", DeploymentID: "s-d:1", AppliedDeploymentID: "s-d:1", State: status.Ready,
			Resources: 3, ReadyResources: 3},
		// A render error: no deployment ID was computed.
		{Bundle: "app", Cluster: "c2", State: status.ErrApplied, Message: templateErr},
		{Bundle: "db", Cluster: "c2", DeploymentID: "s-d:2", AppliedDeploymentID: "s-d:2", State: status.NotReady,
			Message: "cluster c2: StatefulSet db/db: 0/1 replicas ready", Resources: 3, ReadyResources: 1,
			NotReadyResources: 1, Missing: 1},
	}
}

func TestFinish_Mix(t *testing.T) {
	g := status.GitRepo{Namespace: "fleet-default", Name: "shop", Commit: "abc", Deployments: mix()}
	g.Finish()

	assert.Equal(t, status.Display{ReadyBundleDeployments: "2/4", ReadyClusters: "1/2", State: "ErrApplied",
		Message: "ErrApplied(1) [" + templateErr + "]; NotReady(1) [cluster c2: StatefulSet db/db: 0/1 replicas ready]"},
		g.Display)
	assert.Equal(t, status.Summarize(g.Deployments), g.Summary)

	require.Len(t, g.Bundles, 2)
	assert.Equal(t, status.BundleStatus{Name: "app", State: status.ErrApplied, ReadyClusters: "1/2",
		Counts:         status.StateCounts{Ready: 1, ErrApplied: 1, DesiredReady: 2},
		ResourceCounts: status.ResourceCounts{Ready: 2, DesiredReady: 2},
		Message:        "ErrApplied(1) [" + templateErr + "]"}, g.Bundles[0], "the template error names the cluster")
	assert.Equal(t, status.BundleStatus{Name: "db", State: status.NotReady, ReadyClusters: "1/2",
		Counts:         status.StateCounts{Ready: 1, NotReady: 1, DesiredReady: 2},
		ResourceCounts: status.ResourceCounts{Ready: 4, DesiredReady: 6, NotReady: 1, Missing: 1},
		Message:        "NotReady(1) [cluster c2: StatefulSet db/db: 0/1 replicas ready]"}, g.Bundles[1])

	assert.Equal(t, status.ResourceCounts{Ready: 6, DesiredReady: 8, NotReady: 1, Missing: 1}, g.ResourceCounts)
	assert.Equal(t, map[string]status.ResourceCounts{
		"c1": {Ready: 5, DesiredReady: 5},
		"c2": {Ready: 1, DesiredReady: 3, NotReady: 1, Missing: 1},
	}, g.PerClusterResourceCounts)

	assert.Equal(t, []status.Condition{
		{Type: "Ready", Status: "False", Reason: "ErrApplied", Message: g.Summary.Message},
		{Type: "Accepted", Status: "True"},
		{Type: "Stalled", Status: "False"},
		{Type: "RolloutHalted", Status: "False"},
		{Type: "WaitingForApproval", Status: "False"},
		{Type: "DeletionHeld", Status: "False"},
		{Type: "GitPolling", Status: "True"},
	}, g.Conditions)
	ready, ok := g.Condition(status.ConditionReady)
	require.True(t, ok)
	assert.Contains(t, ready.Message, templateErr, "the Ready condition quotes the template error")
	assert.False(t, ready.Healthy())
	assert.Empty(t, g.Progress, "no gating state, nothing to add to the display")

	// Order does not matter, Finish is idempotent and leaves its inputs be.
	again := g
	again.Finish()
	assert.Equal(t, g, again)
	rev := status.GitRepo{Namespace: "fleet-default", Name: "shop", Commit: "abc", Deployments: mix()}
	slices.Reverse(rev.Deployments)
	rev.Finish()
	slices.Reverse(rev.Deployments)
	assert.Equal(t, g, rev)
	assert.Equal(t, mix(), g.Deployments)
}

func TestFinish_AllReady(t *testing.T) {
	g := status.GitRepo{Name: "shop", Commit: "abc", Deployments: []status.Deployment{
		{Bundle: "app", Cluster: "c1", State: status.Ready, Resources: 1, ReadyResources: 1},
		{Bundle: "app", Cluster: "c2", State: status.Ready, Resources: 1, ReadyResources: 1},
	}}
	g.Finish()
	assert.Equal(t, status.Display{ReadyBundleDeployments: "2/2", ReadyClusters: "2/2", State: "Ready"}, g.Display)
	for _, c := range g.Conditions {
		assert.True(t, c.Healthy(), c.Type)
		assert.Empty(t, c.Message, c.Type)
	}
	assert.Equal(t, status.ConditionTypes, conditionTypes(g.Conditions), "always all of them, in order")
}

func TestFinish_PausedDeduplicatesMessages(t *testing.T) {
	g := status.GitRepo{Name: "shop", Commit: "abc", Paused: true, Deployments: []status.Deployment{
		{Bundle: "app", Cluster: "c1", State: status.OutOfSync, Message: "GitRepo is paused", Resources: 1, ReadyResources: 1},
		{Bundle: "app", Cluster: "c2", State: status.OutOfSync, Message: "GitRepo is paused", Resources: 1, ReadyResources: 1},
		{Bundle: "db", Cluster: "c2", State: status.Ready, Resources: 1, ReadyResources: 1},
	}}
	g.Finish()
	assert.Equal(t, "Paused", g.Display.State, "a pause and nothing worse")
	assert.Equal(t, "OutOfSync(2) [GitRepo is paused]", g.Display.Message, "an identical message is quoted once")
	assert.Equal(t, "OutOfSync(2) [GitRepo is paused]", g.Bundles[0].Message)
	assert.Equal(t, status.Condition{Type: "Ready", Status: "False", Reason: "OutOfSync", Message: "OutOfSync(2) [GitRepo is paused]"},
		g.Conditions[0])
	assert.Equal(t, status.ResourceCounts{Ready: 3, DesiredReady: 3}, g.ResourceCounts, "paused deployments keep running")

	// Something worse than the pause shows instead.
	g.Deployments[2].State, g.Deployments[2].Message = status.NotReady, "cluster c2: Deployment db/db: 0/1"
	g.Finish()
	assert.Equal(t, "OutOfSync", g.Display.State)
}

func TestFinish_ErrorHaltsAndApprovals(t *testing.T) {
	g := status.GitRepo{Name: "shop", Commit: "abc", Deployments: mix()[:2],
		Halts: []status.Halt{{Bundle: "db", Failed: []string{"c3", "c4"}, Threshold: 1, Message: "2 clusters failed, more than the 1 allowed",
			RolledBack: []string{"c3"}, RollbackErrors: []string{"cluster c4: timeout"}}},
		Waits: []status.Wait{
			{Bundle: "db", Kind: status.WaitApproval, Partition: "prod", Message: "partition prod needs approval"},
			{Bundle: "app", Kind: status.WaitApproval, Partition: "prod", Message: "partition prod needs approval"},
			{Bundle: "app", Kind: status.WaitMaxUnavailable, Clusters: []string{"c5"}, Message: "maxUnavailable 1 reached: c5"},
		},
	}
	g.Finish()
	halt := "bundle db halted: 2 clusters failed, more than the 1 allowed; failed: c3, c4; rolled back: c3; rollback errors: cluster c4: timeout"
	assert.Equal(t, "Halted", g.Display.State)
	assert.Equal(t, halt, g.Display.Message)
	assert.Equal(t, []status.Condition{
		{Type: "Ready", Status: "True"},
		{Type: "Accepted", Status: "True"},
		{Type: "Stalled", Status: "True", Reason: "RolloutHalted", Message: "rollout halted for bundle db"},
		{Type: "RolloutHalted", Status: "True", Reason: "FailureThreshold", Message: halt},
		{Type: "WaitingForApproval", Status: "True", Reason: "ApprovalRequired",
			Message: "bundles app, db partition prod waits for approval; run: flotilla approve shop --partition prod"},
		{Type: "DeletionHeld", Status: "False"},
		{Type: "GitPolling", Status: "True"},
	}, g.Conditions)
	assert.Equal(t, "1/1 clusters ready, waiting for approval, held back by maxUnavailable", g.Progress,
		"filled from the waits when the workflow left it empty")

	g.Error = "fleet.yaml: unknown field \"helm.valuez\""
	g.Progress = "kept"
	g.Finish()
	assert.Equal(t, "Error", g.Display.State)
	assert.Equal(t, g.Error, g.Display.Message)
	assert.Equal(t, "kept", g.Progress, "a Progress the workflow set stands")
	assert.Equal(t, status.Condition{Type: "Ready", Status: "False", Reason: "Error", Message: g.Error}, g.Conditions[0])
	assert.Equal(t, status.Condition{Type: "Accepted", Status: "False", Reason: "Error", Message: g.Error}, g.Conditions[1])
	assert.Equal(t, status.Condition{Type: "Stalled", Status: "True", Reason: "Error",
		Message: g.Error + "; rollout halted for bundle db"}, g.Conditions[2])

	g.Deleting = true
	g.Finish()
	assert.Equal(t, "Deleting", g.Display.State)
}

func TestFinish_NoDeployments(t *testing.T) {
	g := status.GitRepo{Name: "shop"}
	g.Finish()
	assert.Equal(t, status.Display{ReadyBundleDeployments: "0/0", ReadyClusters: "0/0", State: "Pending"}, g.Display)
	assert.Equal(t, status.Condition{Type: "Ready", Status: "Unknown", Reason: "Pending", Message: "no commit rolled out yet"},
		g.Conditions[0])
	assert.Nil(t, g.PerClusterResourceCounts)
	assert.Nil(t, g.Bundles)

	g.Commit = "abc"
	g.Finish()
	assert.Equal(t, "NoTargets", g.Display.State)
	assert.Equal(t, status.Condition{Type: "Ready", Status: "True"}, g.Conditions[0])

	g.Paused = true
	g.Finish()
	assert.Equal(t, "Paused", g.Display.State)
}

func TestFinish_JSON(t *testing.T) {
	g := status.GitRepo{Name: "shop", Commit: "abc", Deployments: mix()}
	g.Finish()
	b, err := json.Marshal(g)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	assert.Equal(t, map[string]any{"readyBundleDeployments": "2/4", "readyClusters": "1/2", "state": "ErrApplied",
		"message": g.Display.Message}, m["display"])
	assert.Contains(t, m, "resourceCounts")
	assert.Contains(t, m["perClusterResourceCounts"], "c2")
	bundles := m["bundles"].([]any)
	assert.Equal(t, float64(1), bundles[0].(map[string]any)["counts"].(map[string]any)["errApplied"])
	assert.Equal(t, float64(0), bundles[0].(map[string]any)["counts"].(map[string]any)["modified"], "zero counts present")
	assert.Len(t, m["conditions"], 7)

	var back status.GitRepo
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, g, back, "the status survives a query's JSON round trip")
}

func conditionTypes(cs []status.Condition) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Type)
	}
	return out
}

func TestFinish_ApprovalCommandNamesANonDefaultNamespace(t *testing.T) {
	g := status.GitRepo{Namespace: "team-a", Name: "shop", Commit: "abc",
		Waits: []status.Wait{{Bundle: "web", Kind: status.WaitApproval, Partition: "canary"}, {Bundle: "db", Kind: status.WaitApproval}}}
	g.Finish()
	c, _ := g.Condition(status.ConditionWaitingForApproval)
	assert.Equal(t, "bundle db waits for approval; run: flotilla approve shop -n team-a; "+
		"bundle web partition canary waits for approval; run: flotilla approve shop -n team-a --partition canary", c.Message)
}

// Held uninstalls show as the DeletionHeld condition and in the
// progress line.
func TestFinish_DeletionHeld(t *testing.T) {
	g := status.GitRepo{Name: "shop", Commit: "abc", Deployments: []status.Deployment{{Bundle: "app", Cluster: "c1", State: status.Ready}},
		Waits: []status.Wait{{Kind: status.WaitDeletionHeld, Clusters: []string{"c2"},
			Message: `1 uninstall(s) held on c2: clusterGroup "prod" not found; nothing is removed until it exists or no target names it`}}}
	g.Finish()
	c, ok := g.Condition(status.ConditionDeletionHeld)
	require.True(t, ok)
	assert.Equal(t, status.Condition{Type: "DeletionHeld", Status: "True", Reason: "TargetNotFound", Message: g.Waits[0].Message}, c)
	assert.False(t, c.Healthy())
	assert.Equal(t, "1/1 clusters ready, uninstalls held", g.Progress)
}

// TestFinish_GitPolling: Fleet's GitPolling condition is False while the
// Git host asked to wait, checks fail, or the newest commit's signature
// was refused, in that order of precedence.
func TestFinish_GitPolling(t *testing.T) {
	at := time.Date(2026, 11, 30, 2, 0, 0, 0, time.UTC)
	rejected := &status.RejectedCommit{Commit: "abc", Reason: "unsigned"}
	for _, tc := range []struct {
		name string
		g    status.GitRepo
		want status.Condition
	}{
		{"checks succeed", status.GitRepo{}, status.Condition{Type: "GitPolling", Status: "True"}},
		{"the host asked to wait", status.GitRepo{NextCheck: &at, NextCheckReason: "git.example: 429", PollFailures: 2, Rejected: rejected},
			status.Condition{Type: "GitPolling", Status: "False", Reason: "RateLimited", Message: "next check at 2026-11-30T02:00:00Z: git.example: 429"}},
		{"checks fail", status.GitRepo{PollFailures: 2, Error: "GitRepo a/b: connection refused", Rejected: rejected},
			status.Condition{Type: "GitPolling", Status: "False", Reason: "PollFailed", Message: "2 failed checks in a row: GitRepo a/b: connection refused"}},
		{"a commit refused", status.GitRepo{Rejected: rejected},
			status.Condition{Type: "GitPolling", Status: "False", Reason: "CommitRejected", Message: "commit abc not deployed: unsigned"}},
		{"a commit taken without a render", status.GitRepo{Commit: "c2", RenderedCommit: "c1"},
			status.Condition{Type: "GitPolling", Status: "True", Reason: "NoChangeUnderPaths",
				Message: "no change under paths since c1: commit c2 taken without a render or rollout"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.g.Finish()
			c, ok := tc.g.Condition(status.ConditionGitPolling)
			require.True(t, ok)
			assert.Equal(t, tc.want, c)
			assert.Equal(t, tc.want.Status == "True", c.Healthy())
		})
	}
}
