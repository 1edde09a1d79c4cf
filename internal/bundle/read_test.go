package bundle_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/bundle"
	"github.com/flotilla-gitops/flotilla/internal/fleetyaml"
)

func fleetExamples(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	copyTree(t, "testdata/fleet-examples", root)
	return root
}

func TestReadFleetExamples(t *testing.T) {
	root := fleetExamples(t)
	tests := []struct {
		dir string
		// want is the bundle without ManifestID, which is checked separately.
		want      bundle.Bundle
		wantFiles []string
	}{
		{
			dir:  "simple",
			want: bundle.Bundle{Name: "fleet-examples-simple", Dir: "simple", Type: "yaml", ResourceCount: 4},
			wantFiles: []string{
				"README.md", "frontend-deployment.yaml", "frontend-service.yaml", "redis.yaml",
			},
		},
		{
			dir: "single-cluster/helm",
			want: bundle.Bundle{
				Name: "fleet-examples-single-cluster-helm", Dir: "single-cluster/helm", Type: "helm", ResourceCount: 5,
				Options: bundle.Options{
					TargetNamespace: "fleet-helm-example",
					Helm: &bundle.HelmOptions{
						ReleaseName: "guestbook",
						Values:      map[string]any{"replicas": 2.0},
					},
				},
			},
			wantFiles: []string{
				"Chart.yaml", "README.md", "templates/frontend-deployment.yaml",
				"templates/frontend-service.yaml", "values.yaml",
			},
		},
		{
			dir: "single-cluster/manifests",
			want: bundle.Bundle{
				Name: "fleet-examples-single-cluster-manifests", Dir: "single-cluster/manifests", Type: "yaml", ResourceCount: 3,
				Options: bundle.Options{TargetNamespace: "fleet-manifest-example"},
			},
			wantFiles: []string{"README.md", "deployments/frontend-deployment.yaml", "services/frontend-service.yaml"},
		},
		{
			dir: "single-cluster/helm-external",
			want: bundle.Bundle{
				Name: "fleet-examples-single-cluster-helm-external", Dir: "single-cluster/helm-external", Type: "helm", ResourceCount: 3,
				Labels: map[string]string{"team": "web"},
				Options: bundle.Options{
					DefaultNamespace: "guestbook",
					Helm: &bundle.HelmOptions{
						Chart:       "../../charts/guestbook",
						ValuesFiles: []string{"values-prod.yaml"},
						// The values file is merged over the inline values.
						Values: map[string]any{"color": "red", "replicas": 3.0},
					},
				},
			},
			wantFiles: []string{
				".chart/guestbook/Chart.yaml", ".chart/guestbook/templates/configmap.yaml",
				".chart/guestbook/values.yaml",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			b, m, err := bundle.Read(root, tt.dir, "fleet-examples")
			require.NoError(t, err)
			assert.Equal(t, tt.wantFiles, resourceNames(m))
			assert.Equal(t, m.ID(), b.ManifestID)
			b.ManifestID = ""
			assert.Equal(t, tt.want, b)
		})
	}
}

func TestReadRootIsNamedAfterTheRepo(t *testing.T) {
	root := writeTree(t, map[string]string{"a.yaml": cm, "sub/b.yaml": cm})
	b, m, err := bundle.Read(root, ".", "my-repo")
	require.NoError(t, err)
	assert.Equal(t, "my-repo", b.Name)
	assert.Equal(t, ".", b.Dir)
	assert.Equal(t, []string{"a.yaml", "sub/b.yaml"}, resourceNames(m))

	b, _, err = bundle.Read(root, "./sub/", "My_Repo")
	require.NoError(t, err)
	assert.Equal(t, "sub", b.Dir)
	assert.Equal(t, fleetyaml.ReleaseName("My_Repo/sub"), b.Name)
}

