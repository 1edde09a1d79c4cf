package status

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// Display is Fleet's status.display for a GitRepo: what a one-line listing
// shows.
type Display struct {
	// ReadyBundleDeployments is "ready/all" deployments.
	ReadyBundleDeployments string `json:"readyBundleDeployments"`
	// ReadyClusters is "ready/all" clusters with deployments, a cluster
	// being ready when its every deployment is.
	ReadyClusters string `json:"readyClusters"`
	// State is one word; see GitRepo.Finish for how it is chosen.
	State string `json:"state"`
	// Message explains a State other than Ready.
	Message string `json:"message,omitempty"`
}

// Display states besides the deployment States.
const (
	DisplayDeleting = "Deleting"
	DisplayError    = "Error"
	// DisplayPolicyViolation: a GitRepoRestriction or Policy refuses the
	// spec (PolicyViolation).
	DisplayPolicyViolation = "PolicyViolation"
	DisplayHalted          = "Halted"
	DisplayPaused          = "Paused"
	DisplayNoTargets       = "NoTargets"
)

// BundleStatus summarises one bundle over its clusters.
type BundleStatus struct {
	Name string `json:"name"`
	// State is the worst state of the bundle's deployments.
	State State `json:"state"`
	// ReadyClusters is "ready/all" clusters the bundle is deployed to.
	ReadyClusters  string         `json:"readyClusters"`
	Counts         StateCounts    `json:"counts"`
	ResourceCounts ResourceCounts `json:"resourceCounts"`
	// Message is the Summary message of the bundle's deployments: each
	// distinct message once, grouped by state.
	Message string `json:"message,omitempty"`
}

// Condition is a Kubernetes-style condition of a GitRepo.
type Condition struct {
	Type string `json:"type"`
	// Status is ConditionTrue, ConditionFalse or ConditionUnknown.
	Status  string `json:"status"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// Condition statuses.
const (
	ConditionTrue    = "True"
	ConditionFalse   = "False"
	ConditionUnknown = "Unknown"
)

// ReasonWarnings is the reason of an Accepted condition that is True
// while reading the repository gave warnings (GitRepo.Warnings).
const ReasonWarnings = "AcceptedWithWarnings"

// ReasonPolicyViolation is the reason of the Ready, Accepted and Stalled
// conditions while a GitRepoRestriction or Policy refuses the spec
// (GitRepo.PolicyViolation).
const ReasonPolicyViolation = "PolicyViolation"

// maxWarningsQuoted bounds the warnings the Accepted condition quotes.
const maxWarningsQuoted = 3

// Condition types, in the order GitRepo.Conditions lists them.
const (
	// ConditionReady: every deployment is Ready and the last rollout
	// could run.
	ConditionReady = "Ready"
	// ConditionAccepted: the last rollout could run (fleet.yaml valid,
	// Git reachable).
	ConditionAccepted = "Accepted"
	// ConditionStalled: no progress without a change: an Error or a
	// halted rollout.
	ConditionStalled = "Stalled"
	// ConditionRolloutHalted: a bundle's rollout stopped on failures.
	ConditionRolloutHalted = "RolloutHalted"
	// ConditionWaitingForApproval: a partition waits for `flotilla
	// approve`.
	ConditionWaitingForApproval = "WaitingForApproval"
	// ConditionDeletionHeld: uninstalls are held (WaitDeletionHeld); the
	// message says how many, where and why.
	ConditionDeletionHeld = "DeletionHeld"
	// Reasons of ConditionDeletionHeld: a target names a group or cluster
	// that does not exist; the deletion guard holds uninstalls until
	// `flotilla approve --deletions`.
	ReasonTargetNotFound = "TargetNotFound"
	ReasonDeletionGuard  = "DeletionGuard"
	// ConditionGitPolling is Fleet's: True while checks of the remote
	// succeed, False while they fail (ReasonPollFailed), the Git host asked
	// to wait (ReasonRateLimited: NextCheck) or the newest commit's
	// signature was refused (ReasonCommitRejected: Rejected).
	ConditionGitPolling  = "GitPolling"
	ReasonPollFailed     = "PollFailed"
	ReasonRateLimited    = "RateLimited"
	ReasonCommitRejected = "CommitRejected"
	// ReasonNoChangeUnderPaths: GitPolling is True and the commit was
	// taken without a render, since it changes nothing the GitRepo reads.
	ReasonNoChangeUnderPaths = "NoChangeUnderPaths"
)

