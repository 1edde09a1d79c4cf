package main

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-gitops/flotilla/internal/bundle"
	"github.com/flotilla-gitops/flotilla/internal/output"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

var (
	cfgModified = status.ModifiedStatus{APIVersion: "v1", Kind: "ConfigMap", Namespace: "app", Name: "cfg",
		Patch: `{"data":{"color":"blue","size":null}}`}
	webMissing = status.ModifiedStatus{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "app", Name: "web", Missing: true}
	oldOrphan  = status.ModifiedStatus{APIVersion: "v1", Kind: "Secret", Namespace: "app", Name: "old", Delete: true}
	roleFought = status.ModifiedStatus{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: "reader",
		Patch: `{"rules":[{"verbs":["get"]}]}`, Conflict: "kubectl-edit changes .rules"}
)

// driftedDeps are deployments of two bundles on two clusters; app drifted
// on both clusters, db on c2 only, and db on c1 is clean.
func driftedDeps() []status.Deployment {
	return []status.Deployment{
		{Bundle: "db", Cluster: "c2", Namespace: "db", Release: "db", DeploymentID: "s-d:2", State: status.Modified,
			Modified: 1, ModifiedStatus: []status.ModifiedStatus{roleFought}},
		{Bundle: "app", Cluster: "c2", Namespace: "app", Release: "app", DeploymentID: "s-a:1", State: status.Modified,
			Modified: 1, Missing: 1, Orphaned: 1, ModifiedStatus: []status.ModifiedStatus{cfgModified, webMissing, oldOrphan},
			Incomplete: true},
		{Bundle: "db", Cluster: "c1", Namespace: "db", Release: "db", DeploymentID: "s-d:2", State: status.Ready},
		{Bundle: "app", Cluster: "c1", Namespace: "app", Release: "app", DeploymentID: "s-a:1", State: status.Modified,
			Modified: 1, ModifiedStatus: []status.ModifiedStatus{cfgModified}},
	}
}

func TestDiffEntries(t *testing.T) {
	tests := []struct {
		name             string
		bundle, cluster  string
		want             []string // bundle@cluster
		wantIncompleteAt string
	}{
		{name: "all drifted, sorted", want: []string{"app@c1", "app@c2", "db@c2"}, wantIncompleteAt: "app@c2"},
		{name: "by bundle", bundle: "db", want: []string{"db@c2"}},
		{name: "by cluster", cluster: "c2", want: []string{"app@c2", "db@c2"}, wantIncompleteAt: "app@c2"},
		{name: "both", bundle: "app", cluster: "c1", want: []string{"app@c1"}},
		{name: "clean deployment", bundle: "db", cluster: "c1", want: []string{}},
		{name: "unknown bundle", bundle: "nope", want: []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			entries := driftEntries(driftedDeps(), tt.bundle, tt.cluster)
			require.NotNil(t, entries, "JSON must show [] rather than null")
			got := []string{}
			for _, e := range entries {
				key := e.Bundle + "@" + e.Cluster
				got = append(got, key)
				assert.Equal(t, key == tt.wantIncompleteAt, e.Incomplete, key)
				assert.NotEmpty(t, e.ModifiedStatus, key)
				assert.Equal(t, e.Bundle, e.Release, "the release and namespace are carried over")
				assert.Equal(t, e.Bundle, e.Namespace)
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestDiffEntries_IncompleteWithoutListIsDrift(t *testing.T) {
	deps := []status.Deployment{{Bundle: "app", Cluster: "c1", Incomplete: true}, {Bundle: "app", Cluster: "c2"}}
	entries := driftEntries(deps, "", "")
	require.Len(t, entries, 1)
	assert.Equal(t, "c1", entries[0].Cluster)
}

func TestWriteDiff(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, printDiff(&buf, output.Table, false, driftEntries(driftedDeps(), "", "")))
	want := `# bundle app on cluster c1 (release app/app, s-a:1)
ConfigMap app/cfg:
  {
    "data": {
      "color": "blue",
      "size": null
    }
  }

# bundle app on cluster c2 (release app/app, s-a:1)
ConfigMap app/cfg:
  {
    "data": {
      "color": "blue",
      "size": null
    }
  }
Deployment app/web: missing
Secret app/old: orphaned
... (more)

# bundle db on cluster c2 (release db/db, s-d:2)
ClusterRole reader: (conflict: kubectl-edit changes .rules)
  {
    "rules": [
      {
        "verbs": [
          "get"
        ]
      }
    ]
  }
`
	assert.Equal(t, want, buf.String())
}

func TestPrintDiff_NoDrift(t *testing.T) {
	clean := []status.Deployment{{Bundle: "app", Cluster: "c1", State: status.Ready}}
	tests := []struct {
		name      string
		format    output.Format
		fleetYAML bool
		want      string
	}{
		{"table", output.Table, false, "no drift\n"},
		{"fleet.yaml", output.Table, true, "no drift\n"},
		{"json", output.JSON, false, "[]\n"},
		{"yaml", output.YAML, false, "[]\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			require.NoError(t, printDiff(&buf, tt.format, tt.fleetYAML, driftEntries(clean, "", "")))
			assert.Equal(t, tt.want, buf.String())
		})
	}
}

func TestPrintDiff_JSON(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, printDiff(&buf, output.JSON, false, driftEntries(driftedDeps(), "", "c2")))
	var got []map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &got))
	require.Len(t, got, 2)
	assert.Equal(t, map[string]any{"bundle": "app", "cluster": "c2", "release": "app", "namespace": "app",
		"deploymentID": "s-a:1", "incomplete": true, "modifiedStatus": []any{
			map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "namespace": "app", "name": "cfg", "patch": cfgModified.Patch},
			map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "app", "name": "web", "missing": true},
			map[string]any{"apiVersion": "v1", "kind": "Secret", "namespace": "app", "name": "old", "delete": true},
		}}, got[0])
	assert.Equal(t, "db", got[1]["bundle"])
	assert.NotContains(t, got[1], "incomplete")
	assert.Equal(t, "kubectl-edit changes .rules", got[1]["modifiedStatus"].([]any)[0].(map[string]any)["conflict"])
}

