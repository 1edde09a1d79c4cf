package drift_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/flotilla-gitops/flotilla/internal/drift"
	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

var (
	configMaps  = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	services    = schema.GroupVersionResource{Version: "v1", Resource: "services"}
	deployments = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
)

// gitConfigMap is ConfigMap name as Git wants it.
func gitConfigMap(name string) string {
	return `
apiVersion: v1
kind: ConfigMap
metadata: {name: ` + name + `, namespace: default, labels: {app: web}}
data: {key: from-git, other: kept}
`
}

// gitDeployment is Deployment name with container ports as Git wants it.
// It leaves out everything the server defaults (strategy,
// revisionHistoryLimit, the containers' protocol, pull policy, resources
// and termination message fields, the pod's DNS and restart policies, …).
func gitDeployment(name, ports string) string {
	return `
apiVersion: apps/v1
kind: Deployment
metadata: {name: ` + name + `, namespace: default}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: nginx
        ports: ` + ports + `
`
}

// webPorts are the container ports of Deployment web.
const webPorts = "[{name: http, containerPort: 80}]"

// gitService leaves out the port's protocol and targetPort, the type, the
// session affinity and the cluster IP, which the server fills in.
func gitService(name string) string {
	return `
apiVersion: v1
kind: Service
metadata: {name: ` + name + `, namespace: default}
spec:
  selector: {app: web}
  ports: [{name: http, port: 80}]
`
}

// clusterFixture is an API server and a dynamic client for it.
type clusterFixture struct {
	dyn dynamic.Interface
}

// ctx returns a context bounding one step.
func (f *clusterFixture) ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// create creates manifest client-side, as Helm does, with field manager
// "flotilla".
func (f *clusterFixture) create(t *testing.T, gvr schema.GroupVersionResource, manifest string) {
	t.Helper()
	obj := object(t, manifest)
	_, err := f.dyn.Resource(gvr).Namespace(obj.GetNamespace()).Create(f.ctx(t), obj, metav1.CreateOptions{FieldManager: "flotilla"})
	require.NoError(t, err)
}

// get reads the live object, managedFields included.
func (f *clusterFixture) get(t *testing.T, gvr schema.GroupVersionResource, name string) *unstructured.Unstructured {
	t.Helper()
	live, err := f.dyn.Resource(gvr).Namespace("default").Get(f.ctx(t), name, metav1.GetOptions{})
	require.NoError(t, err)
	return live
}

// edit changes the live object as kubectl edit does: an Update with field
// manager "kubectl-edit".
func (f *clusterFixture) edit(t *testing.T, gvr schema.GroupVersionResource, name string, change func(obj map[string]any)) {
	t.Helper()
	live := f.get(t, gvr, name)
	change(live.Object)
	_, err := f.dyn.Resource(gvr).Namespace("default").Update(f.ctx(t), live, metav1.UpdateOptions{FieldManager: "kubectl-edit"})
	require.NoError(t, err)
}

// setPort sets the port of a Service's first port.
func setPort(port int64) func(obj map[string]any) {
	return func(obj map[string]any) {
		ports, _, _ := unstructured.NestedSlice(obj, "spec", "ports")
		ports[0].(map[string]any)["port"] = port
		_ = unstructured.SetNestedSlice(obj, ports, "spec", "ports")
	}
}

// drift dry-runs manifest and compares the result with the live object,
// returning the patch and the live object it was computed against.
func (f *clusterFixture) drift(t *testing.T, gvr schema.GroupVersionResource, manifest string) ([]byte, *unstructured.Unstructured) {
	t.Helper()
	desired := object(t, manifest)
	before := desired.DeepCopy()
	want, err := drift.DryRun(f.ctx(t), f.dyn, gvr, true, desired)
	require.NoError(t, err)
	assert.Equal(t, before, desired, "DryRun modified desired")
	live := f.get(t, gvr, desired.GetName())
	patch, err := drift.Compare(live, want, drift.Rules{}, nil)
	require.NoError(t, err)
	return patch, live
}

func TestDryRun_Errors(t *testing.T) {
	ctx := t.Context()
	_, err := drift.DryRun(ctx, nil, configMaps, true, nil)
	assert.Error(t, err)
	noNamespace := object(t, `{apiVersion: v1, kind: ConfigMap, metadata: {name: settings}}`)
	_, err = drift.DryRun(ctx, nil, configMaps, true, noNamespace)
	assert.ErrorContains(t, err, "namespaced object without a namespace")
}

