package deploy_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestControllerChartSSHHostKeys: knownHosts and additionalKnownHosts
// become the ConfigMap <release>-known-hosts, mounted without subPath and
// passed as --ssh-known-hosts; insecureSkipHostKeyChecks adds
// --insecure-skip-host-key-checks. Neither set: no ConfigMap, no flags.
func TestControllerChartSSHHostKeys(t *testing.T) {
	const (
		github = "github.com ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
		ported = "[git.example.com]:2222 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
	)
	tests := []struct {
		name, vals string
		// wantKnownHosts is the ConfigMap's known_hosts; "" means no
		// ConfigMap, mount or flag.
		wantKnownHosts string
		wantInsecure   bool
	}{
		{name: "defaults", vals: "{}"},
		{name: "knownHosts", vals: "knownHosts: |\n  " + github + "\n", wantKnownHosts: github + "\n"},
		{name: "additionalKnownHosts only", vals: "additionalKnownHosts: ['" + ported + "']", wantKnownHosts: ported + "\n"},
		{
			name:           "both, in order",
			vals:           "knownHosts: '" + github + "'\nadditionalKnownHosts: ['" + ported + "']",
			wantKnownHosts: github + "\n" + ported + "\n",
		},
		{name: "insecure", vals: "insecureSkipHostKeyChecks: true", wantInsecure: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, vals := controllerChartWith(t, tt.vals)
			objs := renderObjects(t, c, controllerRelease, controllerNamespace, vals)
			d := deployment(t, objs, controllerRelease)
			ctr := d.Spec.Template.Spec.Containers[0]
			assert.Equal(t, tt.wantInsecure, slices.Contains(ctr.Args, "--insecure-skip-host-key-checks"))

			cm := find(objs, "ConfigMap", controllerRelease+"-known-hosts")
			file, hasFlag := flagValue(ctr.Args, "--ssh-known-hosts")
			vol := volume(d.Spec.Template.Spec, "known-hosts")
			if tt.wantKnownHosts == "" {
				assert.Nil(t, cm)
				assert.False(t, hasFlag)
				assert.Nil(t, vol)
				return
			}
			require.NotNil(t, cm)
			data, _, err := unstructured.NestedString(cm.Object, "data", "known_hosts")
			require.NoError(t, err)
			assert.Equal(t, strings.Split(strings.TrimSpace(tt.wantKnownHosts), "\n"), strings.Split(strings.TrimSpace(data), "\n"))
			assert.Equal(t, controllerNamespace, cm.GetNamespace())
			assert.Equal(t, "/etc/flotilla/ssh/known_hosts", file)
			assert.Equal(t, "known-hosts", volumeMounts(ctr)["/etc/flotilla/ssh"])
			for _, m := range ctr.VolumeMounts {
				if m.Name == "known-hosts" {
					assert.True(t, m.ReadOnly)
					assert.Empty(t, m.SubPath, "a subPath mount never sees a changed ConfigMap")
				}
			}
			require.NotNil(t, vol)
			require.NotNil(t, vol.ConfigMap)
			assert.Equal(t, controllerRelease+"-known-hosts", vol.ConfigMap.Name)
		})
	}
}
