package bundle_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/bundle"
	"github.com/flotilla-gitops/flotilla/internal/fleetyaml"
)

// Keys fleet.yaml does not define are ignored, as Fleet ignores them, and
// each is a warning naming the file and the key path; embedded (inline)
// options and selectors count as known at every depth.
func TestReadWarnings(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		// want are the bundle's warnings, in order.
		want []string
	}{
		{"none", map[string]string{"app/fleet.yaml": "namespace: a\nhelm:\n  releaseName: x\n" +
			"targetCustomizations:\n- name: p\n  clusterGroupSelector: {matchLabels: {a: b}}\n  doNotDeploy: false\n" +
			"  namespace: b\n  helm: {values: {a: 1}}\n  yaml: {overlays: [x]}\n" +
			"rolloutStrategy:\n  partitions:\n  - name: p\n    clusterSelector: {}\n",
			"app/x.yaml": cm}, nil},
		{"imageScans are known but not acted on", map[string]string{"app/fleet.yaml": "imageScans:\n- image: x\n  anything: goes\n",
			"app/x.yaml": cm}, []string{"app/fleet.yaml: imageScans: not acted on (Flotilla does not write to Git)"}},
		{"correctionWindows come from rolloutStrategy", map[string]string{"app/fleet.yaml": "correctionWindows:\n- schedule: \"@daily\"\n  duration: 1h\n",
			"app/x.yaml": cm}, []string{"app/fleet.yaml: correctionWindows: ignored; drift is corrected inside rolloutStrategy.windows"}},
		{"typos at every depth", map[string]string{"app/fleet.yaml": "helm:\n  chrat: x\nnamespaces: x\n" +
			"targetCustomizations:\n- name: p\n  clusterSelectr: {}\n  helm: {vaules: {a: 1}}\n" +
			"rolloutStrategy:\n  windows:\n  - schedule: \"@daily\"\n    duration: 1h\n    zone: UTC\n", "app/x.yaml": cm},
			[]string{
				`app/fleet.yaml: unknown field "helm.chrat" (ignored)`,
				`app/fleet.yaml: unknown field "namespaces" (ignored)`,
				`app/fleet.yaml: unknown field "rolloutStrategy.windows[0].zone" (ignored)`,
				`app/fleet.yaml: unknown field "targetCustomizations[0].clusterSelectr" (ignored)`,
				`app/fleet.yaml: unknown field "targetCustomizations[0].helm.vaules" (ignored)`,
			}},
		{"fleet.yml is named as it is", map[string]string{"app/fleet.yml": "status: {}\n", "app/x.yaml": cm},
			[]string{`app/fleet.yml: unknown field "status" (ignored)`}},
		{"raw YAML files skipped whole", map[string]string{"app/fleet.yaml": "futureKey: 1\n", "app/x.yaml": cm,
			"app/cm.yaml": cm + "---\napiVersion: v1\n", "app/values.yaml": "replicas: 1\n"},
			[]string{
				`app/fleet.yaml: unknown field "futureKey" (ignored)`,
				"app/cm.yaml: document 2 has no kind; the file is skipped, as Fleet skips it",
				"app/values.yaml: document 1 has no apiVersion and no kind; the file is skipped, as Fleet skips it",
			}},
		{"no raw YAML warnings for a chart", map[string]string{"app/Chart.yaml": "apiVersion: v2\nname: c\nversion: 1.0.0\n",
			"app/values.yaml": "replicas: 1\n", "app/templates/x.yaml": cm}, nil},
		{"no raw YAML warnings for a kustomization", map[string]string{"app/kustomization.yaml": "resources: [x.yaml]\n",
			"app/x.yaml": cm, "app/patch.yaml": "spec: {}\n"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := writeTree(t, tt.files)
			b, _, err := bundle.Read(root, "app", "repo")
			require.NoError(t, err, "unknown keys are not errors")
			assert.Equal(t, tt.want, b.Warnings)
		})
	}
}

// An unknown key is ignored: what Flotilla knows still decodes, and the
// deployment ID is the one without the key.
func TestReadUnknownKeyIsIgnored(t *testing.T) {
	root := writeTree(t, map[string]string{"a/fleet.yaml": "namespace: a\n", "a/x.yaml": cm,
		"b/fleet.yaml": "namespace: a\nnamespaces: b\nfutureKey: {nested: x}\n", "b/x.yaml": cm})
	a, _, err := bundle.Read(root, "a", "repo")
	require.NoError(t, err)
	b, _, err := bundle.Read(root, "b", "repo")
	require.NoError(t, err)
	assert.Equal(t, "a", b.Options.TargetNamespace)
	assert.Equal(t, a.ManifestID, b.ManifestID)
	assert.Equal(t, fleetyaml.DeploymentID(a.ManifestID, a.Options), fleetyaml.DeploymentID(b.ManifestID, b.Options),
		"an ignored key changes nothing deployed")
}

