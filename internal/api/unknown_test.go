package api

import (
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestUnknownFields(t *testing.T) {
	doc := `apiVersion: fleet.cattle.io/v1alpha1
kind: GitRepo
metadata:
  name: apps
  namespace: fleet-default
  uid: 6f1c          # kubectl get -o yaml: known to Kubernetes
  resourceVersion: "12"
  labels: {team: a}
spec:
  repo: https://example.com/apps.git
  pollingIntreval: 30s   # a typo
  pollingInterval: 1m
  Branch: main           # the decoder matches names case-insensitively
  targets:
  - clusterSelector:
      matchLabels: {env: dev}
    clusterSelectr: {}   # a typo inside a list
  correctDrift:
    enabled: true
    forse: true
status:
  commit: abc            # output, not input
`
	docs, err := Decode(strings.NewReader(doc), "apps.yaml")
	require.NoError(t, err)
	require.Len(t, docs, 1)
	assert.Equal(t, []string{
		`apps.yaml#1: GitRepo fleet-default/apps: unknown field "spec.correctDrift.forse" (ignored)`,
		`apps.yaml#1: GitRepo fleet-default/apps: unknown field "spec.pollingIntreval" (ignored)`,
		`apps.yaml#1: GitRepo fleet-default/apps: unknown field "spec.targets[0].clusterSelectr" (ignored)`,
	}, docs[0].Warnings)
	assert.Equal(t, "main", docs[0].GitRepo.Spec.Branch, "the known fields still decode")
}

func TestUnknownFields_NoneInValidDocuments(t *testing.T) {
	doc := `apiVersion: v1
kind: Secret
metadata: {name: creds}
type: kubernetes.io/basic-auth
stringData: {username: u, password: p}
---
apiVersion: flotilla.dev/v1alpha1
kind: ClusterGroup
metadata: {name: dev}
spec:
  selector:
    matchExpressions: [{key: env, operator: In, values: [dev]}]
`
	docs, err := Decode(strings.NewReader(doc), "x.yaml")
	require.NoError(t, err)
	for _, d := range docs {
		assert.Empty(t, d.Warnings, d.Source)
	}
}

func TestUnknownFields_Types(t *testing.T) {
	type inner struct {
		A string `json:"a"`
	}
	type embedded struct {
		E string `json:"e"`
	}
	type outer struct {
		embedded
		Inline inner            `json:",inline"`
		Items  []inner          `json:"items"`
		ByName map[string]inner `json:"byName"`
		Free   map[string]any   `json:"free"`
		Ptr    *inner           `json:"ptr"`
		Skip   string           `json:"-"`
	}
	raw := map[string]any{
		"e": "x", "a": "x", "Skip": "x", "-": "x",
		"items":  []any{map[string]any{"a": 1, "b": 2}},
		"byName": map[string]any{"k": map[string]any{"c": 3}},
		"free":   map[string]any{"anything": map[string]any{"goes": 1}},
		"ptr":    map[string]any{"d": 4},
	}
	assert.Equal(t, []string{"-", "Skip", "byName.k.c", "items[0].b", "ptr.d"}, UnknownFields(raw, reflect.TypeOf(outer{})))
}
