package protocol

import (
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/seal"
)

// Workflow types.
const (
	GitRepoWorkflow      = "GitRepoWorkflow"
	HelmOpWorkflow       = "HelmOpWorkflow"
	RolloutWorkflow      = "RolloutWorkflow"
	ClusterWorkflow      = "ClusterWorkflow"
	ClusterGroupWorkflow = "ClusterGroupWorkflow"
	ClusterTokenWorkflow = "ClusterTokenWorkflow"
	// SecretWorkflow holds one sealed Secret (SecretRecord).
	SecretWorkflow = "SecretWorkflow"
	// KeysWorkflow holds the controllers' public sealing keys (KeysID).
	KeysWorkflow = "KeysWorkflow"
	// ResealWorkflow moves every sealed kubeconfig and Secret to the
	// newest key (`flotilla secrets rotate`).
	ResealWorkflow = "ResealWorkflow"
)

// KeysID is the ID of the well-known workflow that holds the controllers'
// public sealing keys: the CLI reads the newest there and seals with it.
const KeysID = "flotilla/keys"

// DefaultTaskQueue is the controller's task queue.
const DefaultTaskQueue = "flotilla"

// Updates, signals and queries.
const (
	// UpdateApply sets a resource's spec (GitRepo, Cluster, ClusterGroup).
	UpdateApply = "apply"
	// UpdateLabel sets and removes cluster labels.
	UpdateLabel = "label"
	// UpdateApprove releases rollout partitions that require approval.
	UpdateApprove = "approve"
	// UpdateApproveDeletions lets the uninstalls the deletion guard holds
	// go (sent to the GitRepo's workflow; its argument is nil, its
	// result an ApproveResult naming them).
	UpdateApproveDeletions = "approve-deletions"
	// UpdateRegister registers an agent's cluster with a registration
	// token (sent to the token's workflow).
	UpdateRegister = "register"

	SignalSync            = "sync"
	SignalPause           = "pause"
	SignalResume          = "resume"
	SignalDelete          = "delete"
	SignalClustersChanged = "clustersChanged"
	// SignalSupersede tells a rollout a newer change is waiting.
	SignalSupersede = "supersede"
	// SignalHeartbeat is an agent's periodic sign of life (Heartbeat).
	SignalHeartbeat = "heartbeat"
	// SignalAgentDefaults tells a cluster the controller's agent defaults
	// (AgentDefaults); a managed agent is redeployed only when its
	// effective configuration changed.
	SignalAgentDefaults = "agentDefaults"

	// SignalPush tells a GitRepo a webhook reported a push (Push).
	SignalPush = "push"
	// SignalCheck tells a GitRepo that a controller's check of its remote
	// for another GitRepo of the same repository saw a new commit
	// (Check): it checks now, with the shared answer.
	SignalCheck = "check"
	// SignalWatch tells a cluster which releases a GitRepo runs there
	// (WatchSet), so its watch follows them.
	SignalWatch = "watch"
	// SignalLive carries what a cluster's watch saw of a GitRepo's
	// releases (status.LiveSignal): readiness and drift.
	SignalLive = "live"
	// SignalContact tells a cluster's workflow whether the cluster's
	// drift watch reaches its API server (Contact).
	SignalContact = "contact"

	// UpdatePublishKeys adds a controller's public sealing keys
	// ([]seal.PublicKey) to the KeysWorkflow.
	UpdatePublishKeys = "publishKeys"

	QueryStatus = "status"
	// QueryKubeconfig returns a cluster's sealed kubeconfig (*seal.Box,
	// nil for a cluster without one).
	QueryKubeconfig = "kubeconfig"
	// QueryWebhookTarget returns what the webhook receiver matches a
	// GitRepo by (WebhookTarget).
	QueryWebhookTarget = "webhookTarget"
)

// Push is a webhook's report that a GitRepo's branch moved. The workflow
// checks the remote before acting on it, so a forged, stale or reordered
// delivery cannot move a GitRepo to another commit.
type Push struct {
	Provider string `json:"provider"`
	Delivery string `json:"delivery,omitempty"`
	Ref      string `json:"ref"`
	Commit   string `json:"commit"`
	// Authenticated: a secret vouched for the delivery. Only those relax
	// the GitRepo's polling.
	Authenticated bool `json:"authenticated,omitempty"`
}

