// Package outcome names what happened to one bundle on one cluster when
// Flotilla tried to deploy, check, roll back or remove it. Errors are
// classified where they happen (the activity that called Helm, the API
// server or the content store) and the class travels as a value: code that
// decides reads the class's Policy, one table for every class, and never
// reads a message.
package outcome

// Class is the kind of failure of one step on one cluster. The zero value
// means the step succeeded.
type Class string

// The failure classes. Each says who must act; what it means for the
// deployment's state and its retries is its row of the policy table
// (Class.Policy, policy.go).
const (
	// OK: the step did what it was asked.
	OK Class = ""
	// Unreachable: the cluster's API server did not answer (connection
	// refused, DNS, TLS, timeouts, 5xx, 429). WaitApplied; the rollout
	// retries it after a short pause.
	Unreachable Class = "Unreachable"
	// Unauthorized: the API server refused the credentials (401).
	// WaitApplied; retried on the failure backoff.
	Unauthorized Class = "Unauthorized"
	// BundleFailed: the cluster answered and refused or failed the bundle
	// (a template error, an admission denial, an immutable field, a wait
	// timeout, a missing permission). ErrApplied on that cluster alone,
	// retried on the failure backoff at the same deployment ID.
	BundleFailed Class = "BundleFailed"
	// Invalid: the bundle's objects failed Flotilla's checks before
	// anything was applied (bad label, cluster-scoped object in a forced
	// namespace). ErrApplied; nothing was applied.
	Invalid Class = "Invalid"
	// ContentUnavailable: the rendered bundle could not be read from the
	// content store or registry. WaitApplied, retried like Unreachable.
	ContentUnavailable Class = "ContentUnavailable"
	// Refused: a GitRepoRestriction or Policy of the GitRepo's (or
	// HelmOp's) namespace refuses its spec (internal/policy). Nothing is
	// rendered or deployed; a change of the spec or of the policy, not a
	// retry, lifts it.
	Refused Class = "Refused"
)

// Rollback is what rolling a release back to its previous deployment did.
type Rollback string

// Rollback outcomes.
const (
	// RolledBack: the release runs its previous deployment again.
	RolledBack Rollback = "RolledBack"
	// RollbackFailed: the release still runs what the halted rollout
	// deployed.
	RollbackFailed Rollback = "RollbackFailed"
)
