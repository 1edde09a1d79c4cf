package main

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-gitops/flotilla/internal/output"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

const renderErr = `bundle app: cluster c2: template: fleet.yaml:3: map has no entry for key "region"`

// shop is a GitRepo as its workflow reports it: two clusters and two
// bundles, app failing to render on c2 and db not ready there, the db
// rollout halted and its next partition waiting for approval.
func shop() status.GitRepo {
	return status.GitRepo{Namespace: "fleet-default", Name: "shop", Repo: "https://git.example/shop.git", Branch: "main",
		Commit: "0123456789abcdef", LatestCommit: "0123456789abcdef", Rollout: "rollout/fleet-default/shop/0123456789ab-1",
		Deployments: []status.Deployment{
			{Bundle: "db", Cluster: "c2", Namespace: "db", Release: "db", DeploymentID: "s-d:2", AppliedDeploymentID: "s-d:2",
				State: status.NotReady, Message: "cluster c2: StatefulSet db/db: 0/1 replicas ready", Resources: 3, ReadyResources: 1,
				NotReadyResources: 1, Missing: 1},
			{Bundle: "app", Cluster: "c2", Namespace: "app", Release: "app", State: status.ErrApplied, Message: renderErr},
			{Bundle: "app", Cluster: "c1", Namespace: "app", Release: "app", DeploymentID: "s-a:1", AppliedDeploymentID: "s-a:1",
				State: status.Ready, Resources: 2, ReadyResources: 2},
			{Bundle: "db", Cluster: "c1", Namespace: "db", Release: "db", DeploymentID: "s-d:2", AppliedDeploymentID: "s-d:2",
				State: status.Ready, Resources: 3, ReadyResources: 3},
		},
		Waits: []status.Wait{
			{Bundle: "db", Kind: status.WaitApproval, Partition: "prod", Clusters: []string{"c3", "c4"},
				Message: "partition prod (c3, c4) waits for approval"},
			{Bundle: "app", Kind: status.WaitWindow, Partition: "prod", Clusters: []string{"c3"}, Until: "2026-09-01T09:00:00Z"},
		},
		Partitions: []status.PartitionStatus{
			{Bundle: "db", Name: "canary", Index: 0, Clusters: 2, Unavailable: 1, MaxUnavailable: 1, Phase: status.PartitionDone},
			{Bundle: "db", Name: "prod", Index: 1, Clusters: 2, Phase: status.PartitionWaitingForApproval},
		},
		Halts: []status.Halt{{Bundle: "db", Failed: []string{"c2"}, Threshold: 0, Message: "1 cluster failed, none allowed",
			RolledBack: []string{"c2"}}},
		Progress: "1/2 clusters ready, partition 2/2 (prod) waiting for approval",
	}
}

func TestPrintStatus_Table(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, printStatus(&buf, output.Table, shop()))
	out := buf.String()
	t.Log("\n" + out)

	for _, want := range []string{
		"Commit:   0123456789ab\n",
		"State:    Halted  2/4 bundle deployments ready, 1/2 clusters ready, 6/8 resources ready\n",
		"Progress: 1/2 clusters ready, partition 2/2 (prod) waiting for approval\n",
		"Rollout:  rollout/fleet-default/shop/0123456789ab-1 (running)\n",
		"Message:  ErrApplied(1) [" + renderErr + "]; NotReady(1) [cluster c2: StatefulSet db/db: 0/1 replicas ready]\n",
		"Conditions:\n  Ready=False (ErrApplied)\n  Stalled=True (RolloutHalted): rollout halted for bundle db\n" +
			"  RolloutHalted=True (FailureThreshold)\n" +
			"  WaitingForApproval=True (ApprovalRequired): bundle db partition prod waits for approval; run: flotilla approve shop --partition prod\n",
		"Waits:\n  bundle app partition prod, Window: c3 (until 2026-09-01T09:00:00Z)\n" +
			"  bundle db partition prod, Approval: partition prod (c3, c4) waits for approval\n",
		"Halts:\n  bundle db halted: 1 cluster failed, none allowed; failed: c2; rolled back: c2\n",
	} {
		assert.Contains(t, out, want)
	}
	assert.NotContains(t, out, "Accepted", "healthy conditions are left out")
	conditions := out[strings.Index(out, "Conditions:"):strings.Index(out, "Waits:")]
	assert.NotContains(t, conditions, "map has no entry", "the Ready condition's message is the Message line; not repeated")

	// The bundle table: state, clusters ready, resources, non-zero counts.
	assert.Regexp(t, `BUNDLE +STATE +CLUSTERS-READY +RESOURCES-READY +DEPLOYMENTS\n`+
		`app +ErrApplied +1/2 +2/2 +ErrApplied\(1\) Ready\(1\)\n`+
		`db +NotReady +1/2 +4/6 +NotReady\(1\) Ready\(1\)\n`, out)
	// The deployments, sorted by bundle and cluster.
	assert.Regexp(t, `BUNDLE +CLUSTER +STATE +RESOURCES +RELEASE +MESSAGE\n`+
		`app +c1 +Ready +2/2 +app/app +\n`+
		`app +c2 +ErrApplied +0/0 +app/app +`+regexp.QuoteMeta(renderErr)+`\n`+
		`db +c1 +Ready +3/3 +db/db +\n`+
		`db +c2 +NotReady +1/3 +db/db +cluster c2: StatefulSet db/db: 0/1 replicas ready\n`, out)
}

