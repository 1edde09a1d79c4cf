package workflows

import (
	"slices"
	"strconv"

	"go.temporal.io/sdk/workflow"

	"github.com/flotilla-gitops/flotilla/activities"
	"github.com/flotilla-gitops/flotilla/internal/history"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/rollout"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

// versionDriftWatch: a GitRepo tells each cluster which of its releases
// run there after every rollout, and clusters watch them (issue 15).
const versionDriftWatch = "drift-watch"

// live takes what a cluster's watch saw: each report about the deployment
// ID a release runs is kept in its inventory entry and shown in status.
func (g *gitRepo) live(ctx workflow.Context, batch status.LiveSignal) {
	changed, ready := false, false
	g.drift = &driftBatch{}
	for _, sig := range batch.Each() {
		if sig.Contact != nil {
			c := *sig.Contact
			c.Cluster = sig.Cluster
			var ch bool
			g.s.OutOfContact, ch = status.SetContact(g.s.OutOfContact, c)
			changed = changed || ch
		}
		c, r := g.liveCluster(sig)
		changed, ready = changed || c, ready || r
	}
	if ready && g.longLived && g.running == "" && status.WaitsOnReadiness(g.s.Waits) {
		// The last rollout stopped where clusters had to become Ready
		// first (maxUnavailable, partitions, dependsOn): one did, so the
		// rollout goes on. A rollout that runs waits for them itself.
		g.s.RetryDue = true
		g.due(history.Trigger{Kind: history.TriggerRetry})
	}
	if changed {
		g.upsert(ctx)
	}
	g.driftObserved(ctx, g.drift)
	g.drift = nil
}

// liveCluster takes one cluster's reports and says whether a deployment
// changed, and whether one became Ready.
func (g *gitRepo) liveCluster(sig status.LiveSignal) (changed, ready bool) {
	for _, r := range sig.Reports {
		key := status.Key{Bundle: r.Bundle, Cluster: sig.Cluster}
		i := slices.IndexFunc(g.s.Inventory, func(e InventoryEntry) bool {
			return e.Key() == key && e.Release == r.Release && e.Namespace == r.Namespace
		})
		if i < 0 || g.s.Inventory[i].DeploymentID != r.DeploymentID {
			continue // about a release the GitRepo no longer runs so
		}
		if g.longLived {
			g.s.LiveSeq++
			r.Seq = g.s.LiveSeq
		}
		if g.drift != nil {
			g.drift.observe(sig.Cluster, g.s.Inventory[i].Live, r)
		}
		g.s.Inventory[i].Live = &r
		for j, d := range g.s.Deployments {
			if d.Key() == key {
				g.s.Deployments[j] = d.WithLive(r)
				changed = true
				ready = ready || (d.State != status.Ready && g.s.Deployments[j].State == status.Ready)
			}
		}
	}
	return changed, ready
}

// keepLive keeps, after a rollout, the newest live report of every
// release (those the GitRepo took while the rollout ran, from prev) and
// shows them on the rollout's deployments. After a sync's rollout, which
// restored drifted releases (rollout.MarkRepairs), a drift report taken
// before it started (Seq at most since) is what it repaired where it
// applied the release: it is dropped there, so `flotilla sync --wait` does
// not end on the drift it just corrected; the watch reports anew. since <
// 0 keeps every report.
func (g *gitRepo) keepLive(prev []InventoryEntry, since int64) {
	observed := map[status.Key]bool{}
	if since >= 0 {
		for _, d := range g.s.Deployments {
			if d.DeploymentID != "" && d.AppliedDeploymentID == d.DeploymentID && (d.State == status.Ready || d.State == status.NotReady) {
				observed[d.Key()] = true
			}
		}
	}
	newest := map[rollout.ReleaseRef]*status.LiveReport{}
	for _, e := range prev {
		if e.Live != nil {
			newest[e.Ref()] = e.Live
		}
	}
	at := map[status.Key]*status.LiveReport{}
	for i, e := range g.s.Inventory {
		if l, ok := newest[e.Ref()]; ok {
			g.s.Inventory[i].Live = l
		}
		if l := g.s.Inventory[i].Live; l != nil && observed[e.Key()] && l.Seq <= since && l.Missing+l.Modified > 0 {
			g.s.Inventory[i].Live = nil // the drift the sync repaired
		}
		if l := g.s.Inventory[i].Live; l != nil && l.DeploymentID == e.DeploymentID {
			at[e.Key()] = l
		}
	}
	for j, d := range g.s.Deployments {
		if l, ok := at[d.Key()]; ok {
			g.s.Deployments[j] = d.WithLive(*l)
		}
	}
}

// sendWatch tells every cluster whose share of the GitRepo changed which
// releases the GitRepo runs there now (none, for a cluster it left), so
// the cluster's watch follows them.
func (g *gitRepo) sendWatch(ctx workflow.Context) {
	if workflow.GetVersion(ctx, versionDriftWatch, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return
	}
	sets := rollout.WatchSets(g.ref.String(), g.s.Inventory, g.s.Deployments)
	if g.s.Watched == nil {
		g.s.Watched = map[string]string{}
	}
	var send []activities.ClusterWatchSet
	hashes := map[string]string{}
	seen := map[string]bool{}
	for _, w := range sets {
		seen[w.Cluster] = true
		if h := w.Hash(); g.s.Watched[w.Cluster] != h {
			send = append(send, activities.ClusterWatchSet{Cluster: w.Cluster, Set: w.Set})
			hashes[w.Cluster] = h
		}
	}
	var gone []string
	//workflowcheck:ignore deterministic: sorted below
	for c := range g.s.Watched {
		if !seen[c] {
			gone = append(gone, c)
		}
	}
	slices.Sort(gone)
	for _, c := range gone {
		delete(g.s.Watched, c)
		send = append(send, activities.ClusterWatchSet{Cluster: c, Set: protocol.WatchSet{GitRepo: g.ref.String()}})
	}
	if len(send) == 0 {
		return
	}
	// A cluster removed meanwhile has no watch to tell; one that did not
	// get its set is told again after the next rollout.
	if workflow.GetVersion(ctx, versionWatchSetsActivity, workflow.DefaultVersion, 1) == 1 {
		// One activity signals them all: a thousand clusters add three
		// events to the history, not two thousand.
		var a *activities.Activities
		var res activities.WatchSetsResult
		opts := withSummary(watchSetsOptions, "tell "+strconv.Itoa(len(send))+" cluster(s) what to watch")
		if workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), a.SendWatchSets,
			activities.WatchSetsInput{Sets: send}).Get(ctx, &res) != nil {
			return
		}
		for _, c := range res.Told {
			if h := hashes[c]; h != "" {
				g.s.Watched[c] = h
			}
		}
		return
	}
	fs := make([]workflow.Future, len(send))
	for i, s := range send {
		fs[i] = workflow.SignalExternalWorkflow(ctx, protocol.ClusterID(s.Cluster), "", protocol.SignalWatch, s.Set)
	}
	for i, s := range send {
		if fs[i].Get(ctx, nil) == nil && hashes[s.Cluster] != "" {
			g.s.Watched[s.Cluster] = hashes[s.Cluster]
		}
	}
}
