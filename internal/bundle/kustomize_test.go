package bundle_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/releaseutil"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-gitops/flotilla/internal/bundle"
	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

const guestbookURL = "https://github.com/rancher/fleet-examples/releases/download/example/guestbook-0.0.1.tgz"

// TestChartFleetExamplesConformance renders the kustomize, helm-kustomize
// and manifests examples the way the agent does (Chart, then Helm with the
// Kustomizer as post-renderer) and compares the objects with Fleet's
// renders for a cluster labelled env=dev/test/prod. Namespaces are not
// compared (forcing them is the deployer's job), nor Fleet's objectset.*
// bookkeeping labels and annotations.
func TestChartFleetExamplesConformance(t *testing.T) {
	// rancher/fleet-examples and Fleet's renders of it, and the remote
	// charts the examples download, from the shared fixture directory.
	sharedExamples := testenv.SharedDir(t, "fleet-examples")
	sharedCharts := testenv.SharedDir(t, "fleet-examples-charts")
	type env struct {
		kustomizeDir string
		overlays     []string
	}
	tests := []struct {
		dir       string
		namespace string
		remote    bool // helm.chart is the guestbook archive
		// envs holds the options of each env's targetCustomization (none
		// for single-cluster examples).
		envs map[string]env
	}{
		{dir: "single-cluster/kustomize", namespace: "fleet-kustomize-example"},
		{dir: "single-cluster/helm-kustomize", namespace: "fleet-helm-kustomize-example", remote: true,
			envs: map[string]env{"dev": {kustomizeDir: "overlays/dev"}, "test": {kustomizeDir: "overlays/dev"}, "prod": {kustomizeDir: "overlays/dev"}}},
		{dir: "single-cluster/manifests", namespace: "fleet-manifest-example"},
		{dir: "multi-cluster/kustomize", namespace: "fleet-mc-kustomize-example",
			envs: map[string]env{"dev": {kustomizeDir: "overlays/dev"}, "test": {kustomizeDir: "overlays/test"}, "prod": {kustomizeDir: "overlays/prod"}}},
		{dir: "multi-cluster/helm-kustomize", namespace: "fleet-mc-helm-kustomize-example", remote: true,
			envs: map[string]env{"dev": {kustomizeDir: "overlays/dev"}, "test": {kustomizeDir: "overlays/test"}, "prod": {kustomizeDir: "overlays/prod"}}},
		{dir: "multi-cluster/manifests", namespace: "fleet-mc-manifest-example",
			envs: map[string]env{"dev": {overlays: []string{"noreplication"}}, "test": {overlays: []string{"scale3"}}, "prod": {overlays: []string{"servicelb", "scale3"}}}},
	}
	for _, tt := range tests {
		for _, envName := range []string{"dev", "test", "prod"} {
			t.Run(tt.dir+"/"+envName, func(t *testing.T) {
				root := t.TempDir()
				copyTree(t, filepath.Join(sharedExamples, filepath.FromSlash(tt.dir)), filepath.Join(root, filepath.FromSlash(tt.dir)))
				if tt.remote {
					// Read does not fetch charts here: read the local files
					// only, then embed the chart as the reader would.
					require.NoError(t, os.WriteFile(filepath.Join(root, filepath.FromSlash(tt.dir), "fleet.yaml"),
						[]byte("namespace: "+tt.namespace+"\n"), 0o644))
				}
				b, m, err := bundle.Read(root, tt.dir, "test")
				require.NoError(t, err)
				// The options for the cluster: fleet.yaml's, with the
				// matching targetCustomization merged by hand.
				opts := bundle.Options{TargetNamespace: tt.namespace}
				if strings.HasPrefix(tt.dir, "single-cluster/kustomize") {
					opts.Kustomize = &bundle.KustomizeOptions{Dir: ""}
				}
				if e, ok := tt.envs[envName]; ok {
					if e.kustomizeDir != "" {
						opts.Kustomize = &bundle.KustomizeOptions{Dir: e.kustomizeDir}
					}
					if e.overlays != nil {
						opts.YAML = &bundle.YAMLOptions{Overlays: e.overlays}
					}
				}
				if tt.remote {
					opts.Helm = &bundle.HelmOptions{Chart: guestbookURL}
					m = withChartArchive(t, m, opts.Helm,
						filepath.Join(sharedCharts, "github.com/rancher/fleet-examples/releases/download/example/guestbook-0.0.1.tgz"))
				}
				b.Options = opts

				c, err := bundle.Chart(b, m)
				require.NoError(t, err)
				k, err := bundle.NewKustomizer(b, m)
				require.NoError(t, err)
				assert.Equal(t, strings.Contains(tt.dir, "kustomize"), k != nil, "kustomizer")

				inst := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
				inst.DryRun = true
				inst.ClientOnly = true
				inst.Replace = true
				inst.IncludeCRDs = true
				inst.KubeVersion = &chartutil.KubeVersion{Version: "v1.25.0", Major: "1", Minor: "25"}
				inst.ReleaseName = b.ReleaseName()
				inst.Namespace = tt.namespace
				if k != nil {
					inst.PostRenderer = k
				}
				var values map[string]any
				if b.Options.Helm != nil {
					values = b.Options.Helm.Values
				}
				rel, err := inst.Run(c, values)
				require.NoError(t, err)

				want := fixtureObjects(t, filepath.Join(sharedExamples, "tests", "expected", filepath.FromSlash(tt.dir), envName+"-output.yaml"))
				require.NotEmpty(t, want)
				got := fixtureObjectsOf(t, rel.Manifest)
				assert.Equal(t, sortedKeys(want), sortedKeys(got))
				for key, w := range want {
					if g, ok := got[key]; ok {
						assert.Equal(t, w, g, key)
					}
				}
			})
		}
	}
}

