package deploy_test

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chart"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/flotilla-gitops/flotilla/deploy"
	"github.com/flotilla-gitops/flotilla/internal/crds"
	"github.com/flotilla-gitops/flotilla/internal/keyring"
)

func TestControllerChartRender(t *testing.T) {
	c, err := deploy.ControllerChart()
	require.NoError(t, err)
	objs := renderObjects(t, c, controllerRelease, controllerNamespace, controllerValues(t, ""))

	want := []string{
		"ServiceAccount/flotilla", "Secret/flotilla", "Secret/flotilla-seal-keys",
		"ConfigMap/flotilla-config", "Role/flotilla", "RoleBinding/flotilla",
		"Service/flotilla", "Deployment/flotilla", "PodDisruptionBudget/flotilla",
	}
	want = append(want, managementRBAC...) // management.enabled is on by default
	want = append(want, userRoles...)
	for _, k := range crds.Kinds { // the chart's crds/: Fleet's CRDs
		want = append(want, "CustomResourceDefinition/"+k.CRDName())
	}
	assert.ElementsMatch(t, want, kinds(objs), "no PersistentVolumeClaim: the state dir is a cache")
	_, sealKey := generatedSealKey(t, find(objs, "Secret", "flotilla-seal-keys"))
	assertNoSecretsOutsideSecrets(t, objs, append(slices.Clone(secretValues), sealKey))

	d := deployment(t, objs, controllerRelease)
	assert.Equal(t, int32(2), *d.Spec.Replicas)
	assert.Equal(t, appsv1.DeploymentStrategy{
		Type: appsv1.RollingUpdateDeploymentStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDeployment{
			MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(0)),
		},
	}, d.Spec.Strategy)
	assert.NotEmpty(t, d.Spec.Template.Annotations["checksum/config"])
	assert.NotEmpty(t, d.Spec.Template.Annotations["checksum/secret"])
	pod := d.Spec.Template.Spec
	assert.Equal(t, wantTolerations, pod.Tolerations)
	assert.Equal(t, wantControllerAffinity, pod.Affinity, "the values' nodeAffinity and the default podAntiAffinity")
	assert.Empty(t, pod.TopologySpreadConstraints)
	assert.Equal(t, wantNodeSelector, pod.NodeSelector)
	require.Len(t, pod.Containers, 1)
	ctr := pod.Containers[0]
	assert.Equal(t, "controller", ctr.Name)
	assert.Equal(t, wantResources.Limits.Memory().String(), ctr.Resources.Limits.Memory().String())
	wantFlags := map[string]string{
		"--temporal-address": "temporal.example.com:7233",
		"--namespace":        "fleet",
		"--task-queue":       "flotilla",
		"--state-dir":        "/var/lib/flotilla",
		"--http-listen":      ":8081",
		"--agent-defaults":   "/etc/flotilla/agent-defaults.yaml",
		"--log-level":        "info",
		"--log-format":       "json",
		"--tls-server-name":  "temporal.example.com",
		"--tls-ca":           "/etc/flotilla/temporal/ca.crt",
		"--tls-cert":         "/etc/flotilla/temporal/tls.crt",
		"--tls-key":          "/etc/flotilla/temporal/tls.key",
		"--content-registry": "registry.example.com/flotilla",
		"--seal-keys":        "/etc/flotilla/seal-keys",
	}
	for flag, want := range wantFlags {
		got, ok := flagValue(ctr.Args, flag)
		if assert.True(t, ok, "flag %s missing from %q", flag, ctr.Args) {
			assert.Equal(t, want, got, flag)
		}
	}
	assert.Equal(t, "--max-concurrent-activities=400", ctr.Args[len(ctr.Args)-1], "extraArgs come last")
	assert.NotContains(t, ctr.Args, "--content-registry-ca")
	assert.NotContains(t, ctr.Args, "--payload-keys")
	assert.Equal(t, map[string]string{
		"FLOTILLA_API_KEY":                   "flotilla/api-key",
		"FLOTILLA_CONTENT_REGISTRY_USERNAME": "flotilla/registry-username",
		"FLOTILLA_CONTENT_REGISTRY_PASSWORD": "flotilla/registry-password",
	}, envSecretRefs(ctr))
	assert.Equal(t, map[string]string{
		"/var/lib/flotilla":                 "state",
		"/tmp":                              "tmp",
		"/etc/flotilla/agent-defaults.yaml": "config",
		"/etc/flotilla/temporal":            "temporal-tls",
		"/etc/flotilla/seal-keys":           "seal-keys",
	}, volumeMounts(ctr))
	state := volume(pod, "state")
	require.NotNil(t, state)
	assert.Equal(t, &corev1.EmptyDirVolumeSource{}, state.EmptyDir)
	assert.Nil(t, state.PersistentVolumeClaim)

	pdb := podDisruptionBudget(t, objs, controllerRelease)
	assert.Equal(t, ptr.To(intstr.FromInt32(1)), pdb.Spec.MinAvailable)
	assert.Nil(t, pdb.Spec.MaxUnavailable)
	assert.Equal(t, d.Spec.Selector, pdb.Spec.Selector)

	defaults := agentDefaults(t, find(objs, "ConfigMap", "flotilla-config").Object)
	assert.Equal(t, map[string]any{
		"image":           "example.com/flotilla-worker:v9.9.9",
		"imagePullPolicy": "IfNotPresent",
		"namespace":       "flotilla-system",
		"temporal": map[string]any{
			"address": "temporal.public.example.com:443", "namespace": "", "serverName": "",
			"caFile": "/etc/flotilla/agent/ca.crt", "apiKeyFile": "",
			"certFile": "", "keyFile": "", "tlsSecret": "", "tlsSecretKeys": []any{},
		},
		"contentRegistry":   map[string]any{"url": "", "plainHTTP": false, "caFile": ""},
		"heartbeatInterval": "30s",
		"tolerations":       []any{map[string]any{"key": "workload", "operator": "Exists", "effect": "NoExecute"}},
		"affinity":          map[string]any{},
		"nodeSelector":      map[string]any{"kubernetes.io/os": "linux"},
		"resources":         map[string]any{},
		"env":               []any{},
		"priorityClassName": "",
	}, defaults)
}