// TestDryRunCompare_Cluster runs DryRun and Compare against a real API
// server, on objects created as Helm creates them and edited as users do.
func TestDryRunCompare_Cluster(t *testing.T) {
	cluster := testenv.StartClusters(t, 1, testenv.Options{})[0]
	dyn, err := dynamic.NewForConfig(cluster.RESTConfig())
	require.NoError(t, err)
	f := &clusterFixture{dyn: dyn}

	t.Run("unchanged objects do not drift despite server defaults", func(t *testing.T) {
		f.create(t, configMaps, gitConfigMap("unchanged"))
		f.create(t, deployments, gitDeployment("web", webPorts))
		f.create(t, services, gitService("unchanged"))
		for _, c := range []struct {
			gvr      schema.GroupVersionResource
			manifest string
		}{{configMaps, gitConfigMap("unchanged")}, {deployments, gitDeployment("web", webPorts)}, {services, gitService("unchanged")}} {
			patch, live := f.drift(t, c.gvr, c.manifest)
			assert.Nil(t, patch, "%s: patch %s", c.gvr.Resource, patch)
			for _, m := range live.GetManagedFields() {
				assert.NotEqual(t, drift.FieldManager, m.Manager, "%s: the dry run was persisted", c.gvr.Resource)
			}
		}
		// The defaults were there to be mistaken for drift.
		web := f.get(t, deployments, "web")
		limit, found, _ := unstructured.NestedInt64(web.Object, "spec", "revisionHistoryLimit")
		assert.True(t, found && limit == 10, "revisionHistoryLimit defaulted: %v %d", found, limit)
		svc := f.get(t, services, "unchanged")
		clusterIP, _, _ := unstructured.NestedString(svc.Object, "spec", "clusterIP")
		assert.NotEmpty(t, clusterIP, "clusterIP allocated")
	})

	t.Run("desired read from the cluster", func(t *testing.T) {
		// A manifest that carries what the server maintains (uid, a stale
		// resourceVersion, managedFields, status) still dry-runs.
		f.create(t, configMaps, gitConfigMap("read"))
		desired := f.get(t, configMaps, "read")
		f.edit(t, configMaps, "read", func(obj map[string]any) {
			require.NoError(t, unstructured.SetNestedField(obj, "blue", "metadata", "labels", "team"))
		})
		require.NoError(t, unstructured.SetNestedField(desired.Object, "x", "status", "phase"))
		require.NotEmpty(t, desired.GetManagedFields())
		want, err := drift.DryRun(f.ctx(t), f.dyn, configMaps, true, desired)
		require.NoError(t, err)
		patch, err := drift.Compare(f.get(t, configMaps, "read"), want, drift.Rules{}, nil)
		require.NoError(t, err)
		assert.Nil(t, patch, "patch %s", patch)
	})

	t.Run("cluster-scoped object", func(t *testing.T) {
		// Helm may render a namespace into a cluster-scoped object.
		role := `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: reader, namespace: default}
rules: [{apiGroups: [""], resources: [configmaps], verbs: [get]}]
`
		roles := schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}
		created := object(t, role)
		created.SetNamespace("")
		_, err := f.dyn.Resource(roles).Create(f.ctx(t), created, metav1.CreateOptions{FieldManager: "flotilla"})
		require.NoError(t, err)
		want, err := drift.DryRun(f.ctx(t), f.dyn, roles, false, object(t, role))
		require.NoError(t, err)
		live, err := f.dyn.Resource(roles).Get(f.ctx(t), "reader", metav1.GetOptions{})
		require.NoError(t, err)
		patch, err := drift.Compare(live, want, drift.Rules{}, nil)
		require.NoError(t, err)
		assert.Nil(t, patch, "patch %s", patch)
	})

	t.Run("data edited by hand", func(t *testing.T) {
		f.create(t, configMaps, gitConfigMap("edited"))
		f.edit(t, configMaps, "edited", func(obj map[string]any) {
			require.NoError(t, unstructured.SetNestedField(obj, "by-hand", "data", "key"))
		})
		patch, live := f.drift(t, configMaps, gitConfigMap("edited"))
		assert.JSONEq(t, `{"data":{"key":"from-git"}}`, string(patch))
		manager, field := drift.Owner(live, patch, "flotilla", drift.FieldManager)
		assert.Equal(t, "kubectl-edit", manager)
		assert.Equal(t, "data.key", field)
	})

	t.Run("label added by hand is not drift", func(t *testing.T) {
		f.create(t, configMaps, gitConfigMap("labelled"))
		f.edit(t, configMaps, "labelled", func(obj map[string]any) {
			require.NoError(t, unstructured.SetNestedField(obj, "blue", "metadata", "labels", "team"))
		})
		patch, _ := f.drift(t, configMaps, gitConfigMap("labelled"))
		assert.Nil(t, patch, "patch %s", patch)
	})

	t.Run("service port changed by hand", func(t *testing.T) {
		// A named port: server-side apply adds Git's port next to the
		// hand-made one, the names clash, and DryRun falls back to an update.
		f.create(t, services, gitService("ported"))
		f.edit(t, services, "ported", setPort(8080))
		patch, live := f.drift(t, services, gitService("ported"))
		assert.JSONEq(t, `{"spec":{"ports":[{"name":"http","port":80,"protocol":"TCP","targetPort":80}]}}`, string(patch))
		manager, field := drift.Owner(live, patch, "flotilla", drift.FieldManager)
		assert.Equal(t, "kubectl-edit", manager)
		assert.Equal(t, "spec.ports", field)

		// Several ports must be named, so an unnamed port takes the same
		// path.
		unnamed := strings.Replace(gitService("unnamed"), "{name: http, port: 80}", "{port: 80}", 1)
		f.create(t, services, unnamed)
		f.edit(t, services, "unnamed", setPort(8080))
		patch, _ = f.drift(t, services, unnamed)
		assert.JSONEq(t, `{"spec":{"ports":[{"port":80,"protocol":"TCP","targetPort":80}]}}`, string(patch))
	})

	t.Run("container port changed by hand", func(t *testing.T) {
		// Unnamed container ports may be several: server-side apply keeps
		// the hand-made port, which another manager owns, and adds Git's.
		f.create(t, deployments, gitDeployment("unnamed", "[{containerPort: 80}]"))
		f.edit(t, deployments, "unnamed", func(obj map[string]any) {
			containers, _, _ := unstructured.NestedSlice(obj, "spec", "template", "spec", "containers")
			containers[0].(map[string]any)["ports"] = []any{map[string]any{"containerPort": int64(8080), "protocol": "TCP"}}
			require.NoError(t, unstructured.SetNestedSlice(obj, containers, "spec", "template", "spec", "containers"))
		})
		patch, _ := f.drift(t, deployments, gitDeployment("unnamed", "[{containerPort: 80}]"))
		var changes struct {
			Spec struct {
				Template struct {
					Spec struct {
						Containers []struct {
							Ports []map[string]any `json:"ports"`
						} `json:"containers"`
					} `json:"spec"`
				} `json:"template"`
			} `json:"spec"`
		}
		require.NoError(t, json.Unmarshal(patch, &changes), "patch %s", patch)
		containers := changes.Spec.Template.Spec.Containers
		require.Len(t, containers, 1, "patch %s", patch)
		assert.Equal(t, []map[string]any{
			{"containerPort": float64(8080), "protocol": "TCP"},
			{"containerPort": float64(80), "protocol": "TCP"},
		}, containers[0].Ports)
	})

	t.Run("null fields in the manifest are not drift", func(t *testing.T) {
		f.create(t, configMaps, gitConfigMap("nulls"))
		f.edit(t, configMaps, "nulls", func(obj map[string]any) {
			require.NoError(t, unstructured.SetNestedField(obj, "by-hand", "metadata", "annotations", "note"))
		})
		withNulls := `
apiVersion: v1
kind: ConfigMap
metadata: {name: nulls, namespace: default, labels: {app: web}, annotations: null, creationTimestamp: null}
data: {key: from-git, other: kept}
binaryData: null
`
		patch, live := f.drift(t, configMaps, withNulls)
		assert.Nil(t, patch, "patch %s", patch)
		assert.Equal(t, map[string]string{"note": "by-hand"}, live.GetAnnotations())
		// Typed objects marshalled to YAML carry creationTimestamp: null
		// and empty structs; Helm charts often template null values.
		deploymentWithNulls := gitDeployment("web", webPorts) + `  strategy: null
  minReadySeconds: null
`
		deploymentWithNulls = strings.Replace(deploymentWithNulls, "metadata: {labels: {app: web}}", "metadata: {labels: {app: web}, creationTimestamp: null, annotations: null}", 1)
		deploymentWithNulls = strings.Replace(deploymentWithNulls, "image: nginx", "image: nginx\n        resources: null\n        env: null", 1)
		patch, _ = f.drift(t, deployments, deploymentWithNulls)
		assert.Nil(t, patch, "patch %s", patch)
	})
}
