package workflows

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/flotilla-gitops/flotilla/activities"
	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/plan"
	"github.com/flotilla-gitops/flotilla/internal/rollout"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

func TestPlanWorks(t *testing.T) {
	web := activities.Bundle{Name: "app-web", Release: "web", Namespace: "apps", DeploymentID: "m2:o"}
	targets := activities.TargetsResult{
		Registered: []string{"c1", "c2", "c3", "c4"}, Agents: []string{"c3"},
		Matched: []activities.TargetCluster{
			{Name: "c1", Bundles: []activities.Bundle{web}},
			{Name: "c2", Bundles: []activities.Bundle{web}},
			{Name: "c3", Bundles: []activities.Bundle{web}, Agent: true},
		},
		Errors: []status.Deployment{{Bundle: "app-db", Cluster: "c2", Release: "db", Namespace: "apps", Message: "template: bad"}},
	}
	inv := []rollout.InventoryEntry{
		{Bundle: "app-web", Cluster: "c1", Release: "web", Namespace: "apps", DeploymentID: "m1:o"},
		// app-old is gone from Git: uninstalled on c1, kept on c3 (keepResources).
		{Bundle: "app-old", Cluster: "c1", Release: "old", Namespace: "apps", DeploymentID: "x"},
		{Bundle: "app-old", Cluster: "c3", Release: "old", Namespace: "apps", DeploymentID: "x", KeepResources: true},
		// c4 is no longer targeted: its release goes.
		{Bundle: "app-web", Cluster: "c4", Release: "web", Namespace: "apps", DeploymentID: "m1:o"},
		// app-db failed to compute on c2: it keeps what it runs.
		{Bundle: "app-db", Cluster: "c2", Release: "db", Namespace: "apps", DeploymentID: "d"},
	}
	tests := []struct {
		name string
		only []string
		// want: per cluster, its bundles, removals and failed releases.
		want map[string][3][]string
		// agents are the clusters planned on their agent's queue.
		agents []string
	}{
		{"all", nil, map[string][3][]string{
			"c1": {{"app-web"}, {"app-old"}, nil},
			"c2": {{"app-web"}, nil, {"app-db"}},
			"c3": {{"app-web"}, nil, nil},
			"c4": {{}, {"app-web"}, nil},
		}, []string{"c3"}},
		{"restricted", []string{"c2", "c4"}, map[string][3][]string{
			"c2": {{"app-web"}, nil, {"app-db"}},
			"c4": {{}, {"app-web"}, nil},
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			works, _ := planWorks(targets, inv, tt.only, "app")
			got := map[string][3][]string{}
			var agents, order []string
			for _, w := range works {
				var g [3][]string
				g[0] = []string{}
				for _, b := range w.cluster.Bundles {
					g[0] = append(g[0], b.Name)
				}
				for _, r := range w.cluster.Remove {
					g[1] = append(g[1], r.Bundle)
				}
				for _, r := range w.failed {
					g[2] = append(g[2], r.Bundle)
					assert.Equal(t, "template: bad", r.Error)
				}
				got[w.cluster.Cluster] = g
				order = append(order, w.cluster.Cluster)
				if w.agent {
					agents = append(agents, w.cluster.Cluster)
				}
			}
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.agents, agents)
			assert.IsNonDecreasing(t, order)
		})
	}
}

// fakePlanFleet answers a PlanWorkflow's activities: clusters c1 and c2
// (c2 unreachable), the GitRepo at base with app-web on both.
type fakePlanFleet struct {
	mu       sync.Mutex
	renders  []string // commits rendered
	offline  []activities.PlanOfflineInput
	planned  []activities.PlanInput
	resolved []activities.ResolveInput
}

const (
	planBase = "base000000000000000000000000000000000000"
	planHead = "head000000000000000000000000000000000000"
)

func (f *fakePlanFleet) register(env *testsuite.TestWorkflowEnvironment) {
	var a *activities.Activities
	var ca *activities.ClusterActivities
	env.RegisterWorkflow(PlanWorkflow)
	env.OnActivity(a.ReadPlanBase, mock.Anything, mock.Anything).Return(activities.PlanBase{
		Spec: api.GitRepoSpec{Repo: "https://git.example/app", Branch: "main"}, Commit: planBase, LatestCommit: planBase,
		Inventory: []rollout.InventoryEntry{
			{Bundle: "app-web", Cluster: "c1", Release: "web", Namespace: "apps", DeploymentID: "old"},
			{Bundle: "app-web", Cluster: "c2", Release: "web", Namespace: "apps", DeploymentID: "old"},
		}}, nil)
	env.OnActivity(a.ResolveCommit, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.ResolveInput) (activities.ResolveResult, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.resolved = append(f.resolved, in)
			return activities.ResolveResult{Commit: planHead}, nil
		})
	env.OnActivity(a.Render, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.RenderInput) (activities.RenderResult, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.renders = append(f.renders, in.Commit)
			return activities.RenderResult{Bundles: []activities.Bundle{{Name: "app-web", Release: "web", Namespace: "apps",
				DeploymentID: in.Commit[:4]}}}, nil
		})
	env.OnActivity(a.TargetBundles, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.BundleTargetsInput) (activities.TargetsResult, error) {
			return activities.TargetsResult{Registered: []string{"c1", "c2"}, Matched: []activities.TargetCluster{
				{Name: "c1", Bundles: in.Bundles}, {Name: "c2", Bundles: in.Bundles}}}, nil
		})
	env.OnActivity(ca.Plan, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.PlanInput) (plan.Cluster, error) {
			f.mu.Lock()
			f.planned = append(f.planned, in)
			f.mu.Unlock()
			if in.Cluster == "c2" {
				return plan.Cluster{}, temporal.NewNonRetryableApplicationError("dial tcp 127.0.0.1:1: connection refused",
					activities.ErrTypeClusterUnreachable, nil)
			}
			return plan.Cluster{Name: in.Cluster, Releases: []plan.Release{{Bundle: "app-web", Release: "web", Namespace: "apps",
				Action: plan.Upgrade, From: "old", To: in.Bundles[0].DeploymentID,
				Objects: []plan.Object{{Kind: "ConfigMap", Namespace: "apps", Name: "web", Change: plan.Update,
					Diff: strings.Repeat("+ line\n", 5000)}}}}}, nil
		})
	env.OnActivity(a.PlanOffline, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.PlanOfflineInput) (plan.Cluster, error) {
			f.mu.Lock()
			f.offline = append(f.offline, in)
			f.mu.Unlock()
			return plan.Cluster{Name: in.Cluster, Offline: true, Reason: in.Reason, Releases: []plan.Release{{Bundle: "app-web",
				Action: plan.Upgrade, From: in.Current[0].DeploymentID, To: in.Bundles[0].DeploymentID}}}, nil
		})
}