func TestReadOptionsFile(t *testing.T) {
	root := writeTree(t, map[string]string{
		"a/fleet.yml": "name: custom-name\nlabels: {env: prod}\nkeepResources: true\ndeleteNamespace: true\n" +
			"serviceAccount: deployer\nnamespaceLabels: {team: a}\nnamespaceAnnotations: {note: x}\n" +
			"defaultNamespace: apps\n" +
			"targetCustomizations:\n- name: x\n  clusterSelector: {}\ndependsOn:\n- name: other\n" +
			"helm:\n  chart: ./chart\n  releaseName: my.release-1\n  version: 1.0.0\n  timeoutSeconds: 60\n" +
			"  force: true\n  takeOwnership: true\n  atomic: true\n  waitForJobs: true\n  maxHistory: 3\n" +
			"  disableDNS: true\n",
		"a/chart/Chart.yaml":       "apiVersion: v2\nname: c\nversion: 1.0.0\n",
		"a/chart/templates/x.yaml": cm,
	})
	b, m, err := bundle.Read(root, "a", "repo")
	require.NoError(t, err)
	assert.Equal(t, "custom-name", b.Name)
	assert.Equal(t, map[string]string{"env": "prod"}, b.Labels)
	assert.Equal(t, bundle.Options{
		DefaultNamespace: "apps",
		Helm: &bundle.HelmOptions{
			Chart: "./chart", ReleaseName: "my.release-1", Version: "1.0.0", TimeoutSeconds: 60,
			Force: true, TakeOwnership: true, MaxHistory: 3, WaitForJobs: true, Atomic: true, DisableDNS: true,
		},
		ServiceAccount:       "deployer",
		KeepResources:        true,
		NamespaceLabels:      map[string]string{"team": "a"},
		NamespaceAnnotations: map[string]string{"note": "x"},
		DeleteNamespace:      true,
	}, b.Options)
	assert.Equal(t, []string{"chart/Chart.yaml", "chart/templates/x.yaml"}, resourceNames(m))
	assert.Equal(t, "my.release-1", b.ReleaseName())
	require.Len(t, b.Spec.TargetCustomizations, 1)
	assert.Equal(t, "x", b.Spec.TargetCustomizations[0].Name)
	assert.Equal(t, []bundle.BundleRef{{Name: "other"}}, b.Spec.DependsOn)
	assert.Equal(t, "helm", b.Type)
}

func TestReadValuesFiles(t *testing.T) {
	root := writeTree(t, map[string]string{
		"app/fleet.yaml": "helm:\n  values:\n    a: inline\n    keep: inline\n    nested: {x: 1, k: inline}\n" +
			"  valuesFiles: [values/base.yaml, ./values/prod.yaml, ../shared/common.yaml]\n",
		"app/values/base.yaml":  "a: base\nnested: {k: base, z: base}\nlist: [1, 2]\n",
		"app/values/prod.yaml":  "nested: {z: prod}\nlist: [3]\n",
		"app/values/other.yaml": "not: referenced\n",
		"app/x.yaml":            cm,
		"shared/common.yaml":    "common: true\n",
	})
	b, m, err := bundle.Read(root, "app", "repo")
	require.NoError(t, err)
	// Inline values first, then each file on top (later files win); maps
	// merge deeply, lists are replaced.
	assert.Equal(t, map[string]any{
		"a":      "base",
		"keep":   "inline",
		"nested": map[string]any{"x": 1.0, "k": "base", "z": "prod"},
		"list":   []any{3.0},
		"common": true,
	}, b.Options.Helm.Values)
	assert.Equal(t, []string{"values/base.yaml", "./values/prod.yaml", "../shared/common.yaml"}, b.Options.Helm.ValuesFiles)
	// Referenced values files are not resources; others are.
	assert.Equal(t, []string{"values/other.yaml", "x.yaml"}, resourceNames(m))
}

