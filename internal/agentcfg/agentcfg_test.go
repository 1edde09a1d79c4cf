package agentcfg_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/kube/fake"
	"helm.sh/helm/v3/pkg/releaseutil"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-gitops/flotilla/deploy"
	"github.com/flotilla-gitops/flotilla/internal/agentcfg"
	"github.com/flotilla-gitops/flotilla/internal/keyring"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
)

const testChartDigest = "0123456789abcdef"

// testController is a controller with every connection fallback set.
func testController() agentcfg.Controller {
	return agentcfg.Controller{
		Version:           "v1.2.3",
		TemporalAddress:   "temporal-frontend.temporal:7233",
		TemporalNamespace: "flotilla",
		TLSServerName:     "temporal.example.com",
		RegistryURL:       "registry.example.com/flotilla",
	}
}

// resolve resolves c1's agent and fails the test on error.
func resolve(t *testing.T, d agentcfg.Defaults, c agentcfg.Controller, own *protocol.AgentConfig) (agentcfg.Effective, agentcfg.Secrets) {
	t.Helper()
	e, s, err := agentcfg.Resolve("c1", d, c, own, testChartDigest)
	require.NoError(t, err)
	return e, s
}

func tol(key, op, value, effect string) corev1.Toleration {
	return corev1.Toleration{Key: key, Operator: corev1.TolerationOperator(op), Value: value, Effect: corev1.TaintEffect(effect)}
}

func seconds(s int64) *int64 { return &s }

// A per-cluster field set to the value it would fall back to is not a
// change: the agent's hash is the same as with the field unset, so a
// controller restart (or re-running `cluster add` with explicit values)
// never redeploys the agent. Fleet redeployed every agent on restart
// because its comparison ignored such fallbacks.
func TestResolve_FallbackValueIsNoChange(t *testing.T) {
	withDefaults := func(f func(*agentcfg.Defaults)) agentcfg.Defaults {
		var d agentcfg.Defaults
		f(&d)
		return d
	}
	noTemporalNS := testController()
	noTemporalNS.TemporalNamespace = ""
	tests := []struct {
		name string
		d    agentcfg.Defaults
		c    agentcfg.Controller
		// own is the cluster's setting equal to its fallback.
		own protocol.AgentConfig
	}{
		{name: "namespace = built-in", c: testController(),
			own: protocol.AgentConfig{Namespace: agentcfg.DefaultNamespace}},
		{name: "namespace = defaults", c: testController(), d: withDefaults(func(d *agentcfg.Defaults) { d.Namespace = "agents" }),
			own: protocol.AgentConfig{Namespace: "agents"}},
		{name: "image = built-in at the controller's version", c: testController(),
			own: protocol.AgentConfig{Image: agentcfg.DefaultImageRepository + ":v1.2.3"}},
		{name: "image = defaults", c: testController(), d: withDefaults(func(d *agentcfg.Defaults) { d.Image = "mirror.example.com/worker:v1" }),
			own: protocol.AgentConfig{Image: "mirror.example.com/worker:v1"}},
		{name: "temporal address = controller's", c: testController(),
			own: protocol.AgentConfig{TemporalAddress: "temporal-frontend.temporal:7233"}},
		{name: "temporal address = defaults", c: testController(), d: withDefaults(func(d *agentcfg.Defaults) { d.Temporal.Address = "temporal.example.com:443" }),
			own: protocol.AgentConfig{TemporalAddress: "temporal.example.com:443"}},
		{name: "temporal namespace = controller's", c: testController(),
			own: protocol.AgentConfig{TemporalNamespace: "flotilla"}},
		{name: "temporal namespace = defaults", c: testController(), d: withDefaults(func(d *agentcfg.Defaults) { d.Temporal.Namespace = "agents" }),
			own: protocol.AgentConfig{TemporalNamespace: "agents"}},
		{name: "temporal namespace = built-in", c: noTemporalNS,
			own: protocol.AgentConfig{TemporalNamespace: "default"}},
		{name: "TLS server name = controller's", c: testController(),
			own: protocol.AgentConfig{TLSServerName: "temporal.example.com"}},
		{name: "TLS server name = defaults", c: testController(), d: withDefaults(func(d *agentcfg.Defaults) { d.Temporal.ServerName = "agents.example.com" }),
			own: protocol.AgentConfig{TLSServerName: "agents.example.com"}},
		{name: "toleration = built-in", c: testController(),
			own: protocol.AgentConfig{Tolerations: []corev1.Toleration{tol("node-role.kubernetes.io/control-plane", "Exists", "", "NoSchedule")}}},
		{name: "toleration = defaults, operator implied", c: testController(),
			d: withDefaults(func(d *agentcfg.Defaults) {
				d.Tolerations = []corev1.Toleration{tol("dedicated", "Equal", "agents", "NoSchedule")}
			}),
			own: protocol.AgentConfig{Tolerations: []corev1.Toleration{tol("dedicated", "", "agents", "NoSchedule")}}},
		{name: "node selector = defaults", c: testController(),
			d:   withDefaults(func(d *agentcfg.Defaults) { d.NodeSelector = map[string]string{"pool": "system"} }),
			own: protocol.AgentConfig{NodeSelector: map[string]string{"pool": "system"}}},
		{name: "priority class = defaults", c: testController(),
			d:   withDefaults(func(d *agentcfg.Defaults) { d.PriorityClassName = "system-cluster-critical" }),
			own: protocol.AgentConfig{PriorityClassName: "system-cluster-critical"}},
		{name: "everything at once", c: testController(), d: withDefaults(func(d *agentcfg.Defaults) { d.Temporal.Address = "temporal.example.com:443" }),
			own: protocol.AgentConfig{Namespace: agentcfg.DefaultNamespace, Image: agentcfg.DefaultImageRepository + ":v1.2.3",
				TemporalAddress: "temporal.example.com:443", TemporalNamespace: "flotilla", TLSServerName: "temporal.example.com"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			unset, _ := resolve(t, tt.d, tt.c, nil)
			empty, _ := resolve(t, tt.d, tt.c, &protocol.AgentConfig{})
			own := tt.own
			set, _ := resolve(t, tt.d, tt.c, &own)
			assert.Equal(t, unset.Hash(), empty.Hash(), "nil and empty per-cluster settings")
			assert.Equal(t, unset.Hash(), set.Hash(), "unset:\n%s\nset:\n%s", toJSON(t, unset), toJSON(t, set))
		})
	}
}

