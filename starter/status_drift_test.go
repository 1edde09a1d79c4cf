package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/output"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

// driftedRepo is a settled GitRepo whose app bundle drifted on c2 (more
// objects than listed, corrected twice) and db on c1, with a conflict.
func driftedRepo() status.GitRepo {
	return status.GitRepo{Namespace: "fleet-default", Name: "shop", Repo: "https://git.example/shop.git", Commit: "abc",
		Settled: true, Deployments: []status.Deployment{
			{Bundle: "db", Cluster: "c1", Namespace: "db", Release: "db", DeploymentID: "s-d:1", AppliedDeploymentID: "s-d:1",
				State: status.Modified, Resources: 2, ReadyResources: 1, Modified: 1,
				ModifiedStatus: []status.ModifiedStatus{roleFought}},
			{Bundle: "app", Cluster: "c2", Namespace: "app", Release: "app", DeploymentID: "s-a:1", AppliedDeploymentID: "s-a:1",
				State: status.Modified, Resources: 4, ReadyResources: 1, Modified: 1, Missing: 1, Orphaned: 1, Corrections: 2,
				ModifiedStatus: []status.ModifiedStatus{cfgModified, webMissing, oldOrphan}, Incomplete: true},
			{Bundle: "app", Cluster: "c1", Namespace: "app", Release: "app", DeploymentID: "s-a:1", AppliedDeploymentID: "s-a:1",
				State: status.Ready, Resources: 4, ReadyResources: 4},
		}}
}

func TestPrintStatus_Drift(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, printStatus(&buf, output.Table, driftedRepo()))
	out := buf.String()
	t.Log("\n" + out)

	want := `
Drift: 2 modified, 1 missing, 1 orphaned resources
  bundle app on cluster c2 (release app/app): 1 modified, 1 missing, 1 orphaned, 2 corrections
    ConfigMap app/cfg: modified {"data":{"color":"blue","size":null}}
    Deployment app/web: missing
    Secret app/old: orphaned
    ... (more)
  bundle db on cluster c1 (release db/db): 1 modified
    ClusterRole reader: modified {"rules":[{"verbs":["get"]}]} (conflict: kubectl-edit changes .rules)

`
	assert.True(t, strings.HasSuffix(out, want), "the Drift section closes the output")
	deployments := strings.Index(out, "BUNDLE   CLUSTER")
	require.GreaterOrEqual(t, deployments, 0)
	assert.Less(t, deployments, strings.Index(out, "Drift:"), "Drift comes after the deployments table")

	// The table columns are unchanged.
	assert.Regexp(t, `BUNDLE +CLUSTER +STATE +RESOURCES +RELEASE +MESSAGE\n`+`app +c1 +Ready +4/4 +app/app +\n`, out)
}

func TestPrintStatus_NoDriftNoSection(t *testing.T) {
	st := driftedRepo()
	for i := range st.Deployments {
		st.Deployments[i].ModifiedStatus, st.Deployments[i].Incomplete = nil, false
	}
	var buf bytes.Buffer
	require.NoError(t, printStatus(&buf, output.Table, st))
	assert.NotContains(t, buf.String(), "Drift")
}

func TestPrintStatus_DriftCountsWithoutList(t *testing.T) {
	tests := []struct {
		name string
		dep  status.Deployment
		want string
	}{
		{"incomplete with nothing counted", status.Deployment{Bundle: "a", Cluster: "c", Namespace: "n", Release: "r",
			Incomplete: true}, "  bundle a on cluster c (release n/r): 0 listed\n    ... (more)\n"},
		{"orphans only", status.Deployment{Bundle: "a", Cluster: "c", Namespace: "n", Release: "r", Orphaned: 3,
			ModifiedStatus: []status.ModifiedStatus{oldOrphan}}, "  bundle a on cluster c (release n/r): 3 orphaned\n" +
			"    Secret app/old: orphaned\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			printDrift(&buf, status.GitRepo{Deployments: []status.Deployment{tt.dep}})
			assert.Contains(t, buf.String(), tt.want)
		})
	}
}

func TestPrintStatus_DriftJSONUnchanged(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, printStatus(&buf, output.JSON, driftedRepo()))
	assert.NotContains(t, buf.String(), "Drift:")
	var got status.GitRepo
	require.NoError(t, json.Unmarshal(buf.Bytes(), &got))
	want := driftedRepo()
	want.Finish()
	assert.Equal(t, want, got)
	assert.Equal(t, 2, got.ResourceCounts.Modified)
	assert.Equal(t, 1, got.ResourceCounts.Orphaned)
}
