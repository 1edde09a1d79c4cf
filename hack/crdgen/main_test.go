package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-gitops/flotilla/internal/crds"
)

// chartDir is the chart's crds/ directory from this package's directory.
var chartDir = filepath.Join("..", "..", filepath.FromSlash(crds.ChartDir))

// TestChartMatchesGenerator fails when the chart's crds/ differ from what
// the generator writes now: run `make crds` after changing internal/api.
func TestChartMatchesGenerator(t *testing.T) {
	files, err := generate()
	require.NoError(t, err)
	onDisk, err := filepath.Glob(filepath.Join(chartDir, "*.yaml"))
	require.NoError(t, err)
	assert.Len(t, onDisk, len(files), "%s holds other files than the generator writes: run `make crds`", crds.ChartDir)
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(chartDir, name))
		require.NoError(t, err, "run `make crds`")
		assert.True(t, bytes.Equal(want, got), "%s/%s is not what hack/crdgen generates: run `make crds`", crds.ChartDir, name)
	}
}

func TestGenerate_Deterministic(t *testing.T) {
	first, err := generate()
	require.NoError(t, err)
	for range 5 {
		again, err := generate()
		require.NoError(t, err)
		require.Equal(t, first, again)
	}
	// write produces the same bytes, and removes a stale file of ours
	// but not an unrelated one.
	dir := t.TempDir()
	stale := filepath.Join(dir, "gone."+crds.Group+".yaml")
	other := filepath.Join(dir, "README.md")
	require.NoError(t, os.WriteFile(stale, []byte("x"), 0o644))
	require.NoError(t, os.WriteFile(other, []byte("x"), 0o644))
	require.NoError(t, write(dir))
	for name, want := range first {
		got, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		assert.Equal(t, string(want), string(got))
	}
	assert.NoFileExists(t, stale)
	assert.FileExists(t, other)
}

// decoded returns the generated CRDs, decoded, by kind.
func decoded(t *testing.T) map[string]map[string]any {
	t.Helper()
	files, err := generate()
	require.NoError(t, err)
	out := map[string]map[string]any{}
	for _, k := range crds.Kinds {
		data := files[k.FileName()]
		require.NotEmpty(t, data, k.Kind)
		require.True(t, bytes.HasPrefix(data, []byte(header)), "%s: header", k.Kind)
		var m map[string]any
		require.NoError(t, yaml.Unmarshal(data, &m), k.Kind)
		out[k.Kind] = m
	}
	return out
}

// version returns the CRD's only version.
func version(t *testing.T, crd map[string]any) map[string]any {
	t.Helper()
	vs := crd["spec"].(map[string]any)["versions"].([]any)
	require.Len(t, vs, 1)
	return vs[0].(map[string]any)
}

func TestGenerate_NamesScopeAndSubresources(t *testing.T) {
	withStatus := map[string]bool{
		"GitRepo": true, "HelmOp": true, "Cluster": true, "ClusterGroup": true, "Bundle": true,
		"ClusterRegistrationToken": true, "GitRepoRestriction": true, "Policy": false,
	}
	for kind, crd := range decoded(t) {
		spec := crd["spec"].(map[string]any)
		assert.Equal(t, crds.Group, spec["group"], kind)
		assert.Equal(t, "Namespaced", spec["scope"], kind)
		meta := crd["metadata"].(map[string]any)
		assert.Equal(t, map[string]any{crds.ManagedByLabel: crds.ManagedByValue}, meta["labels"], kind)
		v := version(t, crd)
		assert.Equal(t, crds.Version, v["name"], kind)
		assert.Equal(t, true, v["served"], kind)
		assert.Equal(t, true, v["storage"], kind)
		_, hasStatus := v["subresources"]
		assert.Equal(t, withStatus[kind], hasStatus, "%s: status subresource", kind)
	}
}

// TestGenerate_PrinterColumnsAreFleets pins Fleet's columns (names,
// order, JSONPaths) as the Rancher UI and `kubectl get` show them.
func TestGenerate_PrinterColumnsAreFleets(t *testing.T) {
	const ready = `.status.conditions[?(@.type=="Ready")].message`
	want := map[string][][2]string{
		"GitRepo": {{"Repo", ".spec.repo"}, {"Commit", ".status.commit"},
			{"BundleDeployments-Ready", ".status.display.readyBundleDeployments"}, {"Status", ready}},
		"HelmOp": {{"Repo", ".spec.helm.repo"}, {"Chart", ".spec.helm.chart"}, {"Version", ".status.version"},
			{"BundleDeployments-Ready", ".status.display.readyBundleDeployments"}, {"Status", ready}},
		"Cluster": {{"Bundles-Ready", ".status.display.readyBundles"}, {"Last-Seen", ".status.agent.lastSeen"}, {"Status", ready}},
		"ClusterGroup": {{"Clusters-Ready", ".status.display.readyClusters"},
			{"Bundles-Ready", ".status.display.readyBundles"}, {"Status", ready}},
		"Bundle":                   {{"BundleDeployments-Ready", ".status.display.readyClusters"}, {"Status", ready}},
		"ClusterRegistrationToken": {{"Secret-Name", ".status.secretName"}},
		"GitRepoRestriction":       {{"Default-ServiceAccount", ".defaultServiceAccount"}, {"Allowed-ServiceAccounts", ".allowedServiceAccounts"}},
		"Policy":                   nil,
	}
	for kind, crd := range decoded(t) {
		var got [][2]string
		cols, _ := version(t, crd)["additionalPrinterColumns"].([]any)
		for _, c := range cols {
			m := c.(map[string]any)
			assert.Equal(t, "string", m["type"], kind)
			got = append(got, [2]string{m["name"].(string), m["jsonPath"].(string)})
		}
		assert.Equal(t, want[kind], got, kind)
	}
}