func TestControllerChartDefaultAgentImage(t *testing.T) {
	c, err := deploy.ControllerChart()
	require.NoError(t, err)
	objs := renderObjects(t, c, "prod", "ops", values(t, "temporal: {address: t:7233}"))
	defaults := agentDefaults(t, find(objs, "ConfigMap", "prod-flotilla-config").Object)
	assert.Equal(t, "ghcr.io/flotilla-gitops/flotilla-worker:0.1.0", defaults["image"])
	assert.Equal(t, []any{}, defaults["tolerations"])
	assert.Nil(t, find(objs, "Secret", "prod-flotilla"), "no Secret without credentials")
	d := deployment(t, objs, "prod-flotilla")
	assert.NotContains(t, d.Spec.Template.Annotations, "checksum/secret")
	assert.Empty(t, envSecretRefs(d.Spec.Template.Spec.Containers[0]))
}

func TestControllerChartOptionalObjects(t *testing.T) {
	tests := []struct {
		name string
		// vals are the values besides temporal.address.
		vals string
		// wantWebhook: port and --webhook-listen present.
		wantWebhook bool
		// wantIngress, wantServiceMonitor, wantPVC, wantClusterAdmin:
		// whether the object is rendered.
		wantIngress, wantServiceMonitor, wantPVC, wantClusterAdmin bool
		// wantClaim is the state volume's claim; "" means an emptyDir.
		wantClaim string
	}{
		{name: "defaults", vals: "{}"},
		{name: "webhook without ingress", vals: "webhook: {enabled: true}", wantWebhook: true},
		{
			name:        "webhook with ingress",
			vals:        "webhook: {enabled: true, ingress: {enabled: true, host: hooks.example.com}}",
			wantWebhook: true, wantIngress: true,
		},
		{name: "ingress needs webhook", vals: "webhook: {ingress: {enabled: true}}"},
		{name: "service monitor", vals: "metrics: {serviceMonitor: {enabled: true}}", wantServiceMonitor: true},
		{
			name:    "persistence with one replica",
			vals:    "replicaCount: 1\npersistence: {enabled: true}",
			wantPVC: true, wantClaim: "flotilla",
		},
		{
			name:    "shared persistence",
			vals:    "persistence: {enabled: true, accessModes: [ReadWriteMany]}",
			wantPVC: true, wantClaim: "flotilla",
		},
		{name: "existing claim", vals: "replicaCount: 1\npersistence: {enabled: true, existingClaim: state}", wantClaim: "state"},
		{name: "existing claim without persistence", vals: "persistence: {existingClaim: state}"},
		{name: "cluster admin", vals: "rbac: {clusterAdmin: true}", wantClusterAdmin: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, vals := controllerChartWith(t, tt.vals)
			objs := renderObjects(t, c, controllerRelease, controllerNamespace, vals)

			assert.Equal(t, tt.wantIngress, find(objs, "Ingress", controllerRelease) != nil, "Ingress")
			assert.Equal(t, tt.wantServiceMonitor, find(objs, "ServiceMonitor", controllerRelease) != nil, "ServiceMonitor")
			assert.Equal(t, tt.wantPVC, find(objs, "PersistentVolumeClaim", controllerRelease) != nil, "PersistentVolumeClaim")
			assert.Equal(t, tt.wantClusterAdmin, find(objs, "ClusterRoleBinding", controllerRelease) != nil, "ClusterRoleBinding")

			d := deployment(t, objs, controllerRelease)
			ctr := d.Spec.Template.Spec.Containers[0]
			listen, ok := flagValue(ctr.Args, "--webhook-listen")
			assert.Equal(t, tt.wantWebhook, ok, "--webhook-listen")
			if ok {
				assert.Equal(t, ":8080", listen)
			}
			assert.Equal(t, tt.wantWebhook, hasPort(ctr.Ports, "webhook", 8080), "container port webhook")
			svc := find(objs, "Service", controllerRelease)
			require.NotNil(t, svc)
			ports, _, err := unstructured.NestedSlice(svc.Object, "spec", "ports")
			require.NoError(t, err)
			wantPorts := 2 // http and the agents' gateway (on by default)
			if tt.wantWebhook {
				wantPorts = 3
			}
			assert.Len(t, ports, wantPorts, "Service ports")
			gw, ok := flagValue(ctr.Args, "--gateway-listen")
			assert.True(t, ok && gw == ":7243", "--gateway-listen :7243, got %q", gw)
			addr, _ := flagValue(ctr.Args, "--gateway-address")
			assert.Equal(t, controllerRelease+"."+controllerNamespace+".svc:7243", addr, "--gateway-address: the release's Service")
			assert.True(t, hasPort(ctr.Ports, "gateway", 7243), "container port gateway")

			state := volume(d.Spec.Template.Spec, "state")
			require.NotNil(t, state)
			if tt.wantClaim == "" {
				assert.NotNil(t, state.EmptyDir)
				assert.Nil(t, state.PersistentVolumeClaim)
			} else {
				require.NotNil(t, state.PersistentVolumeClaim)
				assert.Equal(t, tt.wantClaim, state.PersistentVolumeClaim.ClaimName)
			}
		})
	}
}

