// Package agentcfg resolves the configuration of an agent the controller
// installs (`flotilla cluster add --install-agent`): the controller's
// agent defaults (--agent-defaults, written by the flotilla chart), the
// controller's own connection settings as fallbacks, and the cluster's own
// settings, into one Effective configuration whose hash is the agent's
// deployment ID.
//
// Every default and fallback is resolved before hashing, and list and map
// fields are put in a canonical order, so the hash changes only when what
// the agent would run changes: a controller restart, a reordered
// toleration list or a per-cluster value equal to its default never
// redeploys an agent (Fleet redeployed every agent on restart because its
// comparison ignored such fallbacks).
package agentcfg

import (
	"cmp"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"helm.sh/helm/v3/pkg/chart"

	"github.com/flotilla-gitops/flotilla/internal/keyring"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
)

// Built-in defaults.
const (
	DefaultNamespace         = "flotilla-system"
	DefaultImageRepository   = "ghcr.io/flotilla-gitops/flotilla-worker"
	DefaultHeartbeatInterval = 30 * time.Second
	// ReleaseName is the Helm release of an installed agent.
	ReleaseName = "flotilla-agent"
)

// builtinTolerations let the agent run on nodes every cluster has: not
// yet initialised by a cloud provider, or control-plane only.
var builtinTolerations = []corev1.Toleration{
	{Key: "node.cloudprovider.kubernetes.io/uninitialized", Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule},
	{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
}

// Defaults is the controller's agent defaults file (--agent-defaults).
type Defaults struct {
	// Image is repository[:tag]; default DefaultImageRepository at the
	// controller's version.
	Image           string            `json:"image,omitempty"`
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`
	Namespace       string            `json:"namespace,omitempty"`
	Temporal        struct {
		// Address and Namespace default to the controller's own.
		Address   string `json:"address,omitempty"`
		Namespace string `json:"namespace,omitempty"`
		// ServerName, CAFile and APIKeyFile default to the controller's
		// --tls-server-name, --tls-ca and --api-key-file.
		ServerName string `json:"serverName,omitempty"`
		CAFile     string `json:"caFile,omitempty"`
		APIKeyFile string `json:"apiKeyFile,omitempty"`
		// CertFile and KeyFile are a PEM client certificate and key for
		// mTLS; both or neither. Default: the controller's --tls-cert and
		// --tls-key.
		CertFile string `json:"certFile,omitempty"`
		KeyFile  string `json:"keyFile,omitempty"`
		// TLSSecret names a Secret in the agent's namespace on every
		// workload cluster that holds the agent's TLS files (ca.crt,
		// tls.crt, tls.key), e.g. one cert-manager issues per cluster.
		// The CA, certificate and key above are then not sent.
		TLSSecret string `json:"tlsSecret,omitempty"`
		// TLSSecretKeys are the keys TLSSecret holds. Default: all three.
		TLSSecretKeys []string `json:"tlsSecretKeys,omitempty"`
	} `json:"temporal,omitempty"`
	// Gateway is how agents reach the controllers' gateway. When it has
	// an address (or the controller serves one, --gateway-address), agents
	// connect there with their own cluster's credential and get no
	// Temporal credentials, payload keys or registry credentials.
	// A pointer, so defaults without it keep their hash.
	Gateway         *GatewayDefaults `json:"gateway,omitempty"`
	ContentRegistry struct {
		// URL defaults to the controller's --content-registry.
		URL       string `json:"url,omitempty"`
		PlainHTTP bool   `json:"plainHTTP,omitempty"`
		CAFile    string `json:"caFile,omitempty"`
	} `json:"contentRegistry,omitempty"`
	HeartbeatInterval metav1.Duration             `json:"heartbeatInterval,omitempty"`
	Tolerations       []corev1.Toleration         `json:"tolerations,omitempty"`
	Affinity          *corev1.Affinity            `json:"affinity,omitempty"`
	NodeSelector      map[string]string           `json:"nodeSelector,omitempty"`
	Resources         corev1.ResourceRequirements `json:"resources,omitempty"`
	Env               []corev1.EnvVar             `json:"env,omitempty"`
	PriorityClassName string                      `json:"priorityClassName,omitempty"`
}

// GatewayDefaults say how agents reach the controllers' gateway.
type GatewayDefaults struct {
	// Address defaults to the controller's --gateway-address.
	Address    string `json:"address,omitempty"`
	ServerName string `json:"serverName,omitempty"`
	// CAFile verifies the gateway's certificate; setting it (or
	// ServerName) turns TLS on.
	CAFile string `json:"caFile,omitempty"`
}

// gateway returns d's gateway settings (zero when unset).
func (d Defaults) gateway() GatewayDefaults {
	if d.Gateway == nil {
		return GatewayDefaults{}
	}
	return *d.Gateway
}

// Load reads a defaults file; unknown fields are errors naming the file.
func Load(path string) (Defaults, error) {
	var d Defaults
	if path == "" {
		return d, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return d, fmt.Errorf("agent defaults: %w", err)
	}
	if err := yaml.UnmarshalStrict(data, &d); err != nil {
		return d, fmt.Errorf("agent defaults %s: %w", path, err)
	}
	return d, nil
}

// Controller is what the controller itself runs with: the fallbacks of
// every connection setting an agent needs.
type Controller struct {
	Version           string
	TemporalAddress   string
	TemporalNamespace string
	TLS               bool
	TLSServerName     string
	TLSCAFile         string
	TLSCertFile       string
	TLSKeyFile        string
	APIKeyFile        string
	APIKey            string
	RegistryURL       string
	RegistryPlainHTTP bool
	RegistryCAFile    string
	RegistryUsername  string
	RegistryPassword  string
	// PayloadKeys is the controller's payload keyring directory
	// (--payload-keys); agents get the same keys. Omitted from
	// DefaultsHash when empty, so controllers without one keep their hash.
	PayloadKeys string `json:",omitempty"`
	// GatewayAddress is the agents' gateway the controller serves
	// (--gateway-address), GatewayTLS whether it serves TLS. Omitted when
	// empty, so controllers without a gateway keep their hash.
	GatewayAddress string `json:",omitempty"`
	GatewayTLS     bool   `json:",omitempty"`
	// Credential is the gateway credential of the cluster being resolved
	// (set per call, never hashed as such: SecretsHash covers it).
	Credential string `json:"-"`
}

// ViaGateway reports whether agents reach the controllers through the
// gateway.
func ViaGateway(d Defaults, c Controller) bool {
	return first(d.gateway().Address, c.GatewayAddress) != ""
}

// Effective is an agent's fully resolved configuration. Secrets are
// represented by their hashes only, payload keys by their IDs; their
// values travel in Secrets.
type Effective struct {
	Cluster           string                      `json:"cluster"`
	Namespace         string                      `json:"namespace"`
	Image             string                      `json:"image"`
	ImagePullPolicy   corev1.PullPolicy           `json:"imagePullPolicy"`
	TemporalAddress   string                      `json:"temporalAddress"`
	TemporalNamespace string                      `json:"temporalNamespace"`
	TLS               bool                        `json:"tls"`
	TLSServerName     string                      `json:"tlsServerName,omitempty"`
	TLSSecret         string                      `json:"tlsSecret,omitempty"`
	TLSSecretKeys     []string                    `json:"tlsSecretKeys,omitempty"`
	RegistryURL       string                      `json:"registryURL,omitempty"`
	RegistryPlainHTTP bool                        `json:"registryPlainHTTP,omitempty"`
	HeartbeatInterval string                      `json:"heartbeatInterval"`
	Tolerations       []corev1.Toleration         `json:"tolerations"`
	Affinity          *corev1.Affinity            `json:"affinity,omitempty"`
	NodeSelector      map[string]string           `json:"nodeSelector,omitempty"`
	Resources         corev1.ResourceRequirements `json:"resources"`
	Env               []corev1.EnvVar             `json:"env,omitempty"`
	PriorityClassName string                      `json:"priorityClassName,omitempty"`
	// Gateway: TemporalAddress is the controllers' gateway, which the
	// agent reaches with its cluster's credential alone.
	Gateway bool `json:"gateway,omitempty"`
	// PayloadKeyIDs are the IDs of the payload keys the agent gets,
	// sorted: adding a key (rotation) redeploys the agent. A key never
	// changes under its ID, so its bytes are not hashed. Omitted when
	// empty, so agents without payload keys keep their hash.
	PayloadKeyIDs []string `json:"payloadKeyIDs,omitempty"`
	// SecretsHash is the hash of every secret value (CA, API key,
	// registry credentials), so rotating one redeploys the agent.
	SecretsHash string `json:"secretsHash"`
	// ChartDigest identifies the agent chart the controller carries.
	ChartDigest string `json:"chartDigest"`
}

// Secrets are the secret values an agent gets (in its chart's Secret).
type Secrets struct {
	CA string
	// Cert and Key are the mTLS client certificate and key.
	Cert             string `json:",omitempty"`
	Key              string `json:",omitempty"`
	APIKey           string
	RegistryCA       string
	RegistryUsername string
	RegistryPassword string
	// PayloadKeys is the payload keyring: key ID → the key in standard
	// base64. Not part of SecretsHash: Effective.PayloadKeyIDs covers it.
	PayloadKeys map[string]string `json:"-"`
}

// ErrInvalid marks a configuration that cannot be resolved.
var ErrInvalid = errors.New("invalid agent configuration")

// Resolve computes the effective configuration of cluster's agent.
// Unset per-cluster fields fall back to d, unset defaults to the
// controller's own settings, then to built-in values.
func Resolve(cluster string, d Defaults, c Controller, own *protocol.AgentConfig, chartDigest string) (Effective, Secrets, error) {
	if own == nil {
		own = &protocol.AgentConfig{}
	}
	e := Effective{Cluster: cluster, ChartDigest: chartDigest}
	e.resolvePod(d, c, own)
	if ViaGateway(d, c) {
		return e.resolveGateway(d, c)
	}
	e.resolveConnection(d, c, own)

	s, err := readSecrets(d, c)
	errs := []error{err} // errors.Join drops nils
	if e.TLSSecret != "" {
		// The cluster's own Secret holds the TLS files.
		s.CA, s.Cert, s.Key = "", "", ""
		errs = append(errs, e.checkTLSSecret()...)
	}
	e.TLS = c.TLS || s.CA != "" || s.Cert != "" || e.TLSServerName != "" || e.TLSSecret != ""

	if e.TemporalAddress == "" {
		errs = append(errs, errors.New("no Temporal address for the agent: set temporal.address in the agent defaults"))
	}
	if msgs := validation.IsDNS1123Label(e.Namespace); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("namespace %q: %s", e.Namespace, strings.Join(msgs, "; ")))
	}
	if err := errors.Join(errs...); err != nil {
		return Effective{}, Secrets{}, fmt.Errorf("%w for cluster %s: %w", ErrInvalid, cluster, err)
	}
	e.SecretsHash = hashOf(s)
	e.PayloadKeyIDs = payloadKeyIDs(s)
	return e, s, nil
}

// resolvePod resolves where and how the agent's pod runs: namespace,
// image, scheduling, resources and environment.
func (e *Effective) resolvePod(d Defaults, c Controller, own *protocol.AgentConfig) {
	e.Namespace = first(own.Namespace, d.Namespace, DefaultNamespace)
	e.Image = first(own.Image, d.Image, DefaultImageRepository+":"+imageTag(c.Version))
	e.ImagePullPolicy = corev1.PullPolicy(first(string(d.ImagePullPolicy), string(corev1.PullIfNotPresent)))
	e.Tolerations = tolerations(builtinTolerations, d.Tolerations, own.Tolerations)
	e.Affinity = d.Affinity
	if own.Affinity != nil {
		e.Affinity = own.Affinity
	}
	e.NodeSelector = mergeMaps(d.NodeSelector, own.NodeSelector)
	e.Resources = d.Resources
	if len(own.Resources.Limits) > 0 || len(own.Resources.Requests) > 0 {
		e.Resources = own.Resources
	}
	e.Env = mergeEnv(d.Env, own.Env)
	e.PriorityClassName = first(own.PriorityClassName, d.PriorityClassName)
}

// resolveConnection resolves how the agent reaches Temporal and the
// content registry, and how often it heartbeats. It does not set TLS,
// which also depends on the secrets.
func (e *Effective) resolveConnection(d Defaults, c Controller, own *protocol.AgentConfig) {
	e.TemporalAddress = first(own.TemporalAddress, d.Temporal.Address, c.TemporalAddress)
	e.TemporalNamespace = first(own.TemporalNamespace, d.Temporal.Namespace, c.TemporalNamespace, "default")
	e.TLSServerName = first(own.TLSServerName, d.Temporal.ServerName, c.TLSServerName)
	e.TLSSecret = first(own.TLSSecret, d.Temporal.TLSSecret)
	if e.TLSSecret != "" {
		e.TLSSecretKeys = slices.Sorted(slices.Values(d.Temporal.TLSSecretKeys))
		if len(e.TLSSecretKeys) == 0 {
			e.TLSSecretKeys = []string{"ca.crt", "tls.crt", "tls.key"}
		}
	}
	e.RegistryURL = first(d.ContentRegistry.URL, c.RegistryURL)
	e.RegistryPlainHTTP = d.ContentRegistry.PlainHTTP || d.ContentRegistry.URL == "" && c.RegistryPlainHTTP
	hb := d.HeartbeatInterval.Duration
	if hb <= 0 {
		hb = DefaultHeartbeatInterval
	}
	e.HeartbeatInterval = hb.String()
}

// resolveGateway completes e for an agent behind the gateway: it gets the
// gateway's address and CA and its cluster's credential, and nothing of
// the controller's (Temporal credentials, payload keys, registry).
func (e Effective) resolveGateway(d Defaults, c Controller) (Effective, Secrets, error) {
	e.Gateway = true
	e.TemporalAddress = first(d.gateway().Address, c.GatewayAddress)
	e.TemporalNamespace = first(d.Temporal.Namespace, c.TemporalNamespace, "default")
	g := d.gateway()
	e.TLSServerName = g.ServerName
	hb := d.HeartbeatInterval.Duration
	if hb <= 0 {
		hb = DefaultHeartbeatInterval
	}
	e.HeartbeatInterval = hb.String()
	s := Secrets{APIKey: c.Credential}
	var errs []error
	if g.CAFile != "" {
		b, err := os.ReadFile(g.CAFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("gateway CA for agents: %w", err))
		}
		s.CA = string(b)
	}
	if c.Credential == "" {
		errs = append(errs, errors.New("no gateway credential for the agent"))
	}
	if msgs := validation.IsDNS1123Label(e.Namespace); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("namespace %q: %s", e.Namespace, strings.Join(msgs, "; ")))
	}
	if err := errors.Join(errs...); err != nil {
		return Effective{}, Secrets{}, fmt.Errorf("%w for cluster %s: %w", ErrInvalid, e.Cluster, err)
	}
	e.TLS = c.GatewayTLS || s.CA != "" || e.TLSServerName != ""
	e.SecretsHash = hashOf(s)
	return e, s, nil
}

// checkTLSSecret reports what is wrong with the name and keys of the
// cluster's own TLS Secret.
func (e *Effective) checkTLSSecret() []error {
	var errs []error
	if msgs := validation.IsDNS1123Subdomain(e.TLSSecret); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("TLS secret %q: %s", e.TLSSecret, strings.Join(msgs, "; ")))
	}
	for _, k := range e.TLSSecretKeys {
		if !slices.Contains([]string{"ca.crt", "tls.crt", "tls.key"}, k) {
			errs = append(errs, fmt.Errorf("TLS secret key %q: want ca.crt, tls.crt or tls.key", k))
		}
	}
	return errs
}

// Hash is the agent's deployment ID: the sha256 of the canonical JSON of
// the effective configuration.
func (e Effective) Hash() string { return "agent:" + hashOf(e) }

// DefaultsHash identifies the controller's side of every agent's
// configuration (defaults, fallbacks, chart, secrets): clusters re-check
// their agent only when it changes.
func DefaultsHash(d Defaults, c Controller, chartDigest string) string {
	sec, _ := readSecrets(d, c) // a read error shows when an agent is resolved
	c.APIKey, c.RegistryUsername, c.RegistryPassword = "", "", ""
	return hashOf(struct {
		D       Defaults
		C       Controller
		Chart   string
		Secrets string
		// PayloadKeyIDs is omitted when empty, keeping the hash of a
		// controller without payload keys.
		PayloadKeyIDs []string `json:",omitempty"`
	}{d, c, chartDigest, hashOf(sec), payloadKeyIDs(sec)})
}

// payloadKeyIDs returns the IDs of s's payload keys, sorted; nil without
// any.
func payloadKeyIDs(s Secrets) []string {
	if len(s.PayloadKeys) == 0 {
		return nil
	}
	return slices.Sorted(maps.Keys(s.PayloadKeys))
}

// readSecrets reads the secret values agents get: files named in the
// defaults, else the controller's own, plus its inline API key, registry
// credentials and payload keyring. Errors name what could not be read.
func readSecrets(d Defaults, c Controller) (Secrets, error) {
	var s Secrets
	var errs []error
	read := func(dst *string, what string, paths ...string) {
		p := first(paths...)
		if p == "" {
			return
		}
		data, err := os.ReadFile(p)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", what, err))
			return
		}
		*dst = string(data)
	}
	read(&s.CA, "Temporal CA for agents", d.Temporal.CAFile, c.TLSCAFile)
	// The client certificate and key are a pair: both from the defaults,
	// or both from the controller.
	cert, key := c.TLSCertFile, c.TLSKeyFile
	if d.Temporal.CertFile != "" || d.Temporal.KeyFile != "" {
		cert, key = d.Temporal.CertFile, d.Temporal.KeyFile
	}
	if (cert == "") != (key == "") {
		errs = append(errs, errors.New("temporal.certFile and temporal.keyFile of the agent defaults go together"))
	} else {
		read(&s.Cert, "Temporal client certificate for agents", cert)
		read(&s.Key, "Temporal client key for agents", key)
	}
	read(&s.APIKey, "Temporal API key for agents", d.Temporal.APIKeyFile, c.APIKeyFile)
	s.APIKey = strings.TrimSpace(cmp.Or(s.APIKey, c.APIKey))
	read(&s.RegistryCA, "content registry CA for agents", d.ContentRegistry.CAFile, c.RegistryCAFile)
	s.RegistryUsername, s.RegistryPassword = c.RegistryUsername, c.RegistryPassword
	if c.PayloadKeys != "" {
		var err error
		if s.PayloadKeys, err = readPayloadKeys(c.PayloadKeys); err != nil {
			errs = append(errs, err)
		}
	}
	return s, errors.Join(errs...)
}

// readPayloadKeys reads the keyring in dir as key ID → key in standard
// base64. Errors name dir, never a key's content.
func readPayloadKeys(dir string) (map[string]string, error) {
	ring, err := keyring.LoadDir(dir) // validates every ID and key
	if err != nil {
		return nil, fmt.Errorf("payload keys for agents: %w", err)
	}
	out := make(map[string]string, len(ring.IDs()))
	for _, k := range ring.Keys() {
		out[k.ID] = base64.StdEncoding.EncodeToString(k.Bytes[:])
	}
	return out, nil
}

// Values are the flotilla-agent chart's values for e.
func (e Effective) Values(s Secrets) map[string]any {
	repo, tag, digest := splitImage(e.Image)
	v := map[string]any{
		"cluster": e.Cluster,
		"image":   map[string]any{"repository": repo, "tag": tag, "digest": digest, "pullPolicy": string(e.ImagePullPolicy)},
		"temporal": map[string]any{
			"address":   e.TemporalAddress,
			"namespace": e.TemporalNamespace,
			"tls":       tlsValues(e, s),
			"apiKey":    s.APIKey,
		},
		"contentRegistry": map[string]any{"url": e.RegistryURL, "plainHTTP": e.RegistryPlainHTTP, "ca": s.RegistryCA,
			"username": s.RegistryUsername, "password": s.RegistryPassword},
		"heartbeatInterval": e.HeartbeatInterval,
		"gateway":           e.Gateway,
		"tolerations":       toValue(e.Tolerations),
		"nodeSelector":      toValue(e.NodeSelector),
		"resources":         toValue(e.Resources),
		"env":               toValue(e.Env),
		"priorityClassName": e.PriorityClassName,
		"configHash":        strings.TrimPrefix(e.Hash(), "agent:")[:16],
	}
	if e.Affinity != nil {
		v["affinity"] = toValue(e.Affinity)
	}
	if len(s.PayloadKeys) > 0 {
		v["payloadKeys"] = toValue(s.PayloadKeys)
	}
	return v
}

// tlsValues are the chart's temporal.tls values: the cluster's own Secret
// when it has one, else the files' contents.
func tlsValues(e Effective, s Secrets) map[string]any {
	v := map[string]any{"enabled": e.TLS, "serverName": e.TLSServerName}
	if e.TLSSecret != "" {
		v["existingSecret"], v["existingSecretKeys"] = e.TLSSecret, toValue(e.TLSSecretKeys)
		return v
	}
	v["ca"], v["cert"], v["key"] = s.CA, s.Cert, s.Key
	return v
}

func toValue(x any) any {
	data, err := json.Marshal(x)
	if err != nil {
		return nil
	}
	var v any
	if json.Unmarshal(data, &v) != nil {
		return nil
	}
	return v
}

func first(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

func imageTag(version string) string {
	if version == "" || version == "dev" || strings.ContainsAny(version, "+ ") {
		return "latest"
	}
	return version
}

// splitImage splits repository[:tag][@digest].
func splitImage(image string) (repo, tag, digest string) {
	image, digest, _ = strings.Cut(image, "@")
	slash := strings.LastIndex(image, "/")
	if colon := strings.LastIndex(image, ":"); colon > slash {
		return image[:colon], image[colon+1:], digest
	}
	return image, "", digest
}

// tolerations merges lists, dropping duplicates, in a canonical order.
func tolerations(lists ...[]corev1.Toleration) []corev1.Toleration {
	var out []corev1.Toleration
	for _, l := range lists {
		for _, t := range l {
			if t.Operator == "" {
				t.Operator = corev1.TolerationOpEqual
			}
			if !slices.ContainsFunc(out, func(o corev1.Toleration) bool {
				return o.MatchToleration(&t) && ptrEq(o.TolerationSeconds, t.TolerationSeconds)
			}) {
				out = append(out, t)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		return fmt.Sprint(a.Key, "\x00", a.Operator, "\x00", a.Value, "\x00", a.Effect, "\x00", a.TolerationSeconds == nil, *cmp.Or(a.TolerationSeconds, new(int64))) < fmt.Sprint(b.Key, "\x00", b.Operator, "\x00", b.Value, "\x00", b.Effect, "\x00", b.TolerationSeconds == nil, *cmp.Or(b.TolerationSeconds, new(int64)))
	})
	return out
}

func ptrEq(a, b *int64) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func mergeMaps(a, b map[string]string) map[string]string {
	if len(a)+len(b) == 0 {
		return nil
	}
	out := maps.Clone(a)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, b)
	return out
}

// mergeEnv keeps the defaults' order; a cluster's variable replaces the
// default of the same name in place, new ones follow.
func mergeEnv(defaults, own []corev1.EnvVar) []corev1.EnvVar {
	out := slices.Clone(defaults)
	for _, v := range own {
		if i := slices.IndexFunc(out, func(o corev1.EnvVar) bool { return o.Name == v.Name }); i >= 0 {
			out[i] = v
		} else {
			out = append(out, v)
		}
	}
	return out
}

func hashOf(v any) string {
	data, err := json.Marshal(v) // struct fields in order, map keys sorted
	if err != nil {
		panic(fmt.Sprintf("agentcfg: hash: %v", err)) // only plain data is hashed
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// ChartDigest is a content hash of a chart's files, metadata and values,
// stable across processes.
func ChartDigest(c *chart.Chart) string {
	files := append(slices.Clone(c.Raw), c.Templates...)
	files = append(files, c.Files...)
	sort.Slice(files, func(i, j int) bool { return files[i].Name < files[j].Name })
	h := sha256.New()
	for _, f := range files {
		h.Write([]byte(f.Name))
		h.Write([]byte{0})
		h.Write(f.Data)
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}
