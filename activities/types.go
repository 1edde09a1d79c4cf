package activities

import (
	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

// GitRepoRef names a GitRepo.
type GitRepoRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

func (r GitRepoRef) String() string { return r.Namespace + "/" + r.Name }

// ResolveInput asks which commit a GitRepo's branch or revision is at.
type ResolveInput struct {
	GitRepo GitRepoRef      `json:"gitRepo"`
	Spec    api.GitRepoSpec `json:"spec"`
}

// ResolveResult is the resolved commit.
type ResolveResult struct {
	// Ref is the full ref name followed (refs/heads/main) or the revision.
	Ref    string `json:"ref"`
	Commit string `json:"commit"`
}

// RenderInput asks for the bundles of a GitRepo at a commit.
type RenderInput struct {
	GitRepo GitRepoRef      `json:"gitRepo"`
	Spec    api.GitRepoSpec `json:"spec"`
	Commit  string          `json:"commit"`
}

// Bundle is one rendered bundle. Its resources and options live in the
// content store under ManifestID and OptionsHash; only these small fields
// travel through workflow history.
type Bundle struct {
	Name string `json:"name"`
	// Path is the bundle's directory in the repository.
	Path         string `json:"path"`
	ManifestID   string `json:"manifestID"`
	OptionsHash  string `json:"optionsHash"`
	DeploymentID string `json:"deploymentID"`
	Release      string `json:"release"`
	Namespace    string `json:"namespace"`
	// KeepResources and DeleteNamespace decide what its cleanup does.
	KeepResources   bool `json:"keepResources,omitempty"`
	DeleteNamespace bool `json:"deleteNamespace,omitempty"`
	// Resources counts the files in the bundle.
	Resources int `json:"resources"`
	// BundleKey names the stored bundle.Bundle (options before
	// customization, fleet.yaml spec) that TargetBundles reads.
	BundleKey string `json:"bundleKey,omitempty"`
}

// RenderResult lists the bundles, sorted by name.
type RenderResult struct {
	Bundles []Bundle `json:"bundles"`
}

// TargetsInput asks which registered clusters a GitRepo's targets select.
type TargetsInput struct {
	Targets []api.GitTarget `json:"targets"`
}

// BundleTargetsInput asks where each rendered bundle of a GitRepo goes,
// and with which options.
type BundleTargetsInput struct {
	GitRepo GitRepoRef      `json:"gitRepo"`
	Spec    api.GitRepoSpec `json:"spec"`
	Bundles []Bundle        `json:"bundles"`
}

// TargetCluster is one matched cluster.
type TargetCluster struct {
	Name   string `json:"name"`
	Paused bool   `json:"paused,omitempty"`
	// Bundles are the bundles the cluster gets, with its options
	// (TargetBundles only; ListTargets leaves it empty).
	Bundles []Bundle `json:"bundles,omitempty"`
}

// TargetsResult lists the matched clusters and every registered one.
type TargetsResult struct {
	Matched    []TargetCluster `json:"matched"`
	Registered []string        `json:"registered"`
	// Errors are bundles that could not be computed for a cluster
	// (TargetBundles only).
	Errors []status.Deployment `json:"errors,omitempty"`
}

// NotifyInput asks to signal every GitRepo that clusters changed. When
// WaitFor is set, the notification waits until that workflow is listed as
// running, so the GitRepos that react see it.
type NotifyInput struct {
	WaitFor string `json:"waitFor,omitempty"`
	Reason  string `json:"reason"`
}

// DeployInput deploys bundles of one GitRepo to the cluster whose queue
// runs the activity.
type DeployInput struct {
	Cluster    string     `json:"cluster"`
	GitRepo    GitRepoRef `json:"gitRepo"`
	Commit     string     `json:"commit"`
	WorkflowID string     `json:"workflowID"`
	Bundles    []Bundle   `json:"bundles"`
}

// DeployResult reports every bundle's deployment. Retry is set when the
// cluster could not be reached; the rollout tries again later.
type DeployResult struct {
	Deployments []status.Deployment `json:"deployments"`
	Retry       bool                `json:"retry,omitempty"`
	Message     string              `json:"message,omitempty"`
}

// Release is one release to remove from a cluster.
type Release struct {
	Bundle          string `json:"bundle"`
	Release         string `json:"release"`
	Namespace       string `json:"namespace"`
	KeepResources   bool   `json:"keepResources,omitempty"`
	DeleteNamespace bool   `json:"deleteNamespace,omitempty"`
}

// CleanupInput removes releases a GitRepo no longer wants on a cluster.
type CleanupInput struct {
	Cluster    string     `json:"cluster"`
	GitRepo    GitRepoRef `json:"gitRepo"`
	WorkflowID string     `json:"workflowID"`
	Releases   []Release  `json:"releases"`
}

// CleanupResult lists the releases removed; Retry and Message as in
// DeployResult for those that were not.
type CleanupResult struct {
	Removed []string `json:"removed"`
	Retry   bool     `json:"retry,omitempty"`
	Message string   `json:"message,omitempty"`
}
