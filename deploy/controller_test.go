package deploy_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/flotilla-gitops/flotilla/deploy"
)

func TestControllerChartRender(t *testing.T) {
	c, err := deploy.ControllerChart()
	require.NoError(t, err)
	objs := renderObjects(t, c, controllerRelease, controllerNamespace, controllerValues(t, ""))

	assert.ElementsMatch(t, []string{
		"ServiceAccount/flotilla", "Secret/flotilla", "ConfigMap/flotilla-config",
		"PersistentVolumeClaim/flotilla", "Role/flotilla", "RoleBinding/flotilla",
		"Service/flotilla", "Deployment/flotilla",
	}, kinds(objs))
	assertNoSecretsOutsideSecrets(t, objs, secretValues)

	d := deployment(t, objs, controllerRelease)
	assert.Equal(t, int32(1), *d.Spec.Replicas)
	assert.Equal(t, "Recreate", string(d.Spec.Strategy.Type))
	assert.NotEmpty(t, d.Spec.Template.Annotations["checksum/config"])
	assert.NotEmpty(t, d.Spec.Template.Annotations["checksum/secret"])
	pod := d.Spec.Template.Spec
	assert.Equal(t, wantTolerations, pod.Tolerations)
	assert.Equal(t, wantAffinity, pod.Affinity)
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
	}
	for flag, want := range wantFlags {
		got, ok := flagValue(ctr.Args, flag)
		if assert.True(t, ok, "flag %s missing from %q", flag, ctr.Args) {
			assert.Equal(t, want, got, flag)
		}
	}
	assert.Equal(t, "--max-concurrent-activities=400", ctr.Args[len(ctr.Args)-1], "extraArgs come last")
	assert.NotContains(t, ctr.Args, "--content-registry-ca")
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
	}, volumeMounts(ctr))

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
		{name: "defaults", vals: "{}", wantPVC: true, wantClaim: "flotilla"},
		{
			name:        "webhook without ingress",
			vals:        "webhook: {enabled: true}",
			wantWebhook: true, wantPVC: true, wantClaim: "flotilla",
		},
		{
			name:        "webhook with ingress",
			vals:        "webhook: {enabled: true, ingress: {enabled: true, host: hooks.example.com}}",
			wantWebhook: true, wantIngress: true, wantPVC: true, wantClaim: "flotilla",
		},
		{name: "ingress needs webhook", vals: "webhook: {ingress: {enabled: true}}", wantPVC: true, wantClaim: "flotilla"},
		{
			name:               "service monitor",
			vals:               "metrics: {serviceMonitor: {enabled: true}}",
			wantServiceMonitor: true, wantPVC: true, wantClaim: "flotilla",
		},
		{name: "existing claim", vals: "persistence: {existingClaim: state}", wantClaim: "state"},
		{name: "no persistence", vals: "persistence: {enabled: false}"},
		{name: "cluster admin", vals: "rbac: {clusterAdmin: true}", wantClusterAdmin: true, wantPVC: true, wantClaim: "flotilla"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := deploy.ControllerChart()
			require.NoError(t, err)
			vals := values(t, tt.vals)
			vals["temporal"] = map[string]any{"address": "t:7233"}
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
			wantPorts := 1
			if tt.wantWebhook {
				wantPorts = 2
			}
			assert.Len(t, ports, wantPorts, "Service ports")

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
			c, err := deploy.ControllerChart()
			require.NoError(t, err)
			vals := values(t, tt.vals)
			vals["temporal"] = map[string]any{"address": "t:7233"}
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
			c, err := deploy.ControllerChart()
			require.NoError(t, err)
			vals := values(t, "webhook: {enabled: true, maxBodyBytes: "+v+"}")
			vals["temporal"] = map[string]any{"address": "t:7233"}
			_, err = render(t, c, controllerRelease, controllerNamespace, vals)
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