// TestControllerChartWebhookSettings checks the flags, volume and mount
// that webhook.existingSecret, requireSignature and maxBodyBytes add, and
// that a disabled receiver is switched off rather than left on the
// controller's default address.
func TestControllerChartWebhookSettings(t *testing.T) {
	tests := []struct {
		name string
		// vals are the values besides temporal.address.
		vals string
		// wantListen is the --webhook-listen value; "" means the
		// receiver is disabled with --webhook-listen=.
		wantListen string
		// wantSecret: --webhook-secrets, the volume and its mount.
		wantSecret, wantRequire bool
		// wantMaxBody is the --webhook-max-body value; "" means absent.
		wantMaxBody string
	}{
		{name: "disabled", vals: "{}"},
		{name: "disabled ignores the settings", vals: "webhook: {existingSecret: hooks, requireSignature: true, maxBodyBytes: 1024}"},
		{name: "enabled, defaults", vals: "webhook: {enabled: true}", wantListen: ":8080"},
		{
			name:       "enabled with every setting",
			vals:       "webhook: {enabled: true, existingSecret: hooks, requireSignature: true, maxBodyBytes: 10485760}",
			wantListen: ":8080", wantSecret: true, wantRequire: true, wantMaxBody: "10485760",
		},
		{
			name:       "max body as a string",
			vals:       `webhook: {enabled: true, maxBodyBytes: "65536"}`,
			wantListen: ":8080", wantMaxBody: "65536",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, vals := controllerChartWith(t, tt.vals)
			objs := renderObjects(t, c, controllerRelease, controllerNamespace, vals)
			d := deployment(t, objs, controllerRelease)
			ctr := d.Spec.Template.Spec.Containers[0]

			listen, ok := flagValue(ctr.Args, "--webhook-listen")
			if tt.wantListen == "" {
				assert.False(t, ok, "--webhook-listen with a value in %q", ctr.Args)
				assert.Contains(t, ctr.Args, "--webhook-listen=")
			} else {
				assert.Equal(t, tt.wantListen, listen)
				assert.NotContains(t, ctr.Args, "--webhook-listen=")
			}

			dir, ok := flagValue(ctr.Args, "--webhook-secrets")
			assert.Equal(t, tt.wantSecret, ok, "--webhook-secrets")
			mounts := volumeMounts(ctr)
			vol := volume(d.Spec.Template.Spec, "webhook-secrets")
			if tt.wantSecret {
				assert.Equal(t, "/etc/flotilla/webhook", dir)
				assert.Equal(t, "webhook-secrets", mounts["/etc/flotilla/webhook"])
				for _, m := range ctr.VolumeMounts {
					if m.Name == "webhook-secrets" {
						assert.True(t, m.ReadOnly, "webhook secrets mounted read-only")
						assert.Empty(t, m.SubPath, "a subPath mount never sees a rotated Secret")
					}
				}
				require.NotNil(t, vol)
				require.NotNil(t, vol.Secret)
				assert.Equal(t, "hooks", vol.Secret.SecretName)
			} else {
				assert.NotContains(t, mounts, "/etc/flotilla/webhook")
				assert.Nil(t, vol)
			}

			assert.Equal(t, tt.wantRequire, slices.Contains(ctr.Args, "--webhook-require-signature"), "--webhook-require-signature")
			maxBody, ok := flagValue(ctr.Args, "--webhook-max-body")
			assert.Equal(t, tt.wantMaxBody != "", ok, "--webhook-max-body")
			assert.Equal(t, tt.wantMaxBody, maxBody)
		})
	}
}

