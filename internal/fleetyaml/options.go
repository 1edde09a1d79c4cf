package fleetyaml

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// Options are how a bundle is deployed on one cluster: Fleet's
// BundleDeploymentOptions. Field order and JSON names are Fleet's, because
// the deployment ID hashes the JSON encoding, and every field is omitted
// when empty (except ignore, which Fleet embeds by value), so a bundle
// that only uses fields Fleet knows hashes to Fleet's ID. Do not reorder
// fields.
type Options struct {
	// DefaultNamespace is the namespace for namespaced objects that name
	// none. It does not restrict where objects go.
	DefaultNamespace string `json:"defaultNamespace,omitempty"`
	// TargetNamespace forces every object into this namespace (fleet.yaml
	// "namespace"); cluster-scoped objects are then an error.
	TargetNamespace string `json:"namespace,omitempty"`
	// Kustomize names the directory of the kustomization to apply.
	Kustomize *KustomizeOptions `json:"kustomize,omitempty"`
	// Helm holds the Helm options, or nil when fleet.yaml sets none.
	Helm *HelmOptions `json:"helm,omitempty"`
	// ServiceAccount is the downstream service account to impersonate.
	ServiceAccount string `json:"serviceAccount,omitempty"`
	// ForceSyncGeneration is bumped to force a redeployment.
	ForceSyncGeneration int64 `json:"forceSyncGeneration,omitempty"`
	// YAML lists the overlays applied to raw YAML files.
	YAML *YAMLOptions `json:"yaml,omitempty"`
	// Diff tunes drift detection. Not part of the deployment ID.
	Diff *DiffOptions `json:"diff,omitempty"`
	// KeepResources keeps deployed objects when the bundle is deleted.
	KeepResources bool `json:"keepResources,omitempty"`
	// DeleteNamespace deletes the target namespace with the bundle.
	DeleteNamespace bool `json:"deleteNamespace,omitempty"`
	// Ignore mirrors Fleet's embedded, non-pointer IgnoreOptions: it is
	// always encoded (as "ignore":{} when empty), and Fleet's IDs include it.
	Ignore IgnoreOptions `json:"ignore,omitempty"`
	// CorrectDrift undoes changes made on the cluster. Not part of the
	// deployment ID.
	CorrectDrift *CorrectDrift `json:"correctDrift,omitempty"`
	// NamespaceLabels are added to the target namespace.
	NamespaceLabels map[string]string `json:"namespaceLabels,omitempty"`
	// NamespaceAnnotations are added to the target namespace.
	NamespaceAnnotations map[string]string `json:"namespaceAnnotations,omitempty"`
	// DeleteCRDResources lets a cleanup delete the bundle's CRDs (and so
	// every custom resource of them); otherwise CRDs are kept.
	DeleteCRDResources bool `json:"deleteCRDResources,omitempty"`
	// DownstreamResources are Secrets and ConfigMaps copied from the
	// GitRepo's namespace to the cluster.
	DownstreamResources []DownstreamResource `json:"downstreamResources,omitempty"`
	// DownstreamResourcesDigest is Flotilla's own: a keyed digest (HMAC
	// under a key only controllers hold) of the content of the
	// DownstreamResources copied to this cluster, set when the options are
	// computed for it. It puts that content into the deployment ID, so a
	// changed Secret or ConfigMap redeploys, without revealing it. Empty
	// (and so absent from the hash) without DownstreamResources.
	DownstreamResourcesDigest string `json:"downstreamResourcesDigest,omitempty"`
	// CorrectionWindows are the bundle's rolloutStrategy.windows, copied
	// here when the options are computed for a cluster: the drift watch
	// reads only these options, and corrects drift inside the windows
	// alone. Like CorrectDrift, not part of the deployment ID.
	CorrectionWindows []Window `json:"correctionWindows,omitempty"`
}

// KustomizeOptions select a kustomization.
type KustomizeOptions struct {
	// Dir is the directory, relative to the bundle, holding
	// kustomization.yaml. Empty means the bundle directory.
	Dir string `json:"dir,omitempty"`
}

// YAMLOptions customise raw YAML bundles.
type YAMLOptions struct {
	// Overlays name directories under overlays/, applied in order: a file
	// there replaces the bundle file of the same path, and a file named
	// <name>_patch.<ext> patches it.
	Overlays []string `json:"overlays,omitempty"`
}

// DiffOptions tune drift detection.
type DiffOptions struct {
	ComparePatches []ComparePatch `json:"comparePatches,omitempty"`
}

// ComparePatch selects objects and the fields (or whole objects) drift
// detection ignores.
type ComparePatch struct {
	Kind         string      `json:"kind,omitempty"`
	APIVersion   string      `json:"apiVersion,omitempty"`
	Namespace    string      `json:"namespace,omitempty"`
	Name         string      `json:"name,omitempty"`
	Operations   []Operation `json:"operations,omitempty"`
	JSONPointers []string    `json:"jsonPointers,omitempty"`
}

// Operation is a JSON patch operation of a ComparePatch ("remove", or
// "ignore" for a whole object).
type Operation struct {
	Op    string `json:"op,omitempty"`
	Path  string `json:"path,omitempty"`
	Value string `json:"value,omitempty"`
}