// Top-level annotations are carried on the bundle, as Fleet copies them
// onto its Bundle, and are not deployment options.
func TestReadAnnotations(t *testing.T) {
	root := writeTree(t, map[string]string{
		"a/fleet.yaml": "labels: {team: a}\nnamespace: a\n",
		"a/x.yaml":     cm,
		"b/fleet.yaml": "labels: {team: a}\nnamespace: a\nannotations:\n  example.com/owner: Web Team <web@example.com>\n  note: \"free text: any value\"\n",
		"b/x.yaml":     cm,
	})
	a, _, err := bundle.Read(root, "a", "repo")
	require.NoError(t, err)
	b, _, err := bundle.Read(root, "b", "repo")
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"example.com/owner": "Web Team <web@example.com>", "note": "free text: any value"}, b.Annotations)
	assert.Nil(t, a.Annotations)
	assert.Empty(t, b.Warnings, "annotations is a known key")
	assert.Equal(t, a.Options.Hash(), b.Options.Hash(), "annotations are not part of the options hash")
	assert.Equal(t, fleetyaml.DeploymentID(a.ManifestID, a.Options), fleetyaml.DeploymentID(b.ManifestID, b.Options))
}

// A customization's helm.valuesFiles are merged into its helm.values as
// Fleet's bundle reader does for every target: inline values first, each
// file on top in order (later files win, maps merge deeply). The files
// are not resources.
func TestReadTargetValuesFiles(t *testing.T) {
	root := writeTree(t, map[string]string{
		"app/fleet.yaml": "helm:\n  values: {replicas: 1, image: {tag: base}}\n" +
			"targetCustomizations:\n" +
			"- name: prod\n  clusterSelector: {matchLabels: {env: prod}}\n" +
			"  helm:\n    values: {inline: true, image: {pullPolicy: Always, tag: inline}}\n" +
			"    valuesFiles: [values/prod.yaml, ../shared/region.yaml]\n" +
			"- name: dev\n  clusterSelector: {matchLabels: {env: dev}}\n  helm:\n    valuesFiles: [values/dev.yaml]\n" +
			"- name: plain\n  clusterName: x\n  helm: {values: {a: 1}}\n" +
			"targets:\n- clusterName: edge\n  helm:\n    valuesFiles: [values/edge.yaml]\n",
		"app/values/prod.yaml":  "replicas: 3\nimage: {tag: prod}\n",
		"app/values/dev.yaml":   "replicas: 2\n",
		"app/values/edge.yaml":  "edge: true\n",
		"app/values/other.yaml": "unreferenced: true\n",
		"shared/region.yaml":    "region: eu\nimage: {registry: eu.example}\n",
		"app/x.yaml":            cm,
	})
	b, m, err := bundle.Read(root, "app", "repo")
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"replicas": 1.0, "image": map[string]any{"tag": "base"}}, b.Options.Helm.Values,
		"the bundle's own values do not change")
	tc := b.Spec.TargetCustomizations
	require.Len(t, tc, 3)
	assert.Equal(t, map[string]any{
		"inline":   true,
		"replicas": 3.0,
		"region":   "eu",
		"image":    map[string]any{"pullPolicy": "Always", "tag": "prod", "registry": "eu.example"},
	}, tc[0].Helm.Values)
	assert.Equal(t, []string{"values/prod.yaml", "../shared/region.yaml"}, tc[0].Helm.ValuesFiles, "kept: Fleet hashes them")
	assert.Equal(t, map[string]any{"replicas": 2.0}, tc[1].Helm.Values)
	assert.Equal(t, map[string]any{"a": 1.0}, tc[2].Helm.Values, "a customization without files is unchanged")
	assert.Equal(t, map[string]any{"edge": true}, b.Spec.Targets[0].Helm.Values)
	assert.Equal(t, []string{"values/other.yaml", "x.yaml"}, resourceNames(m), "referenced values files are not resources")
	assert.Equal(t, []string{"app/values/other.yaml: document 1 has no apiVersion and no kind; the file is skipped, as Fleet skips it"},
		b.Warnings, "an unreferenced values file stays a resource of this raw YAML bundle, and is skipped")
}

// YAML merge keys are not duplicate keys: a mapping's own keys override
// the merged ones, as YAML (and Fleet) allow.
func TestReadMergeKeys(t *testing.T) {
	root := writeTree(t, map[string]string{
		"app/fleet.yaml": "helm:\n  values:\n    common: &common {a: 1, b: 1}\n" +
			"    first:\n      <<: *common\n      a: 2\n    second:\n      b: 3\n      <<: *common\n",
		"app/x.yaml": cm,
	})
	b, _, err := bundle.Read(root, "app", "repo")
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"a": 2.0, "b": 1.0}, b.Options.Helm.Values["first"])
	assert.Contains(t, b.Options.Helm.Values, "second", "a merge after the keys is not a duplicate either")
}