func TestControllerChartWebhookMaxBodyInvalid(t *testing.T) {
	for _, v := range []string{"-1", "1.5", `"10Mi"`} {
		t.Run(v, func(t *testing.T) {
			c, vals := controllerChartWith(t, "webhook: {enabled: true, maxBodyBytes: "+v+"}")
			_, err := render(t, c, controllerRelease, controllerNamespace, vals)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "webhook.maxBodyBytes must be a whole number of bytes above 0")
		})
	}
}

// hasPort reports whether ports holds a port called name with number port.
func hasPort(ports []corev1.ContainerPort, name string, port int32) bool {
	for _, p := range ports {
		if p.Name == name && p.ContainerPort == port {
			return true
		}
	}
	return false
}

// wantAntiAffinity is the controller's default podAntiAffinity in release
// controllerRelease: spread the replicas over nodes, preferably.
var wantAntiAffinity = &corev1.PodAntiAffinity{
	PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
		Weight: 100,
		PodAffinityTerm: corev1.PodAffinityTerm{
			TopologyKey:   "kubernetes.io/hostname",
			LabelSelector: &metav1.LabelSelector{MatchLabels: controllerSelector},
		},
	}},
}

// controllerSelector are the selector labels of release controllerRelease.
var controllerSelector = map[string]string{
	"app.kubernetes.io/name":     "flotilla",
	"app.kubernetes.io/instance": controllerRelease,
}