// The hash covers what the agent runs: a per-cluster value different from
// its fallback is a change. (The counterpart of the test above: a hash
// that ignored these fields would pass it too.)
func TestResolve_OwnValueIsChange(t *testing.T) {
	base, _ := resolve(t, agentcfg.Defaults{}, testController(), nil)
	for name, own := range map[string]protocol.AgentConfig{
		"namespace":          {Namespace: "agents"},
		"image":              {Image: agentcfg.DefaultImageRepository + ":v9"},
		"temporal address":   {TemporalAddress: "elsewhere:7233"},
		"temporal namespace": {TemporalNamespace: "other"},
		"TLS server name":    {TLSServerName: "other.example.com"},
		"toleration":         {Tolerations: []corev1.Toleration{tol("gpu", "Exists", "", "NoSchedule")}},
		"node selector":      {NodeSelector: map[string]string{"pool": "agents"}},
		"env":                {Env: []corev1.EnvVar{{Name: "HTTPS_PROXY", Value: "http://proxy:3128"}}},
		"priority class":     {PriorityClassName: "high"},
		"resources":          {Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}},
	} {
		t.Run(name, func(t *testing.T) {
			e, _ := resolve(t, agentcfg.Defaults{}, testController(), &own)
			assert.NotEqual(t, base.Hash(), e.Hash())
		})
	}
	c := testController()
	c.Version = "v1.2.4"
	upgraded, _ := resolve(t, agentcfg.Defaults{}, c, nil)
	assert.NotEqual(t, base.Hash(), upgraded.Hash(), "a new controller version upgrades the default agent image")
	otherChart, _, err := agentcfg.Resolve("c1", agentcfg.Defaults{}, testController(), nil, "fedcba9876543210")
	require.NoError(t, err)
	assert.NotEqual(t, base.Hash(), otherChart.Hash(), "a new agent chart redeploys")
}

// Tolerations in the defaults in another order, repeated, or with the
// operator implied, are the same configuration.
func TestResolve_TolerationsAreCanonical(t *testing.T) {
	a := tol("dedicated", "Equal", "agents", "NoSchedule")
	aImplied := tol("dedicated", "", "agents", "NoSchedule")
	b := tol("example.com/gpu", "Exists", "", "NoExecute")
	c := tol("zone", "Equal", "edge", "PreferNoSchedule")
	// Two tolerations that differ only in how long they tolerate.
	short := corev1.Toleration{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: seconds(60)}
	long := corev1.Toleration{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: seconds(600)}
	tests := []struct {
		name        string
		left, right []corev1.Toleration
	}{
		{"reordered", []corev1.Toleration{a, b, c}, []corev1.Toleration{c, a, b}},
		{"duplicated", []corev1.Toleration{a, b}, []corev1.Toleration{a, b, a, b, b}},
		{"operator implied", []corev1.Toleration{a, b}, []corev1.Toleration{b, aImplied}},
		{"repeats a built-in", []corev1.Toleration{a}, []corev1.Toleration{a, tol("node-role.kubernetes.io/control-plane", "Exists", "", "NoSchedule")}},
		{"reordered, differing in seconds only", []corev1.Toleration{short, long}, []corev1.Toleration{long, short}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, _ := resolve(t, agentcfg.Defaults{Tolerations: tt.left}, testController(), nil)
			r, _ := resolve(t, agentcfg.Defaults{Tolerations: tt.right}, testController(), nil)
			assert.Equal(t, l.Hash(), r.Hash(), "left: %v\nright: %v", l.Tolerations, r.Tolerations)
			assert.Equal(t, l.Tolerations, r.Tolerations)
		})
	}
	t.Run("distinct seconds are both kept", func(t *testing.T) {
		e, _ := resolve(t, agentcfg.Defaults{Tolerations: []corev1.Toleration{short, long}}, testController(), nil)
		assert.Len(t, e.Tolerations, 4, "two built-in, short and long: %v", e.Tolerations)
	})
}

// A cluster's tolerations are added to the built-in ones and the
// defaults', in the effective configuration and in the chart values.
func TestResolve_OwnTolerationsAreAdded(t *testing.T) {
	builtin := []corev1.Toleration{
		tol("node.cloudprovider.kubernetes.io/uninitialized", "Equal", "true", "NoSchedule"),
		tol("node-role.kubernetes.io/control-plane", "Exists", "", "NoSchedule"),
	}
	def := tol("dedicated", "Equal", "agents", "NoSchedule")
	own := []corev1.Toleration{tol("example.com/gpu", "Exists", "", "NoExecute"), tol("zone", "Equal", "edge", "PreferNoSchedule")}

	e, s := resolve(t, agentcfg.Defaults{Tolerations: []corev1.Toleration{def}}, testController(), &protocol.AgentConfig{Tolerations: own})

	want := append(append(append([]corev1.Toleration{}, builtin...), def), own...)
	assert.ElementsMatch(t, want, e.Tolerations)

	var got []corev1.Toleration
	require.NoError(t, json.Unmarshal(toJSONBytes(t, e.Values(s)["tolerations"]), &got))
	assert.ElementsMatch(t, want, got, "chart values")

	// Without any: the built-in ones still apply.
	bare, s := resolve(t, agentcfg.Defaults{}, testController(), nil)
	assert.ElementsMatch(t, builtin, bare.Tolerations)
	got = nil
	require.NoError(t, json.Unmarshal(toJSONBytes(t, bare.Values(s)["tolerations"]), &got))
	assert.ElementsMatch(t, builtin, got)
}

