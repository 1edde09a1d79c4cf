package fleetstatus

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/status"
)

func dep(bundle, cluster string, st status.State) status.Deployment {
	d := status.Deployment{Bundle: bundle, Cluster: cluster, State: st, DeploymentID: "m:o", AppliedDeploymentID: "m:o",
		Resources: 2, ReadyResources: 2}
	if st != status.Ready {
		d.ReadyResources = 1
		d.Message = "cluster " + cluster + ": " + string(st)
	}
	return d
}

// gitRepo returns a finished status of GitRepo ns/demo at commit c1,
// generation 3 rolled out, with deps; mod changes it before Finish.
func gitRepo(mod func(*status.GitRepo), deps ...status.Deployment) status.GitRepo {
	st := status.GitRepo{Namespace: "fleet-default", Name: "demo", Repo: "https://git.example/r.git", Commit: "c1",
		LatestCommit: "c1", Generation: 3, ObservedGeneration: 3, Deployments: deps, Settled: true}
	if mod != nil {
		mod(&st)
	}
	st.Finish()
	return st
}

func cond(s GitRepoStatus, t string) Condition {
	for _, c := range s.Conditions {
		if c.Type == t {
			return c
		}
	}
	return Condition{}
}

func TestProjectGitRepo(t *testing.T) {
	ready := []status.Deployment{dep("demo-a", "c1", status.Ready), dep("demo-a", "c2", status.Ready)}
	tests := []struct {
		name string
		st   status.GitRepo
		// specGen is GitRepoInput.SpecGeneration; overrides its Overrides.
		specGen   int64
		overrides []Condition
		// want* are the Ready, Reconciling and Stalled statuses and
		// reasons, and a condition that must be present.
		wantReady, wantReadyReason   string
		wantReconciling, wantStalled string
		wantCond                     *Condition
		wantDisplay                  Display
	}{
		{name: "rolled out and ready", st: gitRepo(nil, ready...), specGen: 3,
			wantReady: "True", wantReconciling: "False", wantStalled: "False",
			wantDisplay: Display{ReadyBundleDeployments: "2/2", State: "Ready"}},
		{name: "a rollout runs", specGen: 3,
			st:        gitRepo(func(g *status.GitRepo) { g.Rollout, g.Progress = "rollout/x", "partition 1/2 rolling" }, ready...),
			wantReady: "False", wantReadyReason: ReasonRolloutInProgress, wantReconciling: "True", wantStalled: "False",
			wantCond:    &Condition{Type: ConditionReconciling, Status: "True", Reason: ReasonRolloutInProgress, Message: "partition 1/2 rolling"},
			wantDisplay: Display{ReadyBundleDeployments: "2/2", State: "Ready", Message: "partition 1/2 rolling"}},
		{name: "the object's generation is not rolled out yet", specGen: 4, st: gitRepo(nil, ready...),
			wantReady: "False", wantReadyReason: ReasonRolloutInProgress, wantReconciling: "True", wantStalled: "False",
			wantDisplay: Display{ReadyBundleDeployments: "2/2", State: "Ready", Message: "generation 7 is not rolled out yet"}},
		{name: "spec generation not known yet", specGen: 0, st: gitRepo(nil, ready...),
			wantReady: "False", wantReadyReason: ReasonRolloutInProgress, wantReconciling: "True", wantStalled: "False",
			wantDisplay: Display{ReadyBundleDeployments: "2/2", State: "Ready", Message: "generation 7 is not rolled out yet"}},
		{name: "error", specGen: 3,
			st: gitRepo(func(g *status.GitRepo) { g.Error = "bundle demo-a: cluster c2: app/fleet.yaml: bad" },
				dep("demo-a", "c1", status.Ready), dep("demo-a", "c2", status.ErrApplied)),
			wantReady: "False", wantReadyReason: "Error", wantReconciling: "False", wantStalled: "True",
			wantCond:    &Condition{Type: "Stalled", Status: "True", Reason: "Error", Message: "bundle demo-a: cluster c2: app/fleet.yaml: bad"},
			wantDisplay: Display{ReadyBundleDeployments: "1/2", State: "Error", Message: "bundle demo-a: cluster c2: app/fleet.yaml: bad", Error: true}},
		{name: "spec refused by the controller", specGen: 3, st: gitRepo(nil, ready...),
			overrides: []Condition{{Type: "Accepted", Status: "False", Reason: "Invalid", Message: "spec.repo: Required value"}},
			wantReady: "False", wantReadyReason: "Invalid", wantReconciling: "False", wantStalled: "True",
			wantCond:    &Condition{Type: "Accepted", Status: "False", Reason: "Invalid", Message: "spec.repo: Required value"},
			wantDisplay: Display{ReadyBundleDeployments: "2/2", State: "Ready", Message: "spec.repo: Required value"}},
		{name: "policy violation", specGen: 3,
			st: gitRepo(func(g *status.GitRepo) {
				g.PolicyViolation = `Policy team-a/strict: allowedRepoPatterns do not match repo "x"`
			}, ready...),
			wantReady: "False", wantReadyReason: "PolicyViolation", wantReconciling: "False", wantStalled: "True",
			wantCond: &Condition{Type: "Stalled", Status: "True", Reason: "PolicyViolation", Message: `Policy team-a/strict: allowedRepoPatterns do not match repo "x"`},
			wantDisplay: Display{ReadyBundleDeployments: "2/2", State: "PolicyViolation",
				Message: `Policy team-a/strict: allowedRepoPatterns do not match repo "x"`, Error: true}},
		{name: "a partition waits for approval", specGen: 3,
			st: gitRepo(func(g *status.GitRepo) {
				g.Waits = []status.Wait{{Bundle: "demo-a", Kind: status.WaitApproval, Partition: "prod", Message: "waits"}}
			}, dep("demo-a", "c1", status.Ready), dep("demo-a", "c2", status.OutOfSync)),
			wantReady: "False", wantReadyReason: "OutOfSync", wantReconciling: "False", wantStalled: "False",
			wantCond: &Condition{Type: status.ConditionWaitingForApproval, Status: "True", Reason: "ApprovalRequired",
				Message: "bundle demo-a partition prod waits for approval; run: flotilla approve demo --partition prod"},
			wantDisplay: Display{ReadyBundleDeployments: "1/2", State: "OutOfSync", Message: "OutOfSync(1) [cluster c2: OutOfSync]"}},
		{name: "deletions held", specGen: 3,
			st: gitRepo(func(g *status.GitRepo) {
				g.Waits = []status.Wait{{Kind: status.WaitDeletionGuard, Message: "3 uninstalls held"}}
			}, ready...),
			wantReady: "True", wantReconciling: "False", wantStalled: "False",
			wantCond:    &Condition{Type: status.ConditionDeletionHeld, Status: "True", Reason: status.ReasonDeletionGuard, Message: "3 uninstalls held"},
			wantDisplay: Display{ReadyBundleDeployments: "2/2", State: "Ready"}},
		{name: "a failure is retried", specGen: 3,
			st: gitRepo(nil, dep("demo-a", "c1", status.Ready), func() status.Deployment {
				d := dep("demo-a", "c2", status.WaitApplied)
				d.Attempts, d.NextRetry = 3, "2026-01-01T00:00:10Z"
				return d
			}()),
			wantReady: "False", wantReadyReason: "WaitApplied", wantReconciling: "True", wantStalled: "False",
			wantCond: &Condition{Type: ConditionReconciling, Status: "True", Reason: ReasonRetrying,
				Message: "retrying bundle demo-a on cluster c2: attempt 3, next retry at 2026-01-01T00:00:10Z"},
			wantDisplay: Display{ReadyBundleDeployments: "1/2", State: "WaitApplied", Message: "WaitApplied(1) [cluster c2: WaitApplied]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ProjectGitRepo(GitRepoInput{Status: tt.st, Generation: 7, SpecGeneration: tt.specGen, Overrides: tt.overrides})
			assert.Equal(t, int64(7), got.ObservedGeneration)
			for _, c := range got.Conditions {
				assert.Equal(t, int64(7), c.ObservedGeneration, c.Type)
			}
			assert.Equal(t, []string{"Ready", "Accepted", "Reconciling", "Stalled"}, condTypes(got.Conditions)[:4])
			assert.Equal(t, tt.wantReady, cond(got, "Ready").Status)
			assert.Equal(t, tt.wantReadyReason, cond(got, "Ready").Reason)
			assert.Equal(t, tt.wantReconciling, cond(got, ConditionReconciling).Status)
			assert.Equal(t, tt.wantStalled, cond(got, "Stalled").Status)
			if tt.wantCond != nil {
				c := cond(got, tt.wantCond.Type)
				c.ObservedGeneration = 0
				assert.Equal(t, *tt.wantCond, c)
			}
			assert.Equal(t, tt.wantDisplay, got.Display)
		})
	}
}

