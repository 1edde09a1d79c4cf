package deploy_test

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint/support"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-gitops/flotilla/deploy"
	"github.com/flotilla-gitops/flotilla/internal/agentcfg"
)

// Secret values of the test values; none may leave the chart's Secret.
const (
	testCA               = "-----BEGIN CERTIFICATE-----\nZmFrZS1jYQ==\n-----END CERTIFICATE-----\n"
	testCert             = "-----BEGIN CERTIFICATE-----\nZmFrZS1jZXJ0\n-----END CERTIFICATE-----\n"
	testKey              = "-----BEGIN PRIVATE KEY-----\nZmFrZS1rZXk=\n-----END PRIVATE KEY-----\n"
	testAPIKey           = "api-key-4f1d2c9b"
	testRegistryPassword = "registry-password-77a1"
	testRegistrationTok  = "registration-token-0c3e"
	// testPayloadKeyID and testPayloadKey are a payload key: its ID and
	// the base64 of 32 bytes.
	testPayloadKeyID = "fk-20261127t033000z"
	testPayloadKey   = "cGF5bG9hZC1rZXktMzItYnl0ZXMtZm9yLXRoZS10ZXM="
)

// secretValues are the values assertNoSecretsOutsideSecrets looks for. The
// PEM blocks are searched by their bodies, which are unique.
var secretValues = []string{"ZmFrZS1jYQ==", "ZmFrZS1jZXJ0", "ZmFrZS1rZXk=", testAPIKey, testRegistryPassword, testRegistrationTok, testPayloadKey}

// schedulingValues are pod placement values shared by both charts' tests.
const schedulingValues = `
tolerations:
  - key: dedicated
    operator: Equal
    value: flotilla
    effect: NoSchedule
affinity:
  nodeAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      nodeSelectorTerms:
        - matchExpressions:
            - key: kubernetes.io/os
              operator: In
              values: [linux]
nodeSelector:
  pool: system
resources:
  requests: {cpu: 50m, memory: 64Mi}
  limits: {memory: 256Mi}
env:
  - name: HTTPS_PROXY
    value: http://proxy:3128
`

// wantTolerations, wantAffinity, wantNodeSelector and wantResources are
// schedulingValues in typed form.
var (
	wantTolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "flotilla", Effect: corev1.TaintEffectNoSchedule}}
	wantAffinity    = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/os", Operator: corev1.NodeSelectorOpIn, Values: []string{"linux"}}},
		}}},
	}}
	wantNodeSelector = map[string]string{"pool": "system"}
	wantResources    = corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
	}
)

// agentValues are representative values of the agent chart: every
// credential, labels, a config hash and pod placement.
func agentValues(t *testing.T) map[string]any {
	t.Helper()
	return values(t, `
cluster: prod-eu-1
labels: {region: eu-west-1, env: prod}
configHash: 0123abcd
heartbeatInterval: 15s
logLevel: debug
temporal:
  address: temporal.example.com:7233
  namespace: fleet
  tls: {enabled: true, serverName: temporal.example.com, ca: "`+escape(testCA)+`", cert: "`+escape(testCert)+`", key: "`+escape(testKey)+`"}
  apiKey: `+testAPIKey+`
contentRegistry:
  url: registry.example.com/flotilla
  plainHTTP: true
  ca: "`+escape(testCA)+`"
  username: robot
  password: `+testRegistryPassword+`
registration:
  token: `+testRegistrationTok+`
payloadKeys: {`+testPayloadKeyID+`: `+testPayloadKey+`}
`+schedulingValues)
}

// controllerValues are representative values of the controller chart.
func controllerValues(t *testing.T, extra string) map[string]any {
	t.Helper()
	return values(t, `
temporal:
  address: temporal.example.com:7233
  namespace: fleet
  tls: {serverName: temporal.example.com, ca: "`+escape(testCA)+`", cert: "`+escape(testCert)+`", key: "`+escape(testKey)+`"}
  apiKey: `+testAPIKey+`
contentRegistry: {url: registry.example.com/flotilla, username: robot, password: `+testRegistryPassword+`}
extraArgs: [--max-concurrent-activities=400]
agent:
  image: {repository: example.com/flotilla-worker, tag: v9.9.9}
  temporal: {address: temporal.public.example.com:443, caFile: /etc/flotilla/agent/ca.crt}
  tolerations:
    - {key: workload, operator: Exists, effect: NoExecute}
  nodeSelector: {kubernetes.io/os: linux}
`+schedulingValues+extra)
}

