package protocol

// QueryPlanBase asks a GitRepo (or HelmOp) workflow what a plan compares
// a change with: its spec, the commit it runs, whether it is paused and
// its inventory (which release runs on which cluster). The answer is
// activities.PlanBase.
const QueryPlanBase = "planBase"