func TestPrettyPatch(t *testing.T) {
	tests := []struct{ name, patch, want string }{
		{"object", `{"a":{"b":1}}`, "> {\n>   \"a\": {\n>     \"b\": 1\n>   }\n> }"},
		{"not JSON", `{broken`, "> {broken"},
		{"empty", ``, "> "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, prettyPatch(tt.patch, "> "))
		})
	}
}

func TestLeafPointers(t *testing.T) {
	tests := []struct {
		name  string
		patch string
		want  []string
	}{
		{"nested leaves, sorted", `{"spec":{"replicas":3,"template":{"metadata":{"labels":{"x":"y"}}}},"data":{"k":"v"}}`,
			[]string{"/data/k", "/spec/replicas", "/spec/template/metadata/labels/x"}},
		{"null removes a field", `{"metadata":{"annotations":{"note":null}}}`, []string{"/metadata/annotations/note"}},
		{"arrays are leaves", `{"spec":{"ports":[{"port":80}]}}`, []string{"/spec/ports"}},
		{"empty object is a leaf", `{"metadata":{"labels":{}}}`, []string{"/metadata/labels"}},
		{"escaped keys", `{"metadata":{"annotations":{"example.com/a~b":"1"}}}`,
			[]string{"/metadata/annotations/example.com~1a~0b"}},
		{"top-level scalar", `{"immutable":true}`, []string{"/immutable"}},
		{"empty patch", `{}`, nil},
		{"not an object", `[1,2]`, nil},
		{"not JSON", `nope`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, leafPointers(tt.patch))
		})
	}
}

