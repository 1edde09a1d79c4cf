package fleetstatus

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/flotilla-gitops/flotilla/internal/status"
)

// Condition types Fleet's GitRepo has besides Flotilla's own
// (status.ConditionTypes).
const (
	// ConditionReconciling is True while a rollout of the object's spec
	// or commit runs or is due.
	ConditionReconciling = "Reconciling"
)

// Reasons this package sets.
const (
	ReasonRolloutInProgress = "RolloutInProgress"
	ReasonPolicyViolation   = status.ReasonPolicyViolation
	ReasonRetrying          = "Retrying"
	ReasonPaused            = "Paused"
)

// Display states and GitJobStatus values besides status' ones.
const (
	gitJobCurrent = "Current"
	gitJobFailed  = "Failed"
)

// GitRepoInput is what ProjectGitRepo projects.
type GitRepoInput struct {
	// Status is Flotilla's status of the GitRepo or HelmOp (QueryStatus).
	Status status.GitRepo
	// Generation is the management object's metadata.generation.
	Generation int64
	// SpecGeneration is Flotilla's spec generation that carries
	// Generation's spec (status.GitRepo.Generation as first read after
	// the object's generation was applied): Ready waits until a rollout
	// of it, or a later one, finished. 0 when not known yet: Ready waits.
	SpecGeneration int64
	// Overrides are conditions the management controller knows of
	// (Writer.SetCondition), e.g. Accepted=False for a refused spec; one
	// of a type this package sets replaces it.
	Overrides []Condition
}

// caughtUp reports whether Flotilla finished a rollout of the object's
// current generation.
func (in GitRepoInput) caughtUp() bool {
	return in.SpecGeneration > 0 && in.Status.ObservedGeneration >= in.SpecGeneration
}

// ProjectGitRepo returns Fleet's status of the GitRepo or HelmOp, without
// timestamps (Stamp adds them) and without the size bound (Bound). It is
// pure.
//
// Ready is True only when Flotilla's Ready is, no rollout runs, a rollout
// of the object's generation finished (SpecGeneration), there is no
// policy violation and no override refuses the spec: `kubectl wait
// --for=condition=Ready` after an apply waits for the deploy.
func ProjectGitRepo(in GitRepoInput) GitRepoStatus {
	st := in.Status
	out := GitRepoStatus{
		ObservedGeneration:       in.Generation,
		ReadyClusters:            st.Summary.ReadyClusters,
		DesiredReadyClusters:     st.Summary.Clusters,
		Summary:                  bundleSummary(st.Deployments, st.Bundles),
		ResourceCounts:           st.ResourceCounts,
		PerClusterResourceCounts: st.PerClusterResourceCounts,
		Resources:                resources(st.Deployments),
		Commit:                   st.Commit,
		WebhookCommit:            st.WebhookCommit,
		PollingCommit:            st.LatestCommit,
		GitJobStatus:             gitJobCurrent,
		Version:                  st.Version,
	}
	if st.LastWebhookTime != nil {
		out.LastWebhookTime = formatTime(*st.LastWebhookTime)
	}
	if st.LatestCommitSeen != nil {
		out.LastPollingTriggered = formatTime(*st.LatestCommitSeen)
	}
	if st.Error != "" {
		out.GitJobStatus = gitJobFailed
	}
	out.Conditions = gitRepoConditions(in)
	out.Display = display(st, out.Conditions)
	return out
}

// gitRepoConditions are Fleet's Ready, Accepted, Reconciling and Stalled,
// then Flotilla's RolloutHalted, WaitingForApproval and DeletionHeld, then
// Fleet's GitPolling, then other overrides sorted by type; each carries the
// object's generation.
func gitRepoConditions(in GitRepoInput) []Condition {
	st := in.Status
	byType := map[string]Condition{}
	for _, c := range st.Conditions {
		byType[c.Type] = Condition{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message}
	}
	byType[ConditionReconciling] = reconciling(in)
	var extra []Condition
	for _, o := range in.Overrides {
		if _, known := byType[o.Type]; !known {
			extra = append(extra, o)
		}
		byType[o.Type] = Condition{Type: o.Type, Status: o.Status, Reason: o.Reason, Message: o.Message}
	}
	if a := byType[status.ConditionAccepted]; a.Status == status.ConditionFalse {
		// A spec the controller refused cannot progress until it changes.
		byType[status.ConditionStalled] = Condition{Type: status.ConditionStalled, Status: status.ConditionTrue,
			Reason: a.Reason, Message: a.Message}
	}
	byType[status.ConditionReady] = ready(in, byType)
	order := []string{status.ConditionReady, status.ConditionAccepted, ConditionReconciling, status.ConditionStalled,
		status.ConditionRolloutHalted, status.ConditionWaitingForApproval, status.ConditionDeletionHeld, status.ConditionGitPolling}
	sort.Slice(extra, func(i, j int) bool { return extra[i].Type < extra[j].Type })
	var out []Condition
	for _, t := range order {
		if c, ok := byType[t]; ok {
			out = append(out, c)
		}
	}
	for _, c := range extra {
		if !slices.Contains(order, c.Type) {
			out = append(out, byType[c.Type])
		}
	}
	for i := range out {
		out[i].ObservedGeneration = in.Generation
	}
	return out
}