// wantControllerAffinity is the controller pods' affinity with
// schedulingValues: their nodeAffinity and the default podAntiAffinity.
var wantControllerAffinity = &corev1.Affinity{
	NodeAffinity:    wantAffinity.NodeAffinity,
	PodAntiAffinity: wantAntiAffinity,
}

// TestControllerChartAvailability checks replicas, the update strategy,
// the PodDisruptionBudget and pod spreading, and how values override them.
func TestControllerChartAvailability(t *testing.T) {
	rolling := appsv1.DeploymentStrategy{
		Type: appsv1.RollingUpdateDeploymentStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDeployment{
			MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(0)),
		},
	}
	zoneSpread := corev1.TopologySpreadConstraint{
		MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.ScheduleAnyway,
		LabelSelector: &metav1.LabelSelector{MatchLabels: controllerSelector},
	}
	tests := []struct {
		name string
		// vals are the values besides temporal.address.
		vals         string
		wantReplicas int32
		wantStrategy appsv1.DeploymentStrategy
		// wantMinAvailable and wantMaxUnavailable are the PDB's bounds;
		// both nil means no PDB.
		wantMinAvailable, wantMaxUnavailable *intstr.IntOrString
		wantAffinity                         *corev1.Affinity
		wantSpread                           []corev1.TopologySpreadConstraint
	}{
		{
			name: "defaults", vals: "{}", wantReplicas: 2, wantStrategy: rolling,
			wantMinAvailable: ptr.To(intstr.FromInt32(1)),
			wantAffinity:     &corev1.Affinity{PodAntiAffinity: wantAntiAffinity},
		},
		{
			name: "three replicas, max unavailable", vals: "replicaCount: 3\npodDisruptionBudget: {maxUnavailable: 1}",
			wantReplicas: 3, wantStrategy: rolling,
			wantMaxUnavailable: ptr.To(intstr.FromInt32(1)),
			wantAffinity:       &corev1.Affinity{PodAntiAffinity: wantAntiAffinity},
		},
		{
			name: "percentage", vals: `podDisruptionBudget: {minAvailable: "50%"}`,
			wantReplicas: 2, wantStrategy: rolling,
			wantMinAvailable: ptr.To(intstr.FromString("50%")),
			wantAffinity:     &corev1.Affinity{PodAntiAffinity: wantAntiAffinity},
		},
		{
			name: "one replica has no PDB", vals: "replicaCount: 1", wantReplicas: 1, wantStrategy: rolling,
			wantAffinity: &corev1.Affinity{PodAntiAffinity: wantAntiAffinity},
		},
		{
			name: "PDB disabled", vals: "podDisruptionBudget: {enabled: false}", wantReplicas: 2, wantStrategy: rolling,
			wantAffinity: &corev1.Affinity{PodAntiAffinity: wantAntiAffinity},
		},
		{
			name: "single-node claim recreates", vals: "replicaCount: 1\npersistence: {enabled: true}",
			wantReplicas: 1, wantStrategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			wantAffinity: &corev1.Affinity{PodAntiAffinity: wantAntiAffinity},
		},
		{
			name:         "update strategy",
			vals:         "updateStrategy: {type: RollingUpdate, rollingUpdate: {maxUnavailable: 1, maxSurge: 0}}",
			wantReplicas: 2,
			wantStrategy: appsv1.DeploymentStrategy{
				Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{
					MaxSurge: ptr.To(intstr.FromInt32(0)), MaxUnavailable: ptr.To(intstr.FromInt32(1)),
				},
			},
			wantMinAvailable: ptr.To(intstr.FromInt32(1)),
			wantAffinity:     &corev1.Affinity{PodAntiAffinity: wantAntiAffinity},
		},
		{
			name: "own pod anti-affinity replaces the default",
			vals: `
affinity:
  podAntiAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      - topologyKey: kubernetes.io/hostname
        labelSelector: {matchLabels: {app.kubernetes.io/name: flotilla}}`,
			wantReplicas: 2, wantStrategy: rolling, wantMinAvailable: ptr.To(intstr.FromInt32(1)),
			wantAffinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
					TopologyKey:   "kubernetes.io/hostname",
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "flotilla"}},
				}},
			}},
		},
		{
			name: "empty pod anti-affinity removes the default", vals: "affinity: {podAntiAffinity: {}}",
			wantReplicas: 2, wantStrategy: rolling, wantMinAvailable: ptr.To(intstr.FromInt32(1)),
			wantAffinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{}},
		},
		{
			name: "topology spread",
			vals: `
topologySpreadConstraints:
  - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway}
  - {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {tier: control}}}`,
			wantReplicas: 2, wantStrategy: rolling, wantMinAvailable: ptr.To(intstr.FromInt32(1)),
			wantAffinity: &corev1.Affinity{PodAntiAffinity: wantAntiAffinity},
			wantSpread: []corev1.TopologySpreadConstraint{zoneSpread, {
				MaxSkew: 1, TopologyKey: "kubernetes.io/hostname", WhenUnsatisfiable: corev1.DoNotSchedule,
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "control"}},
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, vals := controllerChartWith(t, tt.vals)
			objs := renderObjects(t, c, controllerRelease, controllerNamespace, vals)

			d := deployment(t, objs, controllerRelease)
			assert.Equal(t, tt.wantReplicas, *d.Spec.Replicas)
			assert.Equal(t, tt.wantStrategy, d.Spec.Strategy)
			assert.Equal(t, tt.wantAffinity, d.Spec.Template.Spec.Affinity)
			assert.Equal(t, tt.wantSpread, d.Spec.Template.Spec.TopologySpreadConstraints)

			if tt.wantMinAvailable == nil && tt.wantMaxUnavailable == nil {
				assert.Nil(t, find(objs, "PodDisruptionBudget", controllerRelease))
				return
			}
			pdb := podDisruptionBudget(t, objs, controllerRelease)
			assert.Equal(t, tt.wantMinAvailable, pdb.Spec.MinAvailable)
			assert.Equal(t, tt.wantMaxUnavailable, pdb.Spec.MaxUnavailable)
			assert.Equal(t, &metav1.LabelSelector{MatchLabels: controllerSelector}, pdb.Spec.Selector)
		})
	}
}