// Check is SignalCheck's payload: the reference checked and the commit
// it is at now.
type Check struct {
	Ref    string `json:"ref"`
	Commit string `json:"commit"`
}

// WebhookTarget is what the webhook receiver needs of a GitRepo.
type WebhookTarget struct {
	Branch        string `json:"branch,omitempty"`
	Revision      string `json:"revision,omitempty"`
	WebhookSecret string `json:"webhookSecret,omitempty"`
}

// GitRepoID is the ID of a GitRepo's entity workflow.
func GitRepoID(namespace, name string) string { return "gitrepo/" + namespace + "/" + name }

// HelmOpID is the ID of a HelmOp's entity workflow.
func HelmOpID(namespace, name string) string { return "helmop/" + namespace + "/" + name }

// RolloutID is the ID of one rollout: the GitRepo, the commit (first 12
// characters) and the spec generation.
func RolloutID(namespace, name, commit string, generation int64) string {
	if len(commit) > 12 {
		commit = commit[:12]
	}
	if commit == "" {
		commit = "none"
	}
	return "rollout/" + namespace + "/" + name + "/" + commit + "-" + strconv.FormatInt(generation, 10)
}

// ClusterID is the ID of a cluster's entity workflow.
func ClusterID(name string) string { return "cluster/" + name }

// ClusterGroupID is the ID of a cluster group's entity workflow.
func ClusterGroupID(name string) string { return "clustergroup/" + name }

// SecretID is the ID of a Secret's entity workflow.
func SecretID(namespace, name string) string { return "secret/" + namespace + "/" + name }

// ClusterTokenID is the ID of a registration token's workflow.
func ClusterTokenID(id string) string { return "clustertoken/" + id }

// ClusterQueue is the task queue serving a cluster's deploy and cleanup
// activities: the agent in pull mode, the controller's worker in push mode.
func ClusterQueue(name string) string { return "cluster/" + name }

// WatchQueue is the task queue of the drift watches of the push-mode
// clusters a controller on queue serves: long-running activities, one per
// cluster, kept off the controller's own queue so that they never take
// the slots deploys, renders and Git checks need.
func WatchQueue(queue string) string { return queue + "-watch" }

// GitRepoApply is the argument of the GitRepo apply update.
type GitRepoApply struct {
	GitRepo api.GitRepo `json:"gitRepo"`
	// ManagedBy is who applies: "" for the CLI, ManagedByKubernetes for
	// the management controller. Once a GitRepo was applied with a
	// non-empty one, the workflow refuses applies from anyone else.
	ManagedBy string `json:"managedBy,omitempty"`
}

// HelmOpApply is the argument of the HelmOp apply update.
type HelmOpApply struct {
	HelmOp api.HelmOp `json:"helmOp"`
	// ManagedBy is as in GitRepoApply.
	ManagedBy string `json:"managedBy,omitempty"`
}

// ManagedByKubernetes is the ManagedBy of what the management controller
// (internal/kubenative) applies from a management cluster.
const ManagedByKubernetes = "kubernetes"

// ManagedMessage says that the resource title ("GitRepo ns/name") is
// managed by managedBy, so the CLI may not change it, and where to.
func ManagedMessage(title, managedBy string) string {
	if managedBy == ManagedByKubernetes {
		return title + " is managed from the management cluster (kubectl): change it there, or delete it there first"
	}
	return title + " is managed by " + managedBy + ": change it there, or delete it there first"
}

// ApplyResult answers an apply update.
type ApplyResult struct {
	// Generation is the spec generation after the update.
	Generation int64 `json:"generation"`
	// Created is true for the first spec; Changed when the spec differs.
	Created bool `json:"created"`
	Changed bool `json:"changed"`
}

