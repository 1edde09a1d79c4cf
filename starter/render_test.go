package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const renderCM = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\ndata:\n  k: v\n"

// writeRepo writes files (slash path → content) into a new directory.
func writeRepo(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	return root
}

func cm(name string) string { return strings.Replace(renderCM, "%s", name, 1) }

// runRenderCmd runs `flotilla render` with args and returns its stdout,
// stderr and error.
func runRenderCmd(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	root := newRootCommand()
	var stdout, stderr bytes.Buffer
	root.SetOut(&stdout)
	root.SetErr(&stderr)
	root.SetArgs(append([]string{"render", "--chart-cache", t.TempDir()}, args...))
	err := root.Execute()
	return stdout.String(), stderr.String(), err
}

// warnRepo has a fleet.yaml with a typo and a raw YAML file Fleet skips.
func warnRepo(t *testing.T) string {
	return writeRepo(t, map[string]string{
		"app/fleet.yaml": "namespace: app\nhelm:\n  chrat: x\n",
		"app/good.yaml":  cm("good"),
		"app/bad.yaml":   cm("skipped") + "---\napiVersion: v1\nmetadata: {name: nokind}\n",
	})
}

// Bundle warnings go to stderr, one "Warning: " line each; the objects
// still render, without the skipped file's.
func TestRender_WarningsOnStderr(t *testing.T) {
	stdout, stderr, err := runRenderCmd(t, warnRepo(t))
	require.NoError(t, err)
	assert.Equal(t, `Warning: app/fleet.yaml: unknown field "helm.chrat" (ignored)`+"\n"+
		"Warning: app/bad.yaml: document 2 has no kind; the file is skipped, as Fleet skips it\n", stderr)
	assert.Contains(t, stdout, "name: good")
	assert.NotContains(t, stdout, "name: skipped", "the whole file is skipped, as Fleet skips it")
	assert.Contains(t, stdout, "namespace: app", "the known keys apply")
}

// --strict turns the warnings into an error listing them, for CI.
func TestRender_StrictFailsOnWarnings(t *testing.T) {
	stdout, stderr, err := runRenderCmd(t, warnRepo(t), "--strict")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--strict: 2 warnings")
	assert.Contains(t, err.Error(), `app/fleet.yaml: unknown field "helm.chrat" (ignored)`)
	assert.Contains(t, err.Error(), "app/bad.yaml: document 2 has no kind")
	assert.Contains(t, stderr, "Warning: app/bad.yaml")
	assert.Empty(t, stdout, "nothing is rendered")

	clean := writeRepo(t, map[string]string{"app/fleet.yaml": "namespace: app\n", "app/good.yaml": cm("good")})
	stdout, stderr, err = runRenderCmd(t, clean, "--strict")
	require.NoError(t, err, "no warnings, no error")
	assert.Empty(t, stderr)
	assert.Contains(t, stdout, "name: good")
}

// --gitrepo renders as the GitRepo's rollout: its targets place a bundle
// that has none of its own, its paths, name and options apply.
func TestRender_GitRepoTargetsPlaceTheBundle(t *testing.T) {
	repo := writeRepo(t, map[string]string{
		"app/fleet.yaml":   "namespace: app\n",
		"app/cm.yaml":      cm("web"),
		"other/fleet.yaml": "",
		"other/cm.yaml":    cm("other"),
	})
	gitrepo := filepath.Join(t.TempDir(), "gitrepo.yaml")
	require.NoError(t, os.WriteFile(gitrepo, []byte(`apiVersion: fleet.cattle.io/v1alpha1
kind: GitRepo
metadata: {name: shop, namespace: team-a}
spec:
  repo: https://git.example/shop.git
  paths: [app]
  targetNamespace: forced
  targets:
  - clusterSelector: {matchLabels: {env: prod}}
  pollingIntreval: 1m
`), 0o600))

	_, _, err := runRenderCmd(t, repo, "--cluster-label", "env=prod", "--paths", "app")
	require.Error(t, err, "without the GitRepo, a bundle without targets goes to group default only")
	assert.Contains(t, err.Error(), "no bundle under")

	stdout, stderr, err := runRenderCmd(t, repo, "--cluster-label", "env=prod", "--gitrepo", gitrepo, "--bundles", "-o", "json")
	require.NoError(t, err)
	assert.Contains(t, stderr, `Warning: `+gitrepo+`#1: GitRepo team-a/shop: unknown field "spec.pollingIntreval" (ignored)`)
	assert.Contains(t, stdout, `"name": "shop-app"`, "the GitRepo's name prefixes bundle names")
	assert.NotContains(t, stdout, "other", "only the GitRepo's paths")
	assert.Contains(t, stdout, `"deploy": true`)
	assert.Contains(t, stdout, `"namespace": "forced"`, "targetNamespace applies")

	stdout, _, err = runRenderCmd(t, repo, "--cluster-label", "env=prod", "--gitrepo", gitrepo)
	require.NoError(t, err)
	assert.Contains(t, stdout, "# Bundle: shop-app\n")
	assert.Contains(t, stdout, "namespace: forced")

	_, _, err = runRenderCmd(t, repo, "--cluster-label", "env=dev", "--gitrepo", gitrepo)
	require.Error(t, err, "the GitRepo does not target env=dev")
	assert.Contains(t, err.Error(), "GitRepo shop has 1 targets")
}

