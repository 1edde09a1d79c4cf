package drift_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/bundle"
	"github.com/flotilla-gitops/flotilla/internal/drift"
)

// ignore is the operation list of an "ignore" entry.
var ignore = []bundle.Operation{{Op: "ignore"}}

func TestRules_Ignored(t *testing.T) {
	type id struct{ apiVersion, kind, namespace, name string }
	web := id{"apps/v1", "Deployment", "apps", "web"}
	tests := []struct {
		name    string
		patches []bundle.ComparePatch
		object  id
		ignored bool
	}{
		{name: "no rules", object: web},
		{name: "full selector", object: web, ignored: true, patches: []bundle.ComparePatch{
			{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "apps", Name: "web", Operations: ignore},
		}},
		{name: "no selector matches everything", object: web, ignored: true, patches: []bundle.ComparePatch{{Operations: ignore}}},
		{name: "name regex", object: web, ignored: true, patches: []bundle.ComparePatch{{Kind: "Deployment", Name: "w.b|api", Operations: ignore}}},
		{name: "name regex must match the whole name", object: id{"apps/v1", "Deployment", "apps", "web-canary"}, patches: []bundle.ComparePatch{
			{Kind: "Deployment", Name: "web", Operations: ignore},
			{Kind: "Deployment", Name: "canary", Operations: ignore},
			{Kind: "Deployment", Name: "w.b|api", Operations: ignore},
		}},
		{name: "namespace only", object: web, ignored: true, patches: []bundle.ComparePatch{{Namespace: "apps", Operations: ignore}}},
		{name: "namespace only, other namespace", object: web, patches: []bundle.ComparePatch{{Namespace: "system", Operations: ignore}}},
		{name: "apiVersion mismatch", object: web, patches: []bundle.ComparePatch{{APIVersion: "apps/v1beta1", Kind: "Deployment", Operations: ignore}}},
		{name: "kind mismatch", object: web, patches: []bundle.ComparePatch{{APIVersion: "apps/v1", Kind: "StatefulSet", Operations: ignore}}},
		{name: "kind is case-sensitive", object: web, patches: []bundle.ComparePatch{{Kind: "deployment", Operations: ignore}}},
		{name: "matching entry without ignore", object: web, patches: []bundle.ComparePatch{
			{Kind: "Deployment", Operations: []bundle.Operation{{Op: "remove", Path: "/spec/replicas"}}},
			{Kind: "Deployment", JSONPointers: []string{"/spec/replicas"}},
		}},
		{name: "ignore among other operations", object: web, ignored: true, patches: []bundle.ComparePatch{
			{Kind: "Deployment", Operations: []bundle.Operation{{Op: "remove", Path: "/spec/replicas"}, {Op: "ignore"}}},
		}},
		{name: "second entry matches", object: web, ignored: true, patches: []bundle.ComparePatch{
			{Kind: "ConfigMap", Operations: ignore},
			{Kind: "Deployment", Operations: ignore},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rules := compileRules(t, tt.patches...)
			o := tt.object
			assert.Equal(t, tt.ignored, rules.Ignored(o.apiVersion, o.kind, o.namespace, o.name))
		})
	}
}

