package activities

import (
	"time"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/status"
	"github.com/flotilla-gitops/flotilla/internal/strategy"
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
	// Paused is fleet.yaml's paused: clusters keep what they run.
	Paused bool `json:"paused,omitempty"`
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
	// Agent is set for a cluster served by its agent on its own task
	// queue (pull mode); others are deployed to by the controller.
	Agent bool `json:"agent,omitempty"`
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
	// Agents are the registered clusters served by an agent.
	Agents []string `json:"agents,omitempty"`
	// Offline are the agents that stopped heartbeating.
	Offline []string `json:"offline,omitempty"`
	// Strategies are the rollout strategy of every bundle that has
	// targets, by bundle name (TargetBundles only).
	Strategies []BundleStrategy `json:"strategies,omitempty"`
}

// BundleStrategy is how one bundle rolls out: its partitions and limits
// over the clusters it targets, its deployment windows (the next few, as
// times, so the workflow needs no clock or time zone data) and the
// bundles it depends on.
type BundleStrategy struct {
	Bundle    string              `json:"bundle"`
	Plan      strategy.Plan       `json:"plan"`
	Windows   []strategy.Interval `json:"windows,omitempty"`
	DependsOn []Dependency        `json:"dependsOn,omitempty"`
}

// Dependency is one dependsOn entry resolved to the GitRepo's bundles it
// names or selects.
type Dependency struct {
	// Describe is the entry as written (a name or a selector).
	Describe       string         `json:"describe"`
	Bundles        []string       `json:"bundles,omitempty"`
	AcceptedStates []status.State `json:"acceptedStates,omitempty"`
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

// WaitReadyInput waits for bundles of a cluster to be Ready, for at most
// Timeout (the longest ready timeout of their strategies).
type WaitReadyInput struct {
	DeployInput
	Timeout time.Duration `json:"timeout,omitempty"`
}

// RollbackInput returns releases of a cluster to the deployment IDs they
// ran before a halted rollout.
type RollbackInput struct {
	Cluster    string            `json:"cluster"`
	GitRepo    GitRepoRef        `json:"gitRepo"`
	WorkflowID string            `json:"workflowID"`
	Releases   []RollbackRelease `json:"releases"`
}

// RollbackRelease is one release to roll back.
type RollbackRelease struct {
	Bundle    string `json:"bundle"`
	Release   string `json:"release"`
	Namespace string `json:"namespace"`
	// From is the deployment ID the halted rollout deployed; To the one
	// to return to.
	From string `json:"from"`
	To   string `json:"to"`
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