func TestReadResources(t *testing.T) {
	root := writeTree(t, map[string]string{
		".fleetignore":           "*.md\n",
		"app/fleet.yaml":         "namespace: app\n",
		"app/.fleetignore":       "# build output\nbuild/\n/local.yaml\nsecret-*\n",
		"app/a.yaml":             cm,
		"app/README.md":          "ignored by the root .fleetignore",
		"app/local.yaml":         "anchored: only here",
		"app/sub/local.yaml":     "kept: not anchored here",
		"app/secret-key.yaml":    "ignored",
		"app/build/out.yaml":     "ignored dir",
		"app/.hidden.yaml":       "hidden",
		"app/.cache/x.yaml":      "hidden dir",
		"app/bin.dat":            "\xff\xfe\x00binary",
		"app/nested/fleet.yaml":  "namespace: nested\n",
		"app/nested/n.yaml":      cm,
		"app/link.yaml":          "->a.yaml",
		"app/fleet.yml":          "stray fallback next to fleet.yaml",
		"app/plain/deep/d.json":  "{}",
		"app/plain/deep/Chart.x": "kept",
	})
	b, m, err := bundle.Read(root, "app", "repo")
	require.NoError(t, err)
	// Nested bundles, their fleet.yaml included, are embedded as in Fleet.
	assert.Equal(t, []string{
		"a.yaml", "bin.dat", "link.yaml", "nested/fleet.yaml", "nested/n.yaml",
		"plain/deep/Chart.x", "plain/deep/d.json", "sub/local.yaml",
	}, resourceNames(m))
	assert.Equal(t, 8, b.ResourceCount)
	for _, r := range m.Resources {
		switch r.Name {
		case "bin.dat":
			assert.Equal(t, bundle.EncodingBase64, r.Encoding)
			data, err := r.Data()
			require.NoError(t, err)
			assert.Equal(t, []byte("\xff\xfe\x00binary"), data)
		case "link.yaml":
			assert.Equal(t, cm, r.Content)
		default:
			assert.Empty(t, r.Encoding, r.Name)
		}
	}
}

func TestReadManifestIDFollowsContent(t *testing.T) {
	root := writeTree(t, map[string]string{"app/fleet.yaml": "", "app/a.yaml": cm, "app/README.md": "v1"})
	read := func() bundle.Bundle {
		b, _, err := bundle.Read(root, "app", "repo")
		require.NoError(t, err)
		return b
	}
	first := read()
	assert.Equal(t, first, read(), "stable across reads")

	addFiles(t, root, map[string]string{"app/README.md": "v2"})
	second := read()
	assert.NotEqual(t, first.ManifestID, second.ManifestID, "any file, README included")

	// fleet.yaml is options, not content: it changes the options hash only.
	addFiles(t, root, map[string]string{"app/fleet.yaml": "namespace: x\n"})
	third := read()
	assert.Equal(t, second.ManifestID, third.ManifestID)
	assert.NotEqual(t, second.Options.Hash(), third.Options.Hash())
}

