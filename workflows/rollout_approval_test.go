package workflows

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/flotilla-gitops/flotilla/activities"
	"github.com/flotilla-gitops/flotilla/internal/notify"
	"github.com/flotilla-gitops/flotilla/internal/plan"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

// registerPlan registers fn (nil: a plan of nothing) as the PlanWorkflow
// a rollout starts for a partition waiting for approval, and accepts the
// events emitted to any namespace's notifications.
func registerPlan(env *testsuite.TestWorkflowEnvironment, fn func(workflow.Context, plan.Request) (plan.Result, error)) {
	if fn == nil {
		fn = func(workflow.Context, plan.Request) (plan.Result, error) { return plan.Result{}, nil }
	}
	env.RegisterWorkflowWithOptions(fn, workflow.RegisterOptions{Name: plan.WorkflowName})
	// The notifications workflows take the events.
	env.OnSignalExternalWorkflow(mock.Anything, mock.MatchedBy(func(id string) bool { return strings.HasPrefix(id, notify.WorkflowIDPrefix) }),
		mock.Anything, notify.SignalEvent, mock.Anything).Return(nil)
}

// planRecorder is a PlanWorkflow that takes took (workflow time) and
// plans an upgrade of bundle "app" on every requested cluster, or fails
// with fail; it records the requests.
type planRecorder struct {
	took time.Duration
	fail error
	mu   sync.Mutex
	reqs []plan.Request
}

func (p *planRecorder) run(ctx workflow.Context, req plan.Request) (plan.Result, error) {
	p.mu.Lock()
	p.reqs = append(p.reqs, req)
	p.mu.Unlock()
	if err := workflow.Sleep(ctx, p.took); err != nil {
		return plan.Result{}, err
	}
	if p.fail != nil {
		return plan.Result{}, p.fail
	}
	res := plan.Result{GitRepo: req.Namespace + "/" + req.Name, Commit: req.Commit, Source: req.Source}
	for _, c := range req.Clusters {
		res.Clusters = append(res.Clusters, plan.Cluster{Name: c, Releases: []plan.Release{{Bundle: "app",
			Release: "app", Namespace: "default", Action: plan.Upgrade, From: "m:o0", To: "m:o1",
			Objects: []plan.Object{{APIVersion: "v1", Kind: "ConfigMap", Namespace: "default", Name: "app",
				Change: plan.Update, Diff: "-  color: blue\n+  color: green\n"}}}}})
	}
	return res, nil
}

func (p *planRecorder) requests() []plan.Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]plan.Request(nil), p.reqs...)
}

// queryPlans asks the rollout for its approval plans.
func (r *stratRig) queryPlans() plan.ApprovalPlans {
	r.t.Helper()
	v, err := r.env.QueryWorkflow(protocol.QueryPlan)
	require.NoError(r.t, err)
	var out plan.ApprovalPlans
	require.NoError(r.t, v.Get(&out))
	return out
}

// onlyPlan returns the plan of the one partition waiting for approval.
func (r *stratRig) onlyPlan() plan.PartitionPlan {
	r.t.Helper()
	plans := r.queryPlans()
	require.Len(r.t, plans.Partitions, 1)
	return plans.Partitions[0]
}

// approveAs sends the approve update for partition as who; done gets the
// answer.
func (r *stratRig) approveAs(partition string, who protocol.Identity, done func(protocol.ApproveResult)) {
	r.env.UpdateWorkflow(protocol.UpdateApprove, "approve-"+partition, &testsuite.TestUpdateCallback{
		OnReject: func(err error) { r.t.Errorf("approval rejected: %v", err) },
		OnAccept: func() {},
		OnComplete: func(v any, err error) {
			assert.NoError(r.t, err)
			if res, ok := v.(protocol.ApproveResult); ok {
				done(res)
			}
		},
	}, protocol.Approve{Partition: partition, Identity: who})
}

