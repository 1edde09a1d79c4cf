package protocol

import (
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/internal/api"
)

// Workflow types.
const (
	GitRepoWorkflow      = "GitRepoWorkflow"
	RolloutWorkflow      = "RolloutWorkflow"
	ClusterWorkflow      = "ClusterWorkflow"
	ClusterGroupWorkflow = "ClusterGroupWorkflow"
)

// DefaultTaskQueue is the controller's task queue.
const DefaultTaskQueue = "flotilla"

// Updates, signals and queries.
const (
	// UpdateApply sets a resource's spec (GitRepo, Cluster, ClusterGroup).
	UpdateApply = "apply"
	// UpdateLabel sets and removes cluster labels.
	UpdateLabel = "label"
	// UpdateApprove releases rollout partitions that require approval.
	UpdateApprove = "approve"

	SignalSync            = "sync"
	SignalPause           = "pause"
	SignalResume          = "resume"
	SignalDelete          = "delete"
	SignalClustersChanged = "clustersChanged"
	// SignalSupersede tells a rollout a newer change is waiting.
	SignalSupersede = "supersede"

	QueryStatus = "status"
)

// GitRepoID is the ID of a GitRepo's entity workflow.
func GitRepoID(namespace, name string) string { return "gitrepo/" + namespace + "/" + name }

// RolloutID is the ID of one rollout: the GitRepo, the commit (first 12
// characters) and the spec generation.
func RolloutID(namespace, name, commit string, generation int64) string {
	if len(commit) > 12 {
		commit = commit[:12]
	}
	if commit == "" {
		commit = "none"
	}
	return "rollout/" + namespace + "/" + name + "/" + commit + "-" + strconv.FormatInt(generation, 10)
}

// ClusterID is the ID of a cluster's entity workflow.
func ClusterID(name string) string { return "cluster/" + name }

// ClusterGroupID is the ID of a cluster group's entity workflow.
func ClusterGroupID(name string) string { return "clustergroup/" + name }

// ClusterQueue is the task queue serving a cluster's deploy and cleanup
// activities: the agent in pull mode, the controller's worker in push mode.
func ClusterQueue(name string) string { return "cluster/" + name }

// GitRepoApply is the argument of the GitRepo apply update.
type GitRepoApply struct {
	GitRepo api.GitRepo `json:"gitRepo"`
}

// ApplyResult answers an apply update.
type ApplyResult struct {
	// Generation is the spec generation after the update.
	Generation int64 `json:"generation"`
	// Created is true for the first spec; Changed when the spec differs.
	Created bool `json:"created"`
	Changed bool `json:"changed"`
}

// Approve is the argument of the approve update: the partition to
// release (empty: every partition waiting for approval), optionally of
// one bundle only.
type Approve struct {
	Partition string `json:"partition,omitempty"`
	Bundle    string `json:"bundle,omitempty"`
}

// ApproveResult lists the partitions released, as "bundle/partition".
type ApproveResult struct {
	Approved []string `json:"approved"`
}

// ClusterRecord is a cluster's registration, the ClusterWorkflow's state.
type ClusterRecord struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels,omitempty"`
	// Annotations and TemplateValues feed fleet.yaml value templates
	// (.ClusterAnnotations, .ClusterValues).
	Annotations    map[string]string `json:"annotations,omitempty"`
	TemplateValues map[string]any    `json:"templateValues,omitempty"`
	Paused         bool              `json:"paused,omitempty"`
	// KubeconfigHash is the sha256 of the kubeconfig stored on the worker's
	// host (push mode); the kubeconfig itself never enters Temporal.
	KubeconfigHash string `json:"kubeconfigHash,omitempty"`
	Context        string `json:"context,omitempty"`
	// Generation counts accepted changes.
	Generation int64 `json:"generation"`
	// Removed is set once `flotilla cluster remove` ran.
	Removed bool `json:"removed,omitempty"`
}

// ClusterApply is the argument of the cluster apply update. Labels replace
// the cluster's labels when SetLabels is true.
type ClusterApply struct {
	Labels    map[string]string `json:"labels,omitempty"`
	SetLabels bool              `json:"setLabels,omitempty"`
	// Annotations and TemplateValues replace the cluster's when
	// SetLabels is true (a Cluster resource applied as a whole).
	Annotations    map[string]string `json:"annotations,omitempty"`
	TemplateValues map[string]any    `json:"templateValues,omitempty"`
	Paused         *bool             `json:"paused,omitempty"`
	KubeconfigHash string            `json:"kubeconfigHash,omitempty"`
	Context        string            `json:"context,omitempty"`
}

// ClusterLabel is the argument of the label update: keys to set and keys
// to remove (`k=v` and `k-` on the command line).
type ClusterLabel struct {
	Set    map[string]string `json:"set,omitempty"`
	Remove []string          `json:"remove,omitempty"`
}

// GroupRecord is a cluster group, the ClusterGroupWorkflow's state.
type GroupRecord struct {
	Name       string                `json:"name"`
	Labels     map[string]string     `json:"labels,omitempty"`
	Selector   *metav1.LabelSelector `json:"selector,omitempty"`
	Generation int64                 `json:"generation"`
	Removed    bool                  `json:"removed,omitempty"`
}

// The first inputs of the entity workflows, as clients start them. The
// workflows' input types embed these and add only the state they carry
// across continue-as-new.
type (
	// GitRepoStart starts a GitRepoWorkflow.
	GitRepoStart struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	}
	// ClusterStart starts a ClusterWorkflow.
	ClusterStart struct {
		Record ClusterRecord `json:"record"`
	}
	// GroupStart starts a ClusterGroupWorkflow.
	GroupStart struct {
		Record GroupRecord `json:"record"`
	}
)
