package workflows

import "github.com/flotilla-gitops/flotilla/internal/rollout"

// The rollout's inventory and cluster work are the pure core's types
// (internal/rollout); workflow inputs and results carry them as they are.
type (
	InventoryEntry = rollout.InventoryEntry
	clusterWork    = rollout.ClusterWork
)
