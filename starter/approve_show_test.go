package main

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/output"
	"github.com/flotilla-gitops/flotilla/internal/plan"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
)

// sampleApprovalPlans: web/prod planned, db/prod still planning, api/p2
// failed, old/p1 from a rollout before plans.
func sampleApprovalPlans() plan.ApprovalPlans {
	res := plan.Result{GitRepo: "fleet-default/app", Commit: "0123456789abcdef0123", Source: "approval of web/prod",
		Clusters: []plan.Cluster{{Name: "prod-1", Releases: []plan.Release{{Bundle: "web", Release: "web", Namespace: "apps",
			Action: plan.Upgrade, From: "s-1", To: "s-2", Objects: []plan.Object{{Kind: "ConfigMap", Namespace: "apps",
				Name: "web", Change: plan.Update, Diff: "-  color: blue\n+  color: red\n"}}}}}}}
	return plan.ApprovalPlans{Rollout: "rollout/fleet-default/app/0123456789ab-1", Commit: res.Commit,
		Partitions: []plan.PartitionPlan{
			{Bundle: "web", Partition: "prod", Clusters: []string{"prod-1"}, State: plan.StatePlanned, Summary: res.Summary(), Plan: &res},
			{Bundle: "db", Partition: "prod", Clusters: []string{"prod-1", "prod-2"}, State: plan.StatePlanning,
				Workflow: "plan/fleet-default/app/x-db-prod", Summary: "planning…"},
			{Bundle: "api", Partition: "p2", Clusters: []string{"c2"}, State: plan.StateFailed, Error: "GitRepo fleet-default/app not found"},
			{Bundle: "old", Partition: "p1", State: plan.StateNone},
		}}
}

func TestPrintApprovalPlans_Table(t *testing.T) {
	var buf, planned bytes.Buffer
	plans := sampleApprovalPlans()
	require.NoError(t, printApprovalPlans(&buf, output.Table, "app", plans))
	// The plan is printed as flotilla plan prints it.
	require.NoError(t, printPlan(&planned, output.Table, *plans.Partitions[0].Plan))
	require.Contains(t, planned.String(), "+  color: red")
	want := `rollout rollout/fleet-default/app/0123456789ab-1: bundle web partition prod waits for approval (1 cluster(s): prod-1)
` + planned.String() + `approve: flotilla approve app --bundle web --partition prod

rollout rollout/fleet-default/app/0123456789ab-1: bundle db partition prod waits for approval (2 cluster(s): prod-1, prod-2)
plan: being made (workflow plan/fleet-default/app/x-db-prod); ask again shortly
approve: flotilla approve app --bundle db --partition prod

rollout rollout/fleet-default/app/0123456789ab-1: bundle api partition p2 waits for approval (1 cluster(s): c2)
plan failed: GitRepo fleet-default/app not found (approving still works)
approve: flotilla approve app --bundle api --partition p2

rollout rollout/fleet-default/app/0123456789ab-1: bundle old partition p1 waits for approval
plan: none (the rollout started before approvals were planned)
approve: flotilla approve app --bundle old --partition p1
`
	assert.Equal(t, want, buf.String())

	buf.Reset()
	require.NoError(t, printApprovalPlans(&buf, output.Table, "app", plan.ApprovalPlans{Rollout: "rollout/x"}))
	assert.Equal(t, "rollout rollout/x: no partition is waiting for approval\n", buf.String())
}

func TestPrintApprovalPlans_JSONAndFilter(t *testing.T) {
	plans := sampleApprovalPlans()
	plans.Partitions = filterPlans(plans.Partitions, "", "prod")
	var buf bytes.Buffer
	require.NoError(t, printApprovalPlans(&buf, output.JSON, "app", plans))
	var got plan.ApprovalPlans
	require.NoError(t, json.Unmarshal(buf.Bytes(), &got))
	require.Len(t, got.Partitions, 2, "--partition prod keeps both bundles' prod")
	assert.Equal(t, "web", got.Partitions[0].Bundle)
	require.NotNil(t, got.Partitions[0].Plan)
	assert.Equal(t, "-  color: blue\n+  color: red\n", got.Partitions[0].Plan.Clusters[0].Releases[0].Objects[0].Diff)

	assert.Equal(t, []string{"db"}, bundlesOf(filterPlans(sampleApprovalPlans().Partitions, "db", "")))
	assert.Empty(t, filterPlans(sampleApprovalPlans().Partitions, "web", "p2"))
}

func bundlesOf(plans []plan.PartitionPlan) []string {
	var out []string
	for _, pp := range plans {
		out = append(out, pp.Bundle)
	}
	return out
}

func TestApprovedBy(t *testing.T) {
	assert.Equal(t, " by alice@laptop (cert CN=alice)",
		approvedBy(protocol.ApproveResult{By: protocol.Identity{User: "alice@laptop", Subject: "CN=alice", Via: "cli"}}))
	assert.Empty(t, approvedBy(protocol.ApproveResult{}), "a worker that records nobody: nothing claimed")
}
