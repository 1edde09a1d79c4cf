package rollout

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/flotilla-gitops/flotilla/internal/outcome"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

// Plan is the pure decision of a rollout: what to deploy and clean where.
type Plan struct {
	Work []ClusterWork
	// Inventory is the inventory once every step succeeds... minus the
	// cleanups, which are removed as they succeed.
	Inventory []InventoryEntry
	// Dropped are entries on clusters that are not registered now; they
	// stay in the inventory (the cluster may come back) and nothing is done
	// there.
	Dropped []InventoryEntry
	// Deployments is the initial status of every desired deployment.
	Deployments []status.Deployment
	// Held are releases the plan would uninstall but keeps because a
	// target names something missing (status.WaitDeletionHeld); Guarded
	// those it keeps because the deletion guard tripped
	// (status.WaitDeletionGuard). Holds say why.
	Held    []InventoryEntry
	Guarded []InventoryEntry
	Holds   []status.Wait
}

// PlanOptions are the choices MakePlan makes beyond targets and
// inventory.
type PlanOptions struct {
	// KeepAll forces keepResources on cleanups (a GitRepo deleted with
	// keepResources set after the releases were made).
	KeepAll bool
	// Guard is the deletion guard (off when deleting the GitRepo: that
	// is explicit).
	Guard DeletionGuard
	// Approved are uninstalls `flotilla approve --deletions` let go.
	Approved map[ReleaseRef]bool
	// Bundles are the names of the commit's bundles, so the guard can
	// tell a bundle removed from one untargeted; nil: not known.
	Bundles []string
	// Name is the GitRepo's, for the approve command the guard names.
	Name string
}

// planner carries MakePlan's intermediate state.
type planner struct {
	registered, paused, agent map[string]bool
	// missing is what the targets name that does not exist: nothing is
	// uninstalled meanwhile.
	missing []string
	work    map[string]*ClusterWork
	desired map[status.Key]InventoryEntry
	// held are bundles that failed to compute for a cluster (a template
	// error): the cluster keeps whatever it runs, an error never
	// uninstalls.
	held map[status.Key]bool
	opts PlanOptions
	p    Plan
}

// MakePlan decides a rollout. Each matched cluster lists the bundles it
// gets, with its own options.
func MakePlan(targets Targets, inv []InventoryEntry, opts PlanOptions) Plan {
	pl := &planner{registered: set(targets.Registered), paused: map[string]bool{}, agent: set(targets.Agents),
		work: map[string]*ClusterWork{}, desired: map[status.Key]InventoryEntry{}, held: map[status.Key]bool{},
		missing: targets.Missing, opts: opts}
	for _, d := range targets.Errors {
		pl.held[d.Key()] = true
		pl.p.Deployments = append(pl.p.Deployments, d)
	}
	for _, tc := range targets.Matched {
		pl.addMatched(tc)
	}
	kept := pl.keep(inv)
	pl.finish(kept)
	pl.holds()
	return pl.p
}

// holds says why the held uninstalls are held, and where.
func (pl *planner) holds() {
	if len(pl.p.Held) == 0 {
		return
	}
	var clusters []string
	for _, e := range pl.p.Held {
		clusters = append(clusters, e.Cluster)
	}
	slices.Sort(clusters)
	clusters = slices.Compact(clusters)
	list, more := status.LimitClusters(clusters)
	pl.p.Holds = append(pl.p.Holds, status.Wait{Kind: status.WaitDeletionHeld, Clusters: list,
		Message: fmt.Sprintf("%d uninstall(s) held on %s: %s; nothing is removed until it exists or no target names it",
			len(pl.p.Held), status.JoinClusters(list, more), strings.Join(pl.missing, ", "))})
}

