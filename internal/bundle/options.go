package bundle

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// Options are how a bundle is deployed: a subset of Fleet's
// BundleDeploymentOptions. Field order and JSON names are Fleet's, because
// the deployment ID hashes the JSON encoding; fields Fleet has but Flotilla
// does not support yet are left out, and since they are all omitted when
// empty, the encoding of a value that only uses supported fields is byte for
// byte the one Fleet hashes. Do not reorder fields: insert new ones at
// Fleet's position (defaultNamespace, namespace, kustomize, helm,
// serviceAccount, forceSyncGeneration, yaml, diff, keepResources,
// deleteCRDResources, ignore, correctDrift, namespaceLabels,
// namespaceAnnotations, deleteNamespace).
type Options struct {
	// DefaultNamespace is the namespace for namespaced objects that name
	// none. It does not restrict where objects go.
	DefaultNamespace string `json:"defaultNamespace,omitempty"`
	// TargetNamespace forces every object into this namespace (fleet.yaml
	// "namespace").
	TargetNamespace string `json:"namespace,omitempty"`
	// Helm holds the Helm options, or nil when fleet.yaml sets none.
	Helm *HelmOptions `json:"helm,omitempty"`
	// ServiceAccount is the downstream service account to impersonate.
	ServiceAccount string `json:"serviceAccount,omitempty"`
	// ForceSyncGeneration is bumped to force a redeployment.
	ForceSyncGeneration int64 `json:"forceSyncGeneration,omitempty"`
	// KeepResources keeps deployed objects when the bundle is deleted.
	KeepResources bool `json:"keepResources,omitempty"`
	// Ignore mirrors Fleet's embedded, non-pointer IgnoreOptions: it is
	// always encoded (as "ignore":{} when empty), and Fleet's IDs include it.
	Ignore IgnoreOptions `json:"ignore,omitempty"`
	// NamespaceLabels are added to the target namespace.
	NamespaceLabels map[string]string `json:"namespaceLabels,omitempty"`
	// NamespaceAnnotations are added to the target namespace.
	NamespaceAnnotations map[string]string `json:"namespaceAnnotations,omitempty"`
	// DeleteNamespace deletes the target namespace with the bundle.
	DeleteNamespace bool `json:"deleteNamespace,omitempty"`
}

// IgnoreOptions lists status conditions ignored when computing readiness.
type IgnoreOptions struct {
	// Conditions are maps of condition fields to values; a condition that
	// matches all entries of one map is ignored.
	Conditions []map[string]string `json:"conditions,omitempty"`
}

// HelmOptions are the Helm settings of a bundle, in Fleet's field order
// with Fleet's JSON names (a subset; see Options).
type HelmOptions struct {
	// Chart is the chart directory, relative to the bundle directory. Only
	// local charts are supported.
	Chart string `json:"chart,omitempty"`
	// Repo is a Helm repository URL. Not supported yet: Read rejects it.
	Repo string `json:"repo,omitempty"`
	// ReleaseName overrides the release name derived from the bundle name.
	ReleaseName string `json:"releaseName,omitempty"`
	// Version is the chart version (used with remote charts).
	Version string `json:"version,omitempty"`
	// TimeoutSeconds bounds Helm's wait; zero or less means do not wait.
	TimeoutSeconds int `json:"timeoutSeconds,omitempty"`
	// Values are the Helm values, with ValuesFiles already merged in.
	Values map[string]any `json:"values,omitempty"`
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
}

// Hash returns the SHA-256, in hex, of the options' JSON encoding with a
// trailing newline, which is what Fleet hashes for the deployment ID. Fleet
// clears the drift-only fields (diff, correctDrift) first; Options has none
// of them yet. Values must be JSON-encodable.
func (o Options) Hash() string {
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
