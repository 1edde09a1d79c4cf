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

// `flotilla status` lists the warnings of the last rolled-out commit under
// their own heading; they do not make the GitRepo unhealthy.
func TestPrintStatus_Warnings(t *testing.T) {
	warnings := []string{
		`app/fleet.yaml: unknown field "helm.chrat" (ignored)`,
		"app/cm.yaml: document 2 has no kind; the file is skipped, as Fleet skips it",
	}
	st := status.GitRepo{Namespace: "fleet-default", Name: "demo", Repo: "https://git.example/demo.git", Commit: "abc",
		Settled: true, Warnings: warnings, Deployments: []status.Deployment{
			{Bundle: "app", Cluster: "c1", Namespace: "app", Release: "app", State: status.Ready, Resources: 1, ReadyResources: 1},
		}}
	var buf bytes.Buffer
	require.NoError(t, printStatus(&buf, output.Table, st))
	out := buf.String()
	assert.Contains(t, out, "State:    Ready  1/1 bundle deployments ready")
	assert.Contains(t, out, "Warnings:\n  "+warnings[0]+"\n  "+warnings[1]+"\n")
	assert.NotContains(t, out, "Conditions:", "warnings leave every condition healthy")
	assert.Equal(t, 1, strings.Count(out, "helm.chrat"), "listed once")

	buf.Reset()
	require.NoError(t, printStatus(&buf, output.JSON, st))
	var got status.GitRepo
	require.NoError(t, json.Unmarshal(buf.Bytes(), &got))
	assert.Equal(t, warnings, got.Warnings)
	accepted, _ := got.Condition(status.ConditionAccepted)
	assert.Equal(t, status.ReasonWarnings, accepted.Reason)

	buf.Reset()
	st.Warnings = nil
	require.NoError(t, printStatus(&buf, output.Table, st))
	assert.NotContains(t, buf.String(), "Warnings:")
}
