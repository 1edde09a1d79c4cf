package activities

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
)

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
