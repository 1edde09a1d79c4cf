package status

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Wait is one reason part of a rollout is held back.
type Wait struct {
	Bundle string `json:"bundle"`
	// Kind is one of the Wait* constants.
	Kind      string `json:"kind"`
	Partition string `json:"partition,omitempty"`
	// Clusters lists at most MaxMessages held-back clusters, sorted;
	// More counts those not listed. LimitClusters computes both.
	Clusters []string `json:"clusters,omitempty"`
	More     int      `json:"more,omitempty"`
	// Until is when a window opens, RFC3339, for Kind Window.
	Until string `json:"until,omitempty"`
	// Message is a sentence naming the limit and the clusters.
	Message string `json:"message"`
	// Plan is, for Kind Approval, the one-line summary of what approving
	// the partition would do (plan.Result.Summary), or that its plan is
	// being made or failed; `flotilla approve --show` prints the plan.
	Plan string `json:"plan,omitempty"`
}

// WaitsOnReadiness reports whether a wait ends when a cluster's
// deployment becomes Ready (a limit of unavailable clusters or
// partitions, or dependsOn), rather than on an approval, a window or a
// pause.
func WaitsOnReadiness(waits []Wait) bool {
	for _, w := range waits {
		switch w.Kind {
		case WaitMaxUnavailable, WaitPartitionMaxUnavailable, WaitMaxUnavailablePartitions, WaitDependsOn:
			return true
		}
	}
	return false
}

// The kinds of Wait.
const (
	// WaitMaxUnavailable: the bundle's maxUnavailable clusters are
	// unavailable already.
	WaitMaxUnavailable = "MaxUnavailable"
	// WaitPartitionMaxUnavailable: the partition's maxUnavailable is
	// reached.
	WaitPartitionMaxUnavailable = "PartitionMaxUnavailable"
	// WaitMaxUnavailablePartitions: too many partitions are unavailable to
	// start the next one.
	WaitMaxUnavailablePartitions = "MaxUnavailablePartitions"
	// WaitApproval: the partition waits for `flotilla approve`.
	WaitApproval = "Approval"
	// WaitWindow: the partition waits for a rollout window to open.
	WaitWindow = "Window"
	// WaitDependsOn: the bundle waits for the bundles it depends on.
	WaitDependsOn = "DependsOn"
	// WaitPaused: the GitRepo or the clusters are paused.
	WaitPaused = "Paused"
	// WaitDeletionHeld: uninstalls the plan would make are held (a
	// target names a cluster group or cluster that does not exist).
	WaitDeletionHeld = "DeletionHeld"
	// WaitDeletionGuard: uninstalls the plan would make are held by the
	// deletion guard (too many at once) until `flotilla approve
	// --deletions`.
	WaitDeletionGuard = "DeletionGuard"
)

// WaitKinds lists the kinds of Wait in the order Progress names them.
var WaitKinds = []string{WaitPaused, WaitDependsOn, WaitWindow, WaitApproval, WaitMaxUnavailablePartitions,
	WaitMaxUnavailable, WaitPartitionMaxUnavailable, WaitDeletionHeld, WaitDeletionGuard}

// PartitionStatus is the state of one partition of a bundle's rollout.
type PartitionStatus struct {
	Bundle string `json:"bundle"`
	Name   string `json:"name"`
	// Index is the partition's 0-based place in the bundle's rollout
	// order.
	Index int `json:"index"`
	// Clusters counts the partition's clusters, Unavailable those not
	// running the new deployment ready, MaxUnavailable how many may be.
	Clusters       int `json:"clusters"`
	Unavailable    int `json:"unavailable"`
	MaxUnavailable int `json:"maxUnavailable"`
	// Phase is one of the Partition* constants.
	Phase string `json:"phase"`
}

// The phases of a partition.
const (
	PartitionPending            = "Pending"
	PartitionWaitingForApproval = "WaitingForApproval"
	PartitionWaitingForWindow   = "WaitingForWindow"
	PartitionRolling            = "Rolling"
	PartitionDone               = "Done"
	PartitionHalted             = "Halted"
)

// Halt records a bundle whose rollout stopped because too many clusters
// failed.
type Halt struct {
	Bundle string `json:"bundle"`
	// Failed lists at most MaxMessages failed clusters, sorted.
	Failed []string `json:"failed,omitempty"`
	// Threshold is the number of failures the rollout tolerated.
	Threshold int `json:"threshold"`
	// Message says why, e.g. "3 clusters failed, more than the 1
	// allowed"; Describe adds the bundle, clusters and rollback results.
	Message string `json:"message,omitempty"`
	// RolledBack lists the clusters rolled back to the previous
	// deployment; RollbackErrors the rollbacks that failed, each naming
	// its cluster.
	RolledBack     []string `json:"rolledBack,omitempty"`
	RollbackErrors []string `json:"rollbackErrors,omitempty"`
}

// Describe is a one-line account of the halt: "bundle web halted: <Message>;
// failed: c1, c2; rolled back: c1; rollback errors: c2: <error>".
func (h Halt) Describe() string {
	s := "bundle " + h.Bundle + " halted"
	switch {
	case h.Message != "":
		s += ": " + h.Message
	case h.Threshold > 0:
		s += fmt.Sprintf(": more than %d cluster(s) failed", h.Threshold)
	}
	if len(h.Failed) > 0 {
		s += "; failed: " + strings.Join(h.Failed, ", ")
	}
	if len(h.RolledBack) > 0 {
		s += "; rolled back: " + strings.Join(h.RolledBack, ", ")
	}
	if len(h.RollbackErrors) > 0 {
		s += "; rollback errors: " + strings.Join(h.RollbackErrors, "; ")
	}
	return s
}

// LimitClusters returns names sorted and without duplicates, at most
// MaxMessages of them, and how many more there were. names is not
// modified.
func LimitClusters(names []string) (list []string, more int) {
	list = slices.Clone(names)
	sort.Strings(list)
	list = slices.Compact(list)
	if len(list) > MaxMessages {
		more = len(list) - MaxMessages
		list = list[:MaxMessages:MaxMessages]
	}
	return list, more
}

// JoinClusters writes a list from LimitClusters for a message:
// "c1, c2 and 3 more".
func JoinClusters(list []string, more int) string {
	s := strings.Join(list, ", ")
	switch {
	case more > 0 && s == "":
		s = fmt.Sprintf("%d clusters", more)
	case more > 0:
		s += fmt.Sprintf(" and %d more", more)
	}
	return s
}