func TestPrintStatus_ReadyIsQuiet(t *testing.T) {
	st := status.GitRepo{Namespace: "fleet-default", Name: "demo", Repo: "https://git.example/demo.git", Commit: "abc",
		LastRollout: "rollout/fleet-default/demo/abc-1", Settled: true, Deployments: []status.Deployment{
			{Bundle: "web", Cluster: "c1", Namespace: "web", Release: "web", State: status.Ready, Resources: 2, ReadyResources: 2},
			{Bundle: "web", Cluster: "c2", Namespace: "web", Release: "web", State: status.Ready, Resources: 2, ReadyResources: 2},
		}}
	var buf bytes.Buffer
	require.NoError(t, printStatus(&buf, output.Table, st))
	out := buf.String()
	assert.Contains(t, out, "State:    Ready  2/2 bundle deployments ready, 2/2 clusters ready, 4/4 resources ready\n")
	assert.Contains(t, out, "Rollout:  rollout/fleet-default/demo/abc-1\n")
	for _, absent := range []string{"Conditions:", "Waits:", "Halts:", "Progress:", "Message:", "Error:"} {
		assert.NotContains(t, out, absent)
	}
	assert.Regexp(t, `web +Ready +2/2 +4/4 +Ready\(2\)\n`, out)
}

func TestPrintStatus_ErrorIsNotRepeated(t *testing.T) {
	st := status.GitRepo{Namespace: "fleet-default", Name: "demo", Commit: "abc", Error: `fleet.yaml: unknown field "helmm"`}
	var buf bytes.Buffer
	require.NoError(t, printStatus(&buf, output.Table, st))
	out := buf.String()
	assert.Contains(t, out, "State:    Error  0/0 bundle deployments ready")
	assert.Contains(t, out, "Conditions:\n  Ready=False (Error)\n  Accepted=False (Error)\n  Stalled=True (Error)\n")
	assert.Equal(t, 1, strings.Count(out, "helmm"), "the error shows once, on the Error line")
}

func TestPrintStatus_JSONAndYAMLCarryTheDerivedFields(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, printStatus(&buf, output.JSON, shop()))
	var got status.GitRepo
	require.NoError(t, json.Unmarshal(buf.Bytes(), &got))
	want := shop()
	want.Finish()
	assert.Equal(t, want, got)
	assert.Equal(t, "1/2", got.Display.ReadyClusters)
	assert.Len(t, got.Conditions, 7)

	buf.Reset()
	require.NoError(t, printStatus(&buf, output.YAML, shop()))
	var fromYAML status.GitRepo
	require.NoError(t, yaml.Unmarshal(buf.Bytes(), &fromYAML))
	assert.Equal(t, want, fromYAML)
	assert.Contains(t, buf.String(), "readyClusters: 1/2")
	assert.Contains(t, buf.String(), "perClusterResourceCounts:")
}

