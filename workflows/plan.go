package workflows

import (
	"sort"

	"github.com/flotilla-gitops/flotilla/activities"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

// InventoryEntry records a release Flotilla may have put on a cluster. A
// rollout adds its desired entries before deploying, so the inventory is
// always a superset of what exists and cleanup never misses a release.
type InventoryEntry struct {
	Bundle          string `json:"bundle"`
	Cluster         string `json:"cluster"`
	Release         string `json:"release"`
	Namespace       string `json:"namespace"`
	DeploymentID    string `json:"deploymentID,omitempty"`
	KeepResources   bool   `json:"keepResources,omitempty"`
	DeleteNamespace bool   `json:"deleteNamespace,omitempty"`
}

func (e InventoryEntry) key() string { return e.Bundle + "@" + e.Cluster }

func (e InventoryEntry) release() activities.Release {
	return activities.Release{Bundle: e.Bundle, Release: e.Release, Namespace: e.Namespace,
		KeepResources: e.KeepResources, DeleteNamespace: e.DeleteNamespace}
}

// plan is the pure decision of a rollout: what to deploy and clean where.
type plan struct {
	Work []clusterWork
	// Inventory is the inventory once every step succeeds... minus the
	// cleanups, which are removed as they succeed.
	Inventory []InventoryEntry
	// Dropped are entries on clusters that are not registered now; they
	// stay in the inventory (the cluster may come back) and nothing is done
	// there.
	Dropped []InventoryEntry
	// Deployments is the initial status of every desired deployment.
	Deployments []status.Deployment
}

// makePlan decides a rollout. keepAll forces keepResources on cleanups (a
// GitRepo deleted with keepResources set after the releases were made).
// Each matched cluster lists the bundles it gets, with its own options.
func makePlan(targets activities.TargetsResult, inv []InventoryEntry, keepAll bool) plan {
	registered := map[string]bool{}
	for _, c := range targets.Registered {
		registered[c] = true
	}
	paused := map[string]bool{}
	agent := map[string]bool{}
	for _, c := range targets.Agents {
		agent[c] = true
	}
	work := map[string]*clusterWork{}
	get := func(c string) *clusterWork {
		if w, ok := work[c]; ok {
			return w
		}
		w := &clusterWork{Cluster: c, Paused: paused[c], Agent: agent[c]}
		work[c] = w
		return w
	}
	desired := map[string]InventoryEntry{}
	var p plan
	// A bundle that failed to compute for a cluster (a template error)
	// keeps whatever that cluster runs: an error never uninstalls.
	held := map[string]bool{}
	for _, d := range targets.Errors {
		held[d.Key()] = true
		p.Deployments = append(p.Deployments, d)
	}
	for _, tc := range targets.Matched {
		paused[tc.Name] = tc.Paused
		w := get(tc.Name)
		for _, b := range tc.Bundles {
			e := InventoryEntry{Bundle: b.Name, Cluster: tc.Name, Release: b.Release, Namespace: b.Namespace,
				KeepResources: b.KeepResources, DeleteNamespace: b.DeleteNamespace}
			desired[e.key()] = e
			d := status.Deployment{Bundle: b.Name, Cluster: tc.Name, Release: b.Release, Namespace: b.Namespace,
				DeploymentID: b.DeploymentID, State: status.Pending, Resources: b.Resources}
			if tc.Paused {
				d.State, d.Message = status.OutOfSync, "cluster "+tc.Name+" is paused"
			} else {
				w.Deploy = append(w.Deploy, b)
			}
			p.Deployments = append(p.Deployments, d)
		}
	}
	// Releases the rollout deploys, by cluster/namespace/release: an old
	// entry for the same release (a bundle renamed, releaseName kept) is
	// replaced, never uninstalled after the new bundle deployed it.
	deploying := map[string]bool{}
	//workflowcheck:ignore deterministic: result does not depend on map order
	for _, e := range desired {
		deploying[e.Cluster+"/"+e.Namespace+"/"+e.Release] = true
	}
	kept := map[string]InventoryEntry{}
	for _, e := range inv {
		want, ok := desired[e.key()]
		moved := !ok || want.Release != e.Release || want.Namespace != e.Namespace
		switch {
		case !registered[e.Cluster]:
			// Not listed now (removed, or between two runs of its
			// workflow): keep the entry, do nothing there.
			p.Dropped = append(p.Dropped, e)
		case paused[e.Cluster] || held[e.key()]:
			// A paused cluster keeps what it runs, and so does a bundle
			// that could not be computed for the cluster.
		case moved && deploying[e.Cluster+"/"+e.Namespace+"/"+e.Release]:
			continue // replaced by the bundle that now deploys this release
		case moved:
			if keepAll {
				e.KeepResources = true
			}
			get(e.Cluster).Cleanup = append(get(e.Cluster).Cleanup, e)
		}
		kept[inventoryKey(e.key(), e.Namespace, e.Release)] = e
	}
	//workflowcheck:ignore deterministic: result does not depend on map order
	for _, e := range desired {
		k := inventoryKey(e.key(), e.Namespace, e.Release)
		if old, ok := kept[k]; ok {
			e.DeploymentID = old.DeploymentID
		}
		kept[k] = e
	}
	//workflowcheck:ignore deterministic: result does not depend on map order
	for _, e := range kept {
		p.Inventory = append(p.Inventory, e)
	}
	sortInventory(p.Inventory)
	//workflowcheck:ignore deterministic: result does not depend on map order
	for _, w := range work {
		if len(w.Deploy) > 0 || len(w.Cleanup) > 0 || w.Paused {
			sortInventory(w.Cleanup)
			p.Work = append(p.Work, *w)
		}
	}
	sort.Slice(p.Work, func(i, j int) bool { return p.Work[i].Cluster < p.Work[j].Cluster })
	status.Sort(p.Deployments)
	return p
}

func sortInventory(inv []InventoryEntry) {
	sort.Slice(inv, func(i, j int) bool {
		a, b := inv[i], inv[j]
		if a.Bundle != b.Bundle {
			return a.Bundle < b.Bundle
		}
		if a.Cluster != b.Cluster {
			return a.Cluster < b.Cluster
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Release < b.Release
	})
}

// clustersOf lists the clusters of deployments, sorted and unique.
func clustersOf(deps []status.Deployment) []string {
	seen := map[string]bool{}
	var out []string
	for _, d := range deps {
		if !seen[d.Cluster] {
			seen[d.Cluster] = true
			out = append(out, d.Cluster)
		}
	}
	sort.Strings(out)
	return out
}

// sortedKeys returns m's keys, sorted.
func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	//workflowcheck:ignore deterministic: sorted below
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// maxClusterAttrBytes bounds the encoded FlotillaCluster search attribute:
// Temporal refuses keyword lists over 2 KiB.
const maxClusterAttrBytes = 1900

// fitsClusterAttr reports whether names fit in the FlotillaCluster search
// attribute (as a JSON list).
func fitsClusterAttr(names []string) bool {
	n := 2
	for _, c := range names {
		n += len(c) + 3
	}
	return n <= maxClusterAttrBytes
}
