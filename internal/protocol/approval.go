package protocol

import "github.com/flotilla-gitops/flotilla/internal/plan"

// QueryPlan asks a running rollout for the plans of its partitions that
// wait for approval: what approving each would do (ApprovalPlans).
const QueryPlan = "plan"

// The states of a PartitionPlan.
const (
	// PlanRunning: the plan is being made.
	PlanRunning = "Planning"
	// PlanDone: Plan holds the result.
	PlanDone = "Planned"
	// PlanFailed: no plan could be made; Error says why. Approving still
	// works.
	PlanFailed = "Failed"
	// PlanNone: no plan is made for this rollout (a HelmOp, a worker
	// from before plans).
	PlanNone = "None"
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
	// State is one of the Plan* constants.
	State string `json:"state"`
	// Summary is Plan.Summary(), or what went wrong.
	Summary string       `json:"summary,omitempty"`
	Plan    *plan.Result `json:"plan,omitempty"`
	Error   string       `json:"error,omitempty"`
}

// ApprovalPlans is the answer of QueryPlan.
type ApprovalPlans struct {
	// Rollout is the rollout's workflow ID, Commit what it rolls out.
	Rollout string `json:"rollout"`
	Commit  string `json:"commit"`
	// Partitions are the partitions waiting for approval now, in the
	// order of the rollout's waits (by bundle, then partition).
	Partitions []PartitionPlan `json:"partitions"`
}
