package protocol

// QueryPlan asks a running rollout for the plans of its partitions that
// wait for approval: what approving each would do (plan.ApprovalPlans).
const QueryPlan = "plan"