// Secrets (Temporal CA, API key) are read from their files. Rotating one
// changes the agent's hash, so the agent is redeployed, yet no secret
// value is part of the effective configuration (workflow state and logs):
// values appear only in the chart values, where the chart expects them.
func TestResolve_Secrets(t *testing.T) {
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	keyFile := filepath.Join(dir, "api-key")
	const ca1 = "-----BEGIN CERTIFICATE-----\nMIIBcaONEaaaaaaaaaaaaaaaaaaaaaaa\n-----END CERTIFICATE-----\n"
	const ca2 = "-----BEGIN CERTIFICATE-----\nMIIBcaTWObbbbbbbbbbbbbbbbbbbbbbb\n-----END CERTIFICATE-----\n"
	const key = "fltkey-0123456789abcdef"
	require.NoError(t, os.WriteFile(keyFile, []byte(key+"\n"), 0o600))

	c := testController()
	c.TLSCAFile, c.APIKeyFile = caFile, keyFile

	require.NoError(t, os.WriteFile(caFile, []byte(ca1), 0o600))
	e1, s1 := resolve(t, agentcfg.Defaults{}, c, nil)
	again, _ := resolve(t, agentcfg.Defaults{}, c, nil)
	require.NoError(t, os.WriteFile(caFile, []byte(ca2), 0o600))
	e2, s2 := resolve(t, agentcfg.Defaults{}, c, nil)

	assert.Equal(t, e1.Hash(), again.Hash(), "same files, same hash")
	assert.NotEqual(t, e1.Hash(), e2.Hash(), "a rotated CA redeploys the agent")
	assert.True(t, e1.TLS, "a CA implies TLS")

	for _, e := range []agentcfg.Effective{e1, e2} {
		doc := string(toJSONBytes(t, e))
		for _, secret := range []string{"MIIBcaONE", "MIIBcaTWO", "BEGIN CERTIFICATE", key} {
			assert.NotContains(t, doc, secret)
		}
	}

	v := e2.Values(s2)
	temporal := v["temporal"].(map[string]any)
	assert.Equal(t, ca2, temporal["tls"].(map[string]any)["ca"])
	assert.Equal(t, key, temporal["apiKey"], "the key file's trailing newline is trimmed")
	// Exactly once each: under temporal.tls.ca and temporal.apiKey.
	doc := string(toJSONBytes(t, v))
	assert.Equal(t, 1, strings.Count(doc, "MIIBcaTWO"), doc)
	assert.Equal(t, 1, strings.Count(doc, key), doc)
	assert.NotContains(t, doc, "MIIBcaONE")
	assert.Equal(t, ca1, s1.CA)

	// The API key given inline (--api-key) is a secret too.
	inline := testController()
	inline.APIKey = "inline-key-1"
	k1, sk1 := resolve(t, agentcfg.Defaults{}, inline, nil)
	inline.APIKey = "inline-key-2"
	k2, _ := resolve(t, agentcfg.Defaults{}, inline, nil)
	assert.NotEqual(t, k1.Hash(), k2.Hash())
	assert.NotContains(t, string(toJSONBytes(t, k1)), "inline-key-1")
	assert.Equal(t, "inline-key-1", k1.Values(sk1)["temporal"].(map[string]any)["apiKey"])

	// The defaults' files win over the controller's.
	defCA := filepath.Join(dir, "agents-ca.pem")
	require.NoError(t, os.WriteFile(defCA, []byte("agents CA"), 0o600))
	var d agentcfg.Defaults
	d.Temporal.CAFile = defCA
	_, sd := resolve(t, d, c, nil)
	assert.Equal(t, "agents CA", sd.CA)

	// An unreadable secret file is an error, not an agent without TLS.
	c.TLSCAFile = filepath.Join(dir, "missing.pem")
	_, _, err := agentcfg.Resolve("c1", agentcfg.Defaults{}, c, nil, testChartDigest)
	require.ErrorIs(t, err, agentcfg.ErrInvalid)
	assert.ErrorIs(t, err, os.ErrNotExist)
}

// The controller's side of the configuration (DefaultsHash) changes with
// its secrets' content but not with anything else between restarts.
func TestDefaultsHash(t *testing.T) {
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	require.NoError(t, os.WriteFile(caFile, []byte("ca one"), 0o600))
	c := testController()
	c.TLSCAFile = caFile
	d, err := agentcfg.Load("")
	require.NoError(t, err)

	h1 := agentcfg.DefaultsHash(d, c, testChartDigest)
	assert.Equal(t, h1, agentcfg.DefaultsHash(d, c, testChartDigest), "a restart with the same settings")
	require.NoError(t, os.WriteFile(caFile, []byte("ca two"), 0o600))
	assert.NotEqual(t, h1, agentcfg.DefaultsHash(d, c, testChartDigest), "a rotated CA")
	assert.NotEqual(t, h1, agentcfg.DefaultsHash(d, c, "other chart"))
	c.APIKey = "k1"
	withKey := agentcfg.DefaultsHash(d, c, testChartDigest)
	c.APIKey = "k2"
	assert.NotEqual(t, withKey, agentcfg.DefaultsHash(d, c, testChartDigest), "a rotated inline API key")
}

