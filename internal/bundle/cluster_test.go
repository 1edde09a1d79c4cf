package bundle_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-gitops/flotilla/internal/bundle"
)

func matchLabels(kv ...string) *metav1.LabelSelector {
	s := &metav1.LabelSelector{MatchLabels: map[string]string{}}
	for i := 0; i < len(kv); i += 2 {
		s.MatchLabels[kv[i]] = kv[i+1]
	}
	return s
}

func TestTargetSelectorMatches(t *testing.T) {
	dev := bundle.Cluster{Name: "c1", Labels: map[string]string{"env": "dev", "region": "eu"}}
	display := bundle.Cluster{Name: "c-xyz12", Labels: map[string]string{"management.cattle.io/cluster-display-name": "shiny"}}
	inGroups := bundle.Cluster{Name: "c2", Labels: map[string]string{"env": "prod"}, Groups: []bundle.Group{
		{Name: "g1", Labels: map[string]string{"team": "a"}},
		{Name: "g2", Labels: map[string]string{"team": "b"}},
	}}
	tests := []struct {
		name string
		sel  bundle.TargetSelector
		c    bundle.Cluster
		want bool
	}{
		{"clusterName", bundle.TargetSelector{ClusterName: "c1"}, dev, true},
		{"clusterName other", bundle.TargetSelector{ClusterName: "c9"}, dev, false},
		{"clusterName matches display name label", bundle.TargetSelector{ClusterName: "shiny"}, display, true},
		{"clusterName matches name with display label", bundle.TargetSelector{ClusterName: "c-xyz12"}, display, true},
		{"clusterSelector", bundle.TargetSelector{ClusterSelector: matchLabels("env", "dev")}, dev, true},
		{"clusterSelector other", bundle.TargetSelector{ClusterSelector: matchLabels("env", "prod")}, dev, false},
		{"clusterSelector {} matches all", bundle.TargetSelector{ClusterSelector: &metav1.LabelSelector{}}, display, true},
		{"no criteria matches nothing", bundle.TargetSelector{Name: "empty"}, dev, false},
		{"no criteria matches nothing in groups", bundle.TargetSelector{}, inGroups, false},
		{"clusterGroup member", bundle.TargetSelector{ClusterGroup: "g2"}, inGroups, true},
		{"clusterGroup not member", bundle.TargetSelector{ClusterGroup: "g3"}, inGroups, false},
		{"clusterGroup without groups", bundle.TargetSelector{ClusterGroup: "g1"}, dev, false},
		{"clusterGroupSelector", bundle.TargetSelector{ClusterGroupSelector: matchLabels("team", "b")}, inGroups, true},
		{"clusterGroupSelector other", bundle.TargetSelector{ClusterGroupSelector: matchLabels("team", "c")}, inGroups, false},
		{"clusterGroupSelector {} without groups", bundle.TargetSelector{ClusterGroupSelector: &metav1.LabelSelector{}}, dev, true},
		{"AND both match", bundle.TargetSelector{ClusterName: "c1", ClusterSelector: matchLabels("region", "eu")}, dev, true},
		{"AND one fails", bundle.TargetSelector{ClusterName: "c1", ClusterSelector: matchLabels("region", "us")}, dev, false},
		{"AND group and cluster labels", bundle.TargetSelector{ClusterGroup: "g1", ClusterSelector: matchLabels("env", "prod")}, inGroups, true},
		// Criteria must hold for one and the same group.
		{"AND within one group", bundle.TargetSelector{ClusterGroup: "g1", ClusterGroupSelector: matchLabels("team", "b")}, inGroups, false},
		{"AND within one group holds", bundle.TargetSelector{ClusterGroup: "g2", ClusterGroupSelector: matchLabels("team", "b")}, inGroups, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.sel.Matches(tt.c)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestTargetSelectorMatchesInvalid(t *testing.T) {
	bad := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: "Bogus"}}}
	_, err := bundle.TargetSelector{Name: "prod", ClusterSelector: bad}.Matches(bundle.Cluster{Name: "c"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "target prod: clusterSelector: invalid label selector")

	_, err = bundle.TargetSelector{ClusterGroupSelector: bad}.Matches(bundle.Cluster{Name: "c"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "clusterGroupSelector")
}

// bundleFromYAML returns a bundle with the options and spec of the
// fleet.yaml doc.
func bundleFromYAML(t *testing.T, name, doc string) bundle.Bundle {
	t.Helper()
	b := bundle.Bundle{Name: name, ManifestID: "s-test"}
	require.NoError(t, yaml.Unmarshal([]byte(doc), &b.Options))
	require.NoError(t, yaml.Unmarshal([]byte(doc), &b.Spec))
	return b
}

func clusterWith(name string, labels ...string) bundle.Cluster {
	c := bundle.Cluster{Name: name, Namespace: "fleet-default", Labels: map[string]string{}}
	for i := 0; i < len(labels); i += 2 {
		c.Labels[labels[i]] = labels[i+1]
	}
	return c
}

// multiClusterHelm is fleet-examples' multi-cluster/helm/fleet.yaml.
const multiClusterHelm = `
namespace: fleet-mc-helm-example
targetCustomizations:
- name: dev
  helm:
    values:
      replication: false
  clusterSelector:
    matchLabels:
      env: dev
- name: test
  helm:
    values:
      replicas: 3
  clusterSelector:
    matchLabels:
      env: test
- name: prod
  helm:
    values:
      serviceType: LoadBalancer
      replicas: 3
  clusterSelector:
    matchLabels:
      env: prod
`

func TestForClusterMultiClusterHelm(t *testing.T) {
	b := bundleFromYAML(t, "mc-helm", multiClusterHelm)
	tests := []struct {
		env  string
		want bundle.Options
	}{
		{"dev", bundle.Options{TargetNamespace: "fleet-mc-helm-example",
			Helm: &bundle.HelmOptions{Values: map[string]any{"replication": false}}}},
		{"test", bundle.Options{TargetNamespace: "fleet-mc-helm-example",
			Helm: &bundle.HelmOptions{Values: map[string]any{"replicas": 3.0}}}},
		{"prod", bundle.Options{TargetNamespace: "fleet-mc-helm-example",
			Helm: &bundle.HelmOptions{Values: map[string]any{"serviceType": "LoadBalancer", "replicas": 3.0}}}},
		// No customization: the bundle's options, except that Fleet gives a
		// labelled cluster empty helm options.
		{"other", bundle.Options{TargetNamespace: "fleet-mc-helm-example", Helm: &bundle.HelmOptions{}}},
	}
	ids := map[string]bool{}
	for _, tt := range tests {
		t.Run(tt.env, func(t *testing.T) {
			got, deploy, err := b.ForCluster(clusterWith("c-"+tt.env, "env", tt.env))
			require.NoError(t, err)
			assert.True(t, deploy)
			assert.Equal(t, tt.want, got)
			ids[bundle.DeploymentID(b.ManifestID, got)] = true
		})
	}
	assert.Len(t, ids, len(tests), "each environment has its own deployment ID")
	assert.Nil(t, b.Options.Helm, "ForCluster must not modify the bundle")
}

const overlapping = `
helm:
  values:
    base: true
    shared: base
targetCustomizations:
- name: by-env
  helm:
    values:
      a: 1
      shared: A
    atomic: true
  clusterSelector:
    matchLabels:
      env: dev
- name: by-region
  helm:
    values:
      b: 2
      shared: B
  defaultNamespace: eu
  clusterSelector:
    matchLabels:
      region: eu
`

func TestForClusterModes(t *testing.T) {
	both := clusterWith("c1", "env", "dev", "region", "eu")
	regionOnly := clusterWith("c2", "region", "eu")

	first := bundleFromYAML(t, "app", overlapping)
	got, deploy, err := first.ForCluster(both)
	require.NoError(t, err)
	assert.True(t, deploy)
	assert.Equal(t, bundle.Options{Helm: &bundle.HelmOptions{Atomic: true,
		Values: map[string]any{"base": true, "a": 1.0, "shared": "A"}}}, got)

	got, _, err = first.ForCluster(regionOnly)
	require.NoError(t, err)
	assert.Equal(t, bundle.Options{DefaultNamespace: "eu", Helm: &bundle.HelmOptions{
		Values: map[string]any{"base": true, "b": 2.0, "shared": "B"}}}, got)

	all := bundleFromYAML(t, "app", overlapping+"targetCustomizationMode: AllMatches\n")
	got, deploy, err = all.ForCluster(both)
	require.NoError(t, err)
	assert.True(t, deploy)
	assert.Equal(t, bundle.Options{DefaultNamespace: "eu", Helm: &bundle.HelmOptions{Atomic: true,
		Values: map[string]any{"base": true, "a": 1.0, "b": 2.0, "shared": "B"}}}, got)

	got, _, err = all.ForCluster(clusterWith("c3", "env", "prod"))
	require.NoError(t, err)
	assert.Equal(t, bundle.Options{Helm: &bundle.HelmOptions{
		Values: map[string]any{"base": true, "shared": "base"}}}, got)
}

func TestForClusterAllMatchesMergesCustomizationsFirst(t *testing.T) {
	// Fleet merges the matching customizations together, then onto the
	// bundle: a negative timeout in a customization zeroes only the
	// customizations' timeout, so the bundle's stays.
	b := bundleFromYAML(t, "app", `
helm:
  timeoutSeconds: 30
targetCustomizationMode: AllMatches
targetCustomizations:
- clusterSelector: {}
  helm:
    timeoutSeconds: -1
`)
	got, _, err := b.ForCluster(clusterWith("c", "env", "dev"))
	require.NoError(t, err)
	assert.Equal(t, 30, got.Helm.TimeoutSeconds)

	b.Spec.TargetCustomizationMode = ""
	got, _, err = b.ForCluster(clusterWith("c", "env", "dev"))
	require.NoError(t, err)
	assert.Equal(t, 0, got.Helm.TimeoutSeconds)
}

const withDoNotDeploy = `
targetCustomizations:
- name: dev
  clusterSelector:
    matchLabels:
      env: dev
  helm:
    values:
      dev: true
- name: skip-eu
  clusterSelector:
    matchLabels:
      region: eu
  doNotDeploy: true
`

func TestForClusterDoNotDeploy(t *testing.T) {
	tests := []struct {
		name       string
		mode       string
		labels     []string
		wantDeploy bool
	}{
		{"first match says doNotDeploy", "", []string{"region", "eu"}, false},
		{"first match deploys", "", []string{"env", "dev", "region", "eu"}, true},
		{"AllMatches any says doNotDeploy", "AllMatches", []string{"env", "dev", "region", "eu"}, false},
		{"AllMatches none says doNotDeploy", "AllMatches", []string{"env", "dev"}, true},
		{"no match deploys", "AllMatches", []string{"env", "prod"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := bundleFromYAML(t, "app", withDoNotDeploy)
			b.Spec.TargetCustomizationMode = tt.mode
			opts, deploy, err := b.ForCluster(clusterWith("c", tt.labels...))
			require.NoError(t, err)
			assert.Equal(t, tt.wantDeploy, deploy)
			if !deploy {
				assert.Equal(t, bundle.Options{}, opts)
			}
		})
	}
}

func TestForClusterFleetYAMLTargetsAreCustomizations(t *testing.T) {
	b := bundleFromYAML(t, "app", `
defaultNamespace: base
targets:
- name: by-name
  clusterName: c1
  defaultNamespace: from-target
- name: skip
  clusterSelector:
    matchLabels:
      skip: "true"
  doNotDeploy: true
targetCustomizations:
- name: all
  clusterSelector: {}
  defaultNamespace: from-customization
`)
	tests := []struct {
		cluster    bundle.Cluster
		wantNS     string
		wantDeploy bool
	}{
		// fleet.yaml targets come before targetCustomizations, as in Fleet.
		{clusterWith("c1", "env", "dev"), "from-target", true},
		{clusterWith("c2", "env", "dev"), "from-customization", true},
		{clusterWith("c3", "skip", "true"), "", false},
	}
	for _, tt := range tests {
		t.Run(tt.cluster.Name, func(t *testing.T) {
			opts, deploy, err := b.ForCluster(tt.cluster)
			require.NoError(t, err)
			assert.Equal(t, tt.wantDeploy, deploy)
			assert.Equal(t, tt.wantNS, opts.DefaultNamespace)
		})
	}
}

func TestForClusterInvalidSelector(t *testing.T) {
	b := bundleFromYAML(t, "app", `
targetCustomizations:
- name: ok
  clusterName: c1
- name: bad
  clusterSelector:
    matchExpressions:
    - key: env
      operator: Bogus
`)
	// Fails even for a cluster the first customization selects, as Fleet
	// rejects the bundle as a whole.
	_, _, err := b.ForCluster(clusterWith("c1", "env", "dev"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "bundle app: cluster c1: targetCustomizations[1] (bad): clusterSelector: invalid label selector")
}

func TestForClusterDoesNotModifyBundle(t *testing.T) {
	b := bundleFromYAML(t, "app", `
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
`)
	before, err := yaml.Marshal(b)
	require.NoError(t, err)
	for range 2 {
		opts, _, err := b.ForCluster(clusterWith("c1", "env", "dev"))
		require.NoError(t, err)
		assert.Equal(t, map[string]any{"name": "c1", "env": "dev",
			"nested": map[string]any{"list": []any{1.0, 2.0}, "extra": "dev"}}, opts.Helm.Values)
	}
	after, err := yaml.Marshal(b)
	require.NoError(t, err)
	assert.Equal(t, string(before), string(after))
}
