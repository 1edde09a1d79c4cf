package bundle_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/bundle"
)

// drivenRepo is a repository laid out for Fleet's user-driven scan: one
// kustomize base with two options files beside it, one plain directory,
// and a directory whose fleet.yaml lives in a subfolder.
var drivenRepo = map[string]string{
	"apps/kustomize/base/kustomization.yaml": "resources: [cm.yaml]\n",
	"apps/kustomize/base/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: k}\n",
	"apps/kustomize/fleet.yaml":              "namespace: from-fleet-yaml\n",
	"apps/kustomize/dev.yaml":                "namespace: dev\nkustomize: {dir: base}\n",
	"apps/kustomize/prod.yaml":               "namespace: prod\nkustomize: {dir: base}\n",
	"apps/simple/cm.yaml":                    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: s}\n",
	"apps/simple/nested/fleet.yaml":          "namespace: nested\n",
	"apps/sub/test/fleet.yaml":               "namespace: sub\n",
	"apps/sub/cm.yaml":                       "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: sub}\n",
	"envs/dev.yaml":                          "namespace: shared-dev\n",
	"other/fleet.yaml":                       "namespace: other\n",
}

// TestLocate: with bundles, exactly the listed entries, in order, paths
// unused; errors name the entry and the path.
func TestLocate(t *testing.T) {
	root := writeTree(t, drivenRepo)
	got, err := bundle.Locate(root, []string{"other"}, []api.BundlePath{
		{Base: "apps/kustomize", Options: "dev.yaml"},
		{Base: "apps/kustomize", Options: "prod.yaml"},
		{Base: "./apps/simple/"},
		{Base: "apps/sub", Options: "../../envs/dev.yaml"},
	})
	require.NoError(t, err)
	assert.Equal(t, []bundle.Location{
		{Dir: "apps/kustomize", Options: "dev.yaml"}, {Dir: "apps/kustomize", Options: "prod.yaml"},
		{Dir: "apps/simple"}, {Dir: "apps/sub", Options: "../../envs/dev.yaml"},
	}, got, "nested fleet.yaml files and the paths are not scanned")

	got, err = bundle.Locate(root, []string{"other"}, nil)
	require.NoError(t, err)
	assert.Equal(t, []bundle.Location{{Dir: "other"}}, got, "without bundles, Scan")

	tests := []struct {
		name    string
		bundles []api.BundlePath
		want    []string
	}{
		{"missing base", []api.BundlePath{{Base: "apps/simple"}, {Base: "apps/nope"}},
			[]string{"apps/nope: bundles[1].base: does not exist"}},
		{"base is a file", []api.BundlePath{{Base: "apps/simple/cm.yaml"}}, []string{"bundles[0].base: not a directory"}},
		{"missing options file", []api.BundlePath{{Base: "apps/kustomize", Options: "stage.yaml"}},
			[]string{"apps/kustomize/stage.yaml: bundles[0].options: does not exist"}},
		{"options leaving the repository", []api.BundlePath{{Base: "apps", Options: "../../x.yaml"}},
			[]string{"bundles[0].options: path leaves the repository"}},
		{"base leaving the repository", []api.BundlePath{{Base: "../x"}}, []string{"bundles[0].base: path leaves the repository"}},
		{"the same bundle twice", []api.BundlePath{{Base: "apps/simple"}, {Base: "apps/simple/"}},
			[]string{"apps/simple: bundles[1]: the same bundle as bundles[0]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := bundle.Locate(root, nil, tt.bundles)
			requireValidationError(t, err, tt.want...)
		})
	}
}

// TestReadLocation: an entry's options file configures its bundle instead
// of the base's fleet.yaml; neither is a resource, while the other
// options files in the base are; names follow fleet apply --driven-scan.
func TestReadLocation(t *testing.T) {
	root := writeTree(t, drivenRepo)
	r := &bundle.Reader{}
	tests := []struct {
		loc       bundle.Location
		name, ns  string
		resources []string
	}{
		{bundle.Location{Dir: "apps/kustomize", Options: "dev.yaml"}, "repo-apps-kustomize-dev", "dev",
			[]string{"base/cm.yaml", "base/kustomization.yaml", "prod.yaml"}},
		{bundle.Location{Dir: "apps/kustomize", Options: "prod.yaml"}, "repo-apps-kustomize-prod", "prod",
			[]string{"base/cm.yaml", "base/kustomization.yaml", "dev.yaml"}},
		{bundle.Location{Dir: "apps/kustomize"}, "repo-apps-kustomize", "from-fleet-yaml",
			[]string{"base/cm.yaml", "base/kustomization.yaml", "dev.yaml", "prod.yaml"}},
		{bundle.Location{Dir: "apps/sub", Options: "test/fleet.yaml"}, "repo-apps-sub-test-fleet", "sub", []string{"cm.yaml"}},
		{bundle.Location{Dir: "apps/sub", Options: "../../envs/dev.yaml"}, "repo-envs-dev", "shared-dev",
			[]string{"cm.yaml", "test/fleet.yaml"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, m, err := r.ReadLocation(context.Background(), root, tt.loc, "repo")
			require.NoError(t, err)
			assert.Equal(t, tt.name, b.Name)
			assert.Equal(t, tt.loc.Dir, b.Dir)
			assert.Equal(t, tt.ns, b.Options.TargetNamespace)
			assert.Equal(t, tt.resources, resourceNames(m))
		})
	}

	// Names Fleet's integration tests expect (integrationtests/cli/apply:
	// the GitRepo name joined with the base and the options file).
	fleet := writeTree(t, map[string]string{
		"driven2/kustomize/fleetDev.yaml": "", "driven2/kustomize/cm.yaml": drivenRepo["apps/simple/cm.yaml"],
		"driven_fleet_yaml_subfolder/helm/test/fleet.yaml": "",
	})
	for loc, want := range map[bundle.Location]string{
		{Dir: "driven2/kustomize", Options: "fleetDev.yaml"}:                  "assets-driven2-kustomize-fleetdev-2946f474",
		{Dir: "driven_fleet_yaml_subfolder/helm", Options: "test/fleet.yaml"}: "assets-driven-fleet-yaml-subfolder-helm-test-fl-b676f",
	} {
		b, _, err := r.ReadLocation(context.Background(), fleet, loc, "assets")
		require.NoError(t, err)
		assert.Equal(t, want, b.Name)
	}

	_, _, err := r.ReadLocation(context.Background(), root, bundle.Location{Dir: "apps/simple", Options: "gone.yaml"}, "repo")
	requireValidationError(t, err, "bundle repo-apps-simple-gone: apps/simple/gone.yaml: options file: ")
}