// Hashes of a configuration without payload keys, computed before payload
// keys existed: upgrading the controller must not redeploy an agent whose
// configuration did not change (only a new agent chart may).
func TestHash_Golden(t *testing.T) {
	c := testController()
	c.APIKey = "inline-key"
	e, _ := resolve(t, agentcfg.Defaults{}, c, &protocol.AgentConfig{Namespace: "agents"})
	assert.Equal(t, "agent:69388a5c2403aec0362c1f0f90d1b379ac939dacf438574c29b1386955000cba", e.Hash())
	assert.Equal(t, "5bebd85d30ab91e58891e7c230be9467e29f0d069b2afdadd91adedfc1e579d4", agentcfg.DefaultsHash(agentcfg.Defaults{}, c, testChartDigest))
}

// Agents get the controller's payload keyring (--payload-keys) in their
// chart values. Adding a key (rotation) redeploys them; the effective
// configuration names the keys by ID only, never by content.
func TestResolve_PayloadKeys(t *testing.T) {
	dir := t.TempDir()
	key := func(id string, b byte) keyring.Key {
		k := keyring.Key{ID: id}
		for i := range k.Bytes {
			k.Bytes[i] = b
		}
		return k
	}
	k1, k2 := key("fk-20260101t000000z", 1), key("fk-20260201t000000z", 2)
	b64 := func(k keyring.Key) string { return base64.StdEncoding.EncodeToString(k.Bytes[:]) }
	require.NoError(t, keyring.WriteKey(dir, k2))
	agentChart, err := deploy.AgentChart()
	require.NoError(t, err)

	plain, plainSecrets := resolve(t, agentcfg.Defaults{}, testController(), nil)
	c := testController()
	c.PayloadKeys = dir
	one, s1 := resolve(t, agentcfg.Defaults{}, c, nil)
	again, _ := resolve(t, agentcfg.Defaults{}, c, nil)
	dh1 := agentcfg.DefaultsHash(agentcfg.Defaults{}, c, testChartDigest)
	require.NoError(t, keyring.WriteKey(dir, k1)) // an older ID sorts first
	two, s2 := resolve(t, agentcfg.Defaults{}, c, nil)

	assert.Nil(t, plain.PayloadKeyIDs)
	assert.Nil(t, plain.Values(plainSecrets)["payloadKeys"], "no payloadKeys value without keys")
	assert.Equal(t, []string{k2.ID}, one.PayloadKeyIDs)
	assert.Equal(t, []string{k1.ID, k2.ID}, two.PayloadKeyIDs, "sorted")
	assert.NotEqual(t, plain.Hash(), one.Hash(), "turning encryption on redeploys agents")
	assert.Equal(t, one.Hash(), again.Hash(), "a restart with the same keys")
	assert.NotEqual(t, one.Hash(), two.Hash(), "an added key redeploys agents")
	assert.NotEqual(t, dh1, agentcfg.DefaultsHash(agentcfg.Defaults{}, c, testChartDigest), "an added key re-checks agents")
	assert.Equal(t, plain.SecretsHash, two.SecretsHash, "keys are hashed by ID, not content")

	assert.Equal(t, map[string]string{k1.ID: b64(k1), k2.ID: b64(k2)}, s2.PayloadKeys)
	assert.Equal(t, map[string]any{k2.ID: b64(k2)}, one.Values(s1)["payloadKeys"])
	assert.Equal(t, map[string]any{k1.ID: b64(k1), k2.ID: b64(k2)}, two.Values(s2)["payloadKeys"])
	doc := toJSON(t, two)
	assert.NotContains(t, doc, b64(k1))
	assert.NotContains(t, doc, b64(k2))

	pod, _ := renderAgent(t, agentChart, two.Namespace, two.Values(s2))
	got, ok := flagAfter(pod.Containers[0].Args, "--payload-keys")
	require.True(t, ok, "no --payload-keys in %q", pod.Containers[0].Args)
	assert.Equal(t, "/etc/flotilla/payload-keys", got)
	var mounted string
	for _, v := range pod.Volumes {
		if v.Name == "payload-keys" && v.Secret != nil {
			mounted = v.Secret.SecretName
		}
	}
	assert.Equal(t, agentcfg.ReleaseName+"-payload-keys", mounted)

	// A keyring that cannot be read is an error naming the directory,
	// never a key's content.
	bad := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(bad, "fk-20260301t000000z"), []byte("not-a-key-S3CRET\n"), 0o600))
	for _, d := range []string{filepath.Join(dir, "missing"), bad} {
		c.PayloadKeys = d
		_, _, err := agentcfg.Resolve("c1", agentcfg.Defaults{}, c, nil, testChartDigest)
		require.ErrorIs(t, err, agentcfg.ErrInvalid)
		assert.ErrorContains(t, err, d)
		assert.NotContains(t, err.Error(), "S3CRET")
	}
}

// flagAfter returns the argument following flag in args.
func flagAfter(args []string, flag string) (string, bool) {
	i := slices.Index(args, flag)
	if i < 0 || i+1 >= len(args) {
		return "", false
	}
	return args[i+1], true
}