// withChartArchive returns m with the files of the chart archive at tgz
// added under ".chart/<sha256(chart:repo:version)>/", where the reader
// embeds the remote chart of h.
func withChartArchive(t *testing.T, m bundle.Manifest, h *bundle.HelmOptions, tgz string) bundle.Manifest {
	t.Helper()
	sum := sha256.Sum256([]byte(h.Chart + ":" + h.Repo + ":" + h.Version))
	prefix := ".chart/" + hex.EncodeToString(sum[:]) + "/"
	f, err := os.Open(tgz)
	require.NoError(t, err)
	defer f.Close()
	zr, err := gzip.NewReader(f)
	require.NoError(t, err)
	tr := tar.NewReader(zr)
	out := bundle.Manifest{Resources: append([]bundle.Resource(nil), m.Resources...)}
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		data, err := io.ReadAll(tr)
		require.NoError(t, err)
		out.Resources = append(out.Resources, bundle.Resource{Name: prefix + hdr.Name, Content: string(data)})
	}
	sort.Slice(out.Resources, func(i, j int) bool { return out.Resources[i].Name < out.Resources[j].Name })
	return out
}

func fixtureObjects(t *testing.T, file string) map[string]map[string]any {
	t.Helper()
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	return fixtureObjectsOf(t, string(data))
}

// fixtureObjectsOf parses a YAML stream into objects keyed by
// "apiVersion/kind/name", without metadata.namespace and without
// objectset.rio.cattle.io/ labels and annotations.
func fixtureObjectsOf(t *testing.T, stream string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, doc := range releaseutil.SplitManifests(stream) {
		var obj map[string]any
		require.NoError(t, yaml.Unmarshal([]byte(doc), &obj), doc)
		if obj == nil {
			continue
		}
		md, _ := obj["metadata"].(map[string]any)
		require.NotNil(t, md, doc)
		delete(md, "namespace")
		for _, field := range []string{"labels", "annotations"} {
			m, _ := md[field].(map[string]any)
			for k := range m {
				if strings.HasPrefix(k, "objectset.rio.cattle.io/") {
					delete(m, k)
				}
			}
			if m != nil && len(m) == 0 {
				delete(md, field)
			}
		}
		key := obj["apiVersion"].(string) + "/" + obj["kind"].(string) + "/" + md["name"].(string)
		_, dup := out[key]
		require.False(t, dup, "duplicate object %s", key)
		out[key] = obj
	}
	return out
}

