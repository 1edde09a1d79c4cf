package target

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/fleetyaml"
)

// bundleFromYAML returns a bundle with the options and spec of the
// fleet.yaml doc.
func bundleFromYAML(t *testing.T, name, doc string) fleetyaml.Bundle {
	t.Helper()
	b := fleetyaml.Bundle{Name: name, ManifestID: "s-test"}
	require.NoError(t, yaml.Unmarshal([]byte(doc), &b.Options))
	require.NoError(t, yaml.Unmarshal([]byte(doc), &b.Spec))
	return b
}

func clusterWith(name string, labels ...string) fleetyaml.Cluster {
	c := fleetyaml.Cluster{Name: name, Namespace: "fleet-default", Labels: map[string]string{}}
	for i := 0; i < len(labels); i += 2 {
		c.Labels[labels[i]] = labels[i+1]
	}
	return c
}

// TestTargeted covers which targets apply: the GitRepo's (restrict), a
// bundle's overrideTargets instead, and, without GitRepo targets (as for
// `fleet test`), the bundle's own targets, or the default group for a
// bundle without any.
func TestTargeted(t *testing.T) {
	inDefault := fleetyaml.Cluster{Name: "a", Groups: []fleetyaml.Group{{Name: "default"}}}
	labelled := fleetyaml.Cluster{Name: "b", Labels: map[string]string{"env": "dev"}}
	plain := fleetyaml.Bundle{Name: "plain"}
	custom := fleetyaml.Bundle{Name: "custom", Spec: fleetyaml.Spec{TargetCustomizations: []fleetyaml.Target{{
		TargetSelector: api.TargetSelector{Name: "dev", ClusterName: "b"}}}}}
	fleetTargets := fleetyaml.Bundle{Name: "targets", Spec: fleetyaml.Spec{Targets: []fleetyaml.Target{{
		TargetSelector: api.TargetSelector{ClusterSelector: sel("env", "dev")}}}}}
	override := fleetyaml.Bundle{Name: "o", Spec: fleetyaml.Spec{OverrideTargets: []api.TargetSelector{{ClusterName: "b"}}}}
	gitRepo := []api.TargetSelector{{ClusterGroup: "default"}}
	tests := []struct {
		name     string
		b        fleetyaml.Bundle
		c        fleetyaml.Cluster
		restrict []api.TargetSelector
		want     bool
	}{
		{"no targets anywhere: the default group", plain, inDefault, nil, true},
		{"no targets anywhere: outside the default group", plain, labelled, nil, false},
		{"no GitRepo targets: targetCustomizations select", custom, labelled, nil, true},
		{"no GitRepo targets: targetCustomizations only", custom, inDefault, nil, false},
		{"no GitRepo targets: fleet.yaml targets select", fleetTargets, labelled, nil, true},
		{"GitRepo targets select", custom, inDefault, gitRepo, true},
		{"GitRepo targets replace the bundle's own", custom, labelled, gitRepo, false},
		{"empty GitRepo targets select nothing", plain, inDefault, []api.TargetSelector{}, false},
		{"overrideTargets replace the GitRepo's targets", override, labelled, gitRepo, true},
		{"overrideTargets leave out the GitRepo's clusters", override, inDefault, gitRepo, false},
		{"overrideTargets without GitRepo targets", override, labelled, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Targeted(tt.b, tt.c, tt.restrict)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestTargetedInvalidSelector(t *testing.T) {
	bad := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: "Bogus"}}}
	restrict := []api.TargetSelector{{Name: "broken", ClusterSelector: bad}}
	_, err := Targeted(fleetyaml.Bundle{Name: "app"}, clusterWith("c1"), restrict)
	require.ErrorContains(t, err, "bundle app: cluster c1: target broken: clusterSelector: invalid label selector")

	// Targets are tried in order: a match before the invalid one wins.
	ok, err := Targeted(fleetyaml.Bundle{Name: "app"}, clusterWith("c1"),
		append([]api.TargetSelector{{ClusterName: "c1"}}, restrict...))
	require.NoError(t, err)
	assert.True(t, ok)
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

func TestCustomizeMultiClusterHelm(t *testing.T) {
	b := bundleFromYAML(t, "mc-helm", multiClusterHelm)
	tests := []struct {
		env  string
		want fleetyaml.Options
	}{
		{"dev", fleetyaml.Options{TargetNamespace: "fleet-mc-helm-example",
			Helm: &fleetyaml.HelmOptions{Values: map[string]any{"replication": false}}}},
		{"test", fleetyaml.Options{TargetNamespace: "fleet-mc-helm-example",
			Helm: &fleetyaml.HelmOptions{Values: map[string]any{"replicas": 3.0}}}},
		{"prod", fleetyaml.Options{TargetNamespace: "fleet-mc-helm-example",
			Helm: &fleetyaml.HelmOptions{Values: map[string]any{"serviceType": "LoadBalancer", "replicas": 3.0}}}},
		// No customization: the bundle's options (fleetyaml.ProcessValues
		// then gives a labelled cluster empty helm options, as Fleet does).
		{"other", fleetyaml.Options{TargetNamespace: "fleet-mc-helm-example"}},
	}
	ids := map[string]bool{}
	for _, tt := range tests {
		t.Run(tt.env, func(t *testing.T) {
			got, deploy, err := Customize(b, clusterWith("c-"+tt.env, "env", tt.env))
			require.NoError(t, err)
			assert.True(t, deploy)
			assert.Equal(t, tt.want, got)
			ids[fleetyaml.DeploymentID(b.ManifestID, got)] = true
		})
	}
	assert.Len(t, ids, len(tests), "each environment has its own deployment ID")
	assert.Nil(t, b.Options.Helm, "Customize must not modify the bundle")
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

func TestCustomizeModes(t *testing.T) {
	both := clusterWith("c1", "env", "dev", "region", "eu")
	regionOnly := clusterWith("c2", "region", "eu")
	tests := []struct {
		name string
		mode string
		c    fleetyaml.Cluster
		want fleetyaml.Options
	}{
		{"FirstMatch: the first of two", "", both, fleetyaml.Options{Helm: &fleetyaml.HelmOptions{Atomic: true,
			Values: map[string]any{"base": true, "a": 1.0, "shared": "A"}}}},
		{"FirstMatch: the only one", "", regionOnly, fleetyaml.Options{DefaultNamespace: "eu", Helm: &fleetyaml.HelmOptions{
			Values: map[string]any{"base": true, "b": 2.0, "shared": "B"}}}},
		{"explicit FirstMatch", fleetyaml.FirstMatch, both, fleetyaml.Options{Helm: &fleetyaml.HelmOptions{Atomic: true,
			Values: map[string]any{"base": true, "a": 1.0, "shared": "A"}}}},
		{"AllMatches: both merged in order", fleetyaml.AllMatches, both, fleetyaml.Options{DefaultNamespace: "eu",
			Helm: &fleetyaml.HelmOptions{Atomic: true, Values: map[string]any{"base": true, "a": 1.0, "b": 2.0, "shared": "B"}}}},
		{"AllMatches: none", fleetyaml.AllMatches, clusterWith("c3", "env", "prod"), fleetyaml.Options{Helm: &fleetyaml.HelmOptions{
			Values: map[string]any{"base": true, "shared": "base"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := bundleFromYAML(t, "app", overlapping)
			b.Spec.TargetCustomizationMode = tt.mode
			got, deploy, err := Customize(b, tt.c)
			require.NoError(t, err)
			assert.True(t, deploy)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestCustomizeAllMatchesMergesCustomizationsFirst(t *testing.T) {
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
	got, _, err := Customize(b, clusterWith("c", "env", "dev"))
	require.NoError(t, err)
	assert.Equal(t, 30, got.Helm.TimeoutSeconds)

	b.Spec.TargetCustomizationMode = ""
	got, _, err = Customize(b, clusterWith("c", "env", "dev"))
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

func TestCustomizeDoNotDeploy(t *testing.T) {
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
			opts, deploy, err := Customize(b, clusterWith("c", tt.labels...))
			require.NoError(t, err)
			assert.Equal(t, tt.wantDeploy, deploy)
			if !deploy {
				assert.Equal(t, fleetyaml.Options{}, opts)
			}
		})
	}
}

func TestCustomizeFleetYAMLTargetsAreCustomizations(t *testing.T) {
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
		cluster    fleetyaml.Cluster
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
			opts, deploy, err := Customize(b, tt.cluster)
			require.NoError(t, err)
			assert.Equal(t, tt.wantDeploy, deploy)
			assert.Equal(t, tt.wantNS, opts.DefaultNamespace)
		})
	}
}

func TestCustomizeInvalidSelector(t *testing.T) {
	tests := []struct {
		name, doc, wantErr string
	}{
		{"targetCustomizations", `
targetCustomizations:
- name: ok
  clusterName: c1
- name: bad
  clusterSelector:
    matchExpressions:
    - key: env
      operator: Bogus
`, "bundle app: cluster c1: targetCustomizations[1] (bad): clusterSelector: invalid label selector"},
		{"unnamed fleet.yaml target", `
targets:
- clusterGroupSelector:
    matchExpressions:
    - key: env
      operator: In
`, "bundle app: cluster c1: targets[0]: clusterGroupSelector: invalid label selector"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Fails even for a cluster an earlier customization selects, as
			// Fleet rejects the bundle as a whole.
			_, _, err := Customize(bundleFromYAML(t, "app", tt.doc), clusterWith("c1", "env", "dev"))
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
}