// CorrectDrift configures drift correction.
type CorrectDrift struct {
	Enabled         bool `json:"enabled,omitempty"`
	Force           bool `json:"force,omitempty"`
	KeepFailHistory bool `json:"keepFailHistory,omitempty"`
}

// IgnoreOptions lists status conditions ignored when computing readiness.
type IgnoreOptions struct {
	// Conditions are maps of condition fields to values; a condition that
	// matches all entries of one map is ignored.
	Conditions []map[string]string `json:"conditions,omitempty"`
}

// DownstreamResource names a Secret or ConfigMap to copy to clusters.
type DownstreamResource struct {
	Kind string `json:"kind,omitempty"`
	Name string `json:"name,omitempty"`
}

// HelmOptions are the Helm settings of a bundle, in Fleet's field order
// with Fleet's JSON names.
type HelmOptions struct {
	// Chart is a chart directory relative to the bundle, a URL of a chart
	// archive, an oci:// reference, or a chart name in Repo.
	Chart string `json:"chart,omitempty"`
	// Repo is a Helm repository URL (index.yaml) or an oci:// registry.
	Repo string `json:"repo,omitempty"`
	// ReleaseName overrides the release name derived from the bundle name.
	ReleaseName string `json:"releaseName,omitempty"`
	// Version is the chart version or semver constraint of a remote chart.
	Version string `json:"version,omitempty"`
	// TimeoutSeconds bounds Helm's wait; zero or less means do not wait.
	TimeoutSeconds int `json:"timeoutSeconds,omitempty"`
	// Values are the Helm values, with ValuesFiles already merged in.
	Values map[string]any `json:"values,omitzero"`
	// TemplateValues are rendered per cluster as templates and parsed as
	// YAML; each key then replaces that key of Values.
	TemplateValues map[string]string `json:"templateValues,omitempty"`
	// ValuesFrom reads values on the cluster from ConfigMaps and Secrets.
	ValuesFrom []ValuesFrom `json:"valuesFrom,omitempty"`
	// Force lets Helm replace objects that cannot be updated.
	Force bool `json:"force,omitempty"`
	// TakeOwnership lets Helm adopt objects it did not create.
	TakeOwnership bool `json:"takeOwnership,omitempty"`
	// MaxHistory limits the revisions Helm keeps.
	MaxHistory int `json:"maxHistory,omitempty"`
	// ValuesFiles are the values files, relative to the bundle directory,
	// that Read merged into Values. Kept because Fleet hashes them too.
	ValuesFiles []string `json:"valuesFiles,omitempty"`
	// WaitForJobs waits for Jobs to complete within TimeoutSeconds.
	WaitForJobs bool `json:"waitForJobs,omitempty"`
	// Atomic rolls back a failed upgrade.
	Atomic bool `json:"atomic,omitempty"`
	// DisablePreProcess turns off ${ } templating of Values.
	DisablePreProcess bool `json:"disablePreProcess,omitempty"`
	// DisableDNS turns off Helm's DNS lookups in templates.
	DisableDNS bool `json:"disableDNS,omitempty"`
	// SkipSchemaValidation skips the chart's values.schema.json.
	SkipSchemaValidation bool `json:"skipSchemaValidation,omitempty"`
	// DisableDependencyUpdate uses the chart's vendored charts/ only.
	DisableDependencyUpdate bool `json:"disableDependencyUpdate,omitempty"`
}

// ValuesFrom references values stored on the cluster.
type ValuesFrom struct {
	ConfigMapKeyRef *KeyRef `json:"configMapKeyRef,omitempty"`
	SecretKeyRef    *KeyRef `json:"secretKeyRef,omitempty"`
}

// KeyRef is one key of a ConfigMap or Secret.
type KeyRef struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
	Key       string `json:"key,omitempty"`
}

// Hash returns the SHA-256, in hex, of the options' JSON encoding with a
// trailing newline, after clearing the drift-only fields diff and
// correctDrift: what Fleet hashes for the deployment ID. Values must be
// JSON-encodable.
func (o Options) Hash() string {
	o.Diff, o.CorrectDrift, o.CorrectionWindows = nil, nil, nil
	b, err := json.Marshal(o)
	if err != nil {
		// Only unencodable Values (channels, functions, NaN) get here;
		// hashing the error still yields a stable, distinct value.
		b = []byte(err.Error())
	}
	sum := sha256.Sum256(append(b, '\n'))
	return hex.EncodeToString(sum[:])
}

// DeploymentID returns Fleet's deployment ID, manifestID + ":" + o.Hash().
// A cluster needs a redeploy exactly when its deployment ID changes.
func DeploymentID(manifestID string, o Options) string {
	return manifestID + ":" + o.Hash()
}

// Key returns the SHA-256, in hex, of the full options, drift fields
// included: the name under which the content store keeps them. Two options
// with the same Hash but different diff or correctDrift settings deploy the
// same thing yet are stored apart.
func (o Options) Key() string {
	b, err := json.Marshal(o)
	if err != nil {
		b = []byte(err.Error())
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
