package render_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/bundle"
	"github.com/flotilla-gitops/flotilla/internal/deployer"
	"github.com/flotilla-gitops/flotilla/internal/render"
)

const baseFleetYAML = `namespace: app
helm:
  values:
    replicas: 2
    env: ${ .ClusterLabels.env }
`

// writeBundle writes a Helm bundle with the given fleet.yaml (plus extra
// lines) into a new repository and returns its root.
func writeBundle(t *testing.T, fleetYAML string, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	all := map[string]string{
		"app/fleet.yaml":        fleetYAML,
		"app/Chart.yaml":        "apiVersion: v2\nname: app\nversion: 0.1.0\n",
		"app/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  env: {{ .Values.env | quote }}\n  replicas: {{ .Values.replicas | quote }}\n",
		"app/README.md":         "# app\n",
		"app/values.yaml":       "replicas: 1\n",
	}
	for k, v := range files {
		all[k] = v
	}
	for name, content := range all {
		p := filepath.Join(root, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	return root
}

var prodCluster = bundle.Cluster{Name: "c1", Namespace: "fleet-default",
	Labels: map[string]string{"env": "prod", "team": "a"}, Groups: []bundle.Group{{Name: "default"}}}

func deploymentID(t *testing.T, root string, c bundle.Cluster) string {
	t.Helper()
	b, m, err := bundle.Read(root, "app", "repo")
	require.NoError(t, err)
	dep, err := render.ForCluster(b, m.ID(), c, []api.TargetSelector{{ClusterSelector: nil, ClusterGroup: "default"}})
	require.NoError(t, err)
	require.True(t, dep.Deploy)
	return dep.DeploymentID
}

// TestDeploymentID proves which changes redeploy a cluster, as Fleet
// defines the deployment ID (manifestID:optionsHash, options without diff
// and correctDrift).
func TestDeploymentID(t *testing.T) {
	base := deploymentID(t, writeBundle(t, baseFleetYAML, nil), prodCluster)
	relabel := func(k, v string) bundle.Cluster {
		c := prodCluster
		c.Labels = map[string]string{"env": "prod", "team": "a"}
		c.Labels[k] = v
		return c
	}
	tests := []struct {
		name      string
		fleetYAML string
		files     map[string]string
		cluster   bundle.Cluster
		same      bool
	}{
		{name: "diff.comparePatches only", same: true, fleetYAML: baseFleetYAML +
			"diff:\n  comparePatches:\n  - apiVersion: v1\n    kind: ConfigMap\n    name: app\n    jsonPointers: [/data]\n"},
		{name: "correctDrift only", same: true, fleetYAML: baseFleetYAML + "correctDrift:\n  enabled: true\n"},
		{name: "rolloutStrategy only", same: true, fleetYAML: baseFleetYAML + "rolloutStrategy:\n  maxUnavailable: 10%\n"},
		{name: "dependsOn only", same: true, fleetYAML: baseFleetYAML + "dependsOn:\n- name: other\n"},
		{name: "labels only", same: true, fleetYAML: "labels:\n  tier: web\n" + baseFleetYAML},
		{name: "an untemplated cluster label", same: true, cluster: relabel("team", "b")},
		{name: "a helm value", fleetYAML: strings.Replace(baseFleetYAML, "replicas: 2", "replicas: 3", 1)},
		{name: "README.md", files: map[string]string{"app/README.md": "# app v2\n"}},
		{name: "a chart template", files: map[string]string{"app/templates/extra.yaml": "# nothing\n"}},
		{name: "a templated cluster label", cluster: relabel("env", "staging")},
		{name: "forceSyncGeneration", fleetYAML: baseFleetYAML + "forceSyncGeneration: 2\n"},
		{name: "a target customization", fleetYAML: baseFleetYAML +
			"targetCustomizations:\n- name: prod\n  clusterSelector:\n    matchLabels:\n      env: prod\n  helm:\n    values:\n      replicas: 5\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fy := tt.fleetYAML
			if fy == "" {
				fy = baseFleetYAML
			}
			c := tt.cluster
			if c.Name == "" {
				c = prodCluster
			}
			id := deploymentID(t, writeBundle(t, fy, tt.files), c)
			if tt.same {
				assert.Equal(t, base, id, "must not redeploy")
			} else {
				assert.NotEqual(t, base, id, "must redeploy")
			}
		})
	}
}

// TestTemplateHonoursCustomization renders a bundle for two clusters and
// checks that each gets its customized, templated values.
func TestTemplateHonoursCustomization(t *testing.T) {
	root := writeBundle(t, baseFleetYAML+
		"targetCustomizations:\n- name: prod\n  clusterSelector:\n    matchLabels:\n      env: prod\n  helm:\n    values:\n      replicas: 5\n"+
		"- name: skip\n  clusterName: skipped\n  doNotDeploy: true\n", nil)
	b, m, err := bundle.Read(root, "app", "repo")
	require.NoError(t, err)
	d := deployer.New(deployer.Options{})
	restrict := []api.TargetSelector{{ClusterGroup: "default"}}

	dep, out, err := render.Template(context.Background(), d, b, m, prodCluster, restrict, "")
	require.NoError(t, err)
	assert.Equal(t, "app", dep.Namespace)
	assert.Contains(t, string(out), `replicas: "5"`)
	assert.Contains(t, string(out), "env: prod")
	assert.Contains(t, string(out), "namespace: app")

	dev := bundle.Cluster{Name: "c2", Labels: map[string]string{"env": "dev"}, Groups: []bundle.Group{{Name: "default"}}}
	_, out, err = render.Template(context.Background(), d, b, m, dev, restrict, "")
	require.NoError(t, err)
	assert.Contains(t, string(out), `replicas: "2"`)
	assert.Contains(t, string(out), "env: dev")

	skipped := bundle.Cluster{Name: "skipped", Labels: map[string]string{"env": "dev"}, Groups: []bundle.Group{{Name: "default"}}}
	dep, out, err = render.Template(context.Background(), d, b, m, skipped, restrict, "")
	require.NoError(t, err)
	assert.False(t, dep.Deploy, "doNotDeploy")
	assert.Nil(t, out)

	outside := bundle.Cluster{Name: "c3", Labels: map[string]string{"env": "dev"}}
	dep, _, err = render.Template(context.Background(), d, b, m, outside, restrict, "")
	require.NoError(t, err)
	assert.False(t, dep.Deploy, "not in the GitRepo's targets")

	noEnv := bundle.Cluster{Name: "c4", Labels: map[string]string{"team": "a"}, Groups: []bundle.Group{{Name: "default"}}}
	_, _, err = render.Template(context.Background(), d, b, m, noEnv, restrict, "")
	require.Error(t, err, "a template over a missing label fails")
	assert.Contains(t, err.Error(), "cluster c4")
	assert.Contains(t, err.Error(), "bundle repo-app")
}

// TestForClusterDoesNotModifyBundle: customizations are merged and helm
// values templated for the cluster on copies.
func TestForClusterDoesNotModifyBundle(t *testing.T) {
	doc := `
helm:
  values:
    name: ${ .ClusterName }
    env: global.fleet.clusterLabels.env
    nested:
      list: [1, 2]
targetCustomizations:
- clusterSelector: {}
  helm:
    values:
      nested:
        extra: ${ .ClusterLabels.env }
`
	b := bundle.Bundle{Name: "app"}
	require.NoError(t, yaml.Unmarshal([]byte(doc), &b.Options))
	require.NoError(t, yaml.Unmarshal([]byte(doc), &b.Spec))
	before, err := yaml.Marshal(b)
	require.NoError(t, err)
	c := bundle.Cluster{Name: "c1", Labels: map[string]string{"env": "dev"}}
	for range 2 {
		dep, err := render.ForCluster(b, "s-test", c, []api.TargetSelector{{ClusterName: "c1"}})
		require.NoError(t, err)
		require.True(t, dep.Deploy)
		assert.Equal(t, map[string]any{"name": "c1", "env": "dev",
			"nested": map[string]any{"list": []any{1.0, 2.0}, "extra": "dev"}}, dep.Options.Helm.Values)
	}
	after, err := yaml.Marshal(b)
	require.NoError(t, err)
	assert.Equal(t, string(before), string(after))
}

func TestReadyOptions(t *testing.T) {
	ignore := []map[string]string{{"type": "Progressing", "status": "False"}}
	opts := bundle.Options{Helm: &bundle.HelmOptions{WaitForJobs: true}, Ignore: bundle.IgnoreOptions{Conditions: ignore}}
	assert.Equal(t, deployer.ReadyOptions{WaitForJobs: true, IgnoreConditions: ignore}, render.ReadyOptions(opts))
	assert.Equal(t, deployer.ReadyOptions{}, render.ReadyOptions(bundle.Options{}), "no helm options: Jobs need not complete")
}
