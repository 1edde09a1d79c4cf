package fleetstatus

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/flotilla-gitops/flotilla/internal/status"
)

// Event reasons: Fleet's (its gitjob and helmops controllers') and
// Flotilla's own.
const (
	ReasonGotNewCommit        = "GotNewCommit"
	ReasonGotNewChartVersion  = "GotNewChartVersion"
	ReasonFailedToCheckCommit = "FailedToCheckCommit"
	ReasonRolloutStarted      = "RolloutStarted"
	ReasonRolloutSucceeded    = "RolloutSucceeded"
	ReasonRolloutFailed       = "RolloutFailed"
	ReasonWaitingForApproval  = "WaitingForApproval"
	ReasonDriftDetected       = "DriftDetected"
	ReasonDriftCorrected      = "DriftCorrected"
	ReasonDeletionsHeld       = "DeletionsHeld"
)

// Event is one Kubernetes Event about a GitRepo or HelmOp.
type Event struct {
	// Type is corev1.EventTypeNormal or corev1.EventTypeWarning.
	Type    string
	Reason  string
	Message string
}

// Observation is what Transitions compares of two successive statuses of
// a GitRepo or HelmOp.
type Observation struct {
	HelmOp       bool
	LatestCommit string
	PollFailures int
	Error        string
	Rollout      string
	LastRollout  string
	Commit       string
	// Halts describes the halted bundles.
	Halts string
	// Approvals lists "bundle/partition" waiting for approval.
	Approvals []string
	// Modified counts drifted deployments, Corrections the corrections
	// made, Drifted names the drifted ones (bounded).
	Modified    int
	Corrections int
	Drifted     string
	// DeletionsHeld is the DeletionHeld condition's message.
	DeletionsHeld   string
	PolicyViolation string
	// ReadyCount is display.readyBundleDeployments.
	ReadyCount string
}

// Observe returns what Transitions compares of st.
func Observe(st status.GitRepo) Observation {
	o := Observation{HelmOp: st.Kind == KindHelmOp, LatestCommit: st.LatestCommit, PollFailures: st.PollFailures,
		Error: st.Error, Rollout: st.Rollout, LastRollout: st.LastRollout, Commit: st.Commit,
		PolicyViolation: policyViolation(st), ReadyCount: st.Display.ReadyBundleDeployments}
	if c, ok := st.Condition(status.ConditionRolloutHalted); ok && c.Status == status.ConditionTrue {
		o.Halts = c.Message
	}
	if c, ok := st.Condition(status.ConditionDeletionHeld); ok && c.Status == status.ConditionTrue {
		o.DeletionsHeld = c.Message
	}
	for _, w := range st.Waits {
		if w.Kind == status.WaitApproval {
			o.Approvals = append(o.Approvals, w.Bundle+"/"+w.Partition)
		}
	}
	sort.Strings(o.Approvals)
	o.Approvals = slices.Compact(o.Approvals)
	var drifted []string
	for _, d := range st.Deployments {
		o.Corrections += d.Corrections
		if d.State == status.Modified {
			o.Modified++
			drifted = append(drifted, "bundle "+d.Bundle+" on cluster "+d.Cluster)
		}
	}
	sort.Strings(drifted)
	if len(drifted) > status.MaxMessages {
		drifted = append(drifted[:status.MaxMessages], fmt.Sprintf("and %d more", len(drifted)-status.MaxMessages))
	}
	o.Drifted = strings.Join(drifted, ", ")
	return o
}

// Transitions returns the events of the change from prev to next, in a
// fixed order; none when nothing an event reports changed, and none for
// the first observation (prev nil: after a restart or a leader change
// the state is not news).
func Transitions(prev *Observation, next Observation) []Event {
	if prev == nil {
		return nil
	}
	var out []Event
	add := func(typ, reason, format string, args ...any) {
		out = append(out, Event{Type: typ, Reason: reason, Message: fmt.Sprintf(format, args...)})
	}
	if next.LatestCommit != "" && next.LatestCommit != prev.LatestCommit {
		if next.HelmOp {
			add(corev1.EventTypeNormal, ReasonGotNewChartVersion, "%s", next.LatestCommit)
		} else {
			add(corev1.EventTypeNormal, ReasonGotNewCommit, "%s", next.LatestCommit)
		}
	}
	if next.PollFailures > 0 && prev.PollFailures == 0 {
		add(corev1.EventTypeWarning, ReasonFailedToCheckCommit, "%s", firstNonEmpty(next.Error, "checking the remote failed"))
	}
	if next.PolicyViolation != "" && next.PolicyViolation != prev.PolicyViolation {
		add(corev1.EventTypeWarning, ReasonPolicyViolation, "%s", next.PolicyViolation)
	}
	if next.Rollout != "" && next.Rollout != prev.Rollout {
		add(corev1.EventTypeNormal, ReasonRolloutStarted, "rollout %s started", next.Rollout)
	}
	out = append(out, rolloutEnd(prev, next)...)
	if added := newItems(prev.Approvals, next.Approvals); len(added) > 0 {
		add(corev1.EventTypeNormal, ReasonWaitingForApproval, "waiting for approval: %s", strings.Join(added, ", "))
	}
	if next.Modified > 0 && prev.Modified == 0 {
		add(corev1.EventTypeWarning, ReasonDriftDetected, "drift on %s", next.Drifted)
	}
	if next.Corrections > prev.Corrections {
		add(corev1.EventTypeNormal, ReasonDriftCorrected, "%d drift corrections made", next.Corrections-prev.Corrections)
	}
	if next.DeletionsHeld != "" && next.DeletionsHeld != prev.DeletionsHeld {
		add(corev1.EventTypeWarning, ReasonDeletionsHeld, "%s", next.DeletionsHeld)
	}
	return out
}

// rolloutEnd reports a rollout that finished (LastRollout moved) or a
// rollout error or halt that appeared.
func rolloutEnd(prev *Observation, next Observation) []Event {
	failed := next.Error != "" && next.Error != prev.Error || next.Halts != "" && next.Halts != prev.Halts
	if failed {
		return []Event{{Type: corev1.EventTypeWarning, Reason: ReasonRolloutFailed, Message: firstNonEmpty(next.Error, next.Halts)}}
	}
	if next.LastRollout != "" && next.LastRollout != prev.LastRollout && next.Error == "" && next.Halts == "" {
		return []Event{{Type: corev1.EventTypeNormal, Reason: ReasonRolloutSucceeded,
			Message: fmt.Sprintf("rollout %s finished: %s bundle deployments ready", next.LastRollout, next.ReadyCount)}}
	}
	return nil
}

// newItems returns the items of next not in prev (both sorted).
func newItems(prev, next []string) []string {
	var out []string
	for _, n := range next {
		if _, found := slices.BinarySearch(prev, n); !found {
			out = append(out, n)
		}
	}
	return out
}