// --cluster-group-label gives a group the labels clusterGroupSelector
// matches.
func TestRender_ClusterGroupLabels(t *testing.T) {
	repo := writeRepo(t, map[string]string{
		"app/fleet.yaml": "namespace: app\ntargetCustomizations:\n" +
			"- name: gold\n  clusterGroupSelector: {matchLabels: {tier: gold}}\n  namespace: gold\n",
		"app/cm.yaml": cm("web"),
	})
	_, _, err := runRenderCmd(t, repo, "--cluster-group", "edge")
	require.Error(t, err, "group edge has no labels: the selector does not match")
	assert.Contains(t, err.Error(), "groups edge)")

	stdout, _, err := runRenderCmd(t, repo, "--cluster-group", "edge", "--cluster-group-label", "edge:tier=gold")
	require.NoError(t, err)
	assert.Contains(t, stdout, "namespace: gold", "placed with the customization")

	_, _, err = runRenderCmd(t, repo, "--cluster-group", "edge", "--cluster-group-label", "core:tier=gold")
	require.ErrorContains(t, err, "the cluster is not in group core")
	_, _, err = runRenderCmd(t, repo, "--cluster-group", "edge", "--cluster-group-label", "edge=tier")
	require.ErrorContains(t, err, "want GROUP:key=value")
}

// --groups evaluates ClusterGroup selectors against the cluster's labels,
// as a rollout does; the same file may hold the GitRepo.
func TestRender_GroupsFile(t *testing.T) {
	repo := writeRepo(t, map[string]string{
		"app/fleet.yaml": "namespace: app\ntargetCustomizations:\n" +
			"- name: gold\n  clusterGroupSelector: {matchLabels: {tier: gold}}\n  namespace: gold\n",
		"app/cm.yaml": cm("web"),
	})
	file := filepath.Join(t.TempDir(), "fleet.yaml")
	require.NoError(t, os.WriteFile(file, []byte(`apiVersion: fleet.cattle.io/v1alpha1
kind: ClusterGroup
metadata: {name: prod, labels: {tier: gold}}
spec:
  selector: {matchLabels: {env: prod}}
---
apiVersion: fleet.cattle.io/v1alpha1
kind: ClusterGroup
metadata: {name: dev}
spec:
  selector: {matchLabels: {env: dev}}
---
apiVersion: fleet.cattle.io/v1alpha1
kind: GitRepo
metadata: {name: shop}
spec:
  repo: https://git.example/shop.git
  targets:
  - clusterGroup: prod
`), 0o600))

	stdout, stderr, err := runRenderCmd(t, repo, "--groups", file, "--cluster-label", "env=prod")
	require.NoError(t, err)
	assert.Empty(t, stderr)
	assert.Contains(t, stdout, "namespace: gold", "in group prod, whose labels the customization selects")

	_, _, err = runRenderCmd(t, repo, "--groups", file, "--cluster-label", "env=dev")
	require.Error(t, err, "group dev has no tier label")
	assert.Contains(t, err.Error(), "groups dev)")

	stdout, _, err = runRenderCmd(t, repo, "--groups", file, "--gitrepo", file, "--cluster-label", "env=prod")
	require.NoError(t, err)
	assert.Contains(t, stdout, "# Bundle: shop-app\n", "the GitRepo targets clusterGroup prod")
	assert.Contains(t, stdout, "namespace: gold")
	_, _, err = runRenderCmd(t, repo, "--groups", file, "--gitrepo", file, "--cluster-label", "env=dev")
	require.ErrorContains(t, err, "no bundle under", "the GitRepo does not target group dev")

	noGroups := filepath.Join(t.TempDir(), "gitrepo.yaml")
	require.NoError(t, os.WriteFile(noGroups, []byte("apiVersion: fleet.cattle.io/v1alpha1\nkind: GitRepo\n"+
		"metadata: {name: shop}\nspec: {repo: https://git.example/shop.git}\n"), 0o600))
	_, _, err = runRenderCmd(t, repo, "--groups", noGroups)
	require.ErrorContains(t, err, "holds no ClusterGroup")
	_, _, err = runRenderCmd(t, repo, "--gitrepo", file+"-missing")
	require.ErrorContains(t, err, "--gitrepo")
}