// The Temporal address falls back from the cluster's own to the defaults'
// to the controller's; without any the configuration is invalid, and the
// error names the cluster.
func TestResolve_TemporalAddressAndErrors(t *testing.T) {
	noAddr := testController()
	noAddr.TemporalAddress = ""
	var withAddr agentcfg.Defaults
	withAddr.Temporal.Address = "defaults:7233"
	tests := []struct {
		name    string
		d       agentcfg.Defaults
		c       agentcfg.Controller
		own     *protocol.AgentConfig
		want    string
		wantErr string // a part of the error message; the error wraps ErrInvalid
	}{
		{name: "own", d: withAddr, c: testController(), own: &protocol.AgentConfig{TemporalAddress: "own:7233"}, want: "own:7233"},
		{name: "defaults", d: withAddr, c: testController(), want: "defaults:7233"},
		{name: "controller", c: testController(), want: "temporal-frontend.temporal:7233"},
		{name: "own without controller", c: noAddr, own: &protocol.AgentConfig{TemporalAddress: "own:7233"}, want: "own:7233"},
		{name: "none", c: noAddr, wantErr: "temporal.address"},
		{name: "invalid namespace", c: testController(), own: &protocol.AgentConfig{Namespace: "Flotilla_System"}, wantErr: "Flotilla_System"},
		{name: "namespace too long", c: testController(), own: &protocol.AgentConfig{Namespace: strings.Repeat("n", 64)}, wantErr: "namespace"},
		{name: "invalid namespace in defaults", d: agentcfg.Defaults{Namespace: "-agents"}, c: testController(), wantErr: "-agents"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, _, err := agentcfg.Resolve("edge-17", tt.d, tt.c, tt.own, testChartDigest)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.ErrorIs(t, err, agentcfg.ErrInvalid)
				assert.Contains(t, err.Error(), "edge-17")
				assert.Contains(t, err.Error(), tt.wantErr)
				assert.Equal(t, agentcfg.Effective{}, e)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, e.TemporalAddress)
			assert.Equal(t, tt.want, e.Values(agentcfg.Secrets{})["temporal"].(map[string]any)["address"])
		})
	}
}

// chartDefaults is agent-defaults.yaml as the flotilla chart writes it
// with its default values (toYaml sorts the keys).
const chartDefaults = `affinity: {}
contentRegistry:
  caFile: ""
  plainHTTP: false
  url: ""
env: []
heartbeatInterval: 30s
image: ghcr.io/flotilla-gitops/flotilla-worker:0.1.0
imagePullPolicy: IfNotPresent
namespace: flotilla-system
nodeSelector: {}
priorityClassName: ""
resources: {}
temporal:
  address: ""
  apiKeyFile: ""
  caFile: ""
  namespace: ""
  serverName: ""
tolerations: []
`

// chartDefaultsSet is agent-defaults.yaml with every value set.
const chartDefaultsSet = `affinity:
  nodeAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      nodeSelectorTerms:
      - matchExpressions:
        - key: kubernetes.io/os
          operator: In
          values:
          - linux
contentRegistry:
  caFile: /etc/flotilla/agent/registry-ca.pem
  plainHTTP: true
  url: registry.example.com/flotilla
env:
- name: HTTPS_PROXY
  value: http://proxy:3128
heartbeatInterval: 1m
image: mirror.example.com/flotilla-worker:0.2.0
imagePullPolicy: Always
namespace: agents
nodeSelector:
  pool: system
priorityClassName: system-cluster-critical
resources:
  limits:
    memory: 256Mi
  requests:
    cpu: 50m
temporal:
  address: temporal.example.com:443
  apiKeyFile: /etc/flotilla/agent/api-key
  caFile: /etc/flotilla/agent/ca.pem
  namespace: agents
  serverName: temporal.example.com
tolerations:
- effect: NoSchedule
  key: dedicated
  operator: Equal
  value: agents
`

// Load reads exactly what the chart writes and rejects anything else,
// naming the file.
func TestLoad(t *testing.T) {
	write := func(t *testing.T, doc string) string {
		p := filepath.Join(t.TempDir(), "agent-defaults.yaml")
		require.NoError(t, os.WriteFile(p, []byte(doc), 0o600))
		return p
	}
	t.Run("chart defaults", func(t *testing.T) {
		d, err := agentcfg.Load(write(t, chartDefaults))
		require.NoError(t, err)
		assert.Equal(t, "ghcr.io/flotilla-gitops/flotilla-worker:0.1.0", d.Image)
		assert.Equal(t, corev1.PullIfNotPresent, d.ImagePullPolicy)
		assert.Equal(t, "flotilla-system", d.Namespace)
		assert.Equal(t, metav1.Duration{Duration: 30 * time.Second}, d.HeartbeatInterval)
		// The chart's defaults resolve like no defaults at all, but for
		// the image the chart pins.
		e, _ := resolve(t, d, testController(), nil)
		bare, _ := resolve(t, agentcfg.Defaults{Image: d.Image}, testController(), nil)
		assert.Equal(t, "temporal-frontend.temporal:7233", e.TemporalAddress)
		assert.Equal(t, "30s", e.HeartbeatInterval)
		assert.Equal(t, bare.Tolerations, e.Tolerations)
		assert.Equal(t, bare.Namespace, e.Namespace)
	})
	t.Run("every value set", func(t *testing.T) {
		d, err := agentcfg.Load(write(t, chartDefaultsSet))
		require.NoError(t, err)
		assert.Equal(t, "mirror.example.com/flotilla-worker:0.2.0", d.Image)
		assert.Equal(t, corev1.PullAlways, d.ImagePullPolicy)
		assert.Equal(t, "agents", d.Namespace)
		assert.Equal(t, "temporal.example.com:443", d.Temporal.Address)
		assert.Equal(t, "agents", d.Temporal.Namespace)
		assert.Equal(t, "temporal.example.com", d.Temporal.ServerName)
		assert.Equal(t, "/etc/flotilla/agent/ca.pem", d.Temporal.CAFile)
		assert.Equal(t, "/etc/flotilla/agent/api-key", d.Temporal.APIKeyFile)
		assert.Equal(t, "registry.example.com/flotilla", d.ContentRegistry.URL)
		assert.True(t, d.ContentRegistry.PlainHTTP)
		assert.Equal(t, "/etc/flotilla/agent/registry-ca.pem", d.ContentRegistry.CAFile)
		assert.Equal(t, "1m0s", d.HeartbeatInterval.Duration.String())
		assert.Equal(t, []corev1.Toleration{tol("dedicated", "Equal", "agents", "NoSchedule")}, d.Tolerations)
		require.NotNil(t, d.Affinity)
		require.NotNil(t, d.Affinity.NodeAffinity)
		assert.Equal(t, map[string]string{"pool": "system"}, d.NodeSelector)
		assert.Equal(t, "256Mi", d.Resources.Limits.Memory().String())
		assert.Equal(t, "50m", d.Resources.Requests.Cpu().String())
		assert.Equal(t, []corev1.EnvVar{{Name: "HTTPS_PROXY", Value: "http://proxy:3128"}}, d.Env)
		assert.Equal(t, "system-cluster-critical", d.PriorityClassName)
	})
	t.Run("no file", func(t *testing.T) {
		d, err := agentcfg.Load("")
		require.NoError(t, err)
		assert.Equal(t, agentcfg.Defaults{}, d)
	})
	t.Run("missing file", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "absent.yaml")
		_, err := agentcfg.Load(p)
		require.ErrorIs(t, err, os.ErrNotExist)
		assert.Contains(t, err.Error(), p)
	})
	for name, doc := range map[string]string{
		"unknown top-level key":  chartDefaults + "replicas: 2\n",
		"unknown temporal key":   strings.Replace(chartDefaults, "  serverName: \"\"\n", "  serverName: \"\"\n  tls: true\n", 1),
		"misspelled key":         strings.Replace(chartDefaults, "imagePullPolicy", "pullPolicy", 1),
		"unknown toleration key": strings.Replace(chartDefaultsSet, "  value: agents\n", "  value: agents\n  seconds: 5\n", 1),
		"bad duration":           strings.Replace(chartDefaults, "heartbeatInterval: 30s", "heartbeatInterval: often", 1),
	} {
		t.Run(name, func(t *testing.T) {
			p := write(t, doc)
			_, err := agentcfg.Load(p)
			require.Error(t, err)
			assert.Contains(t, err.Error(), p)
		})
	}
}

