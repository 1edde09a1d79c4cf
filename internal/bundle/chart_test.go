package bundle_test

import (
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-gitops/flotilla/internal/bundle"
)

var update = flag.Bool("update", false, "update golden files")

// assertGolden compares got with testdata/golden/<name>, or rewrites that
// file with -update.
func assertGolden(t *testing.T, got, name string) {
	t.Helper()
	p := filepath.Join("testdata", "golden", name)
	if *update {
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(got), 0o644))
	}
	want, err := os.ReadFile(p)
	require.NoError(t, err, "run go test ./internal/bundle/... -update to create it")
	assert.Equal(t, strings.ReplaceAll(string(want), "\r\n", "\n"), got)
}

// install renders c the way the deployer installs it, with Helm's
// client-only dry run, and returns the release manifest.
func install(t *testing.T, c *chart.Chart, values map[string]any) string {
	t.Helper()
	inst := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	inst.DryRun = true
	inst.ClientOnly = true
	inst.ReleaseName = "test"
	inst.Namespace = "default"
	rel, err := inst.Run(c, values)
	require.NoError(t, err)
	return rel.Manifest
}

// objects returns "Kind/name" of every document of a rendered manifest.
func objects(t *testing.T, manifest string) []string {
	t.Helper()
	var out []string
	for _, doc := range releaseutil.SplitManifests(manifest) {
		var v any
		require.NoError(t, yaml.Unmarshal([]byte(doc), &v), doc)
		if v == nil {
			continue // Comments only, such as Helm's "# Source:" line.
		}
		var head struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		require.NoError(t, yaml.Unmarshal([]byte(doc), &head), doc)
		out = append(out, head.Kind+"/"+head.Metadata.Name)
	}
	sort.Strings(out)
	return out
}

func readBundle(t *testing.T, root, dir string) (bundle.Bundle, bundle.Manifest) {
	t.Helper()
	b, m, err := bundle.Read(root, dir, "fleet-examples")
	require.NoError(t, err)
	return b, m
}

func helmValues(b bundle.Bundle) map[string]any {
	if b.Options.Helm == nil {
		return nil
	}
	return b.Options.Helm.Values
}

func TestChartFleetExamples(t *testing.T) {
	root := fleetExamples(t)
	tests := []struct {
		dir         string
		wantName    string
		wantObjects []string
		golden      string
	}{
		{"simple", "fleet-examples-simple",
			[]string{"ConfigMap/redis-config", "Deployment/frontend", "Service/frontend", "Service/redis-master"}, "simple.yaml"},
		{"single-cluster/manifests", "fleet-examples-single-cluster-manifests",
			[]string{"Deployment/frontend", "Service/frontend"}, "manifests.yaml"},
		{"single-cluster/helm", "guestbook",
			[]string{"Deployment/frontend", "Service/frontend"}, "helm.yaml"},
		{"single-cluster/helm-external", "guestbook",
			[]string{"ConfigMap/test-settings"}, "helm-external.yaml"},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			b, m := readBundle(t, root, tt.dir)
			c, err := bundle.Chart(b, m)
			require.NoError(t, err)
			assert.Equal(t, tt.wantName, c.Name())
			manifest := install(t, c, helmValues(b))
			assert.Equal(t, tt.wantObjects, objects(t, manifest))
			assertGolden(t, manifest, tt.golden)
		})
	}
}

