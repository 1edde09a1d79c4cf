package workflows

import (
	"fmt"
	"slices"

	"github.com/flotilla-gitops/flotilla/activities"
)

// planBase answers protocol.QueryPlanBase: the spec, commit and inventory
// a plan compares a change with. A running rollout's planned releases
// join the inventory, as they would if it ended without a result.
func (g *gitRepo) planBase() (activities.PlanBase, error) {
	if g.s.GitRepo == nil || g.s.Deleting {
		return activities.PlanBase{}, fmt.Errorf("%s is not applied", g.ref.Title())
	}
	inv := slices.Clone(g.s.Inventory)
	for _, e := range g.s.Inflight {
		if !slices.ContainsFunc(inv, func(o InventoryEntry) bool { return o.Ref() == e.Ref() }) {
			inv = append(inv, e)
		}
	}
	return activities.PlanBase{Spec: g.spec(), Commit: g.s.Commit, LatestCommit: g.s.LatestCommit,
		Paused: g.s.Paused, Inventory: inv}, nil
}
