package status

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/flotilla-gitops/flotilla/internal/outcome"
)

// State is the state of one bundle on one cluster, with Fleet's names.
type State string

// The states, from Fleet's bundle_types.go.
const (
	Ready       State = "Ready"
	NotReady    State = "NotReady"
	WaitApplied State = "WaitApplied"
	ErrApplied  State = "ErrApplied"
	OutOfSync   State = "OutOfSync"
	Pending     State = "Pending"
	Modified    State = "Modified"
)

// States lists every state, most severe first.
var States = []State{ErrApplied, WaitApplied, Modified, OutOfSync, Pending, NotReady, Ready}

// Rank orders states by severity (Fleet's StateRank); the summary of many
// deployments takes the highest-ranked state.
func (s State) Rank() int {
	switch s {
	case ErrApplied:
		return 7
	case WaitApplied:
		return 6
	case Modified:
		return 5
	case OutOfSync:
		return 4
	case Pending:
		return 3
	case NotReady:
		return 2
	case Ready:
		return 1
	}
	return 0
}

// RejectedCommit is a commit (or tag) whose signature spec.verify
// refused, the key that signed it if any, and why.
type RejectedCommit struct {
	Commit string `json:"commit"`
	Tag    string `json:"tag,omitempty"`
	Key    string `json:"key,omitempty"`
	Reason string `json:"reason"`
}

// Message is one line naming the commit, the tag, the key and why.
func (r RejectedCommit) Message() string {
	msg := "commit " + r.Commit
	if r.Tag != "" {
		msg = "tag " + r.Tag + " (commit " + r.Commit + ")"
	}
	msg += " not deployed: " + r.Reason
	if r.Key != "" {
		msg += " (key " + r.Key + ")"
	}
	return msg
}

