package bundle_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-gitops/flotilla/internal/bundle"
)

const overlayDeployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
  template:
    spec:
      containers:
      - name: web
        image: nginx
      - name: sidecar
        image: busybox
`

const overlayCR = `apiVersion: example.com/v1
kind: Widget
metadata:
  name: w
spec:
  items: [a, b]
  size: 1
`

// renderOverlays builds the chart of a raw YAML bundle of files with the
// given overlays and returns the installed objects by "Kind/name".
func renderOverlays(t *testing.T, files map[string]string, overlays ...string) map[string]map[string]any {
	t.Helper()
	b := bundle.Bundle{Name: "b", Dir: "app", Options: bundle.Options{YAML: &bundle.YAMLOptions{Overlays: overlays}}}
	var m bundle.Manifest
	for name, content := range files {
		m.Resources = append(m.Resources, bundle.Resource{Name: name, Content: content})
	}
	c, err := bundle.Chart(b, m)
	require.NoError(t, err)
	out := map[string]map[string]any{}
	for key, obj := range fixtureObjectsOf(t, install(t, c, nil)) {
		parts := strings.Split(key, "/")
		out[parts[len(parts)-2]+"/"+parts[len(parts)-1]] = obj
	}
	return out
}

func field(t *testing.T, obj map[string]any, path ...string) any {
	t.Helper()
	var v any = obj
	for _, p := range path {
		m, ok := v.(map[string]any)
		require.True(t, ok, "%v at %s", v, p)
		v = m[p]
	}
	return v
}

func TestOverlayReplace(t *testing.T) {
	files := map[string]string{
		"web.yaml":                     overlayDeployment,
		"sub/cm.yaml":                  cm,
		"gone.yaml":                    strings.Replace(cm, "name: x", "name: gone", 1),
		"overlays/a/sub/cm.yaml":       strings.Replace(cm, "name: x", "name: replaced", 1),
		"overlays/a/added.yaml":        strings.Replace(cm, "name: x", "name: added", 1),
		"overlays/a/gone.yaml":         "",
		"overlays/unused/another.yaml": strings.Replace(cm, "name: x", "name: unused", 1),
	}
	got := renderOverlays(t, files)
	assert.Equal(t, []string{"ConfigMap/gone", "ConfigMap/x", "Deployment/web"}, sortedKeys(got), "no overlays: overlays/ is never deployed")

	got = renderOverlays(t, files, "a")
	assert.Equal(t, []string{"ConfigMap/added", "ConfigMap/replaced", "Deployment/web"}, sortedKeys(got))
}

func TestOverlayPatch(t *testing.T) {
	files := map[string]string{
		"web.yaml":    overlayDeployment,
		"widget.yaml": overlayCR,
		"data.json":   `{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "j"}, "data": {"a": "1"}}`,
		// Strategic merge: containers merge by name.
		"overlays/scale/web_patch.yaml": "spec:\n  replicas: 3\n  template:\n    spec:\n      containers:\n      - name: sidecar\n        image: alpine\n",
		// JSON merge patch for kinds client-go does not know: lists are replaced.
		"overlays/scale/widget_patch.yaml": "spec:\n  items: [c]\n  size: null\n",
		// Any extension; a later overlay sees the earlier one's result.
		"overlays/scale/data_patch.json": `{"data": {"b": "2"}}`,
		"overlays/more/data_patch.json":  `{"data": {"a": null}}`,
		// A JSON patch (a list), on a patched file.
		"overlays/more/web_patch.yaml": "- op: replace\n  path: /spec/replicas\n  value: 5\n- op: add\n  path: /metadata/labels\n  value: {tier: front}\n",
	}
	got := renderOverlays(t, files, "scale")
	require.Equal(t, []string{"ConfigMap/j", "Deployment/web", "Widget/w"}, sortedKeys(got))
	web := got["Deployment/web"]
	assert.EqualValues(t, 3, field(t, web, "spec", "replicas"))
	assert.Equal(t, []any{
		map[string]any{"name": "web", "image": "nginx"},
		map[string]any{"name": "sidecar", "image": "alpine"},
	}, field(t, web, "spec", "template", "spec", "containers"))
	assert.Equal(t, map[string]any{"items": []any{"c"}}, field(t, got["Widget/w"], "spec"))
	assert.Equal(t, map[string]any{"a": "1", "b": "2"}, field(t, got["ConfigMap/j"], "data"))

	got = renderOverlays(t, files, "scale", "more")
	assert.Equal(t, map[string]any{"b": "2"}, field(t, got["ConfigMap/j"], "data"))
	assert.EqualValues(t, 5, field(t, got["Deployment/web"], "spec", "replicas"))
	assert.Equal(t, map[string]any{"tier": "front"}, field(t, got["Deployment/web"], "metadata", "labels"))
	assert.Len(t, field(t, got["Deployment/web"], "spec", "template", "spec", "containers"), 2)
}

func TestOverlayErrors(t *testing.T) {
	tests := []struct {
		name     string
		files    map[string]string
		overlays []string
		want     []string
	}{
		{
			name:     "missing overlay directory",
			files:    map[string]string{"a.yaml": cm, "overlays/x/a.yaml": cm},
			overlays: []string{"x", "nope"},
			want:     []string{"bundle b: app/overlays/nope: yaml.overlays:", `overlay "nope" does not exist`},
		},
		{
			name:     "patch without base file",
			files:    map[string]string{"a.yaml": cm, "overlays/x/b_patch.yaml": "data: {}\n"},
			overlays: []string{"x"},
			want:     []string{"bundle b: app/overlays/x/b_patch.yaml: patch target app/b.yaml does not exist"},
		},
		{
			name:     "invalid patch",
			files:    map[string]string{"a.yaml": cm, "overlays/x/a_patch.yaml": "- op: move\n  path: /nope\n"},
			overlays: []string{"x"},
			want:     []string{"bundle b: app/overlays/x/a_patch.yaml: patch app/a.yaml: JSON patch"},
		},
		{
			name:     "invalid YAML patch",
			files:    map[string]string{"a.yaml": cm, "overlays/x/a_patch.yaml": "data: [\n"},
			overlays: []string{"x"},
			want:     []string{"bundle b: app/overlays/x/a_patch.yaml: patch app/a.yaml: read patch"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := bundle.Bundle{Name: "b", Dir: "app", Options: bundle.Options{YAML: &bundle.YAMLOptions{Overlays: tt.overlays}}}
			var m bundle.Manifest
			for name, content := range tt.files {
				m.Resources = append(m.Resources, bundle.Resource{Name: name, Content: content})
			}
			_, err := bundle.Chart(b, m)
			requireValidationError(t, err, tt.want...)
		})
	}
}

// Overlays apply to raw YAML bundles only, as in Fleet.
func TestOverlayIgnoredForKustomizeAndHelm(t *testing.T) {
	opts := bundle.Options{YAML: &bundle.YAMLOptions{Overlays: []string{"missing"}}}
	kust := bundle.Manifest{Resources: []bundle.Resource{{Name: "kustomization.yaml", Content: "resources: []\n"}}}
	_, err := bundle.Chart(bundle.Bundle{Name: "k", Options: opts}, kust)
	require.NoError(t, err)

	helm := bundle.Manifest{Resources: []bundle.Resource{
		{Name: "Chart.yaml", Content: "apiVersion: v2\nname: c\nversion: 1.0.0\n"},
		{Name: "overlays/missing_patch.yaml", Content: "x: 1\n"},
	}}
	c, err := bundle.Chart(bundle.Bundle{Name: "h", Options: opts}, helm)
	require.NoError(t, err)
	assert.Equal(t, "c", c.Name())
}

// The patched file is YAML again, the first document of the base only (as
// in Fleet).
func TestOverlayPatchedFile(t *testing.T) {
	files := map[string]string{
		"two.yaml":                  strings.Replace(cm, "name: x", "name: one", 1) + "---\n" + strings.Replace(cm, "name: x", "name: two", 1),
		"overlays/p/two_patch.yaml": "data:\n  k: v\n",
	}
	got := renderOverlays(t, files, "p")
	require.Equal(t, []string{"ConfigMap/one"}, sortedKeys(got))
	want := map[string]any{}
	require.NoError(t, yaml.Unmarshal([]byte(strings.Replace(cm, "name: x", "name: one", 1)+"data:\n  k: v\n"), &want))
	assert.Equal(t, want, got["ConfigMap/one"])
}
