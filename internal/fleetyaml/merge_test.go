package fleetyaml_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/fleetyaml"
)

func cmRef(name, key string) fleetyaml.ValuesFrom {
	return fleetyaml.ValuesFrom{ConfigMapKeyRef: &fleetyaml.KeyRef{Name: name, Key: key}}
}

func secretRef(name, key string) fleetyaml.ValuesFrom {
	return fleetyaml.ValuesFrom{SecretKeyRef: &fleetyaml.KeyRef{Name: name, Key: key}}
}

func TestMergeOptions(t *testing.T) {
	type O = fleetyaml.Options
	type H = fleetyaml.HelmOptions
	tests := []struct {
		name               string
		base, custom, want O
	}{
		{
			name:   "empty custom keeps base",
			base:   O{DefaultNamespace: "d", Helm: &H{Chart: "c", Values: map[string]any{"a": 1.0}}},
			custom: O{},
			want:   O{DefaultNamespace: "d", Helm: &H{Chart: "c", Values: map[string]any{"a": 1.0}}},
		},
		{
			name:   "non-empty strings override",
			base:   O{DefaultNamespace: "d", TargetNamespace: "n", ServiceAccount: "sa"},
			custom: O{DefaultNamespace: "d2", TargetNamespace: "n2", ServiceAccount: "sa2"},
			want:   O{DefaultNamespace: "d2", TargetNamespace: "n2", ServiceAccount: "sa2"},
		},
		{
			name:   "empty strings keep base",
			base:   O{DefaultNamespace: "d", TargetNamespace: "n", ServiceAccount: "sa"},
			custom: O{DefaultNamespace: "", Helm: &H{}},
			want:   O{DefaultNamespace: "d", TargetNamespace: "n", ServiceAccount: "sa", Helm: &H{}},
		},
		{
			// Fleet's "-" clearing branch is unreachable: "-" is set as is.
			name:   "dash is not a clear",
			base:   O{TargetNamespace: "n"},
			custom: O{TargetNamespace: "-"},
			want:   O{TargetNamespace: "-"},
		},
		{
			name:   "helm strings override, empty keep",
			base:   O{Helm: &H{Chart: "c", Repo: "r", ReleaseName: "rel", Version: "1"}},
			custom: O{Helm: &H{Chart: "c2", Version: "2"}},
			want:   O{Helm: &H{Chart: "c2", Repo: "r", ReleaseName: "rel", Version: "2"}},
		},
		{
			name: "helm values deep-merged, custom wins, lists replaced",
			base: O{Helm: &H{Values: map[string]any{
				"keep": "k", "over": "base", "list": []any{"a", "b"},
				"nested": map[string]any{"x": 1.0, "y": 2.0}, "scalarToMap": "s",
			}}},
			custom: O{Helm: &H{Values: map[string]any{
				"over": "custom", "list": []any{"c"}, "nested": map[string]any{"y": 3.0, "z": 4.0},
				"scalarToMap": map[string]any{"m": true}, "null": nil,
			}}},
			want: O{Helm: &H{Values: map[string]any{
				"keep":        "k",
				"over":        "custom",
				"list":        []any{"c"},
				"nested":      map[string]any{"x": 1.0, "y": 3.0, "z": 4.0},
				"scalarToMap": map[string]any{"m": true},
				"null":        nil,
			}}},
		},
		{
			name:   "helm values taken when base has none",
			base:   O{},
			custom: O{Helm: &H{Values: map[string]any{"a": 1.0}}},
			want:   O{Helm: &H{Values: map[string]any{"a": 1.0}}},
		},
		{
			name:   "templateValues merged key by key",
			base:   O{Helm: &H{TemplateValues: map[string]string{"a": "1", "b": "2"}}},
			custom: O{Helm: &H{TemplateValues: map[string]string{"b": "3", "c": "4"}}},
			want:   O{Helm: &H{TemplateValues: map[string]string{"a": "1", "b": "3", "c": "4"}}},
		},
		{
			name: "valuesFrom merged by key",
			base: O{Helm: &H{ValuesFrom: []fleetyaml.ValuesFrom{cmRef("a", "v"), secretRef("b", "v"), {}}}},
			custom: O{Helm: &H{ValuesFrom: []fleetyaml.ValuesFrom{
				secretRef("b", "v"), cmRef("c", "v"), cmRef("c", "v"), {}, cmRef("a", "other"),
			}}},
			want: O{Helm: &H{ValuesFrom: []fleetyaml.ValuesFrom{
				cmRef("a", "v"), secretRef("b", "v"), {}, cmRef("c", "v"), {}, cmRef("a", "other"),
			}}},
		},
		{
			name: "helm booleans OR-ed",
			base: O{Helm: &H{Force: true, Atomic: true}},
			custom: O{Helm: &H{TakeOwnership: true, DisablePreProcess: true, WaitForJobs: true,
				DisableDNS: true}},
			want: O{Helm: &H{Force: true, Atomic: true, TakeOwnership: true, DisablePreProcess: true,
				WaitForJobs: true, DisableDNS: true}},
		},
		{
			name:   "keepResources OR-ed",
			base:   O{KeepResources: true},
			custom: O{KeepResources: false},
			want:   O{KeepResources: true},
		},
		{
			name:   "timeoutSeconds positive overrides",
			base:   O{Helm: &H{TimeoutSeconds: 30}},
			custom: O{Helm: &H{TimeoutSeconds: 60}},
			want:   O{Helm: &H{TimeoutSeconds: 60}},
		},
		{
			name:   "timeoutSeconds zero keeps",
			base:   O{Helm: &H{TimeoutSeconds: 30}},
			custom: O{Helm: &H{}},
			want:   O{Helm: &H{TimeoutSeconds: 30}},
		},
		{
			name:   "timeoutSeconds negative resets",
			base:   O{Helm: &H{TimeoutSeconds: 30}},
			custom: O{Helm: &H{TimeoutSeconds: -1}},
			want:   O{Helm: &H{}},
		},
		{
			name:   "forceSyncGeneration positive overrides, zero keeps",
			base:   O{ForceSyncGeneration: 2},
			custom: O{ForceSyncGeneration: 5},
			want:   O{ForceSyncGeneration: 5},
		},
		{
			name:   "forceSyncGeneration zero keeps",
			base:   O{ForceSyncGeneration: 2},
			custom: O{},
			want:   O{ForceSyncGeneration: 2},
		},
		{
			name:   "yaml overlays appended",
			base:   O{YAML: &fleetyaml.YAMLOptions{Overlays: []string{"a"}}},
			custom: O{YAML: &fleetyaml.YAMLOptions{Overlays: []string{"b", "a"}}},
			want:   O{YAML: &fleetyaml.YAMLOptions{Overlays: []string{"a", "b", "a"}}},
		},
		{
			name:   "kustomize dir overrides",
			base:   O{Kustomize: &fleetyaml.KustomizeOptions{Dir: "base"}},
			custom: O{Kustomize: &fleetyaml.KustomizeOptions{Dir: "overlays/prod"}},
			want:   O{Kustomize: &fleetyaml.KustomizeOptions{Dir: "overlays/prod"}},
		},
		{
			name:   "empty kustomize keeps dir",
			base:   O{Kustomize: &fleetyaml.KustomizeOptions{Dir: "base"}},
			custom: O{Kustomize: &fleetyaml.KustomizeOptions{}},
			want:   O{Kustomize: &fleetyaml.KustomizeOptions{Dir: "base"}},
		},
		{
			// As in Fleet, an empty section still appears in the result.
			name:   "empty sections are created",
			base:   O{},
			custom: O{Kustomize: &fleetyaml.KustomizeOptions{}, YAML: &fleetyaml.YAMLOptions{}, Diff: &fleetyaml.DiffOptions{}},
			want:   O{Kustomize: &fleetyaml.KustomizeOptions{}, YAML: &fleetyaml.YAMLOptions{}, Diff: &fleetyaml.DiffOptions{}},
		},
		{
			name:   "correctDrift replaced as a whole",
			base:   O{CorrectDrift: &fleetyaml.CorrectDrift{Enabled: true, Force: true}},
			custom: O{CorrectDrift: &fleetyaml.CorrectDrift{KeepFailHistory: true}},
			want:   O{CorrectDrift: &fleetyaml.CorrectDrift{KeepFailHistory: true}},
		},
		{
			name: "comparePatches merged by object",
			base: O{Diff: &fleetyaml.DiffOptions{ComparePatches: []fleetyaml.ComparePatch{
				{APIVersion: "v1", Kind: "Service", Name: "a", JSONPointers: []string{"/spec/x"}},
				{APIVersion: "v1", Kind: "ConfigMap", Name: "b", JSONPointers: []string{"/data"}},
			}}},
			custom: O{Diff: &fleetyaml.DiffOptions{ComparePatches: []fleetyaml.ComparePatch{
				{APIVersion: "v1", Kind: "Service", Name: "a", JSONPointers: []string{"/spec/y"}},
				{APIVersion: "v1", Kind: "Secret", Name: "c", Operations: []fleetyaml.Operation{{Op: "ignore"}}},
			}}},
			want: O{Diff: &fleetyaml.DiffOptions{ComparePatches: []fleetyaml.ComparePatch{
				{APIVersion: "v1", Kind: "Service", Name: "a", JSONPointers: []string{"/spec/y"}},
				{APIVersion: "v1", Kind: "ConfigMap", Name: "b", JSONPointers: []string{"/data"}},
				{APIVersion: "v1", Kind: "Secret", Name: "c", Operations: []fleetyaml.Operation{{Op: "ignore"}}},
			}}},
		},
		{
			name:   "downstreamResources merged by kind (any case) and name",
			base:   O{DownstreamResources: []fleetyaml.DownstreamResource{{Kind: "Secret", Name: "s"}}},
			custom: O{DownstreamResources: []fleetyaml.DownstreamResource{{Kind: "secret", Name: "s"}, {Kind: "ConfigMap", Name: "c"}}},
			want:   O{DownstreamResources: []fleetyaml.DownstreamResource{{Kind: "secret", Name: "s"}, {Kind: "ConfigMap", Name: "c"}}},
		},
		{
			name: "namespace labels and annotations merged key by key",
			base: O{NamespaceLabels: map[string]string{"a": "1", "b": "2"}},
			custom: O{NamespaceLabels: map[string]string{"b": "3"},
				NamespaceAnnotations: map[string]string{"x": "y"}},
			want: O{NamespaceLabels: map[string]string{"a": "1", "b": "3"},
				NamespaceAnnotations: map[string]string{"x": "y"}},
		},
		{
			// Fleet's Merge does not look at these fields of a
			// customization.
			name: "fields Fleet does not merge are ignored",
			base: O{Helm: &H{MaxHistory: 3}},
			custom: O{
				Helm: &H{MaxHistory: 5, ValuesFiles: []string{"v.yaml"}, SkipSchemaValidation: true,
					DisableDependencyUpdate: true},
				DeleteNamespace: true, DeleteCRDResources: true,
				Ignore: fleetyaml.IgnoreOptions{Conditions: []map[string]string{{"type": "Ready"}}},
			},
			want: O{Helm: &H{MaxHistory: 3}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := fleetyaml.MergeOptions(tt.base, tt.custom)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestMergeOptionsDoesNotModifyInputs(t *testing.T) {
	base := fleetyaml.Options{
		Helm: &fleetyaml.HelmOptions{
			Values:         map[string]any{"a": map[string]any{"b": []any{1.0, map[string]any{"c": "d"}}}},
			TemplateValues: map[string]string{"t": "1"},
			ValuesFrom:     []fleetyaml.ValuesFrom{cmRef("a", "v")},
		},
		YAML:                &fleetyaml.YAMLOptions{Overlays: make([]string, 1, 10)},
		Kustomize:           &fleetyaml.KustomizeOptions{Dir: "k"},
		Diff:                &fleetyaml.DiffOptions{ComparePatches: []fleetyaml.ComparePatch{{Kind: "A", Name: "a"}}},
		NamespaceLabels:     map[string]string{"l": "1"},
		DownstreamResources: []fleetyaml.DownstreamResource{{Kind: "Secret", Name: "s"}},
		CorrectDrift:        &fleetyaml.CorrectDrift{Enabled: true},
	}
	custom := fleetyaml.Options{
		Helm: &fleetyaml.HelmOptions{
			Values:         map[string]any{"a": map[string]any{"x": "y"}, "n": map[string]any{"m": 1.0}},
			TemplateValues: map[string]string{"t": "2"},
			ValuesFrom:     []fleetyaml.ValuesFrom{cmRef("a", "v"), cmRef("b", "v")},
		},
		YAML:                &fleetyaml.YAMLOptions{Overlays: []string{"o"}},
		Kustomize:           &fleetyaml.KustomizeOptions{Dir: "k2"},
		Diff:                &fleetyaml.DiffOptions{ComparePatches: []fleetyaml.ComparePatch{{Kind: "A", Name: "a", JSONPointers: []string{"/x"}}}},
		NamespaceLabels:     map[string]string{"l": "2"},
		DownstreamResources: []fleetyaml.DownstreamResource{{Kind: "Secret", Name: "s"}, {Kind: "ConfigMap", Name: "c"}},
		CorrectDrift:        &fleetyaml.CorrectDrift{Force: true},
	}
	snapshot := func(o fleetyaml.Options) string {
		b, err := json.Marshal(o)
		require.NoError(t, err)
		return string(b)
	}
	baseBefore, customBefore := snapshot(base), snapshot(custom)

	got := fleetyaml.MergeOptions(base, custom)
	assert.Equal(t, baseBefore, snapshot(base))
	assert.Equal(t, customBefore, snapshot(custom))
	assert.Equal(t, "", base.YAML.Overlays[:2][1], "append must not write into base's spare capacity")

	// The result shares nothing with the inputs.
	gotBefore := snapshot(got)
	got.Helm.Values["a"].(map[string]any)["b"].([]any)[1].(map[string]any)["c"] = "changed"
	got.Helm.Values["n"].(map[string]any)["m"] = 2.0
	got.Helm.TemplateValues["t"] = "changed"
	got.Helm.ValuesFrom[0].ConfigMapKeyRef.Name = "changed"
	got.YAML.Overlays[0] = "changed"
	got.Kustomize.Dir = "changed"
	got.Diff.ComparePatches[0].JSONPointers[0] = "changed"
	got.NamespaceLabels["l"] = "changed"
	got.DownstreamResources[1].Name = "changed"
	got.CorrectDrift.Force = false
	assert.NotEqual(t, gotBefore, snapshot(got))
	assert.Equal(t, baseBefore, snapshot(base))
	assert.Equal(t, customBefore, snapshot(custom))
}

func TestMergeOptionsChangesDeploymentID(t *testing.T) {
	const manifestID = "s-0123"
	base := fleetyaml.Options{Helm: &fleetyaml.HelmOptions{Values: map[string]any{"replicas": 1.0}}}
	same := fleetyaml.MergeOptions(base, fleetyaml.Options{})
	assert.Equal(t, fleetyaml.DeploymentID(manifestID, base), fleetyaml.DeploymentID(manifestID, same))
	changed := fleetyaml.MergeOptions(base, fleetyaml.Options{Helm: &fleetyaml.HelmOptions{Values: map[string]any{"replicas": 3.0}}})
	assert.NotEqual(t, fleetyaml.DeploymentID(manifestID, base), fleetyaml.DeploymentID(manifestID, changed))
	driftOnly := fleetyaml.MergeOptions(base, fleetyaml.Options{CorrectDrift: &fleetyaml.CorrectDrift{Enabled: true}})
	assert.Equal(t, fleetyaml.DeploymentID(manifestID, base), fleetyaml.DeploymentID(manifestID, driftOnly))
}
