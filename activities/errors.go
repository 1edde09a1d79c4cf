package activities

import "time"

// Error types of non-retryable application errors. Workflows and the CLI
// match on these, never on messages.
const (
	// ErrTypeInvalidBundle: a bundle in the repository cannot be rendered
	// (bad fleet.yaml, missing chart, duplicate names). The message names
	// the file and the bundle.
	ErrTypeInvalidBundle = "InvalidBundle"
	// ErrTypeGitAuth: the Git server refused the credentials.
	ErrTypeGitAuth = "GitAuth"
	// ErrTypeRefNotFound: the branch, tag or commit does not exist.
	ErrTypeRefNotFound = "RefNotFound"
	// ErrTypeSecretNotFound: clientSecretName names no stored secret.
	ErrTypeSecretNotFound = "SecretNotFound"
	// ErrTypeGitHostKey: an SSH server's host key is not in known_hosts,
	// or differs from it. The message names the host and the key's
	// fingerprint.
	ErrTypeGitHostKey = "GitHostKey"
	// ErrTypeGitRateLimited: the Git host (this controller's record of
	// it) asked to wait. The error's details are a RateLimit: when to ask
	// again and why.
	ErrTypeGitRateLimited = "GitRateLimited"
	// ErrTypeGitTLS: the Git server's (or GitHub App token endpoint's)
	// TLS certificate is not trusted: its CA belongs in caBundle.
	ErrTypeGitTLS = "GitTLS"
)

// RateLimit is the detail of an ErrTypeGitRateLimited error.
type RateLimit struct {
	// Host is the Git host (host[:port]) that asked to wait.
	Host string `json:"host"`
	// RetryAt is the earliest time the host may be asked again.
	RetryAt time.Time `json:"retryAt"`
	// Reason says why: "429 Too Many Requests, Retry-After 30s", or
	// "X-RateLimit-Remaining 0 until ...".
	Reason string `json:"reason"`
}

// ErrTypeInvalidAgentConfig: a managed agent's configuration cannot be
// resolved (missing Temporal address, unreadable CA file, bad namespace).
const ErrTypeInvalidAgentConfig = "InvalidAgentConfig"

// ErrTypeRegistrationRejected: an agent's registration was refused (bad,
// used, expired or revoked token; the cluster exists already).
const ErrTypeRegistrationRejected = "RegistrationRejected"

// ErrTypeContentChanged: content a controller's store missed was rendered
// again from its source, and came out different from the ID the rollout
// planned with (the GitRepo's spec, the cluster's labels or a chart it
// pulls changed since). Retrying the same IDs cannot succeed; the next
// rollout plans with what renders now.
const ErrTypeContentChanged = "ContentChanged"

// ErrTypeGitHostRefused: a Git host's API (previews: commit statuses and
// PR comments) refused the request for good: the token is wrong or lacks
// the permission, the repository, pull request or commit is not there,
// or the request is invalid. Retrying cannot help until the Secret or
// spec.previews changes.
const ErrTypeGitHostRefused = "GitHostRefused"

// ErrTypeGitHostRateLimited: a Git host's API asked to wait; the retry
// waits as long as it said.
const ErrTypeGitHostRateLimited = "GitHostRateLimited"
