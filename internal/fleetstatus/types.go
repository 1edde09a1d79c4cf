package fleetstatus

import (
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/flotilla-gitops/flotilla/internal/status"
)

// The kinds a Ref may name (fleet.cattle.io/v1alpha1).
const (
	KindGitRepo      = "GitRepo"
	KindHelmOp       = "HelmOp"
	KindCluster      = "Cluster"
	KindClusterGroup = "ClusterGroup"
	KindBundle       = "Bundle"
)

// Group and Version of Fleet's API.
const (
	Group      = "fleet.cattle.io"
	Version    = "v1alpha1"
	APIVersion = Group + "/" + Version
)

// Ref names one object of the management cluster whose status the Writer
// keeps. Generation is the object's metadata.generation, UID its UID (a
// write never lands on another object of the same name).
type Ref struct {
	Kind       string
	Namespace  string
	Name       string
	Generation int64
	UID        types.UID
	// Created is the object's creationTimestamp: an object created after
	// the Writer started is news from its first observation on (events).
	Created time.Time
}

// key identifies a Ref regardless of its generation.
type key struct{ kind, namespace, name string }

func (r Ref) key() key { return key{r.Kind, r.Namespace, r.Name} }

// Condition is a Fleet (wrangler) condition with Kubernetes'
// observedGeneration: kubectl wait ignores a condition whose
// observedGeneration is older than the object's generation.
type Condition struct {
	Type               string `json:"type"`
	Status             string `json:"status"`
	Reason             string `json:"reason,omitempty"`
	Message            string `json:"message,omitempty"`
	LastUpdateTime     string `json:"lastUpdateTime,omitempty"`
	LastTransitionTime string `json:"lastTransitionTime,omitempty"`
	ObservedGeneration int64  `json:"observedGeneration,omitempty"`
}

// Display is Fleet's StatusDisplay.
type Display struct {
	ReadyBundleDeployments string `json:"readyBundleDeployments,omitempty"`
	State                  string `json:"state,omitempty"`
	Message                string `json:"message,omitempty"`
	Error                  bool   `json:"error,omitempty"`
}

// BundleSummary is Fleet's BundleSummary: bundle deployments per state
// and the bundles that are not ready.
type BundleSummary struct {
	NotReady          int                `json:"notReady,omitempty"`
	WaitApplied       int                `json:"waitApplied,omitempty"`
	ErrApplied        int                `json:"errApplied,omitempty"`
	OutOfSync         int                `json:"outOfSync,omitempty"`
	Modified          int                `json:"modified,omitempty"`
	Ready             int                `json:"ready"`
	Pending           int                `json:"pending,omitempty"`
	DesiredReady      int                `json:"desiredReady"`
	NonReadyResources []NonReadyResource `json:"nonReadyResources,omitempty"`
}

// NonReadyResource is Fleet's NonReadyResource: one bundle that is not
// ready, with its state and message.
type NonReadyResource struct {
	Name           string           `json:"name,omitempty"`
	State          string           `json:"bundleState,omitempty"`
	Message        string           `json:"message,omitempty"`
	ModifiedStatus []ModifiedStatus `json:"modifiedStatus,omitempty"`
}

// ModifiedStatus is Fleet's ModifiedStatus: one drifted object.
type ModifiedStatus struct {
	Kind       string `json:"kind,omitempty"`
	APIVersion string `json:"apiVersion,omitempty"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name,omitempty"`
	Missing    bool   `json:"missing,omitempty"`
	Delete     bool   `json:"delete,omitempty"`
	Patch      string `json:"patch,omitempty"`
}

// Resource is Fleet's Resource: one object and the clusters per state.
type Resource struct {
	APIVersion      string          `json:"apiVersion,omitempty"`
	Kind            string          `json:"kind,omitempty"`
	Type            string          `json:"type,omitempty"`
	ID              string          `json:"id,omitempty"`
	Namespace       string          `json:"namespace,omitempty"`
	Name            string          `json:"name,omitempty"`
	IncompleteState bool            `json:"incompleteState,omitempty"`
	State           string          `json:"state,omitempty"`
	Error           bool            `json:"error,omitempty"`
	Transitioning   bool            `json:"transitioning,omitempty"`
	Message         string          `json:"message,omitempty"`
	PerClusterState PerClusterState `json:"perClusterState"`
}

