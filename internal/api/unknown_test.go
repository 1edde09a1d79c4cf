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

// Structs embedded inline at any depth, inside lists too, contribute their
// fields (fleet.yaml's targetCustomizations embed a selector and options);
// a top-level status is skipped only for objects with metadata.
func TestUnknownFields_InlineAndStatus(t *testing.T) {
	type helm struct {
		Chart string `json:"chart"`
	}
	type options struct {
		Namespace string `json:"namespace"`
		Helm      *helm  `json:"helm"`
	}
	type target struct {
		TargetSelector `json:",inline"`
		options        `json:",inline"`
	}
	type file struct {
		Name    string `json:"name"`
		options `json:",inline"`
		Targets []target `json:"targets"`
	}
	tests := []struct {
		name string
		raw  map[string]any
		t    reflect.Type
		want []string
	}{
		{"inline fields known at every depth", map[string]any{
			"name": "x", "namespace": "a", "helm": map[string]any{"chart": "c"},
			"targets": []any{map[string]any{"clusterName": "c1", "clusterGroupSelector": map[string]any{"matchLabels": map[string]any{"a": "b"}},
				"namespace": "b", "helm": map[string]any{"chart": "d"}}},
		}, reflect.TypeOf(file{}), nil},
		{"typos inside inline structs", map[string]any{
			"helm":    map[string]any{"chrat": "c"},
			"targets": []any{map[string]any{"clusterSelectr": map[string]any{}, "helm": map[string]any{"vaules": 1}}},
		}, reflect.TypeOf(file{}), []string{"helm.chrat", "targets[0].clusterSelectr", "targets[0].helm.vaules"}},
		{"status is unknown without metadata", map[string]any{"status": "x"}, reflect.TypeOf(file{}), []string{"status"}},
		{"status of an object is output", map[string]any{"status": map[string]any{"commit": "abc"}},
			reflect.TypeOf(GitRepo{}), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, UnknownFields(tt.raw, tt.t))
		})
	}
}
