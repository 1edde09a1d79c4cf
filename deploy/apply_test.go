package deploy_test

import (
	"context"
	"encoding/base64"
	"maps"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/kube"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"

	"github.com/flotilla-gitops/flotilla/deploy"
	"github.com/flotilla-gitops/flotilla/internal/deployer"
	"github.com/flotilla-gitops/flotilla/internal/keyring"
	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

// crdGVR is the resource of CustomResourceDefinitions.
var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// TestChartsApplyToAPIServer server-side applies, as a dry run, every object
// both charts render to a real kube-apiserver, which defaults and validates
// them exactly as an install would.
func TestChartsApplyToAPIServer(t *testing.T) {
	clusters := testenv.StartClusters(t, 1, testenv.Options{})
	cfg := clusters[0].RESTConfig()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	cs := clusters[0].Clientset(t)
	for _, ns := range []string{agentNamespace, controllerNamespace} {
		_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	createServiceMonitorCRD(ctx, t, dyn)
	mapper := newMapper(t, cfg)

	t.Run("agent", func(t *testing.T) {
		c, err := deploy.AgentChart()
		require.NoError(t, err)
		objs := renderObjects(t, c, agentRelease, agentNamespace, agentValues(t))
		applied := applyAll(ctx, t, dyn, mapper, objs)
		d := appliedDeployment(t, applied, agentRelease)
		assertPodSpec(t, d.Spec.Template.Spec, wantAffinity)
		args := d.Spec.Template.Spec.Containers[0].Args
		assert.Equal(t, []string{"env=prod", "region=eu-west-1"}, flagValues(args, "--label"))
		assert.Contains(t, envSecretRefs(d.Spec.Template.Spec.Containers[0]), "FLOTILLA_REGISTRATION_TOKEN")
		assert.Equal(t, "0123abcd", d.Spec.Template.Annotations["flotilla.dev/config-hash"])
	})
	t.Run("controller", func(t *testing.T) {
		c, err := deploy.ControllerChart()
		require.NoError(t, err)
		vals := controllerValues(t, `
webhook:
  enabled: true
  existingSecret: flotilla-webhook
  requireSignature: true
  maxBodyBytes: 1048576
  ingress: {enabled: true, className: nginx, host: hooks.example.com, tls: [{hosts: [hooks.example.com], secretName: hooks-tls}]}
metrics: {serviceMonitor: {enabled: true, labels: {release: prometheus}}}
rbac: {clusterAdmin: true}
extraVolumes: [{name: agent-ca, secret: {secretName: agent-ca}}]
extraVolumeMounts: [{name: agent-ca, mountPath: /etc/flotilla/agent, readOnly: true}]
topologySpreadConstraints: [{maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway}]
persistence: {emptyDir: {sizeLimit: 2Gi}}
payloadEncryption:
  enabled: true
  existingSecret: flotilla-payload-keys
  codecTokenSecret: {name: flotilla-codec, key: bearer}
  corsOrigins: [https://temporal.example.com]
`)
		objs := renderObjects(t, c, controllerRelease, controllerNamespace, vals)
		for _, kind := range []string{"ServiceMonitor", "Ingress", "PodDisruptionBudget"} {
			require.NotNil(t, find(objs, kind, controllerRelease), kind)
		}
		require.NotNil(t, find(objs, "Secret", controllerRelease+"-seal-keys"))
		applied := applyAll(ctx, t, dyn, mapper, objs)
		d := appliedDeployment(t, applied, controllerRelease)
		assert.Equal(t, int32(2), *d.Spec.Replicas)
		pod := d.Spec.Template.Spec
		assertPodSpec(t, pod, wantControllerAffinity)
		require.Len(t, pod.TopologySpreadConstraints, 1)
		assert.Equal(t, &metav1.LabelSelector{MatchLabels: controllerSelector}, pod.TopologySpreadConstraints[0].LabelSelector)
		require.NotNil(t, volume(pod, "state").EmptyDir)
		assert.Equal(t, "2Gi", volume(pod, "state").EmptyDir.SizeLimit.String())
		pdb := podDisruptionBudget(t, applied, controllerRelease)
		assert.Equal(t, 1, pdb.Spec.MinAvailable.IntValue())
		args := pod.Containers[0].Args
		for flag, want := range map[string]string{
			"--seal-keys":        "/etc/flotilla/seal-keys",
			"--payload-keys":     "/etc/flotilla/payload-keys",
			"--codec-token-file": "/etc/flotilla/codec/token",
		} {
			got, _ := flagValue(args, flag)
			assert.Equal(t, want, got, flag)
		}
		assert.Equal(t, []string{"https://temporal.example.com"}, flagValues(args, "--codec-cors-origin"))
		listen, _ := flagValue(args, "--webhook-listen")
		assert.Equal(t, ":8080", listen)
		secrets, _ := flagValue(args, "--webhook-secrets")
		assert.Equal(t, "/etc/flotilla/webhook", secrets)
		maxBody, _ := flagValue(args, "--webhook-max-body")
		assert.Equal(t, "1048576", maxBody)
		assert.Contains(t, args, "--webhook-require-signature")
		assert.Equal(t, "webhook-secrets", volumeMounts(d.Spec.Template.Spec.Containers[0])["/etc/flotilla/webhook"])
		assert.Contains(t, volumeMounts(d.Spec.Template.Spec.Containers[0]), "/etc/flotilla/agent")
	})
}

// assertPodSpec checks what both charts' tests set in a pod spec the API
// server returned: scheduling (with affinity, which the charts complete
// differently), resources, flags and credentials.
func assertPodSpec(t *testing.T, pod corev1.PodSpec, affinity *corev1.Affinity) {
	t.Helper()
	assert.Equal(t, wantTolerations, pod.Tolerations)
	assert.Equal(t, affinity, pod.Affinity)
	assert.Equal(t, wantNodeSelector, pod.NodeSelector)
	require.Len(t, pod.Containers, 1)
	ctr := pod.Containers[0]
	assert.True(t, wantResources.Requests.Cpu().Equal(*ctr.Resources.Requests.Cpu()), "cpu request")
	assert.True(t, wantResources.Limits.Memory().Equal(*ctr.Resources.Limits.Memory()), "memory limit")
	addr, _ := flagValue(ctr.Args, "--temporal-address")
	assert.Equal(t, "temporal.example.com:7233", addr)
	ca, _ := flagValue(ctr.Args, "--tls-ca")
	assert.Equal(t, "/etc/flotilla/temporal/ca.crt", ca)
	refs := envSecretRefs(ctr)
	assert.Contains(t, refs, "FLOTILLA_API_KEY")
	assert.Contains(t, refs, "FLOTILLA_CONTENT_REGISTRY_PASSWORD")
	assert.Contains(t, ctr.Env, corev1.EnvVar{Name: "HTTPS_PROXY", Value: "http://proxy:3128"})
	assert.Equal(t, "/healthz", ctr.LivenessProbe.HTTPGet.Path)
	assert.Equal(t, "/readyz", ctr.ReadinessProbe.HTTPGet.Path)
}

// newMapper returns a RESTMapper backed by the API server's discovery.
func newMapper(t *testing.T, cfg *rest.Config) *restmapper.DeferredDiscoveryRESTMapper {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	require.NoError(t, err)
	return restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
}

// applyAll server-side applies objs as a dry run with strict field
// validation and returns what the API server answered, in the same order.
func applyAll(ctx context.Context, t *testing.T, dyn dynamic.Interface, mapper *restmapper.DeferredDiscoveryRESTMapper, objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		require.NoError(t, err, "mapping %s", gvk)
		var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if m.Scope.Name() == "namespace" {
			ri = dyn.Resource(m.Resource).Namespace(o.GetNamespace())
		}
		body, err := o.MarshalJSON()
		require.NoError(t, err)
		// A patch rather than Apply, whose options cannot ask for strict
		// field validation: unknown or duplicate fields must fail.
		got, err := ri.Patch(ctx, o.GetName(), types.ApplyPatchType, body, metav1.PatchOptions{
			FieldManager:    "flotilla-test",
			DryRun:          []string{metav1.DryRunAll},
			Force:           ptr.To(true),
			FieldValidation: metav1.FieldValidationStrict,
		})
		require.NoError(t, err, "applying %s %s", gvk.Kind, o.GetName())
		out = append(out, got)
	}
	return out
}

// appliedDeployment returns the Deployment name among objs, typed.
func appliedDeployment(t *testing.T, objs []*unstructured.Unstructured, name string) *appsv1.Deployment {
	t.Helper()
	d := deployment(t, objs, name)
	// Defaulting proves the object went through the API server.
	require.NotNil(t, d.Spec.RevisionHistoryLimit, "the API server did not default the Deployment")
	return d
}

// createServiceMonitorCRD creates a minimal ServiceMonitor CRD, which takes
// any fields, and waits until it is established.
func createServiceMonitorCRD(ctx context.Context, t *testing.T, dyn dynamic.Interface) {
	t.Helper()
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": "servicemonitors.monitoring.coreos.com"},
		"spec": map[string]any{
			"group": "monitoring.coreos.com",
			"scope": "Namespaced",
			"names": map[string]any{
				"kind": "ServiceMonitor", "listKind": "ServiceMonitorList",
				"plural": "servicemonitors", "singular": "servicemonitor",
			},
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type": "object", "x-kubernetes-preserve-unknown-fields": true,
				}},
			}},
		},
	}}
	_, err := dyn.Resource(crdGVR).Create(ctx, crd, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		got, err := dyn.Resource(crdGVR).Get(ctx, crd.GetName(), metav1.GetOptions{})
		return err == nil && crdEstablished(got)
	}, 30*time.Second, 100*time.Millisecond, "CRD %s not established", crd.GetName())
}

