package target

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/outcome"
)

// TestBounds covers what a GitRepo's targetNamespace and serviceAccount
// refuse, per cluster: only the customizations selected for the cluster
// count, and the error names the file, the field, the bundle and the
// cluster.
func TestBounds(t *testing.T) {
	const doc = `
namespace: apps
helm:
  valuesFrom:
  - configMapKeyRef: {name: own, namespace: apps}
targetCustomizations:
- name: escape
  clusterName: prod
  namespace: kube-system
- name: same
  clusterName: dev
  namespace: apps
  serviceAccount: deployer
- name: other-sa
  clusterName: qa
  serviceAccount: cluster-admin-sa
- name: read-elsewhere
  clusterName: stage
  helm:
    valuesFrom:
    - secretKeyRef: {name: creds, namespace: kube-system}
- name: second
  clusterSelector: {matchLabels: {env: all}}
  namespace: elsewhere
`
	b := bundleFromYAML(t, "app", doc)
	b.Dir = "apps/web"
	bound := Bounds{Namespace: "apps", ServiceAccount: "deployer"}
	tests := []struct {
		name    string
		bounds  Bounds
		mode    string
		cluster string
		labels  []string
		// field is the refused field, "" when the options are accepted.
		field, setting string
	}{
		{"a customization leaves the targetNamespace", bound, "", "prod", nil, "targetCustomizations[0].namespace", BoundTargetNamespace},
		{"a customization repeats the bounds", bound, "", "dev", nil, "", ""},
		{"a customization names another service account", bound, "", "qa", nil, "targetCustomizations[2].serviceAccount", BoundServiceAccount},
		{"a customization reads values in another namespace", bound, "", "stage", nil,
			"targetCustomizations[3].helm.valuesFrom[0].secretKeyRef.namespace", BoundTargetNamespace},
		{"no customization selected", bound, "", "other", nil, "", ""},
		{"without bounds nothing is refused", Bounds{}, "", "prod", nil, "", ""},
		{"a service account alone does not bind namespaces", Bounds{ServiceAccount: "deployer"}, "", "prod", nil, "", ""},
		{"a namespace alone does not bind service accounts", Bounds{Namespace: "apps"}, "", "qa", nil, "", ""},
		{"FirstMatch: a later match is not selected", bound, "", "dev", []string{"env", "all"}, "", ""},
		{"AllMatches: every match is checked", bound, "AllMatches", "dev", []string{"env", "all"}, "targetCustomizations[4].namespace", BoundTargetNamespace},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bb := b
			bb.Spec.TargetCustomizationMode = tt.mode
			opts, deploy, err := Compile(bb, nil).Bind(tt.bounds).Customize(clusterWith(tt.cluster, tt.labels...))
			if tt.field == "" {
				require.NoError(t, err)
				assert.True(t, deploy)
				return
			}
			require.Error(t, err)
			assert.False(t, deploy)
			assert.Empty(t, opts.TargetNamespace, "no options for a refused cluster")
			var be *BoundsError
			require.True(t, errors.As(err, &be), "a *BoundsError: %v", err)
			assert.Equal(t, tt.field, be.Field)
			assert.Equal(t, tt.setting, be.Setting)
			assert.Equal(t, "apps/web/fleet.yaml", be.File)
			assert.Equal(t, outcome.Invalid, be.Class())
			assert.Contains(t, err.Error(), "bundle app: cluster "+tt.cluster+": apps/web/fleet.yaml: "+tt.field)
		})
	}
}

// TestBounds_BundleOwnServiceAccount: a bundle's own serviceAccount may
// only equal the GitRepo's.
func TestBounds_BundleOwnServiceAccount(t *testing.T) {
	b := bundleFromYAML(t, "app", "serviceAccount: root-ish\n")
	_, _, err := Compile(b, []api.TargetSelector{{ClusterName: "c"}}).Bind(Bounds{ServiceAccount: "deployer"}).Customize(clusterWith("c"))
	var be *BoundsError
	require.True(t, errors.As(err, &be), "a *BoundsError: %v", err)
	assert.Equal(t, "serviceAccount", be.Field)
	assert.Equal(t, "fleet.yaml", be.File)

	_, deploy, err := Compile(b, nil).Bind(Bounds{ServiceAccount: "root-ish"}).Customize(clusterWith("c"))
	require.NoError(t, err)
	assert.True(t, deploy)
}