// escape makes s a YAML double-quoted string body.
func escape(s string) string { return strings.ReplaceAll(s, "\n", `\n`) }

func TestChartsLoad(t *testing.T) {
	tests := []struct {
		name string
		load func() (*chart.Chart, error)
		// wantVersion is the chart's version; both charts have
		// appVersion 0.1.0.
		wantVersion string
	}{
		{"flotilla-agent", deploy.AgentChart, "0.1.1"},
		{"flotilla", deploy.ControllerChart, "0.3.0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := tt.load()
			require.NoError(t, err)
			assert.Equal(t, tt.name, c.Name())
			assert.Equal(t, tt.wantVersion, c.Metadata.Version)
			assert.Equal(t, "0.1.0", c.Metadata.AppVersion)
			var templates []string
			for _, f := range c.Templates {
				templates = append(templates, f.Name)
			}
			assert.Contains(t, templates, "templates/_helpers.tpl")
			assert.Contains(t, templates, "templates/deployment.yaml")
			assert.NotEmpty(t, c.Values)
			require.NoError(t, c.Validate())

			again, err := tt.load()
			require.NoError(t, err)
			assert.NotSame(t, c, again, "every call must return a new chart")
		})
	}
}

func TestChartsLint(t *testing.T) {
	tests := []struct {
		dir  string
		vals map[string]any
	}{
		{"flotilla-agent", values(t, "cluster: c1\ntemporal: {address: temporal:7233}")},
		{"flotilla-agent", agentValues(t)},
		{"flotilla", values(t, "temporal: {address: temporal:7233}")},
		{"flotilla", controllerValues(t, "webhook: {enabled: true, existingSecret: flotilla-webhook, requireSignature: true, maxBodyBytes: 1048576, ingress: {enabled: true, host: flotilla.example.com}}\nmetrics: {serviceMonitor: {enabled: true}}")},
		{"flotilla", controllerValues(t, `
replicaCount: 3
podDisruptionBudget: {maxUnavailable: 1}
topologySpreadConstraints: [{maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway}]
persistence: {enabled: true, accessModes: [ReadWriteMany], storageClass: nfs}
sealKeys: {existingSecret: flotilla-seal-keys}
payloadEncryption: {enabled: true, existingSecret: flotilla-payload-keys, codecTokenSecret: {name: flotilla-codec}, corsOrigins: [https://temporal.example.com]}
`)},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			kv, err := chartutil.ParseKubeVersion(testKubeVersion)
			require.NoError(t, err)
			lint := action.NewLint()
			lint.Strict = true // warnings fail too
			lint.Namespace = "flotilla-system"
			lint.KubeVersion = kv
			res := lint.Run([]string{filepath.Join("charts", tt.dir)}, tt.vals)
			for _, m := range res.Messages {
				t.Logf("lint: %s", m)
			}
			assert.Equal(t, 1, res.TotalChartsLinted)
			assert.Empty(t, res.Errors)
			for _, m := range res.Messages {
				assert.LessOrEqual(t, m.Severity, support.InfoSev, "lint: %s", m)
			}
		})
	}
}