// PerClusterState is Fleet's PerClusterState: cluster names per state.
type PerClusterState struct {
	Ready       []string `json:"ready,omitempty"`
	WaitApplied []string `json:"waitApplied,omitempty"`
	Pending     []string `json:"pending,omitempty"`
	Modified    []string `json:"modified,omitempty"`
	Orphaned    []string `json:"orphaned,omitempty"`
	Missing     []string `json:"missing,omitempty"`
	Unknown     []string `json:"unknown,omitempty"`
	NotReady    []string `json:"notReady,omitempty"`
}

// GitRepoStatus is the status of Fleet's GitRepo and HelmOp (StatusBase
// plus GitRepoStatus' and HelmOpStatus' own fields), with Fleet's JSON
// names.
type GitRepoStatus struct {
	ObservedGeneration       int64                            `json:"observedGeneration"`
	ReadyClusters            int                              `json:"readyClusters"`
	DesiredReadyClusters     int                              `json:"desiredReadyClusters"`
	Summary                  BundleSummary                    `json:"summary"`
	Display                  Display                          `json:"display"`
	Conditions               []Condition                      `json:"conditions,omitempty"`
	Resources                []Resource                       `json:"resources,omitempty"`
	ResourceCounts           status.ResourceCounts            `json:"resourceCounts"`
	PerClusterResourceCounts map[string]status.ResourceCounts `json:"perClusterResourceCounts,omitempty"`
	Commit                   string                           `json:"commit,omitempty"`
	WebhookCommit            string                           `json:"webhookCommit,omitempty"`
	LastWebhookTime          string                           `json:"lastWebhookTime,omitempty"`
	PollingCommit            string                           `json:"pollingCommit,omitempty"`
	// LastPollingTriggered is when a check of the remote found
	// PollingCommit: not every poll, which would write every GitRepo's
	// status once per polling interval (Fleet's status churn, fleet#3484).
	LastPollingTriggered string `json:"lastPollingTriggered,omitempty"`
	GitJobStatus         string `json:"gitJobStatus,omitempty"`
	// Version is a HelmOp's deployed chart version.
	Version string `json:"version,omitempty"`
}

// BundleDisplay is Fleet's BundleDisplay.
type BundleDisplay struct {
	ReadyClusters string `json:"readyClusters,omitempty"`
	State         string `json:"state,omitempty"`
}

// BundleStatus is the status of a Bundle mirror (part of Fleet's
// BundleStatus).
type BundleStatus struct {
	Conditions         []Condition   `json:"conditions,omitempty"`
	Summary            BundleSummary `json:"summary"`
	Display            BundleDisplay `json:"display"`
	ObservedGeneration int64         `json:"observedGeneration"`
}

// ClusterDisplay is Fleet's ClusterDisplay.
type ClusterDisplay struct {
	ReadyBundles string `json:"readyBundles,omitempty"`
	State        string `json:"state,omitempty"`
}

// AgentStatus is Fleet's AgentStatus (lastSeen is the Last-Seen column).
type AgentStatus struct {
	LastSeen  string `json:"lastSeen,omitempty"`
	Namespace string `json:"namespace,omitempty"`
}

// ClusterStatus is the status of Fleet's Cluster, the fields Flotilla
// knows.
type ClusterStatus struct {
	Conditions           []Condition           `json:"conditions,omitempty"`
	Summary              BundleSummary         `json:"summary"`
	ResourceCounts       status.ResourceCounts `json:"resourceCounts"`
	ReadyGitRepos        int                   `json:"readyGitRepos"`
	DesiredReadyGitRepos int                   `json:"desiredReadyGitRepos"`
	Display              ClusterDisplay        `json:"display"`
	Agent                AgentStatus           `json:"agent"`
	ObservedGeneration   int64                 `json:"observedGeneration"`
}

// ClusterGroupDisplay is Fleet's ClusterGroupDisplay.
type ClusterGroupDisplay struct {
	ReadyClusters string `json:"readyClusters,omitempty"`
	ReadyBundles  string `json:"readyBundles,omitempty"`
	State         string `json:"state,omitempty"`
}

// ClusterGroupStatus is the status of Fleet's ClusterGroup.
type ClusterGroupStatus struct {
	ClusterCount         int                   `json:"clusterCount"`
	NonReadyClusterCount int                   `json:"nonReadyClusterCount"`
	NonReadyClusters     []string              `json:"nonReadyClusters,omitempty"`
	Conditions           []Condition           `json:"conditions,omitempty"`
	Summary              BundleSummary         `json:"summary"`
	Display              ClusterGroupDisplay   `json:"display"`
	ResourceCounts       status.ResourceCounts `json:"resourceCounts"`
	ObservedGeneration   int64                 `json:"observedGeneration"`
}