func TestGitRepoRows(t *testing.T) {
	a, b, c := shop(), shop(), status.GitRepo{Namespace: "fleet-default", Name: "empty", Repo: "https://git.example/e.git"}
	b.Name, b.Halts, b.Deployments = "shop-ok", nil, b.Deployments[2:]
	for _, r := range []*status.GitRepo{&a, &b, &c} {
		r.Finish()
	}
	var buf bytes.Buffer
	require.NoError(t, output.Print(&buf, output.Table, nil, gitRepoRows([]status.GitRepo{a, b, c})))
	assert.Regexp(t, `NAMESPACE +NAME +REPO +COMMIT +BUNDLEDEPLOYMENTS-READY +BUNDLES-READY +CLUSTERS-READY +STATE\n`+
		`fleet-default +shop +https://git.example/shop.git +0123456789ab +2/4 +0/2 +1/2 +Halted\n`+
		`fleet-default +shop-ok +https://git.example/shop.git +0123456789ab +2/2 +2/2 +1/1 +Ready\n`+
		`fleet-default +empty +https://git.example/e.git +0/0 +0/0 +0/0 +Pending\n`, buf.String())
}

func TestPrintStatus_PollingAndWebhook(t *testing.T) {
	at := time.Date(2026, 11, 22, 12, 30, 0, 0, time.UTC)
	st := status.GitRepo{Namespace: "fleet-default", Name: "demo", Repo: "https://git.example/demo.git", Commit: "abc",
		PollingInterval: "5m0s", PollFailures: 4, WebhookCommit: "0123456789abcdef0123", LastWebhookTime: &at}
	var buf bytes.Buffer
	require.NoError(t, printStatus(&buf, output.Table, st))
	assert.Contains(t, buf.String(), "Polling:  every 5m0s (backing off: 4 failed checks in a row)\n")
	assert.Contains(t, buf.String(), "Webhook:  0123456789ab at 2026-11-22T12:30:00Z\n")

	buf.Reset()
	st.PollingInterval, st.PollFailures = "", 0
	require.NoError(t, printStatus(&buf, output.Table, st))
	assert.NotContains(t, buf.String(), "Polling:")
}

// TestPrintStatus_GitSourceLines: a Git host's request to wait, a commit
// taken without a render (no change under paths), a verified signature
// and a rejected commit each get their line.
func TestPrintStatus_GitSourceLines(t *testing.T) {
	at := time.Date(2026, 11, 30, 2, 0, 0, 0, time.UTC)
	st := status.GitRepo{Namespace: "fleet-default", Name: "demo", Repo: "ssh://git@git.example/demo.git",
		Commit: "1111111111111111111111111111111111111111", LatestCommit: "1111111111111111111111111111111111111111",
		RenderedCommit: "2222222222222222222222222222222222222222",
		NextCheck:      &at, NextCheckReason: "git.example: 429 Too Many Requests, Retry-After 60s",
		Verified: "ssh-ed25519 SHA256:abc (release@example)",
		Rejected: &status.RejectedCommit{Commit: "3333333333333333333333333333333333333333", Reason: "unsigned"}}
	var buf bytes.Buffer
	require.NoError(t, printStatus(&buf, output.Table, st))
	out := buf.String()
	assert.Contains(t, out, "Commit:   111111111111 (no change under paths since 222222222222: not rendered again)\n")
	assert.Contains(t, out, "Waiting:  next check at 2026-11-30T02:00:00Z (git.example: 429 Too Many Requests, Retry-After 60s)\n")
	assert.Contains(t, out, "Signed:   111111111111 verified (ssh-ed25519 SHA256:abc (release@example))\n")
	assert.Contains(t, out, "Rejected: commit 3333333333333333333333333333333333333333 not deployed: unsigned\n")

	buf.Reset()
	st.RenderedCommit, st.NextCheck, st.Verified, st.Rejected = st.Commit, nil, "", nil
	require.NoError(t, printStatus(&buf, output.Table, st))
	for _, line := range []string{"no change under paths", "Waiting:", "Signed:", "Rejected:"} {
		assert.NotContains(t, buf.String(), line)
	}
}
