// Package notify turns what happens to GitRepos and clusters into
// messages for people and systems: Notification resources, their event
// filters, and the providers that deliver (a generic webhook with an HMAC
// signature, Slack, Microsoft Teams, GitHub, GitLab and Gitea commit
// statuses).
package notify

import (
	"encoding/json"
	"time"
)

// Type is the kind of an event.
type Type string

// The events Flotilla emits.
const (
	RolloutStarted    Type = "RolloutStarted"
	RolloutSucceeded  Type = "RolloutSucceeded"
	RolloutFailed     Type = "RolloutFailed"
	RolloutHalted     Type = "RolloutHalted"
	RolloutRolledBack Type = "RolloutRolledBack"
	ApprovalWaiting   Type = "ApprovalWaiting"
	DriftDetected     Type = "DriftDetected"
	DriftCorrected    Type = "DriftCorrected"
	DriftConflict     Type = "DriftConflict"
	DeletionHeld      Type = "DeletionHeld"
	ClusterOffline    Type = "ClusterOffline"
	ClusterOnline     Type = "ClusterOnline"
	// History carries one history entry (Event.Data), for export as
	// CloudEvents.
	History Type = "History"
)

// Types lists every event type, in a stable order.
var Types = []Type{RolloutStarted, RolloutSucceeded, RolloutFailed, RolloutHalted, RolloutRolledBack,
	ApprovalWaiting, DriftDetected, DriftCorrected, DriftConflict, DeletionHeld, ClusterOffline, ClusterOnline, History}

// Severity is how much an event needs attention.
type Severity string

const (
	Info    Severity = "info"
	Warning Severity = "warning"
	Error   Severity = "error"
)

// Event is one thing that happened. Workflows emit it (deterministically:
// ID and Time come from the workflow); the notifications workflow of its
// namespace delivers it to every Notification whose filters match, once.
type Event struct {
	// ID is unique per event and the same on every replay: the emitting
	// workflow's ID and a sequence number of its own.
	ID       string    `json:"id"`
	Type     Type      `json:"type"`
	Severity Severity  `json:"severity"`
	Time     time.Time `json:"time"`
	// Namespace is the GitRepo's (or cluster's) namespace.
	Namespace string `json:"namespace"`
	// Kind and GitRepo name the GitRepo or HelmOp (empty for cluster
	// events).
	Kind    string `json:"kind,omitempty"`
	GitRepo string `json:"gitRepo,omitempty"`
	// RepoURL and Commit are what rolls out (commit statuses need both).
	RepoURL string `json:"repoURL,omitempty"`
	Commit  string `json:"commit,omitempty"`
	// Bundles and Clusters are what the event concerns, sorted.
	Bundles  []string `json:"bundles,omitempty"`
	Clusters []string `json:"clusters,omitempty"`
	// Rollout is the rollout workflow's ID, when one is concerned.
	Rollout string `json:"rollout,omitempty"`
	// Message says what happened, for people.
	Message string `json:"message"`
	// Data is the event's detail as JSON (a history entry for History).
	Data json.RawMessage `json:"data,omitempty"`
}

// WorkflowIDPrefix starts the ID of a namespace's notifications workflow:
// "notifications/<namespace>".
const WorkflowIDPrefix = "notifications/"

// WorkflowID is the ID of namespace's notifications workflow.
func WorkflowID(namespace string) string { return WorkflowIDPrefix + namespace }

// SignalEvent delivers an Event to the notifications workflow.
const SignalEvent = "event"