func TestRequiredValues(t *testing.T) {
	tests := []struct {
		name    string
		load    func() (*chart.Chart, error)
		vals    string
		wantErr string
	}{
		{"agent without cluster", deploy.AgentChart, "temporal: {address: t:7233}", "cluster is required"},
		{"agent without temporal.address", deploy.AgentChart, "cluster: c1", "temporal.address is required"},
		{"controller without temporal.address", deploy.ControllerChart, "{}", "temporal.address is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := tt.load()
			require.NoError(t, err)
			_, err = render(t, c, "x", "x", values(t, tt.vals))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

func TestAgentChartRender(t *testing.T) {
	c, err := deploy.AgentChart()
	require.NoError(t, err)
	objs := renderObjects(t, c, agentRelease, agentNamespace, agentValues(t))

	assert.ElementsMatch(t, []string{
		"ServiceAccount/flotilla-agent", "Secret/flotilla-agent", "Secret/flotilla-agent-payload-keys",
		"ClusterRoleBinding/flotilla-agent", "Deployment/flotilla-agent",
	}, kinds(objs))
	assert.Nil(t, find(objs, "StatefulSet", agentRelease))
	assertNoSecretsOutsideSecrets(t, objs, secretValues)

	d := deployment(t, objs, agentRelease)
	assert.Equal(t, agentNamespace, d.Namespace)
	assert.Equal(t, int32(1), *d.Spec.Replicas)
	assert.Equal(t, "Recreate", string(d.Spec.Strategy.Type))
	pod := d.Spec.Template.Spec
	assert.Equal(t, wantTolerations, pod.Tolerations)
	assert.Equal(t, wantAffinity, pod.Affinity)
	assert.Equal(t, wantNodeSelector, pod.NodeSelector)
	assert.Equal(t, agentRelease, pod.ServiceAccountName)
	assert.Equal(t, "0123abcd", d.Spec.Template.Annotations["flotilla.dev/config-hash"])
	assert.NotEmpty(t, d.Spec.Template.Annotations["checksum/secret"])

	require.Len(t, pod.Containers, 1)
	ctr := pod.Containers[0]
	assert.Equal(t, "agent", ctr.Name)
	assert.Equal(t, "ghcr.io/flotilla-gitops/flotilla-worker:0.1.0", ctr.Image)
	assert.True(t, wantResources.Requests.Cpu().Equal(*ctr.Resources.Requests.Cpu()))
	assert.Equal(t, wantResources.Limits.Memory().String(), ctr.Resources.Limits.Memory().String())
	assert.Equal(t, "agent", ctr.Args[0], "the agent subcommand comes first")
	wantFlags := map[string]string{
		"--cluster":             "prod-eu-1",
		"--temporal-address":    "temporal.example.com:7233",
		"--namespace":           "fleet",
		"--state-dir":           "/var/lib/flotilla",
		"--http-listen":         ":8081",
		"--heartbeat-interval":  "15s",
		"--log-level":           "debug",
		"--log-format":          "json",
		"--tls-server-name":     "temporal.example.com",
		"--tls-ca":              "/etc/flotilla/temporal/ca.crt",
		"--tls-cert":            "/etc/flotilla/temporal/tls.crt",
		"--tls-key":             "/etc/flotilla/temporal/tls.key",
		"--content-registry":    "registry.example.com/flotilla",
		"--content-registry-ca": "/etc/flotilla/registry/ca.crt",
		"--payload-keys":        "/etc/flotilla/payload-keys",
	}
	for flag, want := range wantFlags {
		got, ok := flagValue(ctr.Args, flag)
		if assert.True(t, ok, "flag %s missing from %q", flag, ctr.Args) {
			assert.Equal(t, want, got, flag)
		}
	}
	assert.Contains(t, ctr.Args, "--tls")
	assert.Contains(t, ctr.Args, "--content-registry-plain-http")
	assert.Equal(t, []string{"env=prod", "region=eu-west-1"}, flagValues(ctr.Args, "--label"))

	assert.Equal(t, map[string]string{
		"FLOTILLA_API_KEY":                   "flotilla-agent/api-key",
		"FLOTILLA_CONTENT_REGISTRY_USERNAME": "flotilla-agent/registry-username",
		"FLOTILLA_CONTENT_REGISTRY_PASSWORD": "flotilla-agent/registry-password",
		"FLOTILLA_REGISTRATION_TOKEN":        "flotilla-agent/registration-token",
	}, envSecretRefs(ctr))
	assert.Contains(t, ctr.Env, corev1.EnvVar{Name: "HTTPS_PROXY", Value: "http://proxy:3128"})
	assert.Equal(t, map[string]string{
		"/var/lib/flotilla":          "state",
		"/tmp":                       "tmp",
		"/etc/flotilla/temporal":     "temporal-tls",
		"/etc/flotilla/registry":     "registry-ca",
		"/etc/flotilla/payload-keys": "payload-keys",
	}, volumeMounts(ctr))
	require.NotNil(t, volume(pod, "state"))
	assert.NotNil(t, volume(pod, "state").EmptyDir)
	require.NotNil(t, volume(pod, "temporal-tls"))
	assert.Equal(t, agentRelease, volume(pod, "temporal-tls").Secret.SecretName)
	assert.Len(t, volume(pod, "temporal-tls").Secret.Items, 3)

	assert.Equal(t, map[string]string{
		"ca.crt": testCA, "tls.crt": testCert, "tls.key": testKey, "api-key": testAPIKey,
		"registry-ca.crt": testCA, "registry-username": "robot", "registry-password": testRegistryPassword,
		"registration-token": testRegistrationTok,
	}, secretData(t, find(objs, "Secret", agentRelease).Object))
	// The keyring has a Secret of its own: every key of it is a key file.
	require.NotNil(t, volume(pod, "payload-keys"))
	assert.Equal(t, agentRelease+"-payload-keys", volume(pod, "payload-keys").Secret.SecretName)
	assert.Empty(t, volume(pod, "payload-keys").Secret.Items, "the whole Secret is the keyring")
	assert.True(t, readOnlyMount(ctr, "payload-keys"))
	assert.Equal(t, map[string]string{testPayloadKeyID: testPayloadKey},
		secretData(t, find(objs, "Secret", agentRelease+"-payload-keys").Object))
}

// The pod's checksum covers the payload keys, so a new key restarts the
// agent, and is unchanged without any, so agents without payload keys are
// not restarted by the chart's support for them.
func TestAgentChartPayloadKeysChecksum(t *testing.T) {
	c, err := deploy.AgentChart()
	require.NoError(t, err)
	agent := func(extra string) *appsv1.Deployment {
		t.Helper()
		objs := renderObjects(t, c, agentRelease, agentNamespace, values(t, "cluster: c1\ntemporal: {address: t:7233, apiKey: k}\n"+extra))
		return deployment(t, objs, agentRelease)
	}
	checksum := func(extra string) string {
		t.Helper()
		return agent(extra).Spec.Template.Annotations["checksum/secret"]
	}
	const secretData = `api-key: "aw=="` // the chart's Secret data for apiKey k
	none := checksum("")
	plain := agent("")
	assert.Nil(t, volume(plain.Spec.Template.Spec, "payload-keys"), "no keyring without payload keys")
	assert.NotContains(t, plain.Spec.Template.Spec.Containers[0].Args, "--payload-keys")
	assert.Equal(t, fmt.Sprintf("%x", sha256.Sum256([]byte(secretData))), none, "the checksum of the chart's Secret data alone")
	one := checksum("payloadKeys: {" + testPayloadKeyID + ": " + testPayloadKey + "}")
	two := checksum("payloadKeys: {" + testPayloadKeyID + ": " + testPayloadKey + ", fk-20261201t000000z: " + testPayloadKey + "}")
	existing := checksum("payloadKeysExistingSecret: keys\npayloadKeys: {" + testPayloadKeyID + ": " + testPayloadKey + "}")
	assert.NotEqual(t, none, one)
	assert.NotEqual(t, one, two, "an added key")
	assert.Equal(t, none, existing, "an existing Secret replaces the values")

	_, err = render(t, c, agentRelease, agentNamespace, values(t, "cluster: c1\ntemporal: {address: t:7233}\npayloadKeys: {Bad_ID: "+testPayloadKey+"}"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `invalid key ID "Bad_ID"`)
}

// readOnlyMount reports whether c mounts the volume name read-only.
func readOnlyMount(c corev1.Container, name string) bool {
	for _, m := range c.VolumeMounts {
		if m.Name == name {
			return m.ReadOnly
		}
	}
	return false
}

func TestAgentChartExistingSecrets(t *testing.T) {
	c, err := deploy.AgentChart()
	require.NoError(t, err)
	objs := renderObjects(t, c, "edge", "agents", values(t, `
cluster: c1
temporal:
  address: t:7233
  tls: {existingSecret: temporal-mtls, existingSecretKeys: [tls.crt, tls.key]}
  apiKeyExistingSecret: {name: temporal-cloud}
contentRegistry: {url: r.example.com, existingSecret: registry, existingSecretKeys: [registry-ca.crt, registry-password]}
registration: {existingSecret: {name: reg, key: token}}
payloadKeysExistingSecret: agent-payload-keys
payloadKeys: {`+testPayloadKeyID+`: `+testPayloadKey+`}
rbac: {clusterAdmin: false, rules: [{apiGroups: [""], resources: [configmaps], verbs: [get]}]}
`))
	assert.ElementsMatch(t, []string{
		"ServiceAccount/edge-flotilla-agent", "ClusterRole/edge-flotilla-agent",
		"ClusterRoleBinding/edge-flotilla-agent", "Deployment/edge-flotilla-agent",
	}, kinds(objs), "no chart Secret when every credential is in an existing Secret")
	d := deployment(t, objs, "edge-flotilla-agent")
	ctr := d.Spec.Template.Spec.Containers[0]
	assert.Equal(t, map[string]string{
		"FLOTILLA_API_KEY":                   "temporal-cloud/api-key",
		"FLOTILLA_CONTENT_REGISTRY_PASSWORD": "registry/registry-password",
		"FLOTILLA_REGISTRATION_TOKEN":        "reg/token",
	}, envSecretRefs(ctr))
	assert.NotContains(t, ctr.Args, "--tls-ca")
	assert.NotContains(t, ctr.Args, "--tls")
	assert.Contains(t, ctr.Args, "--tls-cert")
	assert.Contains(t, ctr.Args, "--content-registry-ca")
	assert.Empty(t, flagValues(ctr.Args, "--label"))
	assert.NotContains(t, d.Spec.Template.Annotations, "flotilla.dev/config-hash")
	assert.Equal(t, "temporal-mtls", volume(d.Spec.Template.Spec, "temporal-tls").Secret.SecretName)
	assert.Equal(t, "registry", volume(d.Spec.Template.Spec, "registry-ca").Secret.SecretName)
	assert.Equal(t, "agent-payload-keys", volume(d.Spec.Template.Spec, "payload-keys").Secret.SecretName,
		"the existing Secret replaces payloadKeys")
	keys, _ := flagValue(ctr.Args, "--payload-keys")
	assert.Equal(t, "/etc/flotilla/payload-keys", keys)
	assert.Equal(t, "payload-keys", volumeMounts(ctr)["/etc/flotilla/payload-keys"])
	crb := find(objs, "ClusterRoleBinding", "edge-flotilla-agent")
	assert.Equal(t, "edge-flotilla-agent", crb.Object["roleRef"].(map[string]any)["name"])
}

// secretData returns a Secret's data, decoded.
func secretData(t *testing.T, secret map[string]any) map[string]string {
	t.Helper()
	out := map[string]string{}
	data, _ := secret["data"].(map[string]any)
	for k, v := range data {
		b, err := base64.StdEncoding.DecodeString(v.(string))
		require.NoError(t, err, k)
		out[k] = string(b)
	}
	return out
}

// agentDefaults parses agent-defaults.yaml from the controller's ConfigMap.
func agentDefaults(t *testing.T, cm map[string]any) map[string]any {
	t.Helper()
	data, _ := cm["data"].(map[string]any)
	doc, ok := data["agent-defaults.yaml"].(string)
	require.True(t, ok, "ConfigMap has no agent-defaults.yaml")
	var out map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(doc), &out))
	// The controller reads the file strictly: every key the chart writes
	// must be one it knows.
	path := filepath.Join(t.TempDir(), "agent-defaults.yaml")
	require.NoError(t, os.WriteFile(path, []byte(doc), 0o600))
	_, err := agentcfg.Load(path)
	require.NoError(t, err, "the controller rejects the chart's agent defaults:\n%s", doc)
	return out
}