func TestComparePatches(t *testing.T) {
	cfgOther := cfgModified
	cfgOther.Patch = `{"data":{"extra":"1","color":"red"}}`
	webModified := webMissing
	webModified.Missing, webModified.Patch = false, `{"spec":{"replicas":2}}`
	opaque := status.ModifiedStatus{APIVersion: "v1", Kind: "Service", Namespace: "app", Name: "svc", Patch: `garbage`}
	remove := func(paths ...string) []bundle.Operation {
		var ops []bundle.Operation
		for _, p := range paths {
			ops = append(ops, bundle.Operation{Op: "remove", Path: p})
		}
		return ops
	}
	ignore := []bundle.Operation{{Op: "ignore"}}
	cfg := bundle.ComparePatch{APIVersion: "v1", Kind: "ConfigMap", Namespace: "app", Name: "cfg"}
	web := bundle.ComparePatch{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "app", Name: "web"}
	with := func(p bundle.ComparePatch, ops []bundle.Operation) bundle.ComparePatch { p.Operations = ops; return p }
	withPatch := func(m status.ModifiedStatus) status.ModifiedStatus { m.Patch = `{"data":{"k":"v"}}`; return m }

	tests := []struct {
		name    string
		objects [][]status.ModifiedStatus // one list per entry
		want    []bundle.ComparePatch
	}{
		{"one modified object", [][]status.ModifiedStatus{{cfgModified}},
			[]bundle.ComparePatch{with(cfg, remove("/data/color", "/data/size"))}},
		{"missing and orphaned are ignored whole", [][]status.ModifiedStatus{{webMissing, oldOrphan}},
			[]bundle.ComparePatch{with(web, ignore),
				{APIVersion: "v1", Kind: "Secret", Namespace: "app", Name: "old", Operations: ignore}}},
		{"the same object on two clusters is one entry with the union of paths",
			[][]status.ModifiedStatus{{cfgModified}, {cfgOther}},
			[]bundle.ComparePatch{with(cfg, remove("/data/color", "/data/extra", "/data/size"))}},
		{"missing on one cluster, modified on another: ignored whole",
			[][]status.ModifiedStatus{{webModified}, {webMissing}},
			[]bundle.ComparePatch{with(web, ignore)}},
		{"an orphan is ignored whole even with a patch", [][]status.ModifiedStatus{{withPatch(oldOrphan)}},
			[]bundle.ComparePatch{{APIVersion: "v1", Kind: "Secret", Namespace: "app", Name: "old", Operations: ignore}}},
		{"a patch with no leaf is ignored whole", [][]status.ModifiedStatus{{opaque}},
			[]bundle.ComparePatch{{APIVersion: "v1", Kind: "Service", Namespace: "app", Name: "svc", Operations: ignore}}},
		{"cluster-scoped, sorted by apiVersion first", [][]status.ModifiedStatus{{cfgModified, roleFought}},
			[]bundle.ComparePatch{
				{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: "reader", Operations: remove("/rules")},
				with(cfg, remove("/data/color", "/data/size"))}},
		{"nothing", nil, []bundle.ComparePatch{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var entries []driftEntry
			for i, objs := range tt.objects {
				entries = append(entries, driftEntry{Bundle: "b", Cluster: string(rune('a' + i)), ModifiedStatus: objs})
			}
			assert.Equal(t, tt.want, comparePatches(entries))
		})
	}
}

func TestPrintDiff_FleetYAML(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, printDiff(&buf, output.JSON, true, driftEntries(driftedDeps(), "app", "")))
	want := `diff:
  comparePatches:
  - apiVersion: apps/v1
    kind: Deployment
    name: web
    namespace: app
    operations:
    - op: ignore
  - apiVersion: v1
    kind: ConfigMap
    name: cfg
    namespace: app
    operations:
    - op: remove
      path: /data/color
    - op: remove
      path: /data/size
  - apiVersion: v1
    kind: Secret
    name: old
    namespace: app
    operations:
    - op: ignore
`
	assert.Equal(t, want, buf.String(), "--fleet-yaml wins over -o json")

	// It reads back as the diff options of a fleet.yaml.
	var fy struct {
		Diff bundle.DiffOptions `json:"diff"`
	}
	require.NoError(t, yaml.UnmarshalStrict(buf.Bytes(), &fy))
	assert.Len(t, fy.Diff.ComparePatches, 3)
}

func TestDiffCommandIsRegistered(t *testing.T) {
	root := newRootCommand()
	cmd, _, err := root.Find([]string{"diff"})
	require.NoError(t, err)
	require.Equal(t, "diff", cmd.Name())
	for _, flag := range []string{"bundle", "cluster", "fleet-yaml"} {
		assert.NotNil(t, cmd.Flags().Lookup(flag), flag)
	}
	assert.NotNil(t, cmd.InheritedFlags().Lookup("gitrepo-namespace"), "-n selects the GitRepo's namespace")
	assert.Error(t, cmd.Args(cmd, nil), "the GitRepo's name is required")
}
