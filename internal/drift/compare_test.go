package drift_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-gitops/flotilla/internal/bundle"
	"github.com/flotilla-gitops/flotilla/internal/drift"
)

// object decodes a YAML manifest the way a client decodes the server's
// JSON (integers become int64).
func object(t *testing.T, manifest string) *unstructured.Unstructured {
	t.Helper()
	doc, err := yaml.YAMLToJSON([]byte(manifest))
	require.NoError(t, err)
	u := &unstructured.Unstructured{}
	require.NoError(t, u.UnmarshalJSON(doc))
	return u
}

// compileRules compiles patches, failing the test on an error.
func compileRules(t *testing.T, patches ...bundle.ComparePatch) drift.Rules {
	t.Helper()
	rules, err := drift.CompileRules(patches)
	require.NoError(t, err)
	return rules
}

const configMap = `
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: apps}
data: {key: restored, other: same}
`

// extended is configMap with data.extra = value.
func extended(value string) string {
	return `
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: apps}
data: {key: restored, other: same, extra: ` + value + `}
`
}

const editedConfigMap = `
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: apps}
data: {key: edited, other: same}
`

const noisyConfigMap = `
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: apps
  uid: 0b5d2c52-8a4c-4b7e-9d0e-5c1f3f6f0a11
  resourceVersion: "4711"
  generation: 3
  creationTimestamp: "2026-01-02T03:04:05Z"
  selfLink: /api/v1/namespaces/apps/configmaps/settings
  deletionTimestamp: "2026-01-02T04:00:00Z"
  deletionGracePeriodSeconds: 30
  managedFields:
  - manager: flotilla
    operation: Update
    apiVersion: v1
    fieldsType: FieldsV1
    fieldsV1: {"f:data": {"f:key": {}, "f:other": {}}}
data: {key: restored, other: same}
status: {observed: yes}
`

const nullConfigMap = `
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: apps, labels: null, annotations: null}
data: {key: restored, other: same, gone: null}
binaryData: null
`

// webhook returns a webhook configuration of kind whose one webhook has
// CA bundle ca.
func webhook(kind, ca string) string {
	return `
apiVersion: admissionregistration.k8s.io/v1
kind: ` + kind + `
metadata: {name: hooks}
webhooks:
- name: check.example.com
  clientConfig:
    caBundle: ` + ca + `
    service: {name: hooks, namespace: system, port: 443}
`
}

// crd returns a CustomResourceDefinition whose conversion webhook has CA
// bundle ca.
func crd(ca string) string {
	return `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  conversion:
    strategy: Webhook
    webhook:
      conversionReviewVersions: [v1]
      clientConfig:
        caBundle: ` + ca + `
        service: {name: conv, namespace: system}
`
}

// apiService returns an APIService with CA bundle ca.
func apiService(ca string) string {
	return `
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: v1beta1.metrics.k8s.io}
spec:
  group: metrics.k8s.io
  version: v1beta1
  caBundle: ` + ca + `
  service: {name: metrics, namespace: system}
`
}

// deployment returns Deployment apps/web with replicas and image.
func deployment(replicas, image string) string {
	return `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: apps}
spec:
  replicas: ` + replicas + `
  template:
    spec:
      containers:
      - {name: web, image: ` + image + `}
`
}

