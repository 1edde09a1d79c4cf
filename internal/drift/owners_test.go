package drift_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/flotilla-gitops/flotilla/internal/drift"
)

// managedDeployment is a Deployment as a GET returns it after Helm created
// it, an HPA scaled it, a user edited its image and labels with kubectl,
// and a drift dry run was applied once.
const managedDeployment = `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: apps
  labels: {app: web, team: blue}
  managedFields:
  - manager: helm
    operation: Update
    apiVersion: apps/v1
    time: "2026-01-01T10:00:00Z"
    fieldsType: FieldsV1
    fieldsV1:
      f:metadata:
        f:labels:
          .: {}
          f:app: {}
      f:spec:
        f:progressDeadlineSeconds: {}
        f:replicas: {}
        f:selector: {}
        f:template:
          f:metadata:
            f:labels:
              .: {}
              f:app: {}
          f:spec:
            f:containers:
              k:{"name":"web"}:
                .: {}
                f:image: {}
                f:name: {}
                f:ports:
                  .: {}
                  k:{"containerPort":80,"protocol":"TCP"}:
                    .: {}
                    f:containerPort: {}
                    f:protocol: {}
  - manager: kube-controller-manager
    operation: Update
    apiVersion: apps/v1
    time: "2026-01-01T10:00:05Z"
    fieldsType: FieldsV1
    subresource: status
    fieldsV1:
      f:status:
        f:replicas: {}
  - manager: hpa-controller
    operation: Update
    apiVersion: apps/v1
    time: "2026-01-01T11:00:00Z"
    fieldsType: FieldsV1
    subresource: scale
    fieldsV1:
      f:spec:
        f:replicas: {}
  - manager: kubectl-edit
    operation: Update
    apiVersion: apps/v1
    time: "2026-01-01T12:00:00Z"
    fieldsType: FieldsV1
    fieldsV1:
      f:metadata:
        f:labels:
          f:team: {}
      f:spec:
        f:template:
          f:spec:
            f:containers:
              k:{"name":"web"}:
                f:image: {}
  - manager: kubectl-scale
    operation: Update
    apiVersion: apps/v1
    time: "2026-01-01T09:00:00Z"
    fieldsType: FieldsV1
    subresource: scale
    fieldsV1:
      f:spec:
        f:replicas: {}
spec:
  replicas: 4
`

func TestOwner(t *testing.T) {
	tests := []struct {
		name    string
		patch   string
		exclude []string
		manager string
		field   string
	}{
		{name: "most recent owner wins", patch: `{"spec":{"replicas":1}}`, manager: "hpa-controller", field: "spec.replicas"},
		{name: "excluded managers are skipped", patch: `{"spec":{"replicas":1}}`, exclude: []string{"hpa-controller"}, manager: "helm", field: "spec.replicas"},
		{name: "older owner", patch: `{"spec":{"replicas":1}}`, exclude: []string{"hpa-controller", "helm"}, manager: "kubectl-scale", field: "spec.replicas"},
		{name: "only excluded owners", patch: `{"spec":{"replicas":1}}`, exclude: []string{"hpa-controller", "kubectl-scale", "helm"}},
		{
			name: "list field", manager: "kubectl-edit", field: "spec.template.spec.containers",
			patch: `{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"nginx:1"}]}}}}`,
		},
		{name: "map key", patch: `{"metadata":{"labels":{"team":null}}}`, manager: "kubectl-edit", field: "metadata.labels.team"},
		{name: "atomic ancestor", patch: `{"spec":{"selector":{"matchLabels":{"app":"web"}}}}`, manager: "helm", field: "spec.selector.matchLabels.app"},
		{
			name: "first changed field in sorted order", exclude: []string{"helm"}, manager: "hpa-controller", field: "spec.replicas",
			patch: `{"spec":{"template":{"spec":{"containers":[]}},"replicas":1},"metadata":{"labels":{"app":"web"}}}`,
		},
		{
			name: "unowned fields are passed over", manager: "kubectl-edit", field: "metadata.labels.team",
			patch: `{"metadata":{"annotations":{"note":"x"},"labels":{"team":"red"}},"spec":{"paused":true}}`,
		},
		{name: "nobody owns it", patch: `{"spec":{"paused":true},"data":{"x":"y"}}`},
		{name: "status subresource manager", patch: `{"status":{"replicas":1}}`, manager: "kube-controller-manager", field: "status.replicas"},
		{name: "empty patch", patch: `{}`},
		{name: "not a merge patch", patch: `[{"op":"remove","path":"/spec"}]`},
	}
	live := object(t, managedDeployment)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			manager, field := drift.Owner(live, []byte(tt.patch), tt.exclude...)
			assert.Equal(t, tt.manager, manager, "manager")
			assert.Equal(t, tt.field, field, "field")
		})
	}
}

func TestOwner_WithoutManagedFields(t *testing.T) {
	manager, field := drift.Owner(object(t, editedConfigMap), []byte(`{"data":{"key":"restored"}}`))
	assert.Empty(t, manager)
	assert.Empty(t, field)
	manager, field = drift.Owner(nil, []byte(`{"data":{"key":"restored"}}`))
	assert.Empty(t, manager)
	assert.Empty(t, field)
}