// ConditionTypes lists the condition types in order.
var ConditionTypes = []string{ConditionReady, ConditionAccepted, ConditionStalled, ConditionRolloutHalted,
	ConditionWaitingForApproval, ConditionDeletionHeld, ConditionGitPolling}

// Healthy reports whether the condition is in its happy state: True for
// Ready and Accepted, False for the others.
func (c Condition) Healthy() bool {
	switch c.Type {
	case ConditionReady, ConditionAccepted, ConditionGitPolling:
		return c.Status == ConditionTrue
	}
	return c.Status == ConditionFalse
}

// Condition returns the condition of type t, and whether there is one.
func (g *GitRepo) Condition(t string) (Condition, bool) {
	i := slices.IndexFunc(g.Conditions, func(c Condition) bool { return c.Type == t })
	if i < 0 {
		return Condition{}, false
	}
	return g.Conditions[i], true
}

// Finish computes the derived fields of the status — Summary, Display,
// Bundles, ResourceCounts, PerClusterResourceCounts, Conditions, and
// Progress when it is empty and there are Partitions or Waits — from
// Deployments, Commit, Error, Paused, Deleting, Partitions, Waits and
// Halts. It is pure and idempotent, its result does not depend on the
// order of those slices, and it never modifies them.
//
// Display.State is the first that holds of:
//
//	Deleting         the GitRepo is being deleted
//	PolicyViolation  a GitRepoRestriction or Policy refuses the spec
//	Error      Error is set: the last rollout could not run
//	Halted     a bundle's rollout halted on failures
//	Paused     Paused, and every deployment Ready or OutOfSync (what a
//	           pause causes); any other state is worse and shows instead
//	Pending    no deployment and no commit rolled out yet
//	NoTargets  no deployment: no cluster is targeted
//	the worst deployment State (Ready when all are)
//
// Display.Message is PolicyViolation, else Error, else the halts, else
// Summary.Message. A PolicyViolation makes Ready and Accepted False and
// Stalled True, each with reason ReasonPolicyViolation.
//
// Warnings do not change the state: the Accepted condition stays True,
// with reason ReasonWarnings and a message quoting the first few.
func (g *GitRepo) Finish() {
	deps := g.Deployments
	g.Summary = Summarize(deps)
	halts := slices.Clone(g.Halts)
	var haltMsgs []string
	for _, h := range halts {
		haltMsgs = append(haltMsgs, h.Describe())
	}
	// Describe starts with the bundle: this orders halts by bundle.
	sort.Strings(haltMsgs)
	sort.SliceStable(halts, func(i, j int) bool { return halts[i].Bundle < halts[j].Bundle })
	haltMsg := strings.Join(haltMsgs, "; ")

	g.Display = Display{
		ReadyBundleDeployments: fmt.Sprintf("%d/%d", g.Summary.Ready, g.Summary.Desired),
		ReadyClusters:          fmt.Sprintf("%d/%d", g.Summary.ReadyClusters, g.Summary.Clusters),
		State:                  g.displayState(),
		Message:                firstNonEmpty(g.PolicyViolation, g.Error, haltMsg, g.Summary.Message),
	}

	g.Bundles = nil
	sorted := slices.Clone(deps)
	Sort(sorted)
	for start := 0; start < len(sorted); {
		end := start
		for end < len(sorted) && sorted[end].Bundle == sorted[start].Bundle {
			end++
		}
		bd := sorted[start:end:end]
		start = end
		s := Summarize(bd)
		g.Bundles = append(g.Bundles, BundleStatus{Name: bd[0].Bundle, State: s.State,
			ReadyClusters: fmt.Sprintf("%d/%d", s.ReadyClusters, s.Clusters), Counts: CountStates(bd),
			ResourceCounts: SumResourceCounts(bd), Message: s.Message})
	}

	g.ResourceCounts = SumResourceCounts(deps)
	g.PerClusterResourceCounts = nil
	if len(deps) > 0 {
		g.PerClusterResourceCounts = map[string]ResourceCounts{}
		for _, d := range deps {
			c := g.PerClusterResourceCounts[d.Cluster]
			c.Add(d.ResourceCounts())
			g.PerClusterResourceCounts[d.Cluster] = c
		}
	}

	g.Conditions = []Condition{g.readyCondition(), g.acceptedCondition(), g.stalledCondition(halts),
		haltedCondition(haltMsg), g.approvalCondition(), g.deletionHeldCondition(), g.gitPollingCondition()}
	if g.Pinned != nil {
		g.Conditions = append(g.Conditions, g.pinnedCondition())
	}

	if g.Progress == "" && (len(g.Partitions) > 0 || len(g.Waits) > 0) {
		g.Progress = Progress(deps, g.Partitions, g.Waits)
	}
}