// Approve is the argument of the approve update: the partition to
// release (empty: every partition waiting for approval), optionally of
// one bundle only.
type Approve struct {
	Partition string `json:"partition,omitempty"`
	Bundle    string `json:"bundle,omitempty"`
	// Identity is who approved, as the history records it.
	Identity Identity `json:"identity,omitzero"`
}

// ApproveResult lists the partitions released, as "bundle/partition".
type ApproveResult struct {
	Approved []string `json:"approved"`
	// By is who the approval was recorded for (zero from workers that do
	// not record it).
	By Identity `json:"by,omitzero"`
}

// ClusterRecord is a cluster's registration, the ClusterWorkflow's state.
type ClusterRecord struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels,omitempty"`
	// Annotations and TemplateValues feed fleet.yaml value templates
	// (.ClusterAnnotations, .ClusterValues).
	Annotations    map[string]string `json:"annotations,omitempty"`
	TemplateValues map[string]any    `json:"templateValues,omitempty"`
	Paused         bool              `json:"paused,omitempty"`
	// KubeconfigHash is the sha256 of the cluster's kubeconfig (push
	// mode). The kubeconfig itself is held sealed by the ClusterWorkflow
	// (QueryKubeconfig), never in the record.
	KubeconfigHash string `json:"kubeconfigHash,omitempty"`
	Context        string `json:"context,omitempty"`
	// Agent is set for a cluster served by an agent (pull mode).
	Agent *AgentRecord `json:"agent,omitempty"`
	// Unreachable is set while the cluster's drift watch cannot reach its
	// API server (the controller's, or in pull mode the agent's): nothing
	// is known of its releases since LastContact.
	Unreachable *Unreachable `json:"unreachable,omitempty"`
	// Generation counts accepted changes.
	Generation int64 `json:"generation"`
	// Removed is set once `flotilla cluster remove` ran.
	Removed bool `json:"removed,omitempty"`
}

// MemoTargeting is the memo field in which a ClusterWorkflow keeps its
// record as targeting reads it (ClusterRecord.Targeting): a rollout lists
// every cluster with one visibility query instead of a query each.
const MemoTargeting = "targeting"

// Targeting returns r as targeting reads it. An agent's heartbeat details
// (when it was last seen, its version and key) and its deploy history
// change without changing where anything goes: they are left out, so the
// memo changes only when targeting could.
func (r ClusterRecord) Targeting() ClusterRecord {
	if r.Agent != nil {
		r.Agent = &AgentRecord{Managed: r.Agent.Managed, Offline: r.Agent.Offline}
	}
	r.Unreachable = nil // rollouts find out for themselves
	return r
}

// Unreachable is a cluster out of its watch's contact.
type Unreachable struct {
	// LastContact is when the watch last reached the API server (zero:
	// not since the watch started).
	LastContact time.Time `json:"lastContact,omitempty"`
	// Reason is the probe's error, without credentials.
	Reason string `json:"reason"`
}

// Contact is the argument of SignalContact: what a cluster's drift watch
// found when it probed the API server. Reachable false is sent once the
// probe failed for a while; true once it succeeds again.
type Contact struct {
	Reachable   bool      `json:"reachable"`
	LastContact time.Time `json:"lastContact,omitempty"`
	Reason      string    `json:"reason,omitempty"`
	// Watch is the token of the watch that probed (WatchInput.Token): a
	// report of a watch canceled since is ignored.
	Watch string `json:"watch,omitempty"`
}

// OutOfContact reports whether nothing is known of the cluster's releases
// now: its agent stopped heartbeating, or its watch cannot reach the API
// server. lastSeen is the last contact known (zero: none).
func (r ClusterRecord) OutOfContact() (out bool, lastSeen time.Time, reason string) {
	if a := r.Agent; a != nil && a.Offline {
		if a.LastSeen != nil {
			lastSeen = *a.LastSeen
		}
		return true, lastSeen, "its agent sent no heartbeat"
	}
	if u := r.Unreachable; u != nil {
		return true, u.LastContact, u.Reason
	}
	return false, time.Time{}, ""
}

// PullMode reports whether the cluster's agent serves its task queue. A
// cluster without a kubeconfig on the controller's host can only be
// served by an agent.
func (r ClusterRecord) PullMode() bool { return r.Agent != nil || r.KubeconfigHash == "" }

