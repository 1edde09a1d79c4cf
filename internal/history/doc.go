// Package history is a GitRepo's audit trail: one Entry per rollout, drift
// correction or rollback, with what started it (a poll, a webhook delivery,
// a CLI sync and who asked), when, how it ended, who approved what, and
// what changed or failed on each cluster.
//
// The trail lives in the GitRepo workflow's state, which continue-as-new
// carries, so it outlives Temporal's retention of old runs. It is bounded
// twice: Append keeps the newest Limit entries, and the per-release rows of
// old entries are trimmed (failures last) once the rows of all entries
// exceed RowBudget bytes. The package is pure: no I/O, no clock, no SDK.
package history