func set(names []string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

func (pl *planner) get(c string) *ClusterWork {
	if w, ok := pl.work[c]; ok {
		return w
	}
	w := &ClusterWork{Cluster: c, Paused: pl.paused[c], Agent: pl.agent[c]}
	pl.work[c] = w
	return w
}

// addMatched wants every bundle of a matched cluster there.
func (pl *planner) addMatched(tc TargetCluster) {
	pl.paused[tc.Name] = tc.Paused
	w := pl.get(tc.Name)
	for _, b := range tc.Bundles {
		e := InventoryEntry{Bundle: b.Name, Cluster: tc.Name, Release: b.Release, Namespace: b.Namespace,
			KeepResources: b.KeepResources, DeleteNamespace: b.DeleteNamespace, OptionsKey: b.OptionsHash}
		pl.desired[e.Key()] = e
		d := status.Deployment{Bundle: b.Name, Cluster: tc.Name, Release: b.Release, Namespace: b.Namespace,
			DeploymentID: b.DeploymentID, State: status.Pending, Resources: b.Resources}
		if tc.Paused {
			d.State, d.Message = status.OutOfSync, "cluster "+tc.Name+" is paused"
		} else {
			w.Deploy = append(w.Deploy, b)
		}
		pl.p.Deployments = append(pl.p.Deployments, d)
	}
}

// keep decides the fate of each inventory entry: kept as is, kept and
// cleaned up (unless held), or replaced by a bundle that now deploys its
// release.
func (pl *planner) keep(inv []InventoryEntry) map[ReleaseRef]InventoryEntry {
	// Releases the rollout deploys: an old entry for the same release (a
	// bundle renamed, releaseName kept) is replaced, never uninstalled
	// after the new bundle deployed it.
	type placed struct{ cluster, namespace, release string }
	deploying := map[placed]bool{}
	//workflowcheck:ignore deterministic: result does not depend on map order
	for _, e := range pl.desired {
		deploying[placed{e.Cluster, e.Namespace, e.Release}] = true
	}
	kept := map[ReleaseRef]InventoryEntry{}
	var cleanups []cleanup
	for _, e := range inv {
		want, ok := pl.desired[e.Key()]
		moved := !ok || want.Release != e.Release || want.Namespace != e.Namespace
		switch {
		case !pl.registered[e.Cluster]:
			// Not listed now (removed, or between two runs of its
			// workflow): keep the entry, do nothing there.
			pl.p.Dropped = append(pl.p.Dropped, e)
		case pl.paused[e.Cluster] || pl.held[e.Key()]:
			// A paused cluster keeps what it runs, and so does a bundle
			// that could not be computed for the cluster.
		case moved && deploying[placed{e.Cluster, e.Namespace, e.Release}]:
			continue // replaced by the bundle that now deploys this release
		case moved && len(pl.missing) > 0:
			// Absence is never a reason to remove: a target names a
			// group or cluster that is not found (a typo, a group not
			// created yet or missing from a listing).
			pl.p.Held = append(pl.p.Held, e)
		case moved:
			if pl.opts.KeepAll {
				e.KeepResources = true
			}
			cleanups = append(cleanups, cleanup{entry: e, cause: pl.causeOf(e)})
		}
		kept[e.Ref()] = e
	}
	for _, e := range pl.guard(cleanups, len(inv)) {
		pl.get(e.Cluster).Cleanup = append(pl.get(e.Cluster).Cleanup, e)
	}
	return kept
}

// finish builds the plan's inventory (kept entries, then desired ones
// carrying what the kept entry knew) and its work, in a stable order.
func (pl *planner) finish(kept map[ReleaseRef]InventoryEntry) {
	at := make(map[status.Key]int, len(pl.p.Deployments))
	for i, d := range pl.p.Deployments {
		at[d.Key()] = i
	}
	//workflowcheck:ignore deterministic: result does not depend on map order
	for _, e := range pl.desired {
		if old, ok := kept[e.Ref()]; ok {
			e.DeploymentID, e.Failure, e.State, e.Live = old.DeploymentID, old.Failure, old.State, old.Live
			pl.known(at, e)
			pl.failed(at, e)
		}
		kept[e.Ref()] = e
	}
	//workflowcheck:ignore deterministic: result does not depend on map order
	for _, e := range kept {
		pl.p.Inventory = append(pl.p.Inventory, e)
	}
	SortInventory(pl.p.Inventory)
	//workflowcheck:ignore deterministic: result does not depend on map order
	for _, w := range pl.work {
		if len(w.Deploy) > 0 || len(w.Cleanup) > 0 || w.Paused {
			SortInventory(w.Cleanup)
			pl.p.Work = append(pl.p.Work, *w)
		}
	}
	sort.Slice(pl.p.Work, func(i, j int) bool { return pl.p.Work[i].Cluster < pl.p.Work[j].Cluster })
	status.Sort(pl.p.Deployments)
}

// known shows a deployment the cluster already runs at its ID in its last
// known state (not Pending) until the rollout confirms it.
func (pl *planner) known(at map[status.Key]int, e InventoryEntry) {
	i, ok := at[e.Key()]
	if !ok || e.State == "" {
		return
	}
	d := &pl.p.Deployments[i]
	if d.State == status.Pending && e.DeploymentID == d.DeploymentID {
		d.State, d.AppliedDeploymentID = e.State, e.DeploymentID
	}
}

// failed shows a deployment whose last attempts at its deployment ID
// failed as that failure until the rollout knows more: a retry does not
// make it look Pending or WaitApplied meanwhile.
func (pl *planner) failed(at map[status.Key]int, e InventoryEntry) {
	i, ok := at[e.Key()]
	f := e.Failure
	if !ok || f == nil {
		return
	}
	d := &pl.p.Deployments[i]
	if d.State == status.Pending && f.DeploymentID == d.DeploymentID && f.Class.Policy().Retry == outcome.RetryAfterBackoff {
		d.State, d.Message, d.Outcome, d.Attempts = f.State, f.Message, f.Class, f.Attempts
		d.AppliedDeploymentID = e.DeploymentID
	}
}

// SortInventory orders entries by bundle, cluster, namespace and release.
func SortInventory(inv []InventoryEntry) {
	slices.SortFunc(inv, func(a, b InventoryEntry) int {
		return cmp.Or(cmp.Compare(a.Bundle, b.Bundle), cmp.Compare(a.Cluster, b.Cluster),
			cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Release, b.Release))
	})
}

// ClustersOf lists the clusters of deployments, sorted and unique.
func ClustersOf(deps []status.Deployment) []string {
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

// MergeInventory returns inv with the entries of more whose release it
// does not record, sorted: what a rollout planned joins what is known to
// exist when the rollout ended without telling what it did, so a later
// plan still removes every release that may exist. Entries of inv win.
func MergeInventory(inv, more []InventoryEntry) []InventoryEntry {
	if len(more) == 0 {
		return inv
	}
	out := slices.Clone(inv)
	known := make(map[ReleaseRef]bool, len(inv))
	for _, e := range inv {
		known[e.Ref()] = true
	}
	for _, e := range more {
		if !known[e.Ref()] {
			known[e.Ref()] = true
			out = append(out, e)
		}
	}
	SortInventory(out)
	return out
}