func TestChartRawYAML(t *testing.T) {
	root := fleetExamples(t)
	b, m := readBundle(t, root, "simple")
	c, err := bundle.Chart(b, m)
	require.NoError(t, err)

	assert.Equal(t, "v2", c.Metadata.APIVersion)
	assert.Equal(t, "0.0.0+"+b.ManifestID[2:14], c.Metadata.Version)
	require.Len(t, c.Templates, 1)
	assert.Empty(t, c.Values)
	var files []string
	for _, f := range c.Files {
		files = append(files, f.Name)
	}
	assert.Equal(t, []string{"rawyaml/frontend-deployment.yaml", "rawyaml/frontend-service.yaml", "rawyaml/redis.yaml"}, files)

	// The template engine leaves the files alone, whatever the values.
	vals, err := chartutil.ToRenderValues(c, map[string]any{"greeting": "templated!"},
		chartutil.ReleaseOptions{Name: "r", Namespace: "default", IsInstall: true}, nil)
	require.NoError(t, err)
	rendered, err := engine.Render(c, vals)
	require.NoError(t, err)
	out := rendered[c.Name()+"/templates/rawyaml.yaml"]
	assert.Contains(t, out, `greeting: "{{ .Values.greeting }}"`)
	assert.NotContains(t, out, "templated!")
	assert.Len(t, releaseutil.SplitManifests(out), 4, "multi-document files split")

	// Same through a Helm install.
	assert.Contains(t, install(t, c, map[string]any{"greeting": "templated!"}), `greeting: "{{ .Values.greeting }}"`)
}

func TestChartRawYAMLSelection(t *testing.T) {
	root := writeTree(t, map[string]string{
		"app/fleet.yaml":                 "",
		"app/a.yaml":                     strings.Replace(cm, "name: x", "name: a", 1),
		"app/b.yml":                      strings.Replace(cm, "name: x", "name: b", 1),
		"app/c.json":                     `{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}`,
		"app/package.json":               `{"name": "not-an-object"}`,
		"app/README.md":                  "apiVersion: v1\nkind: ConfigMap\n",
		"app/mixed.yaml":                 "# leading comment\n---\nfoo: bar\n---\n" + strings.Replace(cm, "name: x", "name: mixed", 1) + "---\n",
		"app/empty.yaml":                 "# nothing\n",
		"app/sub/d.yaml":                 strings.Replace(cm, "name: x", "name: d", 1),
		"app/nested/fleet.yaml":          "",
		"app/nested/n.yaml":              strings.Replace(cm, "name: x", "name: nested", 1),
		"app/vendored/Chart.yaml":        "apiVersion: v2\nname: v\nversion: 1.0.0\n",
		"app/vendored/templates/t.yaml":  "{{ fail \"never rendered\" }}",
		"app/overlays/dev/a.yaml":        strings.Replace(cm, "name: x", "name: overlay", 1),
		"app/kustom/kustomization.yaml":  "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n",
		"app/templates/tpl.yaml":         strings.Replace(cm, "name: x", "name: '{{ .Values.x }}'", 1),
		"app/crlf.yaml":                  "apiVersion: v1\r\nkind: ConfigMap\r\nmetadata:\r\n  name: crlf1\r\n---\r\napiVersion: v1\r\nkind: ConfigMap\r\nmetadata:\r\n  name: crlf2\r\n",
		"app/list.yaml":                  "- a\n- b\n",
		"app/comment-marker.yaml":        "--- # first\n" + strings.Replace(cm, "name: x", "name: marker", 1),
		"app/data-with-separator.yaml":   "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: embedded\ndata:\n  f: |\n    a: 1\n    ---\n    b: 2\n",
		"app/no-trailing-newline.yaml":   strings.TrimSuffix(strings.Replace(cm, "name: x", "name: nonl", 1), "\n"),
		"app/deeper/more/objects.yaml":   strings.Replace(cm, "name: x", name("deep"), 1),
		"app/deeper/more/notes.txt":      "not yaml",
		"app/deeper/more/values.yaml":    "replicas: 3\n",
		"app/deeper/more/.hidden.yaml":   cm,
		"app/deeper/more/fleet.yml.orig": cm,
	})
	b, m := readBundle(t, root, "app")
	c, err := bundle.Chart(b, m)
	require.NoError(t, err)
	got := objects(t, install(t, c, map[string]any{"x": "templated"}))
	assert.Equal(t, []string{
		"ConfigMap/a", "ConfigMap/b", "ConfigMap/c", "ConfigMap/crlf1", "ConfigMap/crlf2",
		"ConfigMap/d", "ConfigMap/deep", "ConfigMap/embedded", "ConfigMap/marker", "ConfigMap/nonl", "ConfigMap/{{ .Values.x }}",
	}, got, "a file with a document that is not an object (mixed.yaml) is skipped whole, as in Fleet")
	assert.Equal(t, []string{
		"app/deeper/more/values.yaml: document 1 has no apiVersion and no kind; the file is skipped, as Fleet skips it",
		"app/list.yaml: document 1 is not a mapping; the file is skipped, as Fleet skips it",
		"app/mixed.yaml: document 1 has no apiVersion and no kind; the file is skipped, as Fleet skips it",
		"app/package.json: document 1 has no apiVersion and no kind; the file is skipped, as Fleet skips it",
	}, b.Warnings, "each skipped file is named, with its first document that is not an object")
}

