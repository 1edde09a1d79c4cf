package status

import (
	"fmt"
	"strings"
)

// ResourceCounts counts the objects of deployments by readiness, with the
// JSON names of Fleet's status.resourceCounts.
type ResourceCounts struct {
	// Ready objects are applied and ready.
	Ready int `json:"ready"`
	// DesiredReady is every object that should be ready.
	DesiredReady int `json:"desiredReady"`
	// WaitApplied objects belong to a deployment not applied yet.
	WaitApplied int `json:"waitApplied"`
	// Modified objects differ from Git; Orphaned ones are labelled as a
	// release's but no longer in it (from the clusters' watches).
	Modified int `json:"modified"`
	Orphaned int `json:"orphaned"`
	// Missing objects are absent from the cluster.
	Missing int `json:"missing"`
	// Unknown objects have a readiness that could not be told.
	Unknown int `json:"unknown"`
	// NotReady objects exist but are not ready.
	NotReady int `json:"notReady"`
}

// Add adds o to c, field by field.
func (c *ResourceCounts) Add(o ResourceCounts) {
	c.Ready += o.Ready
	c.DesiredReady += o.DesiredReady
	c.WaitApplied += o.WaitApplied
	c.Modified += o.Modified
	c.Orphaned += o.Orphaned
	c.Missing += o.Missing
	c.Unknown += o.Unknown
	c.NotReady += o.NotReady
}

// Applied reports whether the cluster runs the deployment's desired
// deploymentID, so its objects' readiness means something: not when the
// deployment waits (WaitApplied), has not started (Pending), or failed to
// apply a new ID (ErrApplied with AppliedDeploymentID != DeploymentID).
func (d Deployment) Applied() bool {
	switch d.State {
	case WaitApplied, Pending:
		return false
	case ErrApplied:
		return d.AppliedDeploymentID == d.DeploymentID
	}
	return true
}

// ResourceCounts counts the deployment's objects as Fleet does for a
// BundleDeployment: every object is desired ready; while the deployment is
// not Applied they all count as WaitApplied and nothing else, otherwise
// Ready, Missing, NotReady and Unknown come from the readiness checks and
// Modified and Orphaned from the cluster's watch.
func (d Deployment) ResourceCounts() ResourceCounts {
	c := ResourceCounts{DesiredReady: d.Resources}
	if !d.Applied() {
		c.WaitApplied = d.Resources
		return c
	}
	c.Ready = d.ReadyResources
	c.Missing = d.Missing
	c.NotReady = d.NotReadyResources
	c.Unknown = d.Unknown
	c.Modified = d.Modified
	c.Orphaned = d.Orphaned
	return c
}

// SumResourceCounts adds up the resource counts of deps.
func SumResourceCounts(deps []Deployment) ResourceCounts {
	var c ResourceCounts
	for _, d := range deps {
		c.Add(d.ResourceCounts())
	}
	return c
}

// StateCounts counts deployments per state, with the JSON names of Fleet's
// BundleSummary; every field is always present in JSON.
type StateCounts struct {
	Ready       int `json:"ready"`
	NotReady    int `json:"notReady"`
	WaitApplied int `json:"waitApplied"`
	ErrApplied  int `json:"errApplied"`
	OutOfSync   int `json:"outOfSync"`
	Pending     int `json:"pending"`
	Modified    int `json:"modified"`
	// DesiredReady counts every deployment.
	DesiredReady int `json:"desiredReady"`
}

// CountStates counts deps per state.
func CountStates(deps []Deployment) StateCounts {
	var c StateCounts
	for _, d := range deps {
		c.DesiredReady++
		if p := c.field(d.State); p != nil {
			*p++
		}
	}
	return c
}

func (c *StateCounts) field(s State) *int {
	switch s {
	case Ready:
		return &c.Ready
	case NotReady:
		return &c.NotReady
	case WaitApplied:
		return &c.WaitApplied
	case ErrApplied:
		return &c.ErrApplied
	case OutOfSync:
		return &c.OutOfSync
	case Pending:
		return &c.Pending
	case Modified:
		return &c.Modified
	}
	return nil
}

// Get returns the count of state s (0 for an unknown state).
func (c StateCounts) Get(s State) int {
	if p := c.field(s); p != nil {
		return *p
	}
	return 0
}

// String lists the non-zero counts, most severe state first:
// "ErrApplied(1) NotReady(2) Ready(5)"; "" when there are none.
func (c StateCounts) String() string {
	var parts []string
	for _, s := range States {
		if n := c.Get(s); n > 0 {
			parts = append(parts, fmt.Sprintf("%s(%d)", s, n))
		}
	}
	return strings.Join(parts, " ")
}
