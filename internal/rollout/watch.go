package rollout

import (
	"crypto/sha256"
	"encoding/hex"
	"sort"

	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

// ClusterWatch is what a GitRepo runs on one cluster, for its watch.
type ClusterWatch struct {
	Cluster string
	Set     protocol.WatchSet
}

// Hash identifies the set, so a GitRepo tells a cluster only changes.
func (w ClusterWatch) Hash() string {
	h := sha256.New()
	field := func(s string) { h.Write([]byte(s)); h.Write([]byte{0}) }
	field(w.Set.GitRepo)
	for _, r := range w.Set.Releases {
		for _, s := range []string{r.Bundle, r.Release, r.Namespace, r.DeploymentID, r.OptionsKey} {
			field(s)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// MarkRepairs marks, on every matched cluster, the bundles whose release
// runs the deployment ID the bundle wants but drifted there, as the
// cluster's last live report in inv says: Bundle.Repair lists the missing
// and modified objects (orphans are not Helm's to restore). A sync's
// rollout deploys them, and their deploy restores the release instead of
// leaving it as it is.
func MarkRepairs(targets *Targets, inv []InventoryEntry) {
	live := LiveReports(inv)
	for i := range targets.Matched {
		tc := &targets.Matched[i]
		for j := range tc.Bundles {
			b := &tc.Bundles[j]
			l := live[status.Key{Bundle: b.Name, Cluster: tc.Name}]
			if l == nil || l.DeploymentID != b.DeploymentID || l.Missing+l.Modified == 0 {
				continue
			}
			b.Repair = nil
			for _, m := range l.ModifiedStatus {
				if !m.Delete {
					b.Repair = append(b.Repair, m.Object())
				}
			}
			if len(b.Repair) == 0 || l.Incomplete {
				b.Repair = append(b.Repair, "...")
			}
		}
	}
}

// WatchSets returns, per cluster (sorted), the releases of gitRepo the
// cluster runs at the deployment ID it should: the deployments applied at
// their DeploymentID whose inventory entry knows the options. Releases are
// sorted by bundle.
func WatchSets(gitRepo string, inv []InventoryEntry, deps []status.Deployment) []ClusterWatch {
	entries := make(map[status.Key]InventoryEntry, len(inv))
	for _, e := range inv {
		entries[e.Key()] = e
	}
	by := map[string]*ClusterWatch{}
	var clusters []string
	for _, d := range deps {
		e, ok := entries[d.Key()]
		if !ok || d.DeploymentID == "" || d.AppliedDeploymentID != d.DeploymentID || e.DeploymentID != d.DeploymentID ||
			e.OptionsKey == "" || e.Release != d.Release || e.Namespace != d.Namespace {
			continue
		}
		w := by[d.Cluster]
		if w == nil {
			w = &ClusterWatch{Cluster: d.Cluster, Set: protocol.WatchSet{GitRepo: gitRepo}}
			by[d.Cluster] = w
			clusters = append(clusters, d.Cluster)
		}
		w.Set.Releases = append(w.Set.Releases, protocol.WatchedRelease{Bundle: d.Bundle, Release: d.Release,
			Namespace: d.Namespace, DeploymentID: d.DeploymentID, OptionsKey: e.OptionsKey})
	}
	sort.Strings(clusters)
	out := make([]ClusterWatch, 0, len(clusters))
	for _, c := range clusters {
		w := by[c]
		sort.Slice(w.Set.Releases, func(i, j int) bool { return w.Set.Releases[i].Bundle < w.Set.Releases[j].Bundle })
		out = append(out, *w)
	}
	return out
}

// Vouched reports whether u's cluster needs no deploy because its watch
// vouches for it: the cluster ran the deployment ID u wants before the
// rollout, nothing asks for a repair, and the watch's last report at
// that ID (live, from the GitRepo's inventory) saw every object present,
// unmodified and Ready, with no error. It returns d, the deployment's
// record, as a deploy would have reported it. A sync of a thousand
// clusters that all run what Git says then makes no cluster call at all.
func Vouched(u Unit, live *status.LiveReport, d status.Deployment) (status.Deployment, bool) {
	id := u.Bundle.DeploymentID
	switch {
	case id == "" || u.PrevID != id || len(u.Bundle.Repair) > 0,
		live == nil || live.DeploymentID != id || live.Drifted() || live.Error != "",
		live.NotReady+live.Unknown > 0 || live.Ready != live.Resources:
		return status.Deployment{}, false
	}
	d.Bundle, d.Cluster, d.Release, d.Namespace = u.Bundle.Name, u.Cluster, u.Bundle.Release, u.Bundle.Namespace
	d.DeploymentID, d.AppliedDeploymentID, d.State = id, id, status.Ready
	return d.WithLive(*live), true
}

// LiveReports indexes the live reports of inv by deployment key, those
// about the deployment ID each entry runs.
func LiveReports(inv []InventoryEntry) map[status.Key]*status.LiveReport {
	out := make(map[status.Key]*status.LiveReport, len(inv))
	for _, e := range inv {
		if e.Live != nil && e.Live.DeploymentID == e.DeploymentID {
			out[e.Key()] = e.Live
		}
	}
	return out
}