// approvalWait returns the approval wait of partition p2.
func approvalWait(t *testing.T, st status.Rollout) status.Wait {
	t.Helper()
	ws := waitsOf(st.Waits, status.WaitApproval)
	require.Len(t, ws, 1, "waits: %+v", st.Waits)
	return ws[0]
}

// A partition waiting for approval gets the plan of its clusters: the
// wait shows its summary (planning… until it ends), the plan query
// answers the whole plan, ApprovalWaiting is emitted once, and the
// approval records who approved and when.
func TestApprovalPlan_WaitShowsPlanAndApproverIsRecorded(t *testing.T) {
	r := newRig(t, nClusters(3), bundleAt("app", "m:o1"))
	r.strategies = []activities.BundleStrategy{{Bundle: "app", Plan: twoPartitions(true)}}
	planner := &planRecorder{took: time.Minute}
	r.planWorkflow = planner.run
	r.register()
	r.env.SetStartWorkflowOptions(client.StartWorkflowOptions{
		ID: protocol.RolloutID("ns", "app", "c0ffee0000000000000000000000000000000001", 1)})
	alice := protocol.Identity{User: "alice@laptop", Subject: "CN=alice"}
	var answered protocol.ApproveResult
	// p2 waits once p1 (c1) is deployed, at 10 s; its plan ends at 70 s.
	r.at(45*time.Second, func() {
		assert.Equal(t, "planning…", approvalWait(t, r.query()).Plan)
		pp := r.onlyPlan()
		assert.Equal(t, plan.StatePlanning, pp.State)
		assert.Equal(t, []string{"c2", "c3"}, pp.Clusters)
		assert.Regexp(t, `^plan/ns/app/c0ffee000000-1-.+-app-p2$`, pp.Workflow)
		assert.Nil(t, pp.Plan)
	})
	r.at(2*time.Minute, func() {
		assert.Equal(t, "2 upgrade on 2 cluster(s)", approvalWait(t, r.query()).Plan)
		pp := r.onlyPlan()
		assert.Equal(t, plan.StatePlanned, pp.State)
		require.NotNil(t, pp.Plan)
		assert.Equal(t, "2 upgrade on 2 cluster(s)", pp.Summary)
		assert.Contains(t, pp.Plan.Clusters[0].Releases[0].Objects[0].Diff, "+  color: green")
		assert.Equal(t, "c0ffee0000000000000000000000000000000001", r.queryPlans().Commit)
		r.approveAs("p2", alice, func(res protocol.ApproveResult) { answered = res })
	})
	r.at(3*time.Minute, func() {
		assert.Empty(t, r.queryPlans().Partitions, "nothing waits once approved")
	})
	res := r.run()

	assert.Equal(t, []string{"app/p2"}, answered.Approved)
	assert.Equal(t, alice, answered.By, "the answer says who was recorded")
	require.Len(t, res.Approvals, 1)
	assert.Equal(t, alice, res.Approvals[0].By)
	assert.Equal(t, stratT0.Add(2*time.Minute), res.Approvals[0].At)
	reqs := planner.requests()
	require.Len(t, reqs, 1, "one plan per waiting partition")
	assert.Equal(t, plan.Request{Namespace: "ns", Name: "app", Commit: "c0ffee0000000000000000000000000000000001",
		Clusters: []string{"c2", "c3"}, Source: "approval of app/p2"}, reqs[0])
	assert.Equal(t, 1, r.signals.count(notify.SignalEvent), "ApprovalWaiting is emitted once")
	assert.Equal(t, map[string]time.Duration{"c1": 0, "c2": 2 * time.Minute, "c3": 2 * time.Minute}, r.deployStarts("app"))
}

