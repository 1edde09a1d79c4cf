package rollout

import (
	"time"

	"github.com/flotilla-gitops/flotilla/internal/outcome"
	"github.com/flotilla-gitops/flotilla/internal/status"
	"github.com/flotilla-gitops/flotilla/internal/strategy"
)

// Bundle is one rendered bundle. Its resources and options live in the
// content store under ManifestID and OptionsHash; only these small fields
// travel through workflow history.
type Bundle struct {
	Name string `json:"name"`
	// Path is the bundle's directory in the repository.
	Path         string `json:"path"`
	ManifestID   string `json:"manifestID"`
	OptionsHash  string `json:"optionsHash"`
	DeploymentID string `json:"deploymentID"`
	Release      string `json:"release"`
	Namespace    string `json:"namespace"`
	// KeepResources and DeleteNamespace decide what its cleanup does.
	KeepResources   bool `json:"keepResources,omitempty"`
	DeleteNamespace bool `json:"deleteNamespace,omitempty"`
	// Resources counts the files in the bundle.
	Resources int `json:"resources"`
	// BundleKey names the stored bundle.Bundle (options before
	// customization, fleet.yaml spec) that TargetBundles reads.
	BundleKey string `json:"bundleKey,omitempty"`
	// Paused is fleet.yaml's paused: clusters keep what they run.
	Paused bool `json:"paused,omitempty"`
	// Repair lists the objects the cluster's watch saw drift (missing or
	// modified) while the release runs DeploymentID: a sync's deploy,
	// which would change nothing, restores them (MarkRepairs).
	Repair []string `json:"repair,omitempty"`
	// Warnings are what reading the bundle ignored (bundle.Bundle's
	// Warnings): Render fills them, the rollout moves them to its result
	// (and so to the GitRepo's status) and drops them from the bundles it
	// hands on.
	Warnings []string `json:"warnings,omitempty"`
}

// TargetCluster is one matched cluster.
type TargetCluster struct {
	Name   string `json:"name"`
	Paused bool   `json:"paused,omitempty"`
	// Agent is set for a cluster served by its agent on its own task
	// queue (pull mode); others are deployed to by the controller.
	Agent bool `json:"agent,omitempty"`
	// Bundles are the bundles the cluster gets, with its options
	// (TargetBundles only; ListTargets leaves it empty).
	Bundles []Bundle `json:"bundles,omitempty"`
}

// Targets lists the matched clusters and every registered one.
type Targets struct {
	Matched    []TargetCluster `json:"matched"`
	Registered []string        `json:"registered"`
	// Errors are bundles that could not be computed for a cluster
	// (TargetBundles only).
	Errors []status.Deployment `json:"errors,omitempty"`
	// Agents are the registered clusters served by an agent.
	Agents []string `json:"agents,omitempty"`
	// Offline are the agents that stopped heartbeating.
	Offline []string `json:"offline,omitempty"`
	// Strategies are the rollout strategy of every bundle that has
	// targets, by bundle name (TargetBundles only).
	Strategies []BundleStrategy `json:"strategies,omitempty"`
	// Backoff paces the retries of deployments that failed (the
	// controller's --retry-backoff flags); zero: the defaults.
	Backoff Backoff `json:"backoff,omitzero"`
	// PickupTimeout is how long a cluster may leave its work unanswered
	// (an agent that does not pick it up, an API server that does not
	// answer) before the rollout stops waiting for it (the controller's
	// --cluster-pickup-timeout); zero: DefaultPickupTimeout.
	PickupTimeout time.Duration `json:"pickupTimeout,omitempty"`
	// Missing is what the targets name that does not exist
	// ("clusterGroup \"prod\" not found"): while anything is missing,
	// nothing is uninstalled (TargetBundles only).
	Missing []string `json:"missing,omitempty"`
	// DeletionGuard is the controller's --deletion-guard (TargetBundles
	// only; zero: off, as in rollouts before it).
	DeletionGuard DeletionGuard `json:"deletionGuard,omitzero"`
}

// DefaultPickupTimeout is the default --cluster-pickup-timeout.
const DefaultPickupTimeout = 2 * time.Minute

// BundleStrategy is how one bundle rolls out: its partitions and limits
// over the clusters it targets, its deployment windows (the next few, as
// times, so the workflow needs no clock or time zone data) and the
// bundles it depends on.
type BundleStrategy struct {
	Bundle    string              `json:"bundle"`
	Plan      strategy.Plan       `json:"plan"`
	Windows   []strategy.Interval `json:"windows,omitempty"`
	DependsOn []Dependency        `json:"dependsOn,omitempty"`
}