func (g *GitRepo) displayState() string {
	pausedOnly := !slices.ContainsFunc(g.Deployments, func(d Deployment) bool {
		return d.State != Ready && d.State != OutOfSync
	})
	switch {
	case g.Deleting:
		return DisplayDeleting
	case g.PolicyViolation != "":
		return DisplayPolicyViolation
	case g.Error != "":
		return DisplayError
	case len(g.Halts) > 0:
		return DisplayHalted
	case g.Paused && pausedOnly:
		return DisplayPaused
	case len(g.Deployments) == 0 && g.Commit == "":
		return string(Pending)
	case len(g.Deployments) == 0:
		return DisplayNoTargets
	}
	return string(g.Summary.State)
}

// readyCondition is True when every deployment is Ready and there is no
// Error; Unknown before any commit rolled out.
func (g *GitRepo) readyCondition() Condition {
	c := Condition{Type: ConditionReady, Status: ConditionTrue}
	switch {
	case g.PolicyViolation != "":
		c.Status, c.Reason, c.Message = ConditionFalse, ReasonPolicyViolation, g.PolicyViolation
	case g.Error != "":
		c.Status, c.Reason, c.Message = ConditionFalse, "Error", firstNonEmpty(g.Summary.Message, g.Error)
	case g.Summary.State != Ready:
		c.Status, c.Reason, c.Message = ConditionFalse, string(g.Summary.State), g.Summary.Message
	case len(g.Deployments) == 0 && g.Commit == "":
		c.Status, c.Reason, c.Message = ConditionUnknown, string(Pending), "no commit rolled out yet"
	}
	return c
}

func (g *GitRepo) acceptedCondition() Condition {
	if g.PolicyViolation != "" {
		return Condition{Type: ConditionAccepted, Status: ConditionFalse, Reason: ReasonPolicyViolation, Message: g.PolicyViolation}
	}
	if g.Error != "" {
		return Condition{Type: ConditionAccepted, Status: ConditionFalse, Reason: "Error", Message: g.Error}
	}
	if n := len(g.Warnings); n > 0 {
		quoted := g.Warnings[:min(n, maxWarningsQuoted)]
		msg := fmt.Sprintf("%d warnings: %s", n, strings.Join(quoted, "; "))
		if n == 1 {
			msg = "1 warning: " + quoted[0]
		}
		if n > len(quoted) {
			msg += "; ..."
		}
		return Condition{Type: ConditionAccepted, Status: ConditionTrue, Reason: ReasonWarnings, Message: msg}
	}
	return Condition{Type: ConditionAccepted, Status: ConditionTrue}
}

// gitPollingCondition is Fleet's GitPolling: whether the newest check of
// the remote could be taken. A Git host's request to wait comes first:
// nothing is asked until NextCheck.
func (g *GitRepo) gitPollingCondition() Condition {
	c := Condition{Type: ConditionGitPolling, Status: ConditionTrue}
	switch {
	case g.NextCheck != nil:
		c.Status, c.Reason = ConditionFalse, ReasonRateLimited
		c.Message = fmt.Sprintf("next check at %s: %s", g.NextCheck.UTC().Format(time.RFC3339), g.NextCheckReason)
	case g.PollFailures > 0:
		c.Status, c.Reason = ConditionFalse, ReasonPollFailed
		c.Message = fmt.Sprintf("%d failed checks in a row", g.PollFailures)
		if g.Error != "" {
			c.Message += ": " + g.Error
		}
	case g.Rejected != nil:
		c.Status, c.Reason, c.Message = ConditionFalse, ReasonCommitRejected, g.Rejected.Message()
	case g.RenderedCommit != "" && g.RenderedCommit != g.Commit:
		c.Reason = ReasonNoChangeUnderPaths
		c.Message = fmt.Sprintf("no change under paths since %s: commit %s taken without a render or rollout",
			g.RenderedCommit, g.Commit)
	}
	return c
}