// AgentRecord is what the ClusterWorkflow knows of a cluster's agent.
type AgentRecord struct {
	// Managed agents are installed and upgraded by the controller through
	// the cluster's kubeconfig (`cluster add --install-agent`).
	Managed bool `json:"managed,omitempty"`
	// Config holds the cluster's own agent settings (managed agents);
	// unset fields fall back to the controller's defaults.
	Config *AgentConfig `json:"config,omitempty"`
	// TokenID is the registration token the agent registered with.
	TokenID      string     `json:"tokenID,omitempty"`
	RegisteredAt *time.Time `json:"registeredAt,omitempty"`
	// LastSeen is the (workflow) time of the last heartbeat.
	LastSeen *time.Time `json:"lastSeen,omitempty"`
	// Version is the agent's version from its last heartbeat.
	Version string `json:"version,omitempty"`
	// HeartbeatInterval is the agent's heartbeat period; three missed
	// heartbeats make the cluster Offline.
	HeartbeatInterval time.Duration `json:"heartbeatInterval,omitempty"`
	Offline           bool          `json:"offline,omitempty"`
	// DeploymentID is the hash of the managed agent's effective
	// configuration last applied; DefaultsHash the controller defaults it
	// was computed from.
	DeploymentID string `json:"deploymentID,omitempty"`
	DefaultsHash string `json:"defaultsHash,omitempty"`
	// Deploys counts real installs and upgrades of the managed agent.
	Deploys int `json:"deploys,omitempty"`
	// Error is the last failure to install the managed agent.
	Error string `json:"error,omitempty"`
	// UpgradeWaits says, while an upgrade of the managed agent waits for
	// one of its UpgradeWindows, which one and when it opens.
	UpgradeWaits string `json:"upgradeWaits,omitempty"`
	// SealKey is the agent's own public key, from its heartbeats: the
	// controller seals the Secrets a bundle copies to the cluster to it
	// (UpdateDownstream). Agents hold no controller key.
	SealKey *seal.PublicKey `json:"sealKey,omitempty"`
}

// AgentConfig is a cluster's own agent settings. Every unset field falls
// back to the controller's agent defaults. Only non-secret settings live
// here: it is workflow state.
type AgentConfig struct {
	Namespace         string `json:"namespace,omitempty"`
	Image             string `json:"image,omitempty"`
	TemporalAddress   string `json:"temporalAddress,omitempty"`
	TemporalNamespace string `json:"temporalNamespace,omitempty"`
	TLSServerName     string `json:"tlsServerName,omitempty"`
	// TLSSecret names a Secret in the agent's namespace on the cluster
	// holding its Temporal TLS files (ca.crt, tls.crt, tls.key).
	TLSSecret         string                      `json:"tlsSecret,omitempty"`
	Tolerations       []corev1.Toleration         `json:"tolerations,omitempty"`
	Affinity          *corev1.Affinity            `json:"affinity,omitempty"`
	NodeSelector      map[string]string           `json:"nodeSelector,omitempty"`
	Resources         corev1.ResourceRequirements `json:"resources,omitempty"`
	Env               []corev1.EnvVar             `json:"env,omitempty"`
	PriorityClassName string                      `json:"priorityClassName,omitempty"`
	// UpgradeWindows are the times the controller may upgrade the agent
	// in; none: at any time. They are not part of the agent's
	// configuration hash: changing them redeploys nothing.
	UpgradeWindows []api.Window `json:"upgradeWindows,omitempty"`
}

// AgentApply changes a cluster's agent: Managed with Config for
// `cluster add --install-agent`, Register for a token registration.
type AgentApply struct {
	Managed bool         `json:"managed,omitempty"`
	Config  *AgentConfig `json:"config,omitempty"`
	TokenID string       `json:"tokenID,omitempty"`
}

// AgentDefaults is the signal argument of SignalAgentDefaults: the hash of
// the controller's agent defaults.
type AgentDefaults struct {
	Hash string `json:"hash"`
}