// TestControllerChartInvalidReplicas checks that a state claim only one
// node can mount, or a replica count that is no count, fails the render.
func TestControllerChartInvalidReplicas(t *testing.T) {
	const oneNode = "persistence.enabled with replicaCount 2 needs a ReadWriteMany claim"
	tests := []struct {
		name    string
		vals    string
		wantErr string
	}{
		{"persistence with two replicas", "persistence: {enabled: true}", oneNode},
		{"existing claim with two replicas", "persistence: {enabled: true, existingClaim: state}", oneNode},
		{
			"persistence with three replicas", "replicaCount: 3\npersistence: {enabled: true, accessModes: [ReadWriteOnce]}",
			"persistence.enabled with replicaCount 3 needs a ReadWriteMany claim",
		},
		{"fractional replicas", "replicaCount: 1.5", "replicaCount must be a whole number of at least 0, not 1.5"},
		{"negative replicas", "replicaCount: -1", "replicaCount must be a whole number of at least 0, not -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, vals := controllerChartWith(t, tt.vals)
			_, err := render(t, c, controllerRelease, controllerNamespace, vals)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

// TestControllerChartSealKeys checks the keyring every replica mounts: a
// Secret the chart generates, or an existing one.
func TestControllerChartSealKeys(t *testing.T) {
	tests := []struct {
		name string
		vals string
		// wantSecret is the Secret mounted; wantGenerated: the chart
		// renders it.
		wantSecret    string
		wantGenerated bool
	}{
		{name: "generated", vals: "{}", wantSecret: "flotilla-seal-keys", wantGenerated: true},
		{name: "existing", vals: "sealKeys: {existingSecret: my-seal-keys}", wantSecret: "my-seal-keys"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, vals := controllerChartWith(t, tt.vals)
			objs := renderObjects(t, c, controllerRelease, controllerNamespace, vals)

			generated := find(objs, "Secret", "flotilla-seal-keys")
			assert.Equal(t, tt.wantGenerated, generated != nil, "generated Secret")
			if generated != nil {
				generatedSealKey(t, generated)
			}
			d := deployment(t, objs, controllerRelease)
			ctr := d.Spec.Template.Spec.Containers[0]
			dir, ok := flagValue(ctr.Args, "--seal-keys")
			assert.True(t, ok, "--seal-keys")
			assert.Equal(t, "/etc/flotilla/seal-keys", dir)
			assertReadOnlyMount(t, ctr, "seal-keys", "/etc/flotilla/seal-keys")
			vol := volume(d.Spec.Template.Spec, "seal-keys")
			require.NotNil(t, vol)
			require.NotNil(t, vol.Secret)
			assert.Equal(t, tt.wantSecret, vol.Secret.SecretName)
			assert.Empty(t, vol.Secret.Items, "every key of the Secret is a key file")
		})
	}
}

// TestControllerChartPayloadEncryption checks the flags, volumes and
// mounts of payloadEncryption.
func TestControllerChartPayloadEncryption(t *testing.T) {
	tests := []struct {
		name string
		vals string
		// wantKeys is the payload keys' Secret; "" means no --payload-keys.
		wantKeys string
		// wantToken is the codec token's "secret/key"; "" means none.
		wantToken   string
		wantOrigins []string
	}{
		{name: "disabled", vals: "{}"},
		{
			name: "disabled ignores the settings",
			vals: "payloadEncryption: {existingSecret: pk, codecTokenSecret: {name: codec}, corsOrigins: [https://ui.example.com]}",
		},
		{name: "keys only", vals: "payloadEncryption: {enabled: true, existingSecret: pk}", wantKeys: "pk"},
		{
			name: "every setting",
			vals: `
payloadEncryption:
  enabled: true
  existingSecret: pk
  codecTokenSecret: {name: codec, key: bearer}
  corsOrigins: [https://ui.example.com, http://localhost:8233]`,
			wantKeys: "pk", wantToken: "codec/bearer",
			wantOrigins: []string{"https://ui.example.com", "http://localhost:8233"},
		},
		{
			name:     "default token key",
			vals:     "payloadEncryption: {enabled: true, existingSecret: pk, codecTokenSecret: {name: codec}}",
			wantKeys: "pk", wantToken: "codec/token",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, vals := controllerChartWith(t, tt.vals)
			objs := renderObjects(t, c, controllerRelease, controllerNamespace, vals)
			d := deployment(t, objs, controllerRelease)
			pod := d.Spec.Template.Spec
			ctr := pod.Containers[0]

			dir, ok := flagValue(ctr.Args, "--payload-keys")
			assert.Equal(t, tt.wantKeys != "", ok, "--payload-keys")
			keys := volume(pod, "payload-keys")
			if tt.wantKeys != "" {
				assert.Equal(t, "/etc/flotilla/payload-keys", dir)
				assertReadOnlyMount(t, ctr, "payload-keys", "/etc/flotilla/payload-keys")
				require.NotNil(t, keys)
				assert.Equal(t, tt.wantKeys, keys.Secret.SecretName)
			} else {
				assert.Nil(t, keys)
			}

			file, ok := flagValue(ctr.Args, "--codec-token-file")
			assert.Equal(t, tt.wantToken != "", ok, "--codec-token-file")
			token := volume(pod, "codec-token")
			if tt.wantToken != "" {
				assert.Equal(t, "/etc/flotilla/codec/token", file)
				assertReadOnlyMount(t, ctr, "codec-token", "/etc/flotilla/codec")
				require.NotNil(t, token)
				require.Len(t, token.Secret.Items, 1)
				item := token.Secret.Items[0]
				assert.Equal(t, tt.wantToken, token.Secret.SecretName+"/"+item.Key)
				assert.Equal(t, "token", item.Path)
			} else {
				assert.Nil(t, token)
			}

			assert.Equal(t, tt.wantOrigins, flagValues(ctr.Args, "--codec-cors-origin"))
		})
	}

	t.Run("enabled without keys", func(t *testing.T) {
		c, vals := controllerChartWith(t, "payloadEncryption: {enabled: true}")
		_, err := render(t, c, controllerRelease, controllerNamespace, vals)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "payloadEncryption.existingSecret is required")
	})
}