// Dependency is one dependsOn entry resolved to the GitRepo's bundles it
// names or selects.
type Dependency struct {
	// Describe is the entry as written (a name or a selector).
	Describe       string         `json:"describe"`
	Bundles        []string       `json:"bundles,omitempty"`
	AcceptedStates []status.State `json:"acceptedStates,omitempty"`
}

// RollbackRelease is one release to roll back.
type RollbackRelease struct {
	Bundle    string `json:"bundle"`
	Release   string `json:"release"`
	Namespace string `json:"namespace"`
	// From is the deployment ID the halted rollout deployed; To the one
	// to return to.
	From string `json:"from"`
	To   string `json:"to"`
}

// Release is one release to remove from a cluster.
type Release struct {
	Bundle          string `json:"bundle"`
	Release         string `json:"release"`
	Namespace       string `json:"namespace"`
	KeepResources   bool   `json:"keepResources,omitempty"`
	DeleteNamespace bool   `json:"deleteNamespace,omitempty"`
}

// InventoryEntry records a release Flotilla may have put on a cluster. A
// rollout adds its desired entries before deploying, so the inventory is
// always a superset of what exists and cleanup never misses a release.
type InventoryEntry struct {
	Bundle          string `json:"bundle"`
	Cluster         string `json:"cluster"`
	Release         string `json:"release"`
	Namespace       string `json:"namespace"`
	DeploymentID    string `json:"deploymentID,omitempty"`
	KeepResources   bool   `json:"keepResources,omitempty"`
	DeleteNamespace bool   `json:"deleteNamespace,omitempty"`
	// State is the deployment's last known state at DeploymentID (Ready
	// or NotReady), shown until a rollout confirms it.
	State status.State `json:"state,omitempty"`
	// Failure records deploys of a deployment ID that failed in a row,
	// so the next rollout retries it only when its backoff is over.
	Failure *Failure `json:"failure,omitempty"`
	// OptionsKey is the content-store key of the bundle's options on the
	// cluster (drift settings included), for the cluster's watch.
	OptionsKey string `json:"optionsKey,omitempty"`
	// Live is the cluster's watch's last report at DeploymentID.
	Live *status.LiveReport `json:"live,omitempty"`
}

// Key is the entry's bundle on its cluster.
func (e InventoryEntry) Key() status.Key { return status.Key{Bundle: e.Bundle, Cluster: e.Cluster} }

// Ref is the entry's release on its cluster.
func (e InventoryEntry) Ref() ReleaseRef {
	return ReleaseRef{Key: e.Key(), Namespace: e.Namespace, Release: e.Release}
}

// Removal is what a cleanup of the entry removes.
func (e InventoryEntry) Removal() Release {
	return Release{Bundle: e.Bundle, Release: e.Release, Namespace: e.Namespace,
		KeepResources: e.KeepResources, DeleteNamespace: e.DeleteNamespace}
}

// ReleaseRef identifies one release of a bundle on a cluster.
type ReleaseRef struct {
	status.Key
	Namespace string `json:"namespace"`
	Release   string `json:"release"`
}

// Failure is a deployment ID's run of failed deploys on one cluster.
type Failure struct {
	// DeploymentID is the ID that failed; a new ID is tried at once.
	DeploymentID string `json:"deploymentID"`
	// Class is the last attempt's failure (outcome.BundleFailed, ...).
	Class outcome.Class `json:"class"`
	// Attempts counts the failed attempts; Next is when the next is due.
	Attempts int       `json:"attempts"`
	Next     time.Time `json:"next"`
	// Message is the last attempt's message, shown while it waits.
	Message string `json:"message,omitempty"`
	// State is the deployment's state while it waits.
	State status.State `json:"state"`
}

// ClusterWork is what a rollout does on one cluster in one step.
type ClusterWork struct {
	Cluster string `json:"cluster"`
	// Agent: the cluster's agent serves its own task queue.
	Agent  bool `json:"agent,omitempty"`
	Paused bool `json:"paused,omitempty"`
	// Deploy are the bundles to deploy; ReadyTimeout bounds the wait for
	// them to become Ready (0: the default).
	Deploy       []Bundle         `json:"deploy,omitempty"`
	ReadyTimeout time.Duration    `json:"readyTimeout,omitempty"`
	Cleanup      []InventoryEntry `json:"cleanup,omitempty"`
	// Rollback returns releases to the deployment they ran before.
	Rollback []RollbackRelease `json:"rollback,omitempty"`
}
