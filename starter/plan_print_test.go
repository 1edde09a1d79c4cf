package main

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/output"
	"github.com/flotilla-gitops/flotilla/internal/plan"
)

func samplePlan() plan.Result {
	return plan.Result{
		GitRepo: "fleet-default/app", Commit: "0123456789abcdef0123", Base: "fedcba9876543210", Source: "branch next",
		Warnings: []string{"bundle x: ignored"},
		Clusters: []plan.Cluster{
			{Name: "cluster-1", Releases: []plan.Release{
				{Bundle: "app-web", Release: "web", Namespace: "apps", Action: plan.Upgrade, From: "s-1", To: "s-2", Objects: []plan.Object{
					{Kind: "ConfigMap", Namespace: "apps", Name: "web", Change: plan.Update, Diff: "-  color: blue\n+  color: red\n"},
					{Kind: "Service", Namespace: "apps", Name: "web", Change: plan.NoChange},
					{Kind: "Deployment", Namespace: "apps", Name: "web", Change: plan.Update, Error: "Deployment.apps \"web\" is invalid:\n field is immutable"},
				}},
				{Bundle: "app-old", Release: "old", Namespace: "apps", Action: plan.Uninstall, From: "s-0"},
			}},
			{Name: "cluster-3", Offline: true, Reason: "cluster cluster-3 unreachable: dial tcp", Releases: []plan.Release{
				{Bundle: "app-web", Release: "web", Namespace: "apps", Action: plan.Unchanged, From: "s-0123456789abcdef:fedcba9876543210", To: "s-0123456789abcdef:fedcba9876543210"},
			}},
		},
	}
}

func TestPrintPlan_Table(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, printPlan(&buf, output.Table, samplePlan()))
	want := `Plan of fleet-default/app at 0123456789ab (branch next), running fedcba987654
warning: bundle x: ignored

cluster-1
~ upgrade    app-web  apps/web  s-1→s-2
  ~ ConfigMap apps/web
      -  color: blue
      +  color: red
  ~ Deployment apps/web
  ! Deployment apps/web: Deployment.apps "web" is invalid: field is immutable
- uninstall  app-old  apps/old  s-0→-

cluster-3 (offline: cluster cluster-3 unreachable: dial tcp)
= unchanged  app-web  apps/web  s-01234567:fedcba9876→s-01234567:fedcba9876
1 upgrade, 1 uninstall, 1 unchanged on 2 cluster(s) (offline: cluster-3)
`
	assert.Equal(t, want, buf.String())
}

func TestPrintPlan_JSON(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, printPlan(&buf, output.JSON, samplePlan()))
	var got plan.Result
	require.NoError(t, json.Unmarshal(buf.Bytes(), &got))
	assert.Equal(t, samplePlan(), got)

	buf.Reset()
	require.NoError(t, printPlan(&buf, output.JSON, plan.Result{GitRepo: "a/b"}))
	assert.Contains(t, buf.String(), `"clusters": []`)
}