func TestCompileRules_Errors(t *testing.T) {
	valid := bundle.ComparePatch{Kind: "ConfigMap", JSONPointers: []string{"/data/key"}}
	tests := []struct {
		name  string
		patch bundle.ComparePatch
		want  string
	}{
		{name: "bad regex", patch: bundle.ComparePatch{Name: "web-(["}, want: `comparePatches[1]: name "web-(["`},
		{name: "unknown op", patch: bundle.ComparePatch{Operations: []bundle.Operation{{Op: "remove", Path: "/a"}, {Op: "delete", Path: "/a"}}},
			want: `comparePatches[1]: operations[1]: unknown op "delete"`},
		{name: "op without a path", patch: bundle.ComparePatch{Operations: []bundle.Operation{{Op: "remove"}}},
			want: `comparePatches[1]: operations[0]: remove: path: "" is not a JSON pointer`},
		{name: "relative pointer", patch: bundle.ComparePatch{JSONPointers: []string{"/ok", "spec/replicas"}},
			want: `comparePatches[1]: jsonPointers[1]: remove: path: "spec/replicas" is not a JSON pointer`},
		{name: "move without a source", patch: bundle.ComparePatch{Operations: []bundle.Operation{{Op: "move", Path: "/a"}}},
			want: `comparePatches[1]: operations[0]: move: value (the source pointer)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := drift.CompileRules([]bundle.ComparePatch{valid, tt.patch})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	_, err := drift.CompileRules([]bundle.ComparePatch{valid, {Operations: ignore}})
	assert.NoError(t, err, "ignore needs no path")
}

// TestRules_Operations checks the operations Compare applies to both sides:
// how Value is read and what happens where a path is missing.
func TestRules_Operations(t *testing.T) {
	tests := []struct {
		name       string
		live, want string
		ops        []bundle.Operation
		patch      string // "" for no drift
	}{
		{
			name: "test with a plain string value guards a remove", live: editedConfigMap, want: configMap, patch: `{"data":{"key":null}}`,
			ops: []bundle.Operation{{Op: "test", Path: "/data/key", Value: "restored"}, {Op: "remove", Path: "/data/key"}},
		},
		{
			name: "test with a JSON string value", live: editedConfigMap, want: configMap, patch: `{"data":{"key":null}}`,
			ops: []bundle.Operation{{Op: "test", Path: "/data/key", Value: `"restored"`}, {Op: "remove", Path: "/data/key"}},
		},
		{
			name: "test with a JSON number value", live: deployment("1", "nginx"), want: deployment("3", "nginx"), patch: `{"spec":{"replicas":null}}`,
			ops: []bundle.Operation{{Op: "test", Path: "/spec/replicas", Value: "3"}, {Op: "remove", Path: "/spec/replicas"}},
		},
		{
			name: "add a JSON object", live: editedConfigMap, want: configMap,
			ops: []bundle.Operation{{Op: "add", Path: "/data", Value: `{"key":"x","other":"same"}`}},
		},
		{
			name: "add with a missing parent is skipped", live: editedConfigMap, want: configMap, patch: `{"data":{"key":"restored"}}`,
			ops: []bundle.Operation{{Op: "add", Path: "/spec/template/x", Value: "1"}},
		},
		{
			name: "copy from value", live: editedConfigMap, want: configMap,
			ops: []bundle.Operation{{Op: "copy", Path: "/data/key", Value: "/data/other"}},
		},
		{
			name: "move from value", live: editedConfigMap, want: configMap,
			ops: []bundle.Operation{{Op: "move", Path: "/data/key", Value: "/data/other"}},
		},
		{
			name: "array index out of range is skipped", live: deployment("1", "nginx:1"), want: deployment("1", "nginx:2"),
			patch: `{"spec":{"template":{"spec":{"containers":[{"image":"nginx:2","name":"web"}]}}}}`,
			ops:   []bundle.Operation{{Op: "remove", Path: "/spec/template/spec/containers/1/image"}},
		},
		{
			name: "array element", live: deployment("1", "nginx:1"), want: deployment("1", "nginx:2"),
			ops: []bundle.Operation{{Op: "remove", Path: "/spec/template/spec/containers/0/image"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rules := compileRules(t, bundle.ComparePatch{Operations: tt.ops})
			patch, err := drift.Compare(object(t, tt.live), object(t, tt.want), rules, nil)
			require.NoError(t, err)
			if tt.patch == "" {
				assert.Nil(t, patch, "patch %s", patch)
			} else {
				assert.JSONEq(t, tt.patch, string(patch))
			}
		})
	}
}
