package rollout

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/flotilla-gitops/flotilla/internal/status"
)

// DeletionGuard caps how much of a GitRepo's releases one plan may
// uninstall without an approval: a plan that would uninstall more than
// Percent % of them, and at least Min, holds those uninstalls
// (status.WaitDeletionGuard) and deploys everything else, until
// `flotilla approve NAME --deletions` lets them go (PlanOptions.Approved)
// or a changed plan no longer trips the guard. The zero value is off.
type DeletionGuard struct {
	On bool `json:"on,omitempty"`
	// Percent is the share of the GitRepo's releases (its inventory) one
	// plan may uninstall.
	Percent float64 `json:"percent,omitempty"`
	// Min is the fewest uninstalls the guard holds: below it a plan may
	// remove any share (a GitRepo of two releases may drop one).
	Min int `json:"min,omitempty"`
}

// Default deletion guard: more than a quarter of the releases, and at
// least five.
const (
	DefaultDeletionGuardPercent = 25
	DefaultDeletionGuardMin     = 5
)

// DefaultDeletionGuard is the controller's default --deletion-guard.
var DefaultDeletionGuard = DeletionGuard{On: true, Percent: DefaultDeletionGuardPercent, Min: DefaultDeletionGuardMin}

// ParseDeletionGuardPercent reads --deletion-guard: "25%", "25" or "off".
func ParseDeletionGuardPercent(s string) (on bool, percent float64, err error) {
	s = strings.TrimSpace(s)
	if s == "off" || s == "none" {
		return false, 0, nil
	}
	p, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64)
	if err != nil || p < 0 || p > 100 || math.IsNaN(p) {
		return false, 0, fmt.Errorf("--deletion-guard %q: want a percentage from 0%% to 100%%, or off", s)
	}
	return true, p, nil
}

// String is the guard as --deletion-guard and the status name it.
func (g DeletionGuard) String() string {
	if !g.On {
		return "off"
	}
	return strconv.FormatFloat(g.Percent, 'f', -1, 64) + "%"
}

// Trips reports whether uninstalling n of total releases needs approval.
func (g DeletionGuard) Trips(n, total int) bool {
	return g.On && n >= max(g.Min, 1) && float64(n)*100 > g.Percent*float64(total)
}

// Why an uninstall is planned, as the deletion guard names it.
const (
	causeBundleRemoved  = "bundle removed"
	causeUntargeted     = "cluster untargeted"
	causeReleaseRenamed = "release or namespace changed"
)

// cleanup is an uninstall the plan would make and why.
type cleanup struct {
	entry InventoryEntry
	cause string
}

// guard holds the plan's uninstalls when they are more than the deletion
// guard lets one plan remove, except those approved, and returns those
// that go ahead. Uninstalls that keep the resources (keepResources) are
// never held: they remove nothing from the cluster.
func (pl *planner) guard(cleanups []cleanup, total int) []InventoryEntry {
	var out []InventoryEntry
	var pending []cleanup
	for _, c := range cleanups {
		if c.entry.KeepResources || pl.opts.Approved[c.entry.Ref()] {
			out = append(out, c.entry)
		} else {
			pending = append(pending, c)
		}
	}
	g := pl.opts.Guard
	if !g.Trips(len(pending), total) {
		for _, c := range pending {
			out = append(out, c.entry)
		}
		return out
	}
	var clusters, causes []string
	for _, c := range pending {
		pl.p.Guarded = append(pl.p.Guarded, c.entry)
		clusters = append(clusters, c.entry.Cluster)
		causes = append(causes, c.cause)
	}
	slices.Sort(clusters)
	slices.Sort(causes)
	list, more := status.LimitClusters(slices.Compact(clusters))
	approve := "flotilla approve --deletions"
	if pl.opts.Name != "" {
		approve = "flotilla approve " + pl.opts.Name + " --deletions"
	}
	pl.p.Holds = append(pl.p.Holds, status.Wait{Kind: status.WaitDeletionGuard, Clusters: list, More: more,
		Message: fmt.Sprintf("deletion guard: %d of %d release(s) would be uninstalled (more than %s) on %s (%s); held until `%s`",
			len(pending), total, g, status.JoinClusters(list, more), strings.Join(slices.Compact(causes), ", "), approve)})
	return out
}

// causeOf says why entry e, no longer desired as it is, would be
// uninstalled.
func (pl *planner) causeOf(e InventoryEntry) string {
	switch {
	case pl.opts.Bundles != nil && !slices.Contains(pl.opts.Bundles, e.Bundle):
		return causeBundleRemoved
	case pl.desiredKey(e):
		return causeReleaseRenamed
	default:
		return causeUntargeted
	}
}

// desiredKey reports whether e's bundle is still wanted on e's cluster.
func (pl *planner) desiredKey(e InventoryEntry) bool {
	_, ok := pl.desired[e.Key()]
	return ok
}