// The image reference is split into the chart's repository and tag so
// that the chart renders the very image the hash was computed from.
func TestValues_Image(t *testing.T) {
	agentChart, err := deploy.AgentChart()
	require.NoError(t, err)
	tests := []struct {
		image             string
		wantRepo, wantTag string
		wantRenderedImage string // the agent container's image
	}{
		{"ghcr.io/acme/worker:v1.2.3", "ghcr.io/acme/worker", "v1.2.3", "ghcr.io/acme/worker:v1.2.3"},
		{"worker:v1", "worker", "v1", "worker:v1"},
		{"localhost:5000/acme/worker:v1", "localhost:5000/acme/worker", "v1", "localhost:5000/acme/worker:v1"},
		// Without a tag the chart uses its appVersion: the agent chart the
		// controller carries matches the controller's version.
		{"localhost:5000/acme/worker", "localhost:5000/acme/worker", "", "localhost:5000/acme/worker:" + agentChart.Metadata.AppVersion},
		{"worker", "worker", "", "worker:" + agentChart.Metadata.AppVersion},
		// A digest pins the image; the chart renders repository@digest.
		{"ghcr.io/acme/worker@sha256:" + strings.Repeat("ab", 32), "ghcr.io/acme/worker", "",
			"ghcr.io/acme/worker@sha256:" + strings.Repeat("ab", 32)},
		{"localhost:5000/worker:v1@sha256:" + strings.Repeat("cd", 32), "localhost:5000/worker", "v1",
			"localhost:5000/worker@sha256:" + strings.Repeat("cd", 32)},
	}
	for _, tt := range tests {
		t.Run(tt.image, func(t *testing.T) {
			e, s := resolve(t, agentcfg.Defaults{}, testController(), &protocol.AgentConfig{Image: tt.image})
			v := e.Values(s)
			img := v["image"].(map[string]any)
			assert.Equal(t, tt.wantRepo, img["repository"])
			assert.Equal(t, tt.wantTag, img["tag"])
			assert.Equal(t, string(corev1.PullIfNotPresent), img["pullPolicy"])
			assert.Equal(t, tt.wantRenderedImage, renderedAgentImage(t, agentChart, e.Namespace, v))
		})
	}
	t.Run("default", func(t *testing.T) {
		for version, want := range map[string]string{"v1.2.3": "v1.2.3", "dev": "latest", "": "latest", "v1.2.3+dirty": "latest"} {
			c := testController()
			c.Version = version
			e, s := resolve(t, agentcfg.Defaults{}, c, nil)
			img := e.Values(s)["image"].(map[string]any)
			assert.Equal(t, agentcfg.DefaultImageRepository, img["repository"], version)
			assert.Equal(t, want, img["tag"], version)
		}
	})
}

// renderedAgentImage renders the agent chart with vals, as the controller
// installs it, and returns the agent container's image.
func renderedAgentImage(t *testing.T, c *chart.Chart, namespace string, vals map[string]any) string {
	t.Helper()
	pod, _ := renderAgent(t, c, namespace, vals)
	require.NotEmpty(t, pod.Containers)
	return pod.Containers[0].Image
}