func TestCompare(t *testing.T) {
	webScaler := []drift.Scaler{{Namespace: "apps", Kind: "Deployment", Name: "web", Min: 2, Max: 5}}
	tests := []struct {
		name       string
		live, want string
		rules      []bundle.ComparePatch
		scalers    []drift.Scaler
		patch      string // "" for no drift
	}{
		{name: "equal", live: configMap, want: configMap},
		{name: "edited data", live: editedConfigMap, want: configMap, patch: `{"data":{"key":"restored"}}`},
		{name: "status and metadata noise", live: noisyConfigMap, want: configMap},
		{name: "noise on the wanted side", live: configMap, want: noisyConfigMap},
		{name: "null fields", live: configMap, want: nullConfigMap},
		{name: "null fields on the live side", live: nullConfigMap, want: configMap},
		{name: "null fields do not hide drift", live: editedConfigMap, want: nullConfigMap, patch: `{"data":{"key":"restored"}}`},
		{
			name: "added field", live: configMap, want: extended("x"), patch: `{"data":{"extra":"x"}}`,
		},
		{
			name: "removed field", live: extended("x"), want: configMap, patch: `{"data":{"extra":null}}`,
		},
		{name: "mutating webhook caBundle", live: webhook("MutatingWebhookConfiguration", "Y2EtMQ=="), want: webhook("MutatingWebhookConfiguration", "Y2EtMg==")},
		{name: "validating webhook caBundle", live: webhook("ValidatingWebhookConfiguration", "Y2EtMQ=="), want: webhook("ValidatingWebhookConfiguration", `""`)},
		{name: "CRD conversion caBundle", live: crd("Y2EtMQ=="), want: crd("Y2EtMg==")},
		{name: "APIService caBundle", live: apiService("Y2EtMQ=="), want: apiService("Y2EtMg==")},
		{
			name: "caBundle of another kind is drift", patch: `{"spec":{"caBundle":"Y2EtMg=="}}`,
			live: `{apiVersion: example.com/v1, kind: APIService, metadata: {name: x}, spec: {caBundle: Y2EtMQ==}}`,
			want: `{apiVersion: example.com/v1, kind: APIService, metadata: {name: x}, spec: {caBundle: Y2EtMg==}}`,
		},
		{name: "replicas without HPA", live: deployment("3", "nginx"), want: deployment("1", "nginx"), patch: `{"spec":{"replicas":1}}`},
		{name: "HPA replicas within bounds", live: deployment("3", "nginx"), want: deployment("1", "nginx"), scalers: webScaler},
		{name: "HPA replicas at the lower bound", live: deployment("2", "nginx"), want: deployment("1", "nginx"), scalers: webScaler},
		{name: "HPA replicas at the upper bound", live: deployment("5", "nginx"), want: deployment("1", "nginx"), scalers: webScaler},
		{name: "HPA replicas above bounds", live: deployment("9", "nginx"), want: deployment("1", "nginx"), scalers: webScaler, patch: `{"spec":{"replicas":1}}`},
		{name: "HPA replicas below bounds", live: deployment("1", "nginx"), want: deployment("3", "nginx"), scalers: webScaler, patch: `{"spec":{"replicas":3}}`},
		{
			name: "HPA does not hide other drift", scalers: webScaler,
			live: deployment("3", "nginx:1"), want: deployment("1", "nginx:2"),
			patch: `{"spec":{"template":{"spec":{"containers":[{"image":"nginx:2","name":"web"}]}}}}`,
		},
		{
			name: "HPA of another object", live: deployment("3", "nginx"), want: deployment("1", "nginx"), patch: `{"spec":{"replicas":1}}`,
			scalers: []drift.Scaler{
				{Namespace: "other", Kind: "Deployment", Name: "web", Min: 1, Max: 5},
				{Namespace: "apps", Kind: "StatefulSet", Name: "web", Min: 1, Max: 5},
				{Namespace: "apps", Kind: "Deployment", Name: "api", Min: 1, Max: 5},
			},
		},
		{
			name: "jsonPointers", live: editedConfigMap, want: configMap,
			rules: []bundle.ComparePatch{{Kind: "ConfigMap", Name: "settings", JSONPointers: []string{"/data/key", "/data/missing"}}},
		},
		{
			name: "remove operation", live: editedConfigMap, want: configMap,
			rules: []bundle.ComparePatch{{Kind: "ConfigMap", Operations: []bundle.Operation{
				{Op: "remove", Path: "/spec/missing"}, {Op: "remove", Path: "/data/key"},
			}}},
		},
		{
			name: "replace operation", live: editedConfigMap, want: configMap,
			rules: []bundle.ComparePatch{{Operations: []bundle.Operation{{Op: "replace", Path: "/data/key", Value: "any"}}}},
		},
		{
			name: "replace does not add a missing field", live: configMap, want: extended("x"), patch: `{"data":{"extra":"y"}}`,
			rules: []bundle.ComparePatch{{Operations: []bundle.Operation{{Op: "replace", Path: "/data/extra", Value: "y"}}}},
		},
		{
			name: "failed test skips its entry", live: editedConfigMap, want: configMap, patch: `{"data":{"key":"restored"}}`,
			rules: []bundle.ComparePatch{{Operations: []bundle.Operation{
				{Op: "remove", Path: "/data/key"}, {Op: "test", Path: "/data/other", Value: "different"},
			}}},
		},
		{
			name: "rule name regex is anchored", live: editedConfigMap, want: configMap, patch: `{"data":{"key":"restored"}}`,
			rules: []bundle.ComparePatch{{Name: "setting", JSONPointers: []string{"/data/key"}}},
		},
		{
			name: "rule name regex", live: editedConfigMap, want: configMap,
			rules: []bundle.ComparePatch{{Name: "sett.*", JSONPointers: []string{"/data/key"}}},
		},
		{
			name: "rule of another kind", live: editedConfigMap, want: configMap, patch: `{"data":{"key":"restored"}}`,
			rules: []bundle.ComparePatch{{Kind: "Secret", JSONPointers: []string{"/data/key"}}},
		},
		{
			name: "namespace-only rule", live: editedConfigMap, want: configMap,
			rules: []bundle.ComparePatch{{Namespace: "apps", JSONPointers: []string{"/data/key"}}},
		},
		{
			name: "namespace-only rule of another namespace", live: editedConfigMap, want: configMap, patch: `{"data":{"key":"restored"}}`,
			rules: []bundle.ComparePatch{{Namespace: "other", JSONPointers: []string{"/data/key"}}},
		},
		{
			name: "ignored object", live: editedConfigMap, want: extended("x"),
			rules: []bundle.ComparePatch{{APIVersion: "v1", Kind: "ConfigMap", Operations: []bundle.Operation{{Op: "ignore"}}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			live, want := object(t, tt.live), object(t, tt.want)
			liveBefore, wantBefore := live.DeepCopy(), want.DeepCopy()
			patch, err := drift.Compare(live, want, compileRules(t, tt.rules...), tt.scalers)
			require.NoError(t, err)
			if tt.patch == "" {
				assert.Nil(t, patch, "patch %s", patch)
			} else {
				assert.JSONEq(t, tt.patch, string(patch))
			}
			assert.Equal(t, liveBefore, live, "live was modified")
			assert.Equal(t, wantBefore, want, "want was modified")
		})
	}
}

func TestCompare_NilObject(t *testing.T) {
	_, err := drift.Compare(nil, object(t, configMap), drift.Rules{}, nil)
	assert.Error(t, err)
	_, err = drift.Compare(object(t, configMap), nil, drift.Rules{}, nil)
	assert.Error(t, err)
}
