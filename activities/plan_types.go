package activities

// PlanInput asks the cluster whose queue runs the activity what deploying
// Bundles and removing Remove would do. Nothing is applied: the plan reads
// the releases and objects there and asks the API server for server-side
// apply dry runs.
type PlanInput struct {
	Cluster    string     `json:"cluster"`
	GitRepo    GitRepoRef `json:"gitRepo"`
	Commit     string     `json:"commit"`
	WorkflowID string     `json:"workflowID"`
	// Bundles are as DeployInput.Bundles: per-cluster options applied
	// (TargetBundles).
	Bundles []Bundle `json:"bundles"`
	// Remove are releases the GitRepo runs there that the change drops.
	Remove []Release `json:"remove,omitempty"`
}

// PlanOfflineInput plans a cluster that could not be reached, on the
// controller: Bundles against Current (what the GitRepo last deployed
// there, rendered from its current commit; nil: nothing known).
type PlanOfflineInput struct {
	PlanInput
	Current []Bundle `json:"current,omitempty"`
	// Reason says why the cluster was not reached; copied to
	// plan.Cluster.Reason.
	Reason string `json:"reason"`
}

// Error types of the non-retryable application errors Plan returns when
// it cannot plan the cluster at all; the planner then falls back to
// PlanOffline. The error's details are the cluster's outcome.Class
// (Unreachable or Unauthorized), as Deploy reports it in DeployResult.
const (
	// ErrTypeClusterUnreachable: the cluster's API server did not answer.
	ErrTypeClusterUnreachable = "ClusterUnreachable"
	// ErrTypeClusterUnauthorized: the cluster refused the credentials.
	ErrTypeClusterUnauthorized = "ClusterUnauthorized"
)