func TestReadErrors(t *testing.T) {
	chart := map[string]string{"app/chart/Chart.yaml": "apiVersion: v2\nname: c\nversion: 1.0.0\n"}
	tests := []struct {
		name  string
		files map[string]string
		dir   string
		// want are substrings of the error message.
		want []string
		// wantErr, when set, is a sentinel the error must wrap.
		wantErr error
	}{
		{"yaml syntax", map[string]string{"app/fleet.yaml": "helm: [\n"}, "app",
			[]string{"bundle repo-app", "app/fleet.yaml", "yaml"}, nil},
		{"wrong type", map[string]string{"app/fleet.yaml": "keepResources: [1]\n"}, "app",
			[]string{"bundle repo-app", "app/fleet.yaml", "keepResources"}, nil},
		{"wrong helm type", map[string]string{"app/fleet.yml": "helm:\n  timeoutSeconds: soon\n"}, "app",
			[]string{"app/fleet.yml", "timeoutSeconds"}, nil},
		{"release name too long", map[string]string{"app/fleet.yaml": "helm:\n  releaseName: " + string(make([]byte, 0)) + "a234567890123456789012345678901234567890123456789012345\n"}, "app",
			[]string{"bundle repo-app", "app/fleet.yaml: helm.releaseName:", "at most 53"}, nil},
		{"release name upper case", map[string]string{"app/fleet.yaml": "helm:\n  releaseName: Guestbook\n"}, "app",
			[]string{"app/fleet.yaml: helm.releaseName:", `"Guestbook"`}, nil},
		{"error names the fleet.yaml bundle name", map[string]string{"app/fleet.yaml": "name: mine\nhelm:\n  releaseName: bad_name\n"}, "app",
			[]string{"bundle mine: app/fleet.yaml: helm.releaseName:"}, nil},
		{"duplicate key", map[string]string{"app/fleet.yaml": "namespace: a\nnamespace: b\n"}, "app",
			[]string{"bundle repo-app: app/fleet.yaml: namespace: given twice, on lines 1 and 2"}, nil},
		{"duplicate nested key", map[string]string{"app/fleet.yaml": "helm:\n  chart: a\n  values: {x: 1}\n  chart: b\n"}, "app",
			[]string{"app/fleet.yaml: helm.chart: given twice, on lines 2 and 4"}, nil},
		{"duplicate key in a list", map[string]string{"app/fleet.yaml": "targetCustomizations:\n- name: a\n  helm: {values: {x: 1, x: 2}}\n"}, "app",
			[]string{"app/fleet.yaml: targetCustomizations[0].helm.values.x: given twice, on lines 3 and 3"}, nil},
		{"wrong type in a customization", map[string]string{"app/fleet.yaml": "targetCustomizations:\n- name: x\n  helm: {timeoutSeconds: soon}\n"}, "app",
			[]string{"app/fleet.yaml: targetCustomizations.helm.timeoutSeconds:", "want an integer"}, nil},
		{"bad annotation key", map[string]string{"app/fleet.yaml": "annotations:\n  ok: fine\n  'bad key!': x\n"}, "app",
			[]string{"app/fleet.yaml: annotations.bad key!:", `invalid annotation key "bad key!"`}, nil},
		{"missing customization values file", merge(chart, map[string]string{"app/fleet.yaml": "helm:\n  chart: chart\n" +
			"targetCustomizations:\n- name: prod\n  clusterSelector: {}\n  helm:\n    valuesFiles: [prod.yaml]\n"}), "app",
			[]string{"bundle repo-app", "app/fleet.yaml: targetCustomizations[0].helm.valuesFiles[0]:",
				`values file app/prod.yaml of target customization "prod" does not exist`}, nil},
		{"missing values file of an unnamed target", map[string]string{"app/fleet.yaml": "targets:\n- clusterName: a\n  helm:\n    valuesFiles: [a.yaml]\n"}, "app",
			[]string{"app/fleet.yaml: targets[0].helm.valuesFiles[0]:", "values file app/a.yaml of targets[0] does not exist"}, nil},
		{"customization values file leaves repo", map[string]string{"app/fleet.yaml": "targetCustomizations:\n- name: x\n  helm:\n    valuesFiles: [../../v.yaml]\n"}, "app",
			[]string{"targetCustomizations[0].helm.valuesFiles[0]", "leaves the repository"}, bundle.ErrOutsideRepo},
		{"mistyped value", map[string]string{"app/fleet.yaml": "helm:\n  timeoutSeconds: soon\n"}, "app",
			[]string{"app/fleet.yaml: helm.timeoutSeconds:", "want an integer"}, nil},
		{"dependsOn without name or selector", map[string]string{"app/fleet.yaml": "dependsOn:\n- acceptedStates: [Ready]\n"}, "app",
			[]string{"app/fleet.yaml: dependsOn[0]:", "needs a name or a selector"}, nil},
		{"dependsOn bad state", map[string]string{"app/fleet.yaml": "dependsOn:\n- name: db\n  acceptedStates: [Done]\n"}, "app",
			[]string{"dependsOn[0].acceptedStates[0]", `"Done" is not a bundle state`}, nil},
		{"bad targetCustomizationMode", map[string]string{"app/fleet.yaml": "targetCustomizationMode: Some\n"}, "app",
			[]string{"targetCustomizationMode", "FirstMatch or AllMatches"}, nil},
		{"bad customization namespace", map[string]string{"app/fleet.yaml": "targetCustomizations:\n- name: x\n  clusterName: a\n  namespace: Bad_NS\n"}, "app",
			[]string{"targetCustomizations[0].namespace", "not a valid namespace name"}, nil},
		{"bad rollout percentage", map[string]string{"app/fleet.yaml": "rolloutStrategy:\n  maxUnavailable: ten\n"}, "app",
			[]string{"rolloutStrategy.maxUnavailable", "count or a percentage"}, nil},
		{"bad downstream kind", map[string]string{"app/fleet.yaml": "downstreamResources:\n- kind: Pod\n  name: x\n"}, "app",
			[]string{"downstreamResources[0].kind", "Secret or ConfigMap"}, nil},
		{"bad selector", map[string]string{"app/fleet.yaml": "targets:\n- clusterSelector:\n    matchLabels:\n      'bad key!': x\n"}, "app",
			[]string{"targets[0].clusterSelector"}, nil},
		{"valuesFrom without ref", map[string]string{"app/fleet.yaml": "helm:\n  valuesFrom:\n  - {}\n"}, "app",
			[]string{"helm.valuesFrom[0]", "exactly one"}, nil},
		{"https chart", map[string]string{"app/fleet.yaml": "helm:\n  chart: https://example.com/c-1.0.0.tgz\n"}, "app",
			[]string{"app/fleet.yaml: helm.chart:", "remote charts are not supported yet here"}, bundle.ErrUnsupported},
		{"oci chart", map[string]string{"app/fleet.yaml": "helm:\n  chart: oci://ghcr.io/x/c\n"}, "app",
			[]string{"helm.chart", "remote charts"}, bundle.ErrUnsupported},
		{"git chart", map[string]string{"app/fleet.yaml": "helm:\n  chart: git::https://github.com/x/y//charts/c\n"}, "app",
			[]string{"helm.chart", "remote charts"}, bundle.ErrUnsupported},
		{"github chart", map[string]string{"app/fleet.yaml": "helm:\n  chart: github.com/x/y//charts/c\n"}, "app",
			[]string{"helm.chart", "remote charts"}, bundle.ErrUnsupported},
		{"repo chart", map[string]string{"app/fleet.yaml": "helm:\n  repo: https://charts.example.com\n  chart: c\n"}, "app",
			[]string{"app/fleet.yaml: helm.chart:", "chart c from https://charts.example.com", "no chart fetcher"}, bundle.ErrUnsupported},
		{"missing chart dir", map[string]string{"app/fleet.yaml": "helm:\n  chart: ./nope\n"}, "app",
			[]string{"bundle repo-app", "app/fleet.yaml: helm.chart:", "app/nope does not exist"}, nil},
		{"chart without Chart.yaml", map[string]string{"app/fleet.yaml": "helm:\n  chart: tpl\n", "app/tpl/x.yaml": cm}, "app",
			[]string{"helm.chart", "app/tpl has no Chart.yaml"}, nil},
		{"hidden chart", map[string]string{"app/fleet.yaml": "helm:\n  chart: .chart\n", "app/.chart/Chart.yaml": "name: c\n"}, "app",
			[]string{"helm.chart", "app/.chart is hidden"}, nil},
		{"chart is a file", map[string]string{"app/fleet.yaml": "helm:\n  chart: x.yaml\n", "app/x.yaml": cm}, "app",
			[]string{"helm.chart", "not a directory"}, nil},
		{"chart leaves repo", map[string]string{"app/fleet.yaml": "helm:\n  chart: ../../elsewhere\n"}, "app",
			[]string{"helm.chart", "leaves the repository"}, bundle.ErrOutsideRepo},
		{"absolute chart", map[string]string{"app/fleet.yaml": "helm:\n  chart: /etc\n"}, "app",
			[]string{"helm.chart", "absolute"}, bundle.ErrOutsideRepo},
		{"missing values file", merge(chart, map[string]string{"app/fleet.yaml": "helm:\n  chart: chart\n  valuesFiles: [a.yaml, missing.yaml]\n", "app/a.yaml": "a: 1\n"}), "app",
			[]string{"bundle repo-app", "app/fleet.yaml: helm.valuesFiles[1]:", "app/missing.yaml does not exist"}, nil},
		{"values file leaves repo", map[string]string{"app/fleet.yaml": "helm:\n  valuesFiles: [../../v.yaml]\n"}, "app",
			[]string{"helm.valuesFiles[0]", "leaves the repository"}, bundle.ErrOutsideRepo},
		{"values file not a map", map[string]string{"app/fleet.yaml": "helm:\n  valuesFiles: [v.yaml]\n", "app/v.yaml": "- a\n"}, "app",
			[]string{"bundle repo-app", "app/v.yaml"}, nil},
		{"values file is a directory", map[string]string{"app/fleet.yaml": "helm:\n  valuesFiles: [v]\n", "app/v/x": ""}, "app",
			[]string{"helm.valuesFiles[0]", "not a regular file"}, nil},
		{"bad namespace", map[string]string{"app/fleet.yaml": "namespace: Not_Valid\n"}, "app",
			[]string{"app/fleet.yaml: namespace:", "Not_Valid"}, nil},
		{"bad default namespace", map[string]string{"app/fleet.yaml": "defaultNamespace: a.b\n"}, "app",
			[]string{"app/fleet.yaml: defaultNamespace:"}, nil},
		{"bad name", map[string]string{"app/fleet.yaml": "name: Bad Name\n"}, "app",
			[]string{"bundle repo-app: app/fleet.yaml: name:"}, nil},
		{"bad label", map[string]string{"app/fleet.yaml": "labels:\n  ok: fine\n  bad key!: x\n"}, "app",
			[]string{"app/fleet.yaml: labels.bad key!:"}, nil},
		{"bad namespace label", map[string]string{"app/fleet.yaml": "namespaceLabels:\n  k: \"not valid value\"\n"}, "app",
			[]string{"app/fleet.yaml: namespaceLabels.k:"}, nil},
		{"dir leaves repo", map[string]string{"x.yaml": cm}, "../x",
			[]string{"leaves the repository"}, bundle.ErrOutsideRepo},
		{"dir is a file", map[string]string{"x.yaml": cm}, "x.yaml",
			[]string{"x.yaml", "not a directory"}, nil},
		{"dir is a link", map[string]string{"real/x.yaml": cm, "link": "->real"}, "link",
			[]string{"link", "symbolic link"}, nil},
		{"file link leaves repo", map[string]string{"app/x.yaml": "->/etc/hostname"}, "app",
			[]string{"bundle repo-app: app/x.yaml:", "leaves the repository"}, bundle.ErrOutsideRepo},
		{"dangling link", map[string]string{"app/x.yaml": "->nowhere.yaml"}, "app",
			[]string{"app/x.yaml", "does not exist"}, nil},
		{"directory link", map[string]string{"app/x.yaml": cm, "app/sub": "->../other", "other/y.yaml": cm}, "app",
			[]string{"app/sub", "directory is not supported"}, nil},
		{"bad fleetignore", map[string]string{"app/.fleetignore": "a[\n", "app/x.yaml": cm}, "app",
			[]string{"bundle repo-app: app/.fleetignore: line 1"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := writeTree(t, tt.files)
			_, _, err := bundle.Read(root, tt.dir, "repo")
			requireValidationError(t, err, tt.want...)
			if tt.wantErr != nil {
				assert.ErrorIs(t, err, tt.wantErr)
			}
		})
	}
}

func TestReadMissingDir(t *testing.T) {
	_, _, err := bundle.Read(t.TempDir(), "missing", "repo")
	require.Error(t, err)
	assert.ErrorIs(t, err, os.ErrNotExist)
	assert.Contains(t, err.Error(), "repo-missing")
}

func TestReadUnreadableFile(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads everything")
	}
	root := writeTree(t, map[string]string{"app/x.yaml": cm})
	require.NoError(t, os.Chmod(filepath.Join(root, "app/x.yaml"), 0))
	_, _, err := bundle.Read(root, "app", "repo")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "app/x.yaml")
}

func merge(maps ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range maps {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}
