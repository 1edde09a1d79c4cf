package api

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestIsConstraintAndPolled(t *testing.T) {
	for _, tc := range []struct {
		chart, repo, version string
		polled               bool
	}{
		{"app", "https://charts.example", "1.2.3", false},
		{"app", "https://charts.example", "v1.2.3", false},
		{"app", "https://charts.example", "~1", true},
		{"app", "https://charts.example", ">=1.0.0 <2", true},
		{"app", "https://charts.example", "1.x", true},
		{"app", "https://charts.example", "1.2", true},
		{"app", "https://charts.example", "", true},
		{"app", "oci://reg.example/charts", "^2.1", true},
		{"oci://reg.example/charts/app", "", "1.0.0", false},
		{"oci://reg.example/charts/app", "", "~1.0", true},
		{"oci://reg.example:5000/charts/app:1.0.0", "", "", false},
		{"oci://reg.example:5000/charts/app", "", "", true},
		{"https://charts.example/app-1.0.0.tgz", "", "", false},
	} {
		h := HelmOpSpec{Bundle: json.RawMessage(`{"helm":{"chart":"` + tc.chart + `","repo":"` + tc.repo + `","version":"` + tc.version + `"}}`)}
		assert.Equal(t, tc.polled, h.Polled(), "%s %s %s", tc.chart, tc.repo, tc.version)
	}
}

func TestHelmOpDecodeSplitsOwnFields(t *testing.T) {
	docs, err := Decode(strings.NewReader(`apiVersion: fleet.cattle.io/v1alpha1
kind: HelmOp
metadata: {name: web}
spec:
  helmSecretName: creds
  insecureSkipTLSVerify: true
  pollingInterval: 1m
  labels: {team: a}
  helm: {repo: "https://charts.example", chart: web, version: "~1"}
  namespace: web
  targets:
  - clusterSelector: {matchLabels: {env: prod}}
`), "op.yaml")
	require.NoError(t, err)
	require.Len(t, docs, 1)
	h := docs[0].HelmOp
	require.NotNil(t, h)
	assert.Equal(t, "fleet-default/web", docs[0].Name())
	assert.Equal(t, "creds", h.Spec.HelmSecretName)
	assert.True(t, h.Spec.InsecureSkipTLSVerify)
	assert.Equal(t, map[string]string{"team": "a"}, h.Spec.Labels)
	assert.JSONEq(t, `{"helm":{"repo":"https://charts.example","chart":"web","version":"~1"},"namespace":"web",
		"targets":[{"clusterSelector":{"matchLabels":{"env":"prod"}}}]}`, string(h.Spec.Bundle))

	g := h.AsGitRepo()
	assert.Equal(t, "https://charts.example/web", g.Spec.Repo)
	assert.False(t, g.Spec.DisablePolling)
	assert.Equal(t, "1m0s", g.Spec.PollingInterval.Duration.String())
	require.Len(t, g.Spec.Targets, 1)
	assert.Equal(t, "prod", g.Spec.Targets[0].ClusterSelector.MatchLabels["env"])
	require.NotNil(t, g.Spec.HelmOp)
	assert.Equal(t, "web", g.Spec.HelmOp.Name)

	// Round trip through the workflow's JSON.
	data, err := json.Marshal(h)
	require.NoError(t, err)
	var back HelmOp
	require.NoError(t, json.Unmarshal(data, &back))
	assert.Equal(t, *h, back)
}

func TestHelmOpValidate(t *testing.T) {
	for _, tc := range []struct{ spec, want string }{
		{`{"helm":{"chart":"./local"}}`, "spec.helm.chart"},
		{`{"helm":{}}`, "spec.helm.chart: Required"},
		{`{"helm":{"repo":"https://c.example","chart":"app","version":">>1"}}`, "spec.helm.version"},
		{`{"helm":{"repo":"ftp://c.example","chart":"app"}}`, "spec.helm.repo"},
		{`{"helm":{"chart":"https://c.example/app.tgz","version":"1.0.0"}}`, "a chart archive URL has no version"},
		{`{"helm":{"repo":"https://c.example","chart":"app"},"targets":[{"clusterName":"Bad_Name"}]}`, "spec.targets[0].clusterName"},
	} {
		h := HelmOp{Metadata: ObjectMeta{Name: "app", Namespace: "ns"}, Spec: HelmOpSpec{Bundle: json.RawMessage(tc.spec)}}
		err := h.Validate()
		require.Error(t, err, tc.spec)
		assert.Contains(t, err.Error(), tc.want, tc.spec)
		assert.Contains(t, err.Error(), "HelmOp ns/app", tc.spec)
	}
	ok := HelmOp{Metadata: ObjectMeta{Name: "app", Namespace: "ns"}, Spec: HelmOpSpec{Bundle: json.RawMessage(`{"helm":{"repo":"oci://r.example/c","chart":"app","version":"~1"}}`)}}
	assert.NoError(t, ok.Validate())
}