// Deployment is one bundle on one cluster (a Fleet BundleDeployment).
type Deployment struct {
	Bundle    string `json:"bundle"`
	Cluster   string `json:"cluster"`
	Release   string `json:"release,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	// DeploymentID is what the cluster should run.
	DeploymentID string `json:"deploymentID,omitempty"`
	// AppliedDeploymentID is what the cluster was last seen running.
	AppliedDeploymentID string `json:"appliedDeploymentID,omitempty"`
	State               State  `json:"state"`
	// Message explains a state other than Ready; it names the cluster.
	Message string `json:"message,omitempty"`
	// Resources and ReadyResources count the release's objects.
	Resources      int `json:"resources"`
	ReadyResources int `json:"readyResources"`
	// Missing, NotReadyResources and Unknown count the release's objects
	// that are absent from the cluster, present but not ready, and of
	// unknown readiness; the deploy activity fills them from its
	// readiness checks.
	Missing           int `json:"missing,omitempty"`
	NotReadyResources int `json:"notReadyResources,omitempty"`
	Unknown           int `json:"unknown,omitempty"`
	// Modified and Orphaned count objects that differ from Git and extra
	// objects labelled as the release's, from the cluster's watch.
	Modified int `json:"modified,omitempty"`
	Orphaned int `json:"orphaned,omitempty"`
	// ModifiedStatus lists the drifted objects (at most MaxListed;
	// Incomplete when there were more), and Corrections counts the drift
	// corrections at DeploymentID.
	ModifiedStatus []ModifiedStatus `json:"modifiedStatus,omitempty"`
	Incomplete     bool             `json:"incomplete,omitempty"`
	Corrections    int              `json:"corrections,omitempty"`
	// Outcome classifies why the deployment is not Ready where the cause
	// is a failure (ErrApplied, WaitApplied); empty otherwise.
	Outcome outcome.Class `json:"outcome,omitempty"`
	// Attempts counts the failed deploys of DeploymentID in a row, and
	// NextRetry (RFC 3339) is when the next one is due; both are set
	// while a failure is retried with backoff.
	Attempts  int    `json:"attempts,omitempty"`
	NextRetry string `json:"nextRetry,omitempty"`
	// Rollback is what the rollback of a halted rollout did here.
	Rollback outcome.Rollback `json:"rollback,omitempty"`
}

// Key identifies one bundle on one cluster.
type Key struct {
	Bundle  string `json:"bundle"`
	Cluster string `json:"cluster"`
}

func (k Key) String() string { return k.Bundle + "@" + k.Cluster }

// Key identifies the deployment.
func (d Deployment) Key() Key { return Key{Bundle: d.Bundle, Cluster: d.Cluster} }

// Counts counts deployments per state.
type Counts map[State]int

// Summary condenses a set of deployments.
type Summary struct {
	// State is the worst state present (Ready when all are).
	State State `json:"state"`
	// Ready and Desired count ready deployments out of all of them.
	Ready   int    `json:"ready"`
	Desired int    `json:"desired"`
	Counts  Counts `json:"counts,omitempty"`
	// ReadyClusters and Clusters count clusters whose every bundle is ready.
	ReadyClusters int `json:"readyClusters"`
	Clusters      int `json:"clusters"`
	// Resources and ReadyResources add up the objects.
	Resources      int `json:"resources"`
	ReadyResources int `json:"readyResources"`
	// Message is Fleet's Ready-condition style message:
	// "ErrApplied(1) [Cluster c2: ...]; NotReady(2) [...]", each distinct
	// message once, at most MaxMessages of them.
	Message string `json:"message,omitempty"`
}

// MaxMessages bounds the messages a summary quotes (Fleet truncates at 10).
const MaxMessages = 10

// Summarize computes the summary of deps. The result does not depend on
// the order of deps.
func Summarize(deps []Deployment) Summary {
	s := Summary{State: Ready, Desired: len(deps), Counts: Counts{}}
	for _, d := range deps {
		s.Counts[d.State]++
		s.Resources += d.Resources
		s.ReadyResources += d.ReadyResources
		if d.State == Ready {
			s.Ready++
		}
		if d.State.Rank() > s.State.Rank() {
			s.State = d.State
		}
	}
	s.ReadyClusters, s.Clusters = readyClusters(deps)
	s.Message = message(deps, s.Counts)
	return s
}

// readyClusters counts the clusters of deps whose every deployment is
// Ready, and all clusters of deps. It never ranges over a map, so workflow
// code may call it without a determinism waiver.
func readyClusters(deps []Deployment) (ready, total int) {
	notReady := map[string]bool{}
	for _, d := range deps {
		if d.State != Ready {
			notReady[d.Cluster] = true
		}
	}
	for _, c := range clusterNames(deps) {
		total++
		if !notReady[c] {
			ready++
		}
	}
	return ready, total
}

// clusterNames returns the distinct clusters of deps, sorted.
func clusterNames(deps []Deployment) []string {
	names := make([]string, 0, len(deps))
	for _, d := range deps {
		names = append(names, d.Cluster)
	}
	sort.Strings(names)
	return slices.Compact(names)
}

func message(deps []Deployment, counts Counts) string {
	byState := map[State][]string{}
	seen := map[string]bool{}
	for _, d := range deps {
		if d.State == Ready || d.Message == "" {
			continue
		}
		key := string(d.State) + "\x00" + d.Message
		if seen[key] {
			continue
		}
		seen[key] = true
		byState[d.State] = append(byState[d.State], d.Message)
	}
	var parts []string
	quoted := 0
	for _, st := range States {
		if st == Ready || counts[st] == 0 {
			continue
		}
		msgs := byState[st]
		sort.Strings(msgs)
		if room := MaxMessages - quoted; len(msgs) > room {
			msgs = append(msgs[:max(room, 0)], "...")
		}
		quoted += len(msgs)
		part := fmt.Sprintf("%s(%d)", st, counts[st])
		if len(msgs) > 0 {
			part += " [" + strings.Join(msgs, "; ") + "]"
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, "; ")
}

// Sort orders deployments by bundle, then cluster.
func Sort(deps []Deployment) {
	sort.Slice(deps, func(i, j int) bool {
		if deps[i].Bundle != deps[j].Bundle {
			return deps[i].Bundle < deps[j].Bundle
		}
		return deps[i].Cluster < deps[j].Cluster
	})
}

// GitRepo is the status of one GitRepo, as `flotilla status` shows it.
type GitRepo struct {
	// Kind is "HelmOp" for a HelmOp (which rolls out as a GitRepo does:
	// Repo is then its chart's source and Commit its version), else "".
	Kind      string `json:"kind,omitempty"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Repo      string `json:"repo"`
	// Version is a HelmOp's resolved chart version: the one its last
	// rollout deployed (LatestCommit is the newest that matches).
	Version  string `json:"version,omitempty"`
	Branch   string `json:"branch,omitempty"`
	Revision string `json:"revision,omitempty"`
	// Commit is the commit of the last finished rollout.
	Commit string `json:"commit,omitempty"`
	// LatestCommit is the newest commit seen on the remote, and
	// LatestCommitSeen when a check of the remote first saw it.
	LatestCommit     string     `json:"latestCommit,omitempty"`
	LatestCommitSeen *time.Time `json:"latestCommitSeen,omitempty"`
	// Pinned is set while `flotilla rollback --to` pins the GitRepo to a
	// commit (until `flotilla resume`).
	Pinned *Pin `json:"pinned,omitempty"`
	// Generation counts spec changes; ObservedGeneration is the generation
	// of the last finished rollout.
	Generation         int64 `json:"generation"`
	ObservedGeneration int64 `json:"observedGeneration"`
	Paused             bool  `json:"paused,omitempty"`
	Deleting           bool  `json:"deleting,omitempty"`
	// ManagedBy is who applies the spec when not the CLI ("kubernetes":
	// the management cluster); the CLI then only reads it and syncs it.
	ManagedBy string `json:"managedBy,omitempty"`
	// Rollout is the ID of the running rollout, if any; LastRollout the
	// ID of the last finished one.
	Rollout     string `json:"rollout,omitempty"`
	LastRollout string `json:"lastRollout,omitempty"`
	// Error is why the last rollout could not run (bad fleet.yaml, Git
	// unreachable, ...); deployments keep their previous state.
	Error string `json:"error,omitempty"`
	// PolicyViolation names the GitRepoRestriction or Policy rule of the
	// namespace that refuses the spec, and what it refuses
	// (internal/policy.Violation): nothing is fetched, rendered or
	// deployed until the spec or the policy changes; deployments keep
	// their previous state.
	PolicyViolation string `json:"policyViolation,omitempty"`
	// PollFailures counts checks of the remote that failed in a row;
	// polling backs off while it is not zero.
	PollFailures int `json:"pollFailures,omitempty"`
	// NextCheck is when the remote is asked again while its Git host asked
	// to wait (429, rate-limit headers), and NextCheckReason the host and
	// what it said.
	NextCheck       *time.Time `json:"nextCheck,omitempty"`
	NextCheckReason string     `json:"nextCheckReason,omitempty"`
	// RenderedCommit is set when Commit changed nothing under the
	// GitRepo's paths (nor any file its bundles reference) since the
	// commit its deployments were rendered from, this one: Commit was
	// taken without a render or a rollout.
	RenderedCommit string `json:"renderedCommit,omitempty"`
	// Rejected is the newest commit spec.verify refused: it is not
	// deployed, and the last accepted commit stays.
	Rejected *RejectedCommit `json:"rejected,omitempty"`
	// Verified names the key that signed LatestCommit (spec.verify).
	Verified string `json:"verified,omitempty"`
	// WebhookCommit is the commit the last webhook reported, and
	// LastWebhookTime when it arrived.
	WebhookCommit   string     `json:"webhookCommit,omitempty"`
	LastWebhookTime *time.Time `json:"lastWebhookTime,omitempty"`
	// PollingInterval is the interval in effect: the spec's, or 15s, or
	// 1h once webhooks arrive; 0 when polling is disabled.
	PollingInterval string       `json:"pollingInterval,omitempty"`
	Deployments     []Deployment `json:"deployments,omitempty"`
	// Watched counts the releases whose cluster's drift watch has
	// reported on the deployment ID they run; a sync settles those the
	// watch saw unchanged and Ready without a call to their cluster.
	Watched int `json:"watched,omitempty"`
	// Waits, Partitions, Halts and Progress are the gating state of the
	// running rollout, or of the last one when none runs; the workflow
	// copies them from the rollout's status.
	Waits      []Wait            `json:"waits,omitempty"`
	Partitions []PartitionStatus `json:"partitions,omitempty"`
	Halts      []Halt            `json:"halts,omitempty"`
	Progress   string            `json:"progress,omitempty"`
	// Warnings are what reading the last rolled-out commit ignored, as
	// Fleet ignores it (unknown fleet.yaml keys, skipped raw YAML files),
	// each naming the file; at most MaxWarnings.
	Warnings []string `json:"warnings,omitempty"`

	// The fields below are derived: Finish computes them from the ones
	// above. Set them only through Finish.

	Summary Summary `json:"summary"`
	// Display is Fleet's status.display: one-line state and counts.
	Display Display `json:"display"`
	// Bundles summarises each bundle over its clusters, sorted by name.
	Bundles []BundleStatus `json:"bundles,omitempty"`
	// ResourceCounts adds up the objects of every deployment, and
	// PerClusterResourceCounts per cluster name (Fleet's fields).
	ResourceCounts           ResourceCounts            `json:"resourceCounts"`
	PerClusterResourceCounts map[string]ResourceCounts `json:"perClusterResourceCounts,omitempty"`
	// Conditions are always the ConditionTypes, in that order, then
	// ConditionPinned while Pinned is set.
	Conditions []Condition `json:"conditions,omitempty"`

	// Settled is true when no rollout runs and none is due.
	Settled bool `json:"settled"`
	// Syncs counts the sync requests the GitRepo has taken.
	Syncs int64 `json:"syncs"`
}

// Rollout is the status of one rollout, as its query returns it.
type Rollout struct {
	ID          string       `json:"id"`
	Commit      string       `json:"commit"`
	Generation  int64        `json:"generation"`
	Phase       string       `json:"phase"`
	Deployments []Deployment `json:"deployments,omitempty"`
	Error       string       `json:"error,omitempty"`
	// Waits lists what holds parts of the rollout back, Partitions the
	// state of each bundle's partitions, Halts the bundles whose rollout
	// stopped on failures. Progress is their one-line summary, as the
	// Progress function writes it.
	Waits      []Wait            `json:"waits,omitempty"`
	Partitions []PartitionStatus `json:"partitions,omitempty"`
	Halts      []Halt            `json:"halts,omitempty"`
	Progress   string            `json:"progress,omitempty"`
}