func sortedKeys(m map[string]map[string]any) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

const kustDeployment = `apiVersion: apps/v1
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
`

func TestNewKustomizerDir(t *testing.T) {
	m := bundle.Manifest{Resources: []bundle.Resource{
		{Name: "deploy.yaml", Content: kustDeployment},
		{Name: "k/kustomization.yaml", Content: "resources:\n- ../deploy.yaml\nnamePrefix: k-\n"},
		{Name: "yml/kustomization.yml", Content: "resources: []\n"},
	}}
	b := bundle.Bundle{Name: "app", Dir: "apps/app"}

	k, err := bundle.NewKustomizer(b, m)
	require.NoError(t, err)
	assert.Nil(t, k, "no kustomization.yaml in the bundle directory")

	// Fleet looks for kustomization.yaml only.
	b.Options.Kustomize = &bundle.KustomizeOptions{Dir: "yml"}
	k, err = bundle.NewKustomizer(b, m)
	require.NoError(t, err)
	assert.Nil(t, k, "kustomization.yml is not looked for")

	for _, dir := range []string{"k", "./k/", "/k"} {
		b.Options.Kustomize = &bundle.KustomizeOptions{Dir: dir}
		k, err = bundle.NewKustomizer(b, m)
		require.NoError(t, err)
		require.NotNil(t, k, dir)
		// With the default load restrictions ("root only") ../deploy.yaml
		// may not be loaded.
		_, err = k.Build(nil)
		requireValidationError(t, err, "bundle app: apps/app/k/kustomization.yaml: kustomize:", "security")
	}

	m.Resources[1].Content = "resources:\n- deploy.yaml\nnamePrefix: k-\n"
	m.Resources = append(m.Resources, bundle.Resource{Name: "k/deploy.yaml", Content: kustDeployment})
	k, err = bundle.NewKustomizer(b, m)
	require.NoError(t, err)
	out, err := k.Build(nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"Deployment/k-web"}, objects(t, string(out)))

	// The chart of a kustomize bundle emits nothing itself.
	c, err := bundle.Chart(b, m)
	require.NoError(t, err)
	assert.Empty(t, c.Files)
	assert.Empty(t, objects(t, install(t, c, nil)))
}

func TestKustomizerHelmOutput(t *testing.T) {
	cm := func(name string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n"
	}
	m := bundle.Manifest{Resources: []bundle.Resource{
		{Name: "kustomization.yaml", Content: "# comment\nresources:\n- own.yaml\nnamePrefix: p-\ncommonLabels:\n  team: a\n"},
		{Name: "own.yaml", Content: cm("own")},
	}}
	k, err := bundle.NewKustomizer(bundle.Bundle{Name: "b"}, m)
	require.NoError(t, err)
	require.NotNil(t, k)

	// Helm's output, with its "# Source" comments, comes first.
	helm := "---\n# Source: c/templates/a.yaml\n" + cm("a") + "---\n# Source: c/templates/b.yaml\n" + cm("b")
	out, err := k.Build([]byte(helm))
	require.NoError(t, err)
	assert.Equal(t, []string{"ConfigMap/p-a", "ConfigMap/p-b", "ConfigMap/p-own"}, objects(t, string(out)))
	assert.True(t, strings.HasPrefix(string(out), "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  labels:\n    team: a\n  name: p-a\n"), string(out))

	// Output without objects is not added.
	for _, empty := range []string{"", "---\n# Source: c/templates/empty.yaml\n\n", "# just a comment\n"} {
		out, err = k.Build([]byte(empty))
		require.NoError(t, err)
		assert.Equal(t, []string{"ConfigMap/p-own"}, objects(t, string(out)))
	}

	// As a Helm post-renderer.
	buf, err := k.Run(bytes.NewBufferString(helm))
	require.NoError(t, err)
	assert.Equal(t, []string{"ConfigMap/p-a", "ConfigMap/p-b", "ConfigMap/p-own"}, objects(t, buf.String()))

	// A kustomization that lists fleet-manifests.yaml itself gets it once.
	m.Resources[0].Content = "resources:\n- own.yaml\n- fleet-manifests.yaml\n"
	k, err = bundle.NewKustomizer(bundle.Bundle{Name: "b"}, m)
	require.NoError(t, err)
	out, err = k.Build([]byte(helm))
	require.NoError(t, err)
	assert.Equal(t, []string{"ConfigMap/a", "ConfigMap/b", "ConfigMap/own"}, objects(t, string(out)))

	// A nil Kustomizer passes Helm's output through.
	var none *bundle.Kustomizer
	buf, err = none.Run(bytes.NewBufferString(helm))
	require.NoError(t, err)
	assert.Equal(t, helm, buf.String())
}