// renderAgent renders the agent chart with vals, as the controller
// installs it, and returns the Deployment's pod spec and the keys of the
// chart's Secret.
func renderAgent(t *testing.T, c *chart.Chart, namespace string, vals map[string]any) (corev1.PodSpec, []string) {
	t.Helper()
	kv, err := chartutil.ParseKubeVersion("v1.33.0")
	require.NoError(t, err)
	in := action.NewInstall(&action.Configuration{
		Releases:     storage.Init(driver.NewMemory()),
		KubeClient:   &fake.PrintingKubeClient{Out: &bytes.Buffer{}},
		Capabilities: chartutil.DefaultCapabilities,
		Log:          t.Logf,
	})
	in.DryRun, in.ClientOnly, in.Replace = true, true, true
	in.ReleaseName, in.Namespace, in.KubeVersion = agentcfg.ReleaseName, namespace, kv
	rel, err := in.Run(c, vals)
	require.NoError(t, err)
	var pod *corev1.PodSpec
	var secretKeys []string
	for _, doc := range releaseutil.SplitManifests(rel.Manifest) {
		var obj struct {
			Kind string `json:"kind"`
			Spec struct {
				Template struct {
					Spec corev1.PodSpec `json:"spec"`
				} `json:"template"`
			} `json:"spec"`
			Data       map[string]string `json:"data"`
			StringData map[string]string `json:"stringData"`
		}
		require.NoError(t, yaml.Unmarshal([]byte(doc), &obj))
		switch obj.Kind {
		case "Deployment":
			pod = &obj.Spec.Template.Spec
		case "Secret":
			secretKeys = append(slices.Collect(maps.Keys(obj.Data)), slices.Collect(maps.Keys(obj.StringData))...)
		}
	}
	require.NotNil(t, pod, "no Deployment in the agent chart's manifest:\n%s", rel.Manifest)
	slices.Sort(secretKeys)
	return *pod, secretKeys
}

// Agents of an mTLS-only Temporal get a client certificate: the
// controller's own by default, the defaults' pair instead, or a Secret
// each cluster holds (cert-manager) when one is named; certificate and key
// go to the chart's Secret only, and rotating either redeploys the agent.
func TestResolve_MutualTLS(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	agentChart, err := deploy.AgentChart()
	require.NoError(t, err)
	c := testController()
	c.TLSServerName = ""
	c.TLSCertFile, c.TLSKeyFile = write("ctrl.crt", "CONTROLLER-CERT"), write("ctrl.key", "CONTROLLER-KEY")

	e, s := resolve(t, agentcfg.Defaults{}, c, nil)
	assert.True(t, e.TLS, "a client certificate implies TLS")
	assert.Equal(t, "CONTROLLER-CERT", s.Cert)
	assert.Equal(t, "CONTROLLER-KEY", s.Key)
	doc := string(toJSONBytes(t, e))
	assert.NotContains(t, doc, "CONTROLLER-CERT")
	assert.NotContains(t, doc, "CONTROLLER-KEY")
	pod, keys := renderAgent(t, agentChart, e.Namespace, e.Values(s))
	assert.Equal(t, []string{"tls.crt", "tls.key"}, keys)
	args := strings.Join(pod.Containers[0].Args, " ")
	assert.Contains(t, args, "--tls-cert /etc/flotilla/temporal/tls.crt --tls-key /etc/flotilla/temporal/tls.key")
	assert.NotContains(t, args, "--tls-ca")

	write("ctrl.key", "CONTROLLER-KEY-2")
	rotated, _ := resolve(t, agentcfg.Defaults{}, c, nil)
	assert.NotEqual(t, e.Hash(), rotated.Hash(), "a rotated key redeploys the agent")

	// The defaults' pair replaces the controller's, as a pair.
	var d agentcfg.Defaults
	d.Temporal.CertFile, d.Temporal.KeyFile = write("agents.crt", "AGENTS-CERT"), write("agents.key", "AGENTS-KEY")
	_, sd := resolve(t, d, c, nil)
	assert.Equal(t, "AGENTS-CERT", sd.Cert)
	assert.Equal(t, "AGENTS-KEY", sd.Key)
	d.Temporal.KeyFile = ""
	_, _, err = agentcfg.Resolve("c1", d, c, nil, testChartDigest)
	require.ErrorIs(t, err, agentcfg.ErrInvalid)
	assert.ErrorContains(t, err, "certFile and temporal.keyFile")

	// A cluster's own Secret: no files are sent, the pod mounts it.
	d = agentcfg.Defaults{}
	d.Temporal.TLSSecret = "agents-tls"
	d.Temporal.TLSSecretKeys = []string{"tls.key", "tls.crt"}
	c.TLSCAFile = write("ca.crt", "CA")
	withSecret, ss := resolve(t, d, c, nil)
	assert.Equal(t, "agents-tls", withSecret.TLSSecret)
	assert.Equal(t, []string{"tls.crt", "tls.key"}, withSecret.TLSSecretKeys, "sorted")
	assert.Empty(t, ss.CA+ss.Cert+ss.Key, "the Secret replaces the files")
	pod, keys = renderAgent(t, agentChart, withSecret.Namespace, withSecret.Values(ss))
	assert.NotContains(t, keys, "tls.crt")
	assert.Contains(t, strings.Join(pod.Containers[0].Args, " "), "--tls-cert /etc/flotilla/temporal/tls.crt")
	var mounted string
	for _, v := range pod.Volumes {
		if v.Secret != nil && v.Name == "temporal-tls" {
			mounted = v.Secret.SecretName
		}
	}
	assert.Equal(t, "agents-tls", mounted)
	own, _ := resolve(t, d, c, &protocol.AgentConfig{TLSSecret: "c1-tls"})
	assert.Equal(t, "c1-tls", own.TLSSecret, "the cluster's own Secret wins")
	assert.Equal(t, []string{"ca.crt", "tls.crt", "tls.key"}, func() []string {
		e, _ := resolve(t, agentcfg.Defaults{}, c, &protocol.AgentConfig{TLSSecret: "c1-tls"})
		return e.TLSSecretKeys
	}(), "all three keys by default")

	for _, bad := range []*protocol.AgentConfig{{TLSSecret: "Not_A_Name"}} {
		_, _, err := agentcfg.Resolve("c1", agentcfg.Defaults{}, c, bad, testChartDigest)
		require.ErrorIs(t, err, agentcfg.ErrInvalid)
		assert.ErrorContains(t, err, "Not_A_Name")
	}
	d.Temporal.TLSSecretKeys = []string{"tls.pem"}
	_, _, err = agentcfg.Resolve("c1", d, c, nil, testChartDigest)
	assert.ErrorContains(t, err, "tls.pem")
}

