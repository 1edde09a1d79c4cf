package fleetyaml_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-gitops/flotilla/internal/fleetyaml"
)

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func fullOptions() fleetyaml.Options {
	return fleetyaml.Options{
		DefaultNamespace: "def",
		TargetNamespace:  "target",
		Helm: &fleetyaml.HelmOptions{
			Chart:          "chart",
			Repo:           "https://charts.example.com",
			ReleaseName:    "rel",
			Version:        "1.2.3",
			TimeoutSeconds: 30,
			Values:         map[string]any{"b": 1, "a": map[string]any{"z": true, "y": "<x>"}},
			Force:          true,
			TakeOwnership:  true,
			MaxHistory:     5,
			ValuesFiles:    []string{"v1.yaml", "v2.yaml"},
			WaitForJobs:    true,
			Atomic:         true,
		},
		ServiceAccount:       "sa",
		ForceSyncGeneration:  7,
		KeepResources:        true,
		NamespaceLabels:      map[string]string{"l": "1"},
		NamespaceAnnotations: map[string]string{"a": "2"},
		DeleteNamespace:      true,
	}
}

func TestOptionsEncodingIsFleets(t *testing.T) {
	// Fleet's BundleDeploymentOptions field order, with its always-present
	// "ignore":{} and sorted map keys.
	const want = `{"defaultNamespace":"def","namespace":"target","helm":{"chart":"chart",` +
		`"repo":"https://charts.example.com","releaseName":"rel","version":"1.2.3","timeoutSeconds":30,` +
		`"values":{"a":{"y":"\u003cx\u003e","z":true},"b":1},"force":true,"takeOwnership":true,` +
		`"maxHistory":5,"valuesFiles":["v1.yaml","v2.yaml"],"waitForJobs":true,"atomic":true},` +
		`"serviceAccount":"sa","forceSyncGeneration":7,"keepResources":true,"deleteNamespace":true,"ignore":{},` +
		`"namespaceLabels":{"l":"1"},"namespaceAnnotations":{"a":"2"}}`
	o := fullOptions()
	got, err := json.Marshal(o)
	require.NoError(t, err)
	assert.Equal(t, want, string(got))
	assert.Equal(t, sha256Hex(want+"\n"), o.Hash())

	assert.Equal(t, sha256Hex(`{"ignore":{}}`+"\n"), fleetyaml.Options{}.Hash())
}

func TestDeploymentIDChangesWithOptions(t *testing.T) {
	const manifestID = "s-0123456789abcdef0123456789abcdef0123456789abcdef0123456789a"
	tests := []struct {
		name   string
		change func(o *fleetyaml.Options)
	}{
		{"defaultNamespace", func(o *fleetyaml.Options) { o.DefaultNamespace = "other" }},
		{"namespace", func(o *fleetyaml.Options) { o.TargetNamespace = "" }},
		{"serviceAccount", func(o *fleetyaml.Options) { o.ServiceAccount = "sa2" }},
		{"forceSyncGeneration", func(o *fleetyaml.Options) { o.ForceSyncGeneration++ }},
		{"keepResources", func(o *fleetyaml.Options) { o.KeepResources = false }},
		{"deleteNamespace", func(o *fleetyaml.Options) { o.DeleteNamespace = false }},
		{"namespaceLabels", func(o *fleetyaml.Options) { o.NamespaceLabels["l"] = "2" }},
		{"namespaceAnnotations", func(o *fleetyaml.Options) { o.NamespaceAnnotations = nil }},
		{"ignore", func(o *fleetyaml.Options) { o.Ignore.Conditions = []map[string]string{{"type": "Ready"}} }},
		{"no helm", func(o *fleetyaml.Options) { o.Helm = nil }},
		{"helm.releaseName", func(o *fleetyaml.Options) { o.Helm.ReleaseName = "rel2" }},
		{"helm.timeoutSeconds", func(o *fleetyaml.Options) { o.Helm.TimeoutSeconds = 31 }},
		{"helm.values leaf", func(o *fleetyaml.Options) { o.Helm.Values["a"].(map[string]any)["z"] = false }},
		{"helm.values key", func(o *fleetyaml.Options) { o.Helm.Values["c"] = nil }},
		{"helm.force", func(o *fleetyaml.Options) { o.Helm.Force = false }},
		{"helm.atomic", func(o *fleetyaml.Options) { o.Helm.Atomic = false }},
		{"helm.maxHistory", func(o *fleetyaml.Options) { o.Helm.MaxHistory = 2 }},
		{"helm.valuesFiles", func(o *fleetyaml.Options) { o.Helm.ValuesFiles = o.Helm.ValuesFiles[:1] }},
	}
	orig := fleetyaml.DeploymentID(manifestID, fullOptions())
	assert.True(t, strings.HasPrefix(orig, manifestID+":"))
	assert.Len(t, orig, len(manifestID)+1+64)
	assert.Equal(t, orig, fleetyaml.DeploymentID(manifestID, fullOptions()), "stable")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := fullOptions()
			tt.change(&o)
			assert.NotEqual(t, orig, fleetyaml.DeploymentID(manifestID, o))
		})
	}
	other := "s-" + strings.Repeat("f", 61)
	assert.NotEqual(t, orig, fleetyaml.DeploymentID(other, fullOptions()))
}

func TestOptionsJSONRoundTripKeepsHash(t *testing.T) {
	// Values as Read produces them: parsed from YAML.
	var values map[string]any
	require.NoError(t, yaml.Unmarshal([]byte("replicas: 2\nratio: 0.5\nbig: 12345678901\nlist: [1, a, {b: c}]\nnil: null\n"), &values))
	o := fullOptions()
	o.Helm.Values = values
	data, err := json.Marshal(o)
	require.NoError(t, err)
	var got fleetyaml.Options
	require.NoError(t, json.Unmarshal(data, &got))
	assert.Equal(t, o, got)
	assert.Equal(t, o.Hash(), got.Hash())
}

func TestBundleJSONRoundTrip(t *testing.T) {
	b := fleetyaml.Bundle{
		Name:          "repo-app",
		Dir:           "app",
		ManifestID:    "s-abc",
		Options:       fullOptions(),
		Labels:        map[string]string{"team": "a"},
		ResourceCount: 3,
	}
	b.Options.Helm.Values = map[string]any{"n": 1.0, "m": map[string]any{"s": "x"}}
	data, err := json.Marshal(b)
	require.NoError(t, err)
	var got fleetyaml.Bundle
	require.NoError(t, json.Unmarshal(data, &got))
	assert.Equal(t, b, got)
}

func TestBundleReleaseName(t *testing.T) {
	b := fleetyaml.Bundle{Name: "repo-My_App"}
	assert.Equal(t, fleetyaml.ReleaseName("repo-My_App"), b.ReleaseName())
	b.Options.Helm = &fleetyaml.HelmOptions{ReleaseName: "guestbook"}
	assert.Equal(t, "guestbook", b.ReleaseName())
}