func TestKustomizerErrors(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  []string
	}{
		{
			name:  "missing resource",
			files: map[string]string{"kustomization.yaml": "resources:\n- missing.yaml\n"},
			want:  []string{"bundle b: app/kustomization.yaml: kustomize:", "missing.yaml"},
		},
		{
			name:  "invalid kustomization",
			files: map[string]string{"kustomization.yaml": "resources: [\n"},
			want:  []string{"bundle b: app/kustomization.yaml: parse kustomization:"},
		},
		{
			name:  "helm chart inflation",
			files: map[string]string{"kustomization.yaml": "helmCharts:\n- name: x\n  repo: https://example.com\n"},
			want:  []string{"bundle b: app/kustomization.yaml: kustomize:"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var m bundle.Manifest
			for name, content := range tt.files {
				m.Resources = append(m.Resources, bundle.Resource{Name: name, Content: content})
			}
			k, err := bundle.NewKustomizer(bundle.Bundle{Name: "b", Dir: "app"}, m)
			require.NoError(t, err)
			_, err = k.Build([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n"))
			requireValidationError(t, err, tt.want...)
		})
	}
}

func TestKustomizerRemote(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"git base", map[string]string{"kustomization.yaml": "resources:\n- github.com/org/repo//deploy?ref=v1\n"},
			"bundle b: app/kustomization.yaml: resources: \"github.com/org/repo//deploy?ref=v1\" is remote"},
		{"deprecated bases", map[string]string{"kustomization.yaml": "bases:\n- git::https://example.com/org/repo.git\n"},
			"bundle b: app/kustomization.yaml: bases:"},
		{"scp-style", map[string]string{"kustomization.yaml": "components:\n- git@example.com:org/repo.git\n"},
			"app/kustomization.yaml: components:"},
		{"http file", map[string]string{"kustomization.yaml": "resources:\n- https://example.com/deploy.yaml\n"},
			"app/kustomization.yaml: resources:"},
		{"patch file", map[string]string{"kustomization.yaml": "patches:\n- path: http://example.com/p.yaml\n"},
			"app/kustomization.yaml: patches[0].path:"},
		{"generator file", map[string]string{"kustomization.yaml": "configMapGenerator:\n- name: c\n  files:\n  - key=https://example.com/f\n"},
			"app/kustomization.yaml: configMapGenerator[0]:"},
		{"in a base", map[string]string{
			"kustomization.yaml":      "resources:\n- base\n",
			"base/kustomization.yaml": "patchesStrategicMerge:\n- https://example.com/p.yaml\n",
		}, "bundle b: app/base/kustomization.yaml: patchesStrategicMerge:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var m bundle.Manifest
			for name, content := range tt.files {
				m.Resources = append(m.Resources, bundle.Resource{Name: name, Content: content})
			}
			_, err := bundle.NewKustomizer(bundle.Bundle{Name: "b", Dir: "app"}, m)
			requireValidationError(t, err, tt.want, "kustomize may only use files of the bundle")
		})
	}
}