// The chart's configHash (the pod annotation that restarts the agent)
// changes exactly when the agent's hash does.
func TestValues_ConfigHashFollowsHash(t *testing.T) {
	var d agentcfg.Defaults
	d.Namespace = "agents"
	configs := []struct {
		name string
		d    agentcfg.Defaults
		own  *protocol.AgentConfig
	}{
		{"none", agentcfg.Defaults{}, nil},
		{"namespace = built-in", agentcfg.Defaults{}, &protocol.AgentConfig{Namespace: agentcfg.DefaultNamespace}},
		{"defaults namespace", d, nil},
		{"own namespace = defaults", d, &protocol.AgentConfig{Namespace: "agents"}},
		{"own image", agentcfg.Defaults{}, &protocol.AgentConfig{Image: "worker:v2"}},
		{"own env", agentcfg.Defaults{}, &protocol.AgentConfig{Env: []corev1.EnvVar{{Name: "A", Value: "1"}}}},
	}
	type got struct{ hash, configHash string }
	results := make([]got, len(configs))
	for i, c := range configs {
		e, s := resolve(t, c.d, testController(), c.own)
		ch, ok := e.Values(s)["configHash"].(string)
		require.True(t, ok)
		require.NotEmpty(t, ch)
		results[i] = got{e.Hash(), ch}
	}
	for i := range configs {
		for j := range configs {
			sameHash := results[i].hash == results[j].hash
			sameConfigHash := results[i].configHash == results[j].configHash
			assert.Equal(t, sameHash, sameConfigHash, "%s vs %s", configs[i].name, configs[j].name)
		}
	}
	assert.Equal(t, results[0].hash, results[1].hash, "precondition: some configurations are equal")
	assert.NotEqual(t, results[0].hash, results[4].hash, "precondition: some differ")
}

// ChartDigest depends on the chart's content only.
func TestChartDigest(t *testing.T) {
	a, err := deploy.AgentChart()
	require.NoError(t, err)
	b, err := deploy.AgentChart()
	require.NoError(t, err)
	assert.Equal(t, agentcfg.ChartDigest(a), agentcfg.ChartDigest(b))
	b.Templates[0].Data = append(b.Templates[0].Data, '\n')
	assert.NotEqual(t, agentcfg.ChartDigest(a), agentcfg.ChartDigest(b))
}

func toJSONBytes(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	require.NoError(t, err)
	return data
}

func toJSON(t *testing.T, v any) string { return string(toJSONBytes(t, v)) }

// An agent behind the gateway gets the gateway's address and its own
// cluster's credential, and none of the controller's secrets: no Temporal
// API key or client certificate, no payload keys, no registry. Moving to
// the gateway changes the agent's hash once; restarts keep it.
func TestResolve_Gateway(t *testing.T) {
	dir := t.TempDir()
	keys := filepath.Join(dir, "payload-keys")
	k, err := keyring.Generate()
	require.NoError(t, err)
	require.NoError(t, keyring.WriteKey(keys, k))
	caFile := filepath.Join(dir, "gw-ca.pem")
	require.NoError(t, os.WriteFile(caFile, []byte("gateway ca"), 0o600))

	c := testController()
	c.APIKey, c.PayloadKeys, c.RegistryUsername, c.RegistryPassword = "controller-api-key", keys, "pusher", "registry-password"
	direct, _ := resolve(t, agentcfg.Defaults{}, c, nil)

	c.GatewayAddress, c.Credential = "flotilla.flotilla-system:7243", "flga1.cred-of-c1"
	d := agentcfg.Defaults{Gateway: &agentcfg.GatewayDefaults{CAFile: caFile}}
	e, s := resolve(t, d, c, &protocol.AgentConfig{TemporalAddress: "elsewhere:7233"})
	assert.True(t, e.Gateway)
	assert.Equal(t, "flotilla.flotilla-system:7243", e.TemporalAddress, "the gateway, never Temporal")
	assert.True(t, e.TLS)
	assert.Empty(t, e.RegistryURL)
	assert.Empty(t, e.PayloadKeyIDs)
	assert.Equal(t, agentcfg.Secrets{CA: "gateway ca", APIKey: "flga1.cred-of-c1"}, s)
	values := fmt.Sprint(e.Values(s))
	for _, secret := range []string{"controller-api-key", "registry-password", "pusher", keys} {
		assert.NotContains(t, values, secret)
	}
	assert.Equal(t, true, e.Values(s)["gateway"])
	assert.NotEqual(t, direct.Hash(), e.Hash(), "moving to the gateway redeploys the agent once")
	again, _ := resolve(t, d, c, &protocol.AgentConfig{TemporalAddress: "elsewhere:7233"})
	assert.Equal(t, e.Hash(), again.Hash(), "a restart does not")
	c.Credential = "flga1.rotated"
	rotated, _ := resolve(t, d, c, nil)
	assert.NotEqual(t, e.Hash(), rotated.Hash(), "a new credential (cluster re-added) redeploys")

	c.Credential = ""
	_, _, err = agentcfg.Resolve("c1", d, c, nil, testChartDigest)
	require.ErrorIs(t, err, agentcfg.ErrInvalid)
}