// Approving does not wait for the plan, and a plan that fails is shown
// as failed without holding the rollout back.
func TestApprovalPlan_NeverBlocks(t *testing.T) {
	tests := []struct {
		name    string
		planner *planRecorder
		// wantPlan is the wait's plan summary just before the approval.
		wantPlan  string
		wantState string
	}{
		{name: "approved before the plan ends", planner: &planRecorder{took: time.Hour},
			wantPlan: "planning…", wantState: plan.StatePlanning},
		{name: "plan fails", planner: &planRecorder{took: 5 * time.Second,
			fail: temporal.NewNonRetryableApplicationError("GitRepo ns/app not found", "NotFound", errors.New("gone"))},
			wantPlan: "plan failed: GitRepo ns/app not found", wantState: plan.StateFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, nClusters(3), bundleAt("app", "m:o1"))
			r.strategies = []activities.BundleStrategy{{Bundle: "app", Plan: twoPartitions(true)}}
			r.planWorkflow = tt.planner.run
			r.register()
			var answered protocol.ApproveResult
			r.at(time.Minute, func() {
				assert.Equal(t, tt.wantPlan, approvalWait(t, r.query()).Plan)
				assert.Equal(t, tt.wantState, r.onlyPlan().State)
				r.approveAs("p2", protocol.Identity{User: "bob@ci"}, func(res protocol.ApproveResult) { answered = res })
			})
			res := r.run()
			assert.Equal(t, []string{"app/p2"}, answered.Approved)
			assert.Equal(t, map[string]time.Duration{"c1": 0, "c2": time.Minute, "c3": time.Minute}, r.deployStarts("app"))
			assert.Equal(t, allStates(nClusters(3), status.Ready), statesOf(res.Deployments, "app"))
			require.Len(t, res.Approvals, 1)
			assert.Equal(t, "bob@ci", res.Approvals[0].By.User)
		})
	}
}

// The Temporal UI's details list, per waiting partition, the plan's
// summary and each cluster's release actions.
func TestApprovalDetails(t *testing.T) {
	res := plan.Result{Clusters: []plan.Cluster{
		{Name: "c2", Releases: []plan.Release{{Bundle: "app", Release: "app", Namespace: "default", Action: plan.Upgrade},
			{Bundle: "db", Release: "db", Namespace: "db", Action: plan.Install}}},
		{Name: "c3", Offline: true, Reason: "agent offline", Releases: []plan.Release{{Bundle: "app", Release: "app",
			Namespace: "default", Action: plan.Unchanged}}},
		{Name: "c4", Error: "cluster c4: unauthorized"},
	}}
	r := &rolloutRun{st: status.Rollout{Waits: []status.Wait{{Bundle: "app", Kind: status.WaitApproval, Partition: "p2"},
		{Bundle: "web", Kind: status.WaitApproval, Partition: "prod"}, {Bundle: "x", Kind: status.WaitWindow}}},
		plans: approvalPlans{byKey: map[string]*plan.PartitionPlan{
			"app/p2":   {Bundle: "app", Partition: "p2", State: plan.StatePlanned, Plan: &res, Summary: res.Summary()},
			"web/prod": {Bundle: "web", Partition: "prod", State: plan.StatePlanning, Summary: "planning…"},
			"old/p1":   {Bundle: "old", Partition: "p1", State: plan.StatePlanned, Summary: "approved already"},
		}}}
	assert.Equal(t, "\n\n**Waiting for approval: app/p2**: 1 install, 1 upgrade, 1 unchanged, 1 failed to plan on 3 cluster(s) (offline: c3)\n"+
		"- c2: upgrade app (default/app), install db (db/db)\n"+
		"- c3 (offline): unchanged app (default/app)\n"+
		"- c4: not planned: cluster c4: unauthorized\n"+
		"\n\n**Waiting for approval: web/prod**: planning…\n", r.approvalDetails())
	assert.Empty(t, (&rolloutRun{st: status.Rollout{Waits: []status.Wait{{Bundle: "app", Kind: status.WaitApproval}}}}).approvalDetails(),
		"a rollout from before plans shows no plan")
}