func condTypes(conds []Condition) []string {
	var out []string
	for _, c := range conds {
		out = append(out, c.Type)
	}
	return out
}

func TestProjectGitRepo_FleetFieldsAndDrift(t *testing.T) {
	drifted := dep("demo-a", "c2", status.Modified)
	drifted.Modified, drifted.Corrections = 1, 2
	drifted.ModifiedStatus = []status.ModifiedStatus{{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "app", Name: "web", Patch: `{"spec":{"replicas":1}}`}}
	when := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	st := gitRepo(func(g *status.GitRepo) {
		g.LatestCommit, g.WebhookCommit, g.LastWebhookTime = "c2", "c2", &when
		seen := when.Add(time.Minute)
		g.LatestCommitSeen = &seen
	}, dep("demo-a", "c1", status.Ready), drifted)
	got := ProjectGitRepo(GitRepoInput{Status: st, Generation: 1, SpecGeneration: 3})

	assert.Equal(t, BundleSummary{Ready: 1, Modified: 1, DesiredReady: 2, NonReadyResources: []NonReadyResource{{
		Name: "demo-a", State: "Modified", Message: "Modified(1) [cluster c2: Modified]",
		ModifiedStatus: []ModifiedStatus{{Kind: "Deployment", APIVersion: "apps/v1", Namespace: "app", Name: "web", Patch: `{"spec":{"replicas":1}}`}},
	}}}, got.Summary)
	require.Len(t, got.Resources, 1)
	assert.Equal(t, Resource{APIVersion: "apps/v1", Kind: "Deployment", Type: "apps.deployment", ID: "app/web", Namespace: "app",
		Name: "web", State: "Modified", Message: `Deployment app/web: modified {"spec":{"replicas":1}}`,
		PerClusterState: PerClusterState{Modified: []string{"c2"}}}, got.Resources[0])
	assert.Equal(t, 1, got.ReadyClusters)
	assert.Equal(t, 2, got.DesiredReadyClusters)

	b, err := json.Marshal(got)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	// Fleet's JSON names, as its CRDs' printer columns and the Rancher UI read them.
	for _, k := range []string{"observedGeneration", "readyClusters", "desiredReadyClusters", "summary", "display", "conditions",
		"resources", "resourceCounts", "perClusterResourceCounts", "commit", "webhookCommit", "lastWebhookTime", "pollingCommit", "gitJobStatus"} {
		assert.Contains(t, m, k)
	}
	assert.Equal(t, "c1", m["commit"])
	assert.Equal(t, "c2", m["pollingCommit"])
	assert.Equal(t, "2026-01-02T03:04:05Z", m["lastWebhookTime"])
	assert.Equal(t, "2026-01-02T03:05:05Z", m["lastPollingTriggered"])
	assert.Equal(t, "1/2", m["display"].(map[string]any)["readyBundleDeployments"])
	assert.Equal(t, "Modified", m["summary"].(map[string]any)["nonReadyResources"].([]any)[0].(map[string]any)["bundleState"])
	assert.Equal(t, map[string]any{"desiredReady": 2.0, "missing": 0.0, "modified": 0.0, "notReady": 0.0, "orphaned": 0.0,
		"ready": 2.0, "unknown": 0.0, "waitApplied": 0.0}, m["perClusterResourceCounts"].(map[string]any)["c1"])
}