func TestPlanWorkflow_OfflineFallback(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	f := &fakePlanFleet{}
	f.register(env)
	env.ExecuteWorkflow(PlanWorkflow, plan.Request{Namespace: "fleet-default", Name: "app", Branch: "next"})
	require.NoError(t, env.GetWorkflowError())
	var res plan.Result
	require.NoError(t, env.GetWorkflowResult(&res))

	assert.Equal(t, "fleet-default/app", res.GitRepo)
	assert.Equal(t, planHead, res.Commit)
	assert.Equal(t, planBase, res.Base)
	assert.Equal(t, "branch next", res.Source)
	require.Len(t, f.resolved, 1)
	assert.Equal(t, "next", f.resolved[0].Spec.Branch)
	// The head, then (once, for the offline cluster) the base.
	assert.Equal(t, []string{planHead, planBase}, f.renders)
	require.Len(t, res.Clusters, 2)
	c1, c2 := res.Clusters[0], res.Clusters[1]
	assert.False(t, c1.Offline)
	diff := c1.Releases[0].Objects[0].Diff
	assert.LessOrEqual(t, len(diff), maxPlanDiff+64)
	assert.Contains(t, diff, "more lines")
	assert.True(t, c2.Offline)
	assert.Equal(t, "cluster c2 unreachable: dial tcp 127.0.0.1:1: connection refused", c2.Reason)
	require.Len(t, f.offline, 1)
	assert.Equal(t, "base", f.offline[0].Current[0].DeploymentID)
	assert.Equal(t, "base", c2.Releases[0].From)
	assert.Equal(t, "head", c2.Releases[0].To)
	for _, in := range f.planned {
		assert.Equal(t, planHead, in.Commit)
		assert.NotEmpty(t, in.WorkflowID)
	}
}

func TestPlanWorkflow_Commit(t *testing.T) {
	tests := []struct {
		name    string
		commit  string
		want    string
		wantErr string
	}{
		{"full", planHead, planHead, ""},
		{"abbreviation of the current commit", "base0000", planBase, ""},
		{"unknown abbreviation", "abcdef12", "", "give the full 40-hex hash"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s testsuite.WorkflowTestSuite
			env := s.NewTestWorkflowEnvironment()
			f := &fakePlanFleet{}
			f.register(env)
			env.ExecuteWorkflow(PlanWorkflow, plan.Request{Namespace: "fleet-default", Name: "app", Commit: tt.commit, Clusters: []string{"c1"}})
			if tt.wantErr != "" {
				require.Error(t, env.GetWorkflowError())
				assert.Contains(t, env.GetWorkflowError().Error(), tt.wantErr)
				return
			}
			require.NoError(t, env.GetWorkflowError())
			var res plan.Result
			require.NoError(t, env.GetWorkflowResult(&res))
			assert.Equal(t, tt.want, res.Commit)
			assert.Empty(t, f.resolved, "a commit is not resolved")
			require.Len(t, res.Clusters, 1, "restricted to c1")
			assert.Equal(t, "c1", res.Clusters[0].Name)
			assert.Empty(t, f.offline)
		})
	}
}

func TestBoundPlan(t *testing.T) {
	big := strings.Repeat("x", 15<<10) + "\n"
	res := plan.Result{}
	for i := range 100 {
		res.Clusters = append(res.Clusters, plan.Cluster{Name: string(rune('a' + i%26)), Releases: []plan.Release{{
			Objects: []plan.Object{{Kind: "ConfigMap", Name: "x", Diff: big}}}}})
	}
	res.Clusters[7].Releases[0].Objects[0].Diff = "small\n"
	boundPlan(&res)
	assert.LessOrEqual(t, planSize(res), maxPlanSize)
	kept, left := 0, 0
	for _, c := range res.Clusters {
		switch d := c.Releases[0].Objects[0].Diff; {
		case d == big:
			kept++
		case strings.Contains(d, "left out"):
			left++
		}
	}
	assert.Equal(t, "small\n", res.Clusters[7].Releases[0].Objects[0].Diff, "the smallest diff is kept")
	assert.Positive(t, kept, "diffs are left out only until the plan fits")
	assert.Positive(t, left)
	assert.Equal(t, 99, kept+left)
}