// crdEstablished reports whether crd has the condition Established=True.
func crdEstablished(crd *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		var cond metav1.Condition
		m, ok := c.(map[string]any)
		if !ok || runtime.DefaultUnstructuredConverter.FromUnstructured(m, &cond) != nil {
			continue
		}
		if cond.Type == "Established" && cond.Status == metav1.ConditionTrue {
			return true
		}
	}
	return false
}

// TestControllerChartSealKeysLifecycle installs, upgrades, uninstalls and
// reinstalls the controller chart on a real kube-apiserver and checks that
// the seal keys Secret it generates keeps its data throughout: an upgrade
// reads it back with lookup (keys added for rotation included), and
// helm.sh/resource-policy: keep leaves it behind on uninstall.
func TestControllerChartSealKeysLifecycle(t *testing.T) {
	clusters := testenv.StartClusters(t, 1, testenv.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const ns = "flotilla-lifecycle"
	secretName := controllerRelease + "-seal-keys"
	cs := clusters[0].Clientset(t)
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	getter, err := deployer.NewRESTClientGetter(clusters[0].RESTConfig(), ns)
	require.NoError(t, err)
	cfg := &action.Configuration{
		RESTClientGetter: getter,
		KubeClient:       kube.New(getter),
		Releases:         storage.Init(driver.NewMemory()),
		Log:              t.Logf,
	}
	c, err := deploy.ControllerChart()
	require.NoError(t, err)
	vals := values(t, "temporal: {address: t:7233}")
	install := func() {
		t.Helper()
		in := action.NewInstall(cfg)
		in.ReleaseName, in.Namespace = controllerRelease, ns
		_, err := in.Run(c, vals)
		require.NoError(t, err)
	}
	upgrade := func() {
		t.Helper()
		up := action.NewUpgrade(cfg)
		up.Namespace = ns
		_, err := up.Run(controllerRelease, c, vals)
		require.NoError(t, err)
	}
	keys := func() map[string][]byte {
		t.Helper()
		s, err := cs.CoreV1().Secrets(ns).Get(ctx, secretName, metav1.GetOptions{})
		require.NoError(t, err)
		return s.Data
	}

	install()
	installed := keys()
	require.Len(t, installed, 2, "a sealing key and the signing key")
	require.Contains(t, installed, keyring.SigningKeyName)
	upgrade()
	assert.Equal(t, installed, keys(), "an upgrade generated a new key")

	// A Secret of an install older than signing gets a signing key at the
	// next upgrade, its sealing keys kept.
	s, err := cs.CoreV1().Secrets(ns).Get(ctx, secretName, metav1.GetOptions{})
	require.NoError(t, err)
	delete(s.Data, keyring.SigningKeyName)
	_, err = cs.CoreV1().Secrets(ns).Update(ctx, s, metav1.UpdateOptions{})
	require.NoError(t, err)
	upgrade()
	upgraded := keys()
	require.Len(t, upgraded, 2)
	assert.NotEqual(t, installed[keyring.SigningKeyName], upgraded[keyring.SigningKeyName], "a new signing key")
	for id, k := range installed {
		if id != keyring.SigningKeyName {
			assert.Equal(t, k, upgraded[id], "the sealing key is kept")
		}
	}
	installed = upgraded

	// Rotation: a newer key added to the Secret survives upgrades too.
	rotated := maps.Clone(installed)
	rotated["fk-29991231t235959z"] = []byte(base64.StdEncoding.EncodeToString(make([]byte, 32)))
	s, err = cs.CoreV1().Secrets(ns).Get(ctx, secretName, metav1.GetOptions{})
	require.NoError(t, err)
	s.Data = rotated
	_, err = cs.CoreV1().Secrets(ns).Update(ctx, s, metav1.UpdateOptions{})
	require.NoError(t, err)
	upgrade()
	assert.Equal(t, rotated, keys(), "an upgrade dropped a rotated key")

	_, err = action.NewUninstall(cfg).Run(controllerRelease)
	require.NoError(t, err)
	_, err = cs.AppsV1().Deployments(ns).Get(ctx, controllerRelease, metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "uninstall left the Deployment: %v", err)
	assert.Equal(t, rotated, keys(), "uninstall must keep the seal keys")

	install()
	assert.Equal(t, rotated, keys(), "a reinstall must reuse the kept seal keys")
}