func TestStamp(t *testing.T) {
	t0, t1 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC)
	prev := Stamp([]Condition{{Type: "Ready", Status: "False", Reason: "NotReady", Message: "a"},
		{Type: "Stalled", Status: "False"}}, nil, t0)
	got := Stamp([]Condition{{Type: "Ready", Status: "False", Reason: "NotReady", Message: "b"},
		{Type: "Stalled", Status: "False"}, {Type: "Accepted", Status: "True"}}, prev, t1)
	assert.Equal(t, []Condition{
		// Same status, new message: only lastUpdateTime moves.
		{Type: "Ready", Status: "False", Reason: "NotReady", Message: "b", LastUpdateTime: "2026-01-01T00:01:00Z", LastTransitionTime: "2026-01-01T00:00:00Z"},
		// Unchanged: both kept, so an unchanged status is not written again.
		{Type: "Stalled", Status: "False", LastUpdateTime: "2026-01-01T00:00:00Z", LastTransitionTime: "2026-01-01T00:00:00Z"},
		{Type: "Accepted", Status: "True", LastUpdateTime: "2026-01-01T00:01:00Z", LastTransitionTime: "2026-01-01T00:01:00Z"},
	}, got)
	flipped := Stamp([]Condition{{Type: "Stalled", Status: "True", Reason: "Error"}}, got, t1.Add(time.Minute))
	assert.Equal(t, "2026-01-01T00:02:00Z", flipped[0].LastTransitionTime)
}

// TestProjectGitRepo_GitPolling: Fleet's GitPolling condition reaches the
// GitRepo's status: True while checks succeed, False naming the host and
// the time while the Git host asked to wait.
func TestProjectGitRepo_GitPolling(t *testing.T) {
	got := ProjectGitRepo(GitRepoInput{Status: gitRepo(nil, dep("demo-a", "c1", status.Ready)), Generation: 3, SpecGeneration: 3})
	assert.Equal(t, Condition{Type: "GitPolling", Status: "True", ObservedGeneration: 3}, cond(got, "GitPolling"))

	at := time.Date(2026, 11, 30, 2, 0, 0, 0, time.UTC)
	st := gitRepo(func(g *status.GitRepo) { g.NextCheck, g.NextCheckReason = &at, "git.example: 429 Too Many Requests" },
		dep("demo-a", "c1", status.Ready))
	got = ProjectGitRepo(GitRepoInput{Status: st, Generation: 3, SpecGeneration: 3})
	assert.Equal(t, Condition{Type: "GitPolling", Status: "False", Reason: "RateLimited", ObservedGeneration: 3,
		Message: "next check at 2026-11-30T02:00:00Z: git.example: 429 Too Many Requests"}, cond(got, "GitPolling"))
	assert.Equal(t, "True", cond(got, "Ready").Status, "a wait for the Git host leaves what is deployed Ready")
}