func name(n string) string { return "name: " + n }

func TestChartLocalChartInSubdir(t *testing.T) {
	root := writeTree(t, map[string]string{
		"app/fleet.yaml":             "helm:\n  chart: ./charts/web\n  values: {color: blue}\n",
		"app/charts/web/Chart.yaml":  "apiVersion: v2\nname: web\nversion: 1.2.3\n",
		"app/charts/web/values.yaml": "color: green\nsize: 1\n",
		"app/charts/web/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\ndata:\n" +
			"  color: {{ .Values.color }}\n  size: {{ .Values.size | quote }}\n",
		"app/other.yaml": cm,
	})
	b, m := readBundle(t, root, "app")
	c, err := bundle.Chart(b, m)
	require.NoError(t, err)
	assert.Equal(t, "web", c.Name())
	assert.Equal(t, "1.2.3", c.Metadata.Version)
	out := install(t, c, helmValues(b))
	assert.Equal(t, []string{"ConfigMap/web"}, objects(t, out), "files outside the chart directory are not deployed")
	assert.Contains(t, out, "color: blue")
	assert.Contains(t, out, `size: "1"`)
}

func TestChartErrors(t *testing.T) {
	tests := []struct {
		name    string
		b       bundle.Bundle
		m       bundle.Manifest
		want    []string
		wantErr error
	}{
		{
			name: "remote chart missing from manifest",
			b: bundle.Bundle{Name: "c", Dir: "app", Options: bundle.Options{Helm: &bundle.HelmOptions{
				Chart: "guestbook", Repo: "https://charts.example.com", Version: "1.0.0"}}},
			m:    bundle.Manifest{Resources: []bundle.Resource{{Name: "guestbook/Chart.yaml", Content: "apiVersion: v2\nname: local\nversion: 1.0.0\n"}}},
			want: []string{"bundle c: app/.chart/" + chartSum("guestbook", "https://charts.example.com", "1.0.0") + ": helm.chart: remote chart \"guestbook\" of repository \"https://charts.example.com\" version \"1.0.0\" is not in the bundle"},
		},
		{
			name: "two remote charts",
			b:    bundle.Bundle{Name: "c", Dir: "app", Options: bundle.Options{Helm: &bundle.HelmOptions{Chart: "oci://r.example.com/c"}}},
			m: bundle.Manifest{Resources: []bundle.Resource{
				{Name: ".chart/" + chartSum("oci://r.example.com/c", "", "") + "/a/Chart.yaml"},
				{Name: ".chart/" + chartSum("oci://r.example.com/c", "", "") + "/b/Chart.yaml"},
			}},
			want: []string{"bundle c: app/.chart/", "more than one chart"},
		},
		{
			name: "chart missing from manifest",
			b:    bundle.Bundle{Name: "c", Dir: "app", Options: bundle.Options{Helm: &bundle.HelmOptions{Chart: "chart"}}},
			m:    bundle.Manifest{Resources: []bundle.Resource{{Name: "chart/values.yaml"}}},
			want: []string{"bundle c: app/chart: chart has no Chart.yaml"},
		},
		{
			name: "broken Chart.yaml",
			b:    bundle.Bundle{Name: "c", Dir: "."},
			m:    bundle.Manifest{Resources: []bundle.Resource{{Name: "Chart.yaml", Content: "name: [\n"}}},
			want: []string{"bundle c: .: load chart"},
		},
		{
			name: "invalid raw YAML",
			b:    bundle.Bundle{Name: "r", Dir: "raw"},
			m:    bundle.Manifest{Resources: []bundle.Resource{{Name: "bad.yaml", Content: cm + "---\nkind: [\n"}}},
			want: []string{"bundle r: raw/bad.yaml: YAML document 2"},
		},
		{
			name: "undecodable resource",
			b:    bundle.Bundle{Name: "r", Dir: "raw"},
			m:    bundle.Manifest{Resources: []bundle.Resource{{Name: "x.yaml", Content: "%%", Encoding: "base64"}}},
			want: []string{"bundle r: raw/x.yaml"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := bundle.Chart(tt.b, tt.m)
			requireValidationError(t, err, tt.want...)
			if tt.wantErr != nil {
				assert.ErrorIs(t, err, tt.wantErr)
			}
		})
	}
}

