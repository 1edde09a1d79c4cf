// Package outcome names what happened to one bundle on one cluster when
// Flotilla tried to deploy, check, roll back or remove it. Errors are
// classified where they happen (the activity that called Helm, the API
// server or the content store) and the class travels as a value: workflow
// code switches on it and never reads a message.
package outcome

// Class is the kind of failure of one step on one cluster. The zero value
// means the step succeeded.
type Class string

// The failure classes. Each says who must act and how Flotilla retries.
const (
	// OK: the step did what it was asked.
	OK Class = ""
	// Unreachable: the cluster's API server did not answer (connection
	// refused, DNS, TLS, timeouts, 5xx, 429). The deployment is
	// WaitApplied and the rollout retries with a short backoff.
	Unreachable Class = "Unreachable"
	// Unauthorized: the API server refused the credentials (401). The
	// deployment is WaitApplied and retried slowly.
	Unauthorized Class = "Unauthorized"
	// BundleFailed: the cluster answered and refused or failed the bundle
	// (a template error, an admission denial, an immutable field, a wait
	// timeout, a missing permission). ErrApplied on that cluster alone,
	// retried with a long backoff at the same deployment ID.
	BundleFailed Class = "BundleFailed"
	// Invalid: the bundle's objects failed Flotilla's checks before
	// anything was applied (bad label, cluster-scoped object in a forced
	// namespace). ErrApplied; nothing was applied.
	Invalid Class = "Invalid"
	// ContentUnavailable: the rendered bundle could not be read from the
	// content store or registry. WaitApplied, retried like Unreachable.
	ContentUnavailable Class = "ContentUnavailable"
)

// Transient reports whether a retry within the same rollout, after a short
// pause, is likely to succeed (the cluster or the store was briefly away).
func (c Class) Transient() bool { return c == Unreachable || c == ContentUnavailable }

// Failed reports whether the bundle itself failed on the cluster
// (ErrApplied), as opposed to not having been tried.
func (c Class) Failed() bool { return c == BundleFailed || c == Invalid }

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