// Heartbeat is an agent's heartbeat signal.
type Heartbeat struct {
	Version  string        `json:"version,omitempty"`
	Interval time.Duration `json:"interval"`
	// SealKey is the agent's public key (AgentRecord.SealKey).
	SealKey *seal.PublicKey `json:"sealKey,omitempty"`
}

// TokenStart starts a registration token's workflow. Only the verifier
// (a hash of a hash of the secret) enters Temporal.
type TokenStart struct {
	ID       string        `json:"id"`
	Verifier string        `json:"verifier"`
	TTL      time.Duration `json:"ttl"`
	// Status is carried across continue-as-new (refused registrations
	// grow a token's history); nil on the first run.
	Status *TokenStatus `json:"status,omitempty"`
}

// TokenStatus is a registration token's state (its workflow's query).
type TokenStatus struct {
	ID        string    `json:"id"`
	CreatedAt time.Time `json:"createdAt"`
	ExpiresAt time.Time `json:"expiresAt"`
	// UsedBy is the cluster that registered with the token.
	UsedBy  string     `json:"usedBy,omitempty"`
	UsedAt  *time.Time `json:"usedAt,omitempty"`
	Expired bool       `json:"expired,omitempty"`
	Revoked bool       `json:"revoked,omitempty"`
	// Refused is why the last registration with the token was refused;
	// the token stays usable.
	Refused string `json:"refused,omitempty"`
}

// Register is the argument of the register update: the cluster, the
// token's proof (never the token itself) and the agent's labels.
type Register struct {
	Cluster string            `json:"cluster"`
	Proof   string            `json:"proof"`
	Labels  map[string]string `json:"labels,omitempty"`
}

// ClusterApply is the argument of the cluster apply update. Labels replace
// the cluster's labels when SetLabels is true.
type ClusterApply struct {
	Labels    map[string]string `json:"labels,omitempty"`
	SetLabels bool              `json:"setLabels,omitempty"`
	// Annotations and TemplateValues replace the cluster's when
	// SetLabels is true (a Cluster resource applied as a whole).
	Annotations    map[string]string `json:"annotations,omitempty"`
	TemplateValues map[string]any    `json:"templateValues,omitempty"`
	Paused         *bool             `json:"paused,omitempty"`
	KubeconfigHash string            `json:"kubeconfigHash,omitempty"`
	Context        string            `json:"context,omitempty"`
	// Kubeconfig is the kubeconfig sealed to the controllers' key; it
	// comes with KubeconfigHash (a re-seal sends it alone with the same
	// hash).
	Kubeconfig *seal.Box `json:"kubeconfig,omitempty"`
	// Agent, when set, puts the cluster in pull mode.
	Agent *AgentApply `json:"agent,omitempty"`
	// AgentSettings change the managed agent's settings (a Cluster
	// resource's agent* fields). The cluster must have a managed agent.
	AgentSettings *AgentSettings `json:"agentSettings,omitempty"`
}

// AgentSettings are the agent settings a Cluster resource carries (Fleet's
// agentNamespace, agentEnvVars, agentTolerations, agentAffinity,
// agentResources). A field that is set replaces the agent's own setting;
// an unset one keeps it.
type AgentSettings struct {
	Namespace   string                       `json:"namespace,omitempty"`
	Env         []corev1.EnvVar              `json:"env,omitempty"`
	Tolerations []corev1.Toleration          `json:"tolerations,omitempty"`
	Affinity    *corev1.Affinity             `json:"affinity,omitempty"`
	Resources   *corev1.ResourceRequirements `json:"resources,omitempty"`
	// UpgradeWindows gate the managed agent's upgrades
	// (AgentConfig.UpgradeWindows).
	UpgradeWindows []api.Window `json:"upgradeWindows,omitempty"`
}

