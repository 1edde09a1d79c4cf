package api

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// API versions and kinds understood by Decode.
const (
	Version      = "flotilla.dev/v1alpha1"
	FleetVersion = "fleet.cattle.io/v1alpha1"

	KindGitRepo      = "GitRepo"
	KindCluster      = "Cluster"
	KindClusterGroup = "ClusterGroup"
	KindSecret       = "Secret"
)

// Defaults applied by Default.
const (
	// DefaultNamespace is the namespace of a GitRepo that names none
	// (Fleet's namespace for downstream clusters).
	DefaultNamespace = "fleet-default"
	// DefaultPollingInterval is how often a GitRepo's remote is polled.
	DefaultPollingInterval = 15 * time.Second
	// DefaultClusterGroup is the group targeted by a GitRepo without targets.
	DefaultClusterGroup = "default"
	// DefaultPath is the path scanned when a GitRepo lists none.
	DefaultPath = "."
)

// ObjectMeta is the subset of Kubernetes object metadata Flotilla uses.
type ObjectMeta struct {
	Name        string            `json:"name"`
	Namespace   string            `json:"namespace,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// TypeMeta names the document's schema.
type TypeMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

// GitRepo is a Git repository whose bundles are deployed to target clusters.
type GitRepo struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta  `json:"metadata"`
	Spec     GitRepoSpec `json:"spec"`
}

// GitRepoSpec carries Fleet's GitRepo field names.
type GitRepoSpec struct {
	// Repo is the clone URL: http(s)://, ssh://, or scp-like
	// (git@host:org/repo.git).
	Repo string `json:"repo"`
	// Branch to follow. Empty: the remote's HEAD (its default branch).
	Branch string `json:"branch,omitempty"`
	// Revision pins a commit or tag; polling then never moves it.
	Revision string `json:"revision,omitempty"`
	// Paths are the directories (globs) scanned for bundles. Default ".".
	Paths []string `json:"paths,omitempty"`
	// Targets select clusters. Default: clusterGroup "default".
	Targets []TargetSelector `json:"targets,omitempty"`
	// TargetNamespace forces every bundle's objects into this namespace.
	// It binds every bundle and customization: one that names another
	// namespace (namespace, a valuesFrom namespace) is refused for the
	// clusters it selects (target.Bounds).
	TargetNamespace string `json:"targetNamespace,omitempty"`
	// ServiceAccount is the ServiceAccount (of each bundle's target
	// namespace, on each cluster) every bundle of the GitRepo deploys as;
	// a bundle or customization naming another one is refused for the
	// clusters it selects (target.Bounds).
	ServiceAccount string `json:"serviceAccount,omitempty"`
	// ClientSecretName names the Secret Git is reached with: basic-auth
	// (username and password, or a token with or without a username),
	// ssh-auth (ssh-privatekey, optional known_hosts), or a GitHub App
	// (github_app_id, github_app_installation_id, github_app_private_key).
	ClientSecretName string `json:"clientSecretName,omitempty"`
	// HelmSecretName names a basic-auth Secret (username/password) for
	// Helm repositories and OCI registries. It requires HelmRepoURLRegex
	// (as Fleet 0.16 does): the credentials are sent only to chart URLs
	// it matches.
	HelmSecretName string `json:"helmSecretName,omitempty"`
	// HelmSecretNameForPaths names a Secret whose secrets-path.yaml maps
	// bundle paths (globs) to Helm credentials (username, password,
	// caBundle, insecureSkipVerify, basicHTTP). When set, HelmSecretName
	// is not used, as in Fleet; it requires HelmRepoURLRegex too.
	HelmSecretNameForPaths string `json:"helmSecretNameForPaths,omitempty"`
	// HelmRepoURLRegex selects the chart URLs that get HelmSecretName's
	// credentials, matched against the whole URL (HelmRepoURLPattern).
	HelmRepoURLRegex string `json:"helmRepoURLRegex,omitempty"`
	// PollingInterval between checks of the remote. Default 15s, ±10 % jitter.
	PollingInterval *metav1.Duration `json:"pollingInterval,omitempty"`
	// DisablePolling stops polling; only sync signals and webhooks trigger.
	DisablePolling bool `json:"disablePolling,omitempty"`
	// WebhookSecret names a Secret in the GitRepo's namespace whose key
	// for the provider (github, gitlab, gitea, gogs, bitbucket,
	// bitbucket-server, azure-username + azure-password) authenticates
	// webhook deliveries for this GitRepo instead of the global secret.
	WebhookSecret string `json:"webhookSecret,omitempty"`
	// Paused keeps polling but deploys nothing until resumed.
	Paused bool `json:"paused,omitempty"`
	// KeepResources leaves deployed objects in place when bundles or the
	// GitRepo are deleted, or clusters are no longer targeted.
	KeepResources bool `json:"keepResources,omitempty"`
	// DeleteNamespace deletes a bundle's namespace when the bundle is removed.
	DeleteNamespace bool `json:"deleteNamespace,omitempty"`
	// ForceSyncGeneration, when bumped, redeploys everything.
	ForceSyncGeneration int64 `json:"forceSyncGeneration,omitempty"`
	// InsecureSkipTLSVerify disables TLS verification for the Git server.
	InsecureSkipTLSVerify bool `json:"insecureSkipTLSVerify,omitempty"`
	// CABundle holds PEM certificates trusted, besides the system's, for
	// the Git server (and a GitHub App's API).
	CABundle []byte `json:"caBundle,omitempty"`
	// InsecureSkipHostKeyChecks accepts any SSH host key (Flotilla
	// extension; Fleet has it as a controller-wide setting): a
	// man-in-the-middle can then serve any commit. Status warns.
	InsecureSkipHostKeyChecks bool `json:"insecureSkipHostKeyChecks,omitempty"`
	// Bundles lists the bundle directories to read (Fleet 0.13's
	// user-driven scan) instead of walking Paths for fleet.yaml files.
	Bundles []BundlePath `json:"bundles,omitempty"`
	// Verify requires commits (or tags) to be signed by a trusted key
	// before they are deployed (Flotilla extension, after Flux).
	Verify *VerifySpec `json:"verify,omitempty"`
	// Previews plans pull requests against Branch and posts the plan as
	// a comment and a commit status (Flotilla extension).
	Previews *PreviewsSpec `json:"previews,omitempty"`
	// CorrectDrift undoes changes made on the clusters to every bundle
	// whose fleet.yaml (or target customization) sets no correctDrift of
	// its own; a bundle's own setting, even enabled: false, wins.
	CorrectDrift *CorrectDrift `json:"correctDrift,omitempty"`
	// HelmOp is set, by Flotilla, on the GitRepo a HelmOp rolls out as
	// (HelmOp.AsGitRepo): the bundle is rendered from it, not from Git.
	HelmOp *HelmOpSource `json:"helmOp,omitempty"`
}

// BundlePath is one entry of a GitRepo's bundles: a bundle directory and
// the options (fleet.yaml-format) files that configure it.
type BundlePath struct {
	// Base is the bundle's directory, relative to the repository root.
	Base string `json:"base,omitempty"`
	// Options is the fleet.yaml-format file, relative to Base, that
	// configures the bundle. Default: Base's fleet.yaml, if any.
	Options string `json:"options,omitempty"`
}

// Verification modes of VerifySpec.
const (
	VerifyHEAD       = "HEAD"
	VerifyTag        = "Tag"
	VerifyTagAndHEAD = "TagAndHEAD"
)

// VerifySpec is a GitRepo's signature verification.
type VerifySpec struct {
	// Mode is what must be signed: HEAD (the commit, the default), Tag
	// (the annotated tag revision names) or TagAndHEAD (both).
	Mode string `json:"mode,omitempty"`
	// SecretRef names a Secret in the GitRepo's namespace whose every key
	// holds trusted public keys: armored OpenPGP keys, or SSH public keys
	// (authorized_keys format, one per line).
	SecretRef *LocalObjectReference `json:"secretRef,omitempty"`
}

// LocalObjectReference names an object in the same namespace.
type LocalObjectReference struct {
	Name string `json:"name"`
}

// CorrectDrift configures drift correction (Fleet's correctDrift).
type CorrectDrift struct {
	// Enabled restores drifted releases (a Helm rollback to the deployed
	// revision) about a second after the change is seen.
	Enabled bool `json:"enabled,omitempty"`
	// Force replaces objects that cannot be patched back in place.
	Force bool `json:"force,omitempty"`
	// KeepFailHistory keeps the Helm record of failed corrections.
	KeepFailHistory bool `json:"keepFailHistory,omitempty"`
}

// TargetSelector selects clusters: a GitRepo target, a fleet.yaml
// overrideTargets entry, and the selector of a fleet.yaml target or
// targetCustomization (bundle.Target embeds it). Its criteria are AND-ed;
// one with none matches nothing; clusterSelector {} matches every cluster.
// internal/target implements the matching.
type TargetSelector struct {
	Name                 string                `json:"name,omitempty"`
	ClusterName          string                `json:"clusterName,omitempty"`
	ClusterSelector      *metav1.LabelSelector `json:"clusterSelector,omitempty"`
	ClusterGroup         string                `json:"clusterGroup,omitempty"`
	ClusterGroupSelector *metav1.LabelSelector `json:"clusterGroupSelector,omitempty"`
}

// Cluster is a registered Kubernetes cluster. Its kubeconfig never travels
// in a resource: `flotilla cluster add` stores it on the worker's host.
type Cluster struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta  `json:"metadata"`
	Spec     ClusterSpec `json:"spec,omitempty"`
}

// ClusterSpec is the cluster's desired state.
type ClusterSpec struct {
	// Paused stops deploys to this cluster.
	Paused bool `json:"paused,omitempty"`
	// TemplateValues are the cluster's values for fleet.yaml templates
	// (.ClusterValues).
	TemplateValues map[string]any `json:"templateValues,omitempty"`

	// The agent settings of Fleet's Cluster, for a cluster whose agent
	// Flotilla installs (`cluster add --install-agent`). A field set here
	// replaces the agent's setting; one left out keeps it. They are
	// layered over the controller's agent defaults as the --agent-* flags
	// are.
	AgentNamespace   string                       `json:"agentNamespace,omitempty"`
	AgentEnvVars     []corev1.EnvVar              `json:"agentEnvVars,omitempty"`
	AgentTolerations []corev1.Toleration          `json:"agentTolerations,omitempty"`
	AgentAffinity    *corev1.Affinity             `json:"agentAffinity,omitempty"`
	AgentResources   *corev1.ResourceRequirements `json:"agentResources,omitempty"`
	// KubeConfigSecret names the Secret (key "value", as in Fleet) holding
	// the cluster's kubeconfig, in KubeConfigSecretNamespace or else the
	// Cluster's namespace. Only the Kubernetes-native mode reads it: it
	// registers the cluster with that kubeconfig, as `cluster add` does.
	KubeConfigSecret          string `json:"kubeConfigSecret,omitempty"`
	KubeConfigSecretNamespace string `json:"kubeConfigSecretNamespace,omitempty"`

	// AgentUpgradeWindows are the times the controller may upgrade the
	// cluster's managed agent in (Flotilla's own, in the form of
	// fleet.yaml's rolloutStrategy.windows). Outside all of them an
	// upgrade waits for the next opening; the first install does not.
	AgentUpgradeWindows []Window `json:"agentUpgradeWindows,omitempty"`
}

// Window is a recurring period: it opens at every activation of Schedule
// (five-field cron or a descriptor such as @daily, read in TimeZone,
// default UTC) and stays open for Duration (a Go duration such as "2h").
type Window struct {
	Schedule string `json:"schedule"`
	Duration string `json:"duration"`
	TimeZone string `json:"timeZone,omitempty"`
}

// HasAgentSettings reports whether the spec sets any agent setting.
func (s ClusterSpec) HasAgentSettings() bool {
	return s.AgentNamespace != "" || len(s.AgentEnvVars) > 0 || len(s.AgentTolerations) > 0 ||
		s.AgentAffinity != nil || s.AgentResources != nil || len(s.AgentUpgradeWindows) > 0
}

// ClusterGroup is a named label selector over clusters.
type ClusterGroup struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta       `json:"metadata"`
	Spec     ClusterGroupSpec `json:"spec"`
}

// ClusterGroupSpec holds the selector.
type ClusterGroupSpec struct {
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
}

// Secret is a Kubernetes v1 Secret: Git or Helm credentials, webhook keys,
// or any data a bundle copies with downstreamResources. `flotilla apply`
// seals it to the controllers' key; Temporal holds only the ciphertext.
type Secret struct {
	TypeMeta   `json:",inline"`
	Metadata   ObjectMeta        `json:"metadata"`
	Type       string            `json:"type,omitempty"`
	Data       map[string][]byte `json:"data,omitempty"`
	StringData map[string]string `json:"stringData,omitempty"`
}

// Polling returns the effective polling interval.
func (s GitRepoSpec) Polling() time.Duration {
	if s.PollingInterval == nil || s.PollingInterval.Duration <= 0 {
		return DefaultPollingInterval
	}
	return s.PollingInterval.Duration
}
