package plan

// The states of a PartitionPlan.
const (
	// StatePlanning: the plan is being made.
	StatePlanning = "Planning"
	// StatePlanned: Plan holds the result.
	StatePlanned = "Planned"
	// StateFailed: no plan could be made; Error says why. Approving still
	// works.
	StateFailed = "Failed"
	// StateNone: no plan is made for this rollout (a HelmOp, a worker
	// from before plans).
	StateNone = "None"
)

// PartitionPlan is the plan of one partition waiting for approval.
type PartitionPlan struct {
	Bundle    string `json:"bundle"`
	Partition string `json:"partition"`
	// Clusters are the partition's clusters, sorted: those the plan
	// covers.
	Clusters []string `json:"clusters,omitempty"`
	// Workflow is the ID of the PlanWorkflow that made (or makes) it.
	Workflow string `json:"workflow,omitempty"`
	// State is one of the State* constants.
	State string `json:"state"`
	// Summary is Plan.Summary(), or what went wrong.
	Summary string  `json:"summary,omitempty"`
	Plan    *Result `json:"plan,omitempty"`
	Error   string  `json:"error,omitempty"`
}

// ApprovalPlans is the answer of a rollout's plan query
// (protocol.QueryPlan).
type ApprovalPlans struct {
	// Rollout is the rollout's workflow ID, Commit what it rolls out.
	Rollout string `json:"rollout"`
	Commit  string `json:"commit"`
	// Partitions are the partitions waiting for approval now, in the
	// order of the rollout's waits (by bundle, then partition).
	Partitions []PartitionPlan `json:"partitions"`
}