func TestChartNameSanitised(t *testing.T) {
	c, err := bundle.Chart(bundle.Bundle{Name: "My Bundle/x"}, bundle.Manifest{})
	require.NoError(t, err)
	assert.Equal(t, "my-bundle-x", c.Name())
	c, err = bundle.Chart(bundle.Bundle{}, bundle.Manifest{})
	require.NoError(t, err)
	assert.Equal(t, "bundle", c.Name())
	assert.Empty(t, objects(t, install(t, c, nil)), "an empty bundle installs nothing")
}

func chartSum(chart, repo, version string) string {
	sum := sha256.Sum256([]byte(chart + ":" + repo + ":" + version))
	return hex.EncodeToString(sum[:])
}

func TestChartRemote(t *testing.T) {
	chartYAML := func(name string) string { return "apiVersion: v2\nname: " + name + "\nversion: 0.1.0\n" }
	tmpl := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Values.name }}\n"
	tests := []struct {
		name string
		helm bundle.HelmOptions
		// top is the chart's directory under .chart/<checksum>/.
		top string
	}{
		{"archive URL", bundle.HelmOptions{Chart: "https://example.com/web-0.1.0.tgz"}, "web/"},
		{"repository", bundle.HelmOptions{Chart: "web", Repo: "https://charts.example.com", Version: "0.1.*"}, "web/"},
		{"oci", bundle.HelmOptions{Chart: "oci://r.example.com/charts/web", Version: "0.1.0"}, "web/"},
		{"git", bundle.HelmOptions{Chart: "git::https://example.com/org/repo//charts/web?ref=v1"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prefix := ".chart/" + chartSum(tt.helm.Chart, tt.helm.Repo, tt.helm.Version) + "/"
			other := ".chart/" + chartSum("other", "", "") + "/"
			m := bundle.Manifest{Resources: []bundle.Resource{
				{Name: prefix + tt.top + "Chart.yaml", Content: chartYAML("web")},
				{Name: prefix + tt.top + "values.yaml", Content: "name: from-chart\n"},
				{Name: prefix + tt.top + "templates/cm.yaml", Content: tmpl},
				{Name: prefix + tt.top + "charts/dep/Chart.yaml", Content: chartYAML("dep")},
				{Name: other + "other/Chart.yaml", Content: chartYAML("other")},
				{Name: "web/Chart.yaml", Content: chartYAML("local")},
				{Name: "kept-out.yaml", Content: cm},
			}}
			h := tt.helm
			h.Values = map[string]any{"name": "from-bundle"}
			b := bundle.Bundle{Name: "app", Dir: "app", Options: bundle.Options{Helm: &h}}
			c, err := bundle.Chart(b, m)
			require.NoError(t, err)
			assert.Equal(t, "web", c.Name())
			require.Len(t, c.Dependencies(), 1)
			out := install(t, c, h.Values)
			assert.Equal(t, []string{"ConfigMap/from-bundle"}, objects(t, out))
		})
	}
}
