package fleetstatus

import (
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

// Display states of clusters besides the deployment states.
const (
	clusterOffline     = "Offline"
	clusterWaitCheckIn = "WaitCheckIn"
	clusterNoBundles   = "NoBundles"
)

// ClusterInput is what ProjectCluster projects.
type ClusterInput struct {
	Record protocol.ClusterRecord
	// GitRepos are the statuses of the GitRepos and HelmOps the Writer
	// follows; their deployments on the cluster make its summary.
	GitRepos []status.GitRepo
	// Generation is the management object's metadata.generation.
	Generation int64
	// Overrides are the management controller's conditions
	// (Writer.SetCondition), e.g. Accepted=False for a refused Cluster.
	Overrides []Condition
}

// ProjectCluster returns Fleet's status of a Cluster: its bundle
// deployments (from the followed GitRepos), ready and desired GitRepos,
// contact (agent.lastSeen, to the minute, so heartbeats do not make a
// write each) and a Ready condition. It is pure.
func ProjectCluster(in ClusterInput) ClusterStatus {
	var deps []status.Deployment
	out := ClusterStatus{ObservedGeneration: in.Generation}
	for _, g := range in.GitRepos {
		mine := onCluster(g.Deployments, in.Record.Name)
		if len(mine) == 0 {
			continue
		}
		out.DesiredReadyGitRepos++
		if status.Summarize(mine).State == status.Ready {
			out.ReadyGitRepos++
		}
		deps = append(deps, mine...)
	}
	sum := status.Summarize(deps)
	out.Summary = bundleSummary(deps, nil)
	out.ResourceCounts = status.SumResourceCounts(deps)
	out.Display = ClusterDisplay{ReadyBundles: fmt.Sprintf("%d/%d", sum.Ready, sum.Desired), State: string(sum.State)}
	if len(deps) == 0 {
		out.Display.State = clusterNoBundles
	}
	ready := Condition{Type: status.ConditionReady, Status: status.ConditionTrue}
	if sum.State != status.Ready {
		ready = Condition{Type: status.ConditionReady, Status: status.ConditionFalse, Reason: string(sum.State), Message: sum.Message}
	}
	rec := in.Record
	if a := rec.Agent; a != nil && a.LastSeen != nil {
		out.Agent.LastSeen = formatTime(a.LastSeen.Truncate(time.Minute))
	}
	if rec.PullMode() && (rec.Agent == nil || rec.Agent.LastSeen == nil) {
		out.Display.State = clusterWaitCheckIn
		ready = Condition{Type: status.ConditionReady, Status: status.ConditionFalse, Reason: clusterWaitCheckIn,
			Message: "the cluster's agent has not checked in"}
	}
	if off, last, why := rec.OutOfContact(); off {
		out.Display.State = clusterOffline
		if !last.IsZero() && out.Agent.LastSeen == "" {
			out.Agent.LastSeen = formatTime(last.Truncate(time.Minute))
		}
		ready = Condition{Type: status.ConditionReady, Status: status.ConditionFalse, Reason: clusterOffline,
			Message: "cluster " + rec.Name + " is out of contact: " + why}
	}
	ready.ObservedGeneration = in.Generation
	out.Conditions = withOverrides([]Condition{ready}, in.Overrides, in.Generation)
	return out
}

// withOverrides adds the management controller's conditions to conds,
// whose first is Ready: each replaces the condition of its type or comes
// after them, and an Accepted=False one makes Ready False for its reason
// (a refused object is not ready, whatever Flotilla holds of its name).
func withOverrides(conds, overrides []Condition, generation int64) []Condition {
	out := slices.Clone(conds)
	for _, o := range overrides {
		o.ObservedGeneration = generation
		if i := slices.IndexFunc(out, func(c Condition) bool { return c.Type == o.Type }); i >= 0 {
			out[i] = o
		} else {
			out = append(out, o)
		}
		if o.Type == status.ConditionAccepted && o.Status == status.ConditionFalse {
			out[0] = Condition{Type: status.ConditionReady, Status: status.ConditionFalse, Reason: o.Reason, Message: o.Message,
				ObservedGeneration: generation}
		}
	}
	return out
}

func onCluster(deps []status.Deployment, cluster string) []status.Deployment {
	var out []status.Deployment
	for _, d := range deps {
		if d.Cluster == cluster {
			out = append(out, d)
		}
	}
	return out
}

// GroupInput is what ProjectGroup projects.
type GroupInput struct {
	Selector *metav1.LabelSelector
	// Clusters are every registered cluster; those the selector matches
	// are the group's.
	Clusters []protocol.ClusterRecord
	GitRepos []status.GitRepo
	// Generation is the management object's metadata.generation.
	Generation int64
	// Overrides are the management controller's conditions, as a
	// Cluster's.
	Overrides []Condition
}

// ProjectGroup returns Fleet's status of a ClusterGroup, computed from
// the clusters its selector matches (none for a missing or invalid
// selector, as in Fleet). It is pure.
func ProjectGroup(in GroupInput) ClusterGroupStatus {
	out := ClusterGroupStatus{ObservedGeneration: in.Generation}
	sel, err := selector(in.Selector)
	var deps []status.Deployment
	for _, c := range in.Clusters {
		if err != nil || !sel.Matches(labels.Set(c.Labels)) {
			continue
		}
		out.ClusterCount++
		cs := ProjectCluster(ClusterInput{Record: c, GitRepos: in.GitRepos})
		if cs.Conditions[0].Status != status.ConditionTrue && cs.Display.State != clusterNoBundles {
			out.NonReadyClusterCount++
			if len(out.NonReadyClusters) < status.MaxMessages {
				out.NonReadyClusters = append(out.NonReadyClusters, c.Name)
			}
		}
		for _, g := range in.GitRepos {
			deps = append(deps, onCluster(g.Deployments, c.Name)...)
		}
	}
	sum := status.Summarize(deps)
	out.Summary = bundleSummary(deps, nil)
	out.ResourceCounts = status.SumResourceCounts(deps)
	out.Display = ClusterGroupDisplay{
		ReadyClusters: fmt.Sprintf("%d/%d", out.ClusterCount-out.NonReadyClusterCount, out.ClusterCount),
		ReadyBundles:  fmt.Sprintf("%d/%d", sum.Ready, sum.Desired),
		State:         string(sum.State),
	}
	ready := Condition{Type: status.ConditionReady, Status: status.ConditionTrue, ObservedGeneration: in.Generation}
	switch {
	case err != nil:
		ready.Status, ready.Reason, ready.Message = status.ConditionFalse, "InvalidSelector", "spec.selector: "+err.Error()
	case out.NonReadyClusterCount > 0:
		ready.Status, ready.Reason = status.ConditionFalse, "NotReady"
		ready.Message = fmt.Sprintf("%d clusters not ready: %s", out.NonReadyClusterCount,
			status.JoinClusters(out.NonReadyClusters, out.NonReadyClusterCount-len(out.NonReadyClusters)))
	}
	out.Conditions = withOverrides([]Condition{ready}, in.Overrides, in.Generation)
	return out
}

// selector is the group's selector; a nil one matches nothing.
func selector(s *metav1.LabelSelector) (labels.Selector, error) {
	if s == nil {
		return labels.Nothing(), nil
	}
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		return nil, fmt.Errorf("invalid selector: %w", err)
	}
	return sel, nil
}