func (g *GitRepo) stalledCondition(halts []Halt) Condition {
	c := Condition{Type: ConditionStalled, Status: ConditionFalse}
	var halted string
	if len(halts) > 0 {
		var names []string
		for _, h := range halts {
			names = append(names, h.Bundle)
		}
		halted = "rollout halted for bundle " + strings.Join(slices.Compact(names), ", ")
	}
	switch {
	case g.PolicyViolation != "":
		c.Status, c.Reason, c.Message = ConditionTrue, ReasonPolicyViolation, g.PolicyViolation
	case g.Error != "":
		c.Status, c.Reason, c.Message = ConditionTrue, "Error", g.Error
		if halted != "" {
			c.Message += "; " + halted
		}
	case halted != "":
		c.Status, c.Reason, c.Message = ConditionTrue, ConditionRolloutHalted, halted
	}
	return c
}

func haltedCondition(msg string) Condition {
	if msg == "" {
		return Condition{Type: ConditionRolloutHalted, Status: ConditionFalse}
	}
	return Condition{Type: ConditionRolloutHalted, Status: ConditionTrue, Reason: "FailureThreshold", Message: msg}
}

// deletionHeldCondition says which uninstalls are held and why.
func (g *GitRepo) deletionHeldCondition() Condition {
	var msgs []string
	reason := ""
	for _, w := range g.Waits {
		switch w.Kind {
		case WaitDeletionHeld:
			msgs = append(msgs, w.Message)
			reason = cmp.Or(reason, ReasonTargetNotFound)
		case WaitDeletionGuard:
			msgs = append(msgs, w.Message)
			reason = ReasonDeletionGuard // the one a user acts on
		}
	}
	if len(msgs) == 0 {
		return Condition{Type: ConditionDeletionHeld, Status: ConditionFalse}
	}
	sort.Strings(msgs)
	return Condition{Type: ConditionDeletionHeld, Status: ConditionTrue, Reason: reason, Message: strings.Join(slices.Compact(msgs), "; ")}
}

// approvalCondition names, per partition waiting for approval, its
// bundles and the command that approves it.
func (g *GitRepo) approvalCondition() Condition {
	var approvals []Wait
	for _, w := range g.Waits {
		if w.Kind == WaitApproval {
			approvals = append(approvals, w)
		}
	}
	if len(approvals) == 0 {
		return Condition{Type: ConditionWaitingForApproval, Status: ConditionFalse}
	}
	sort.SliceStable(approvals, func(i, j int) bool {
		if approvals[i].Partition != approvals[j].Partition {
			return approvals[i].Partition < approvals[j].Partition
		}
		return approvals[i].Bundle < approvals[j].Bundle
	})
	var parts []string
	for start := 0; start < len(approvals); {
		end := start
		var bundles []string
		for end < len(approvals) && approvals[end].Partition == approvals[start].Partition {
			bundles = append(bundles, approvals[end].Bundle)
			end++
		}
		partition := approvals[start].Partition
		start = end
		bundles = slices.Compact(bundles)
		s := "bundle "
		if len(bundles) > 1 {
			s = "bundles "
		}
		s += strings.Join(bundles, ", ")
		cmd := "flotilla approve " + g.Name
		if g.Namespace != "" && g.Namespace != defaultNamespace {
			cmd += " -n " + g.Namespace
		}
		if partition != "" {
			s += " partition " + partition
			cmd += " --partition " + partition
		}
		parts = append(parts, s+" waits for approval; run: "+cmd)
	}
	return Condition{Type: ConditionWaitingForApproval, Status: ConditionTrue, Reason: "ApprovalRequired",
		Message: strings.Join(parts, "; ")}
}

// defaultNamespace is the CLI's default GitRepo namespace (api.DefaultNamespace,
// not imported to keep this package free of Kubernetes dependencies).
const defaultNamespace = "fleet-default"

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
