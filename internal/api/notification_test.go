package api

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDecode_Notification(t *testing.T) {
	docs, err := Decode(strings.NewReader(`
apiVersion: flotilla.dev/v1alpha1
kind: Notification
metadata: {name: team-a}
spec:
  provider: webhook
  address: https://hooks.example/flotilla
  secretRef: {name: hook-secret}
  eventTypes: [RolloutFailed, DriftDetected]
  severity: warning
  gitRepos: ["app-*"]
  clusters: [prod-1]
`), "n.yaml")
	require.NoError(t, err)
	require.Len(t, docs, 1)
	n := docs[0].Notification
	require.NotNil(t, n)
	assert.Equal(t, KindNotification, docs[0].Kind())
	assert.Equal(t, "fleet-default/team-a", docs[0].Name())
	assert.Equal(t, "hook-secret", n.Spec.SecretRef.Name)
	assert.Equal(t, []string{"app-*"}, n.Spec.GitRepos)
	assert.Empty(t, docs[0].Warnings)
}

func TestDecode_NotificationInvalid(t *testing.T) {
	tests := []struct {
		name, doc, want string
	}{
		{"Fleet's group does not have the kind", `{apiVersion: fleet.cattle.io/v1alpha1, kind: Notification, metadata: {name: a}, spec: {provider: webhook, address: "https://x"}}`,
			`unsupported kind "Notification" with apiVersion "fleet.cattle.io/v1alpha1"`},
		{"unknown provider", `{apiVersion: flotilla.dev/v1alpha1, kind: Notification, metadata: {name: a}, spec: {provider: pager}}`,
			`invalid Notification fleet-default/a: spec.provider: Unsupported value: "pager"`},
		{"webhook without address", `{apiVersion: flotilla.dev/v1alpha1, kind: Notification, metadata: {name: a}, spec: {provider: webhook}}`,
			`spec.address: Required value`},
		{"slack without address or secret", `{apiVersion: flotilla.dev/v1alpha1, kind: Notification, metadata: {name: a}, spec: {provider: slack}}`,
			`spec.address: Required value`},
		{"not a URL", `{apiVersion: flotilla.dev/v1alpha1, kind: Notification, metadata: {name: a}, spec: {provider: msteams, address: "ftp://x/y"}}`,
			`spec.address: Invalid value: "ftp://x/y": not an absolute http(s) URL`},
		{"credentials in the URL", `{apiVersion: flotilla.dev/v1alpha1, kind: Notification, metadata: {name: a}, spec: {provider: webhook, address: "https://u:pw@x/y"}}`,
			`spec.address: Invalid value: "https://x/y": credentials belong in spec.secretRef`},
		{"unknown event type", `{apiVersion: flotilla.dev/v1alpha1, kind: Notification, metadata: {name: a}, spec: {provider: github, eventTypes: [RolloutStarted, Deployed]}}`,
			`spec.eventTypes[1]: Unsupported value: "Deployed"`},
		{"unknown severity", `{apiVersion: flotilla.dev/v1alpha1, kind: Notification, metadata: {name: a}, spec: {provider: gitlab, severity: critical}}`,
			`spec.severity: Unsupported value: "critical"`},
		{"bad glob", `{apiVersion: flotilla.dev/v1alpha1, kind: Notification, metadata: {name: a}, spec: {provider: gitea, bundles: ["a["]}}`,
			`spec.bundles[0]: Invalid value: "a["`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode(strings.NewReader(tt.doc), "n.yaml")
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			assert.NotContains(t, err.Error(), "pw@", "credentials never in errors")
		})
	}
}