// TestGenerate_EveryObjectKeepsUnknownFields walks every schema: each
// object level with properties (a struct) keeps unknown fields, a map
// (additionalProperties) accepts any key anyway, and an object with
// neither keeps everything.
func TestGenerate_EveryObjectKeepsUnknownFields(t *testing.T) {
	for kind, crd := range decoded(t) {
		s := version(t, crd)["schema"].(map[string]any)["openAPIV3Schema"].(map[string]any)
		props := s["properties"].(map[string]any)
		topLevel := kind == "GitRepoRestriction" || kind == "Policy"
		if topLevel {
			assert.NotContains(t, props, "spec", kind)
		} else {
			assert.Contains(t, props, "spec", kind)
			assert.Contains(t, props, "status", kind)
		}
		objects := 0
		walkSchema(s, kind, func(path string, o map[string]any) {
			if o["type"] != "object" || path == kind+".metadata" {
				return
			}
			objects++
			if _, isMap := o["additionalProperties"]; isMap {
				return
			}
			assert.Equal(t, true, o["x-kubernetes-preserve-unknown-fields"], "%s: object without preserve-unknown-fields", path)
		})
		assert.Positive(t, objects, kind)
	}
}

// walkSchema calls f for s and every schema below it.
func walkSchema(s map[string]any, path string, f func(string, map[string]any)) {
	f(path, s)
	if props, ok := s["properties"].(map[string]any); ok {
		for k, v := range props {
			walkSchema(v.(map[string]any), path+"."+k, f)
		}
	}
	if items, ok := s["items"].(map[string]any); ok {
		walkSchema(items, path+"[]", f)
	}
	if ap, ok := s["additionalProperties"].(map[string]any); ok {
		walkSchema(ap, path+"{}", f)
	}
}

// TestSchemaOf_Types is the type mapping, table-driven.
func TestSchemaOf_Types(t *testing.T) {
	type inner struct {
		A string `json:"a"`
	}
	type withInline struct {
		inner `json:",inline"`
		B     *int32 `json:"b,omitempty"`
		C     string `json:"-"`
		d     string //nolint:unused // unexported fields are not in the schema
	}
	type recursive struct {
		Self *recursive `json:"self"`
	}
	cases := []struct {
		name string
		v    any
		want string
	}{
		{"string", "", `{"type":"string"}`},
		{"int64", int64(0), `{"format":"int64","type":"integer"}`},
		{"bytes", []byte{}, `{"format":"byte","type":"string"}`},
		{"string map", map[string]string{}, `{"additionalProperties":{"type":"string"},"type":"object"}`},
		{"free map", map[string]any{}, `{"type":"object","x-kubernetes-preserve-unknown-fields":true}`},
		{"inline and skipped fields", withInline{}, `{"properties":{"a":{"nullable":true,"type":"string"},` +
			`"b":{"format":"int32","nullable":true,"type":"integer"}},"type":"object","x-kubernetes-preserve-unknown-fields":true}`},
		{"recursion stops", recursive{}, `{"properties":{"self":{"nullable":true,"type":"object",` +
			`"x-kubernetes-preserve-unknown-fields":true}},"type":"object","x-kubernetes-preserve-unknown-fields":true}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := yaml.Marshal(newBuilder(nil).schemaOf(reflect.TypeOf(tc.v)))
			require.NoError(t, err)
			want, err := yaml.JSONToYAML([]byte(tc.want))
			require.NoError(t, err)
			assert.Equal(t, string(want), string(got))
		})
	}
}

// TestGenerate_FleetFieldTypes checks fields whose Go type encodes itself
// are as permissive as Fleet's schema, and that the Flotilla-internal
// spec.helmOp is left out.
func TestGenerate_FleetFieldTypes(t *testing.T) {
	all := decoded(t)
	prop := func(kind string, path ...string) map[string]any {
		s := version(t, all[kind])["schema"].(map[string]any)["openAPIV3Schema"].(map[string]any)
		for _, p := range path {
			props, _ := s["properties"].(map[string]any)
			next, ok := props[p].(map[string]any)
			if !ok {
				return nil
			}
			s = next
		}
		return s
	}
	assert.Equal(t, "Repo is the clone URL: http(s)://, ssh://, or scp-like (git@host:org/repo.git).", prop("GitRepo", "spec", "repo")["description"],
		"internal/api's doc comments describe the fields (kubectl explain)")
	assert.Equal(t, "string", prop("GitRepo", "spec", "pollingInterval")["type"])
	assert.Equal(t, "string", prop("ClusterRegistrationToken", "spec", "ttl")["type"])
	assert.Nil(t, prop("GitRepo", "spec", "helmOp"), "spec.helmOp is Flotilla-internal")
	limits := prop("Cluster", "spec", "agentResources", "limits")["additionalProperties"].(map[string]any)
	assert.Equal(t, true, limits["x-kubernetes-int-or-string"], "quantities are int-or-string")
	sel := prop("GitRepo", "spec", "targets")["items"].(map[string]any)["properties"].(map[string]any)["clusterSelector"].(map[string]any)
	assert.Equal(t, "atomic", sel["x-kubernetes-map-type"])
	assert.Equal(t, true, prop("Cluster", "spec", "templateValues")["x-kubernetes-preserve-unknown-fields"])
	assert.Equal(t, true, prop("HelmOp", "spec")["x-kubernetes-preserve-unknown-fields"])
	assert.Nil(t, prop("HelmOp", "spec")["properties"], "a HelmOp's spec is a fleet.yaml: kept whole")
}
