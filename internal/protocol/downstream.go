package protocol

import (
	"github.com/flotilla-gitops/flotilla/internal/seal"
)

// ConfigMapWorkflow holds one ConfigMap applied with `flotilla apply`
// (ConfigMapRecord), the source of fleet.yaml downstreamResources of kind
// ConfigMap.
const ConfigMapWorkflow = "ConfigMapWorkflow"

// UpdateDownstream asks a pull-mode cluster's ClusterWorkflow for the
// Secrets and ConfigMaps a bundle copies to the cluster
// (DownstreamRequest), sealed to the key its agent published
// (AgentRecord.SealKey); the answer is a seal.Box of a
// []DownstreamObject in JSON.
const UpdateDownstream = "downstream"

// ConfigMapID is the ID of a ConfigMap's entity workflow.
func ConfigMapID(namespace, name string) string { return "configmap/" + namespace + "/" + name }

// ConfigMapRecord is a ConfigMap applied with `flotilla apply`, the
// ConfigMapWorkflow's state. ConfigMaps are not secret: their data is
// kept in the clear.
type ConfigMapRecord struct {
	Namespace  string            `json:"namespace"`
	Name       string            `json:"name"`
	Data       map[string]string `json:"data,omitempty"`
	BinaryData map[string][]byte `json:"binaryData,omitempty"`
	// Generation counts accepted changes; Removed is set by a delete.
	Generation int64 `json:"generation"`
	Removed    bool  `json:"removed,omitempty"`
}

// ConfigMapStart starts (or continues) a ConfigMapWorkflow.
type ConfigMapStart struct {
	Record ConfigMapRecord `json:"record"`
}

// DownstreamRef names a Secret or ConfigMap in a GitRepo's namespace
// (fleet.yaml downstreamResources).
type DownstreamRef struct {
	// Kind is "Secret" or "ConfigMap" (matched case-insensitively).
	Kind string `json:"kind"`
	Name string `json:"name"`
}

// DownstreamRequest asks for the objects a bundle of a GitRepo copies to
// a cluster, as the bundle's options on that cluster name them: Digest is
// the keyed digest the controller put into those options, so only what a
// controller targeted to the cluster is handed out, and only while it is
// unchanged.
type DownstreamRequest struct {
	Cluster string `json:"cluster"`
	// GitRepo is the GitRepo's (or HelmOp's) "namespace/name"; Namespace
	// is where the sources live.
	GitRepo   string          `json:"gitRepo"`
	Namespace string          `json:"namespace"`
	Bundle    string          `json:"bundle"`
	Refs      []DownstreamRef `json:"refs"`
	Digest    string          `json:"digest"`
	// Key is the agent's public key the answer is sealed to; the
	// ClusterWorkflow refuses a key other than the one the agent
	// published.
	Key seal.PublicKey `json:"key"`
}

// DownstreamObject is one copied Secret or ConfigMap's content. It never
// enters Temporal in the clear: it travels sealed.
type DownstreamObject struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Type is a Secret's type.
	Type string `json:"type,omitempty"`
	// SecretData is a Secret's data.
	SecretData map[string][]byte `json:"secretData,omitempty"`
	// Data and BinaryData are a ConfigMap's.
	Data       map[string]string `json:"data,omitempty"`
	BinaryData map[string][]byte `json:"binaryData,omitempty"`
}