// Apply returns cfg with the settings that are set replacing its own.
func (s AgentSettings) Apply(cfg *AgentConfig) *AgentConfig {
	out := AgentConfig{}
	if cfg != nil {
		out = *cfg
	}
	if s.Namespace != "" {
		out.Namespace = s.Namespace
	}
	if len(s.Env) > 0 {
		out.Env = s.Env
	}
	if len(s.Tolerations) > 0 {
		out.Tolerations = s.Tolerations
	}
	if s.Affinity != nil {
		out.Affinity = s.Affinity
	}
	if s.Resources != nil {
		out.Resources = *s.Resources
	}
	if len(s.UpgradeWindows) > 0 {
		out.UpgradeWindows = s.UpgradeWindows
	}
	return &out
}

// ClusterLabel is the argument of the label update: keys to set and keys
// to remove (`k=v` and `k-` on the command line).
type ClusterLabel struct {
	Set    map[string]string `json:"set,omitempty"`
	Remove []string          `json:"remove,omitempty"`
}

// GroupRecord is a cluster group, the ClusterGroupWorkflow's state.
type GroupRecord struct {
	Name       string                `json:"name"`
	Labels     map[string]string     `json:"labels,omitempty"`
	Selector   *metav1.LabelSelector `json:"selector,omitempty"`
	Generation int64                 `json:"generation"`
	Removed    bool                  `json:"removed,omitempty"`
}

// The first inputs of the entity workflows, as clients start them. The
// workflows' input types embed these and add only the state they carry
// across continue-as-new.
type (
	// GitRepoStart starts a GitRepoWorkflow.
	GitRepoStart struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
		// HistoryBudget is the history length (events) at which a run
		// continues as new; 0 is the default (4,000). Tests and the soak
		// benchmark lower it so runs must continue as new.
		HistoryBudget int `json:"historyBudget,omitempty"`
	}
	// ClusterStart starts a ClusterWorkflow.
	ClusterStart struct {
		Record ClusterRecord `json:"record"`
	}
	// GroupStart starts a ClusterGroupWorkflow.
	GroupStart struct {
		Record GroupRecord `json:"record"`
	}
)

// WatchedRelease is one release a cluster's watch follows: the bundle of a
// GitRepo at a deployment ID, and the content-store key of its options
// (drift settings included).
type WatchedRelease struct {
	Bundle       string `json:"bundle"`
	Release      string `json:"release"`
	Namespace    string `json:"namespace"`
	DeploymentID string `json:"deploymentID"`
	OptionsKey   string `json:"optionsKey"`
}

// WatchSet is the signal argument of SignalWatch: every release GitRepo
// (namespace/name) runs on the cluster now, sorted by bundle; empty when
// it runs none there any more.
type WatchSet struct {
	GitRepo  string           `json:"gitRepo"`
	Releases []WatchedRelease `json:"releases,omitempty"`
}

// SecretRecord is a Secret applied with `flotilla apply`, the
// SecretWorkflow's state: its credentials and webhook keys sealed to the
// controllers' key, and only names in the clear.
type SecretRecord struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Type      string `json:"type,omitempty"`
	// Keys names the data keys the sealed content holds (never values).
	Keys []string `json:"keys,omitempty"`
	// Sealed is the secret's content (cluster.SecretContent), sealed.
	Sealed seal.Box `json:"sealed"`
	// Generation counts accepted changes; Removed is set by a delete.
	Generation int64 `json:"generation"`
	Removed    bool  `json:"removed,omitempty"`
	// Resealed, in an apply update, says the content is unchanged and
	// only sealed to another key (`flotilla secrets rotate`): the GitRepos
	// that copy the Secret are not told. It is not kept in the state.
	Resealed bool `json:"resealed,omitempty"`
}

// SecretStart starts (or continues) a SecretWorkflow.
type SecretStart struct {
	Record SecretRecord `json:"record"`
}

// KeysRecord is the KeysWorkflow's state: every public key a controller
// published, oldest first. New secrets are sealed to the newest.
type KeysRecord struct {
	Keys []seal.PublicKey `json:"keys"`
}

// ResealResult reports a re-seal to the newest key.
type ResealResult struct {
	KeyID       string   `json:"keyID"`
	Kubeconfigs int      `json:"kubeconfigs"`
	Secrets     int      `json:"secrets"`
	Unchanged   int      `json:"unchanged"`
	Failed      []string `json:"failed,omitempty"`
}