// ready is Flotilla's Ready condition, made False while the object's
// generation is not rolled out, a rollout runs, the spec violates a
// policy or is refused (Accepted False), or something is stalled.
func ready(in GitRepoInput, byType map[string]Condition) Condition {
	c, ok := byType[status.ConditionReady]
	if !ok {
		c = Condition{Type: status.ConditionReady, Status: status.ConditionUnknown}
	}
	notReady := func(reason, msg string) Condition {
		return Condition{Type: status.ConditionReady, Status: status.ConditionFalse, Reason: reason, Message: msg}
	}
	if s := byType[status.ConditionStalled]; s.Status == status.ConditionTrue {
		return notReady(s.Reason, s.Message)
	}
	if c.Status != status.ConditionTrue {
		return c
	}
	if r := byType[ConditionReconciling]; r.Status == status.ConditionTrue {
		return notReady(r.Reason, r.Message)
	}
	return c
}

// reconciling is True while a rollout runs, the object's generation is
// not rolled out yet, or failures are retried.
func reconciling(in GitRepoInput) Condition {
	st := in.Status
	c := Condition{Type: ConditionReconciling, Status: status.ConditionFalse}
	retry := retries(st.Deployments)
	switch {
	case st.Rollout != "":
		c.Status, c.Reason = status.ConditionTrue, ReasonRolloutInProgress
		c.Message = firstNonEmpty(st.Progress, "rollout "+st.Rollout+" in progress")
	case st.Paused && !in.caughtUp():
		c.Status, c.Reason, c.Message = status.ConditionTrue, ReasonPaused, "paused: the spec is not rolled out"
	case !in.caughtUp():
		c.Status, c.Reason = status.ConditionTrue, ReasonRolloutInProgress
		c.Message = fmt.Sprintf("generation %d is not rolled out yet", in.Generation)
	case retry != "":
		c.Status, c.Reason, c.Message = status.ConditionTrue, ReasonRetrying, retry
	}
	return c
}

// maxRetriesQuoted bounds the retries the Reconciling message names.
const maxRetriesQuoted = 3

// retries names the deployments whose failures are retried, with their
// attempts and next retry: "bundle b on cluster c: attempt 3, next retry
// at T".
func retries(deps []status.Deployment) string {
	var parts []string
	n := 0
	for _, d := range deps {
		if d.Attempts == 0 || d.NextRetry == "" {
			continue
		}
		n++
		parts = append(parts, fmt.Sprintf("bundle %s on cluster %s: attempt %d, next retry at %s",
			d.Bundle, d.Cluster, d.Attempts, d.NextRetry))
	}
	if n == 0 {
		return ""
	}
	sort.Strings(parts)
	s := "retrying " + strings.Join(parts[:min(n, maxRetriesQuoted)], "; ")
	if n > maxRetriesQuoted {
		s += fmt.Sprintf("; and %d more", n-maxRetriesQuoted)
	}
	return s
}

// display is Fleet's display: Flotilla's, with the Ready condition's
// message when it explains more.
func display(st status.GitRepo, conds []Condition) Display {
	d := Display{ReadyBundleDeployments: st.Display.ReadyBundleDeployments, State: st.Display.State,
		Message: st.Display.Message}
	if i := slices.IndexFunc(conds, func(c Condition) bool { return c.Type == status.ConditionReady }); i >= 0 {
		if r := conds[i]; r.Status == status.ConditionFalse && d.Message == "" {
			d.Message = r.Message
		}
	}
	switch d.State {
	case status.DisplayError, status.DisplayHalted, string(status.ErrApplied), status.DisplayPolicyViolation:
		d.Error = true
	}
	return d
}

// bundleSummary is Fleet's summary: deployments per state and, for each
// bundle that is not Ready, its state, message and drifted objects, at
// most maxNonReady bundles and maxListed objects each.
func bundleSummary(deps []status.Deployment, bundles []status.BundleStatus) BundleSummary {
	c := status.CountStates(deps)
	s := BundleSummary{NotReady: c.NotReady, WaitApplied: c.WaitApplied, ErrApplied: c.ErrApplied,
		OutOfSync: c.OutOfSync, Modified: c.Modified, Ready: c.Ready, Pending: c.Pending, DesiredReady: c.DesiredReady}
	drift := map[string][]ModifiedStatus{}
	for _, d := range deps {
		for _, m := range d.ModifiedStatus {
			if len(drift[d.Bundle]) < status.MaxListed {
				drift[d.Bundle] = append(drift[d.Bundle], modifiedStatus(m))
			}
		}
	}
	for _, b := range bundles {
		if b.State == status.Ready || len(s.NonReadyResources) == maxNonReady {
			continue
		}
		s.NonReadyResources = append(s.NonReadyResources, NonReadyResource{Name: b.Name, State: string(b.State),
			Message: b.Message, ModifiedStatus: drift[b.Name]})
	}
	return s
}

// maxNonReady bounds summary.nonReadyResources (Fleet lists 10).
const maxNonReady = 10

func modifiedStatus(m status.ModifiedStatus) ModifiedStatus {
	return ModifiedStatus{Kind: m.Kind, APIVersion: m.APIVersion, Namespace: m.Namespace, Name: m.Name,
		Missing: m.Missing, Delete: m.Delete, Patch: m.Patch}
}

// policyViolation is the rule a GitRepo violates ("" for none).
func policyViolation(st status.GitRepo) string { return st.PolicyViolation }

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