// keyIDPattern is the rule a seal key ID follows (package keyring).
var keyIDPattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// generatedSealKey checks the seal keys Secret the chart generates: kept
// on uninstall, with exactly one key, named after the install time and
// holding the base64 of 32 bytes, which the controller's keyring loads. It
// returns the key's ID and file content.
func generatedSealKey(t *testing.T, secret *unstructured.Unstructured) (id, file string) {
	t.Helper()
	require.NotNil(t, secret, "no generated seal keys Secret")
	assert.Equal(t, "keep", secret.GetAnnotations()["helm.sh/resource-policy"], "uninstall must not delete the only key")
	data := secretData(t, secret.Object)
	require.Len(t, data, 2, "one generated sealing key and the signing key")
	for k, v := range data {
		if k != keyring.SigningKeyName {
			id, file = k, v
		}
	}
	assert.Regexp(t, keyIDPattern, id)
	stamp, ok := strings.CutPrefix(id, "fk-")
	require.True(t, ok, "key ID %q", id)
	at, err := time.Parse("20060102t150405z", stamp)
	require.NoError(t, err, "key ID %q names no UTC time", id)
	assert.WithinDuration(t, time.Now(), at, time.Minute, "key ID %q names the install time in UTC", id)
	raw, err := base64.StdEncoding.DecodeString(file)
	require.NoError(t, err, "key file is not standard base64")
	assert.Len(t, raw, 32)

	dir := t.TempDir()
	for k, v := range data {
		require.NoError(t, os.WriteFile(filepath.Join(dir, k), []byte(v), 0o400))
	}
	require.NoError(t, os.Chmod(dir, 0o500)) // mounted read-only: nothing is generated
	t.Cleanup(func() { _ = os.Chmod(dir, 0o700) })
	ring, err := keyring.LoadSealing(dir)
	require.NoError(t, err, "the controller rejects the generated keys")
	assert.Equal(t, []string{id}, ring.IDs())
	signing, ok := ring.SigningKey()
	require.True(t, ok, "the generated signing key")
	assert.Equal(t, data[keyring.SigningKeyName], base64.StdEncoding.EncodeToString(signing))
	return id, file
}

// assertReadOnlyMount checks that ctr mounts volume name read-only at path,
// without subPath, so a changed Secret reaches the files.
func assertReadOnlyMount(t *testing.T, ctr corev1.Container, name, path string) {
	t.Helper()
	for _, m := range ctr.VolumeMounts {
		if m.Name == name {
			assert.Equal(t, path, m.MountPath, name)
			assert.True(t, m.ReadOnly, "%s mounted read-only", name)
			assert.Empty(t, m.SubPath, "a subPath mount never sees a changed Secret")
			return
		}
	}
	t.Errorf("volume %s is not mounted", name)
}

// podDisruptionBudget converts the PodDisruptionBudget name of objs to its
// typed form.
func podDisruptionBudget(t *testing.T, objs []*unstructured.Unstructured, name string) *policyv1.PodDisruptionBudget {
	t.Helper()
	o := find(objs, "PodDisruptionBudget", name)
	require.NotNil(t, o, "no PodDisruptionBudget %s among %v", name, kinds(objs))
	var pdb policyv1.PodDisruptionBudget
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &pdb))
	return &pdb
}

// controllerChartWith loads the controller chart and the values of
// valuesYAML with the one required value, temporal.address, set.
func controllerChartWith(t *testing.T, valuesYAML string) (*chart.Chart, map[string]any) {
	t.Helper()
	c, err := deploy.ControllerChart()
	require.NoError(t, err)
	vals := values(t, valuesYAML)
	vals["temporal"] = map[string]any{"address": "t:7233"}
	return c, vals
}
