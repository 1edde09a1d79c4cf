package fleetstatus

import (
	"sort"
	"strings"

	"github.com/flotilla-gitops/flotilla/internal/status"
)

// Bounds of status.resources: Fleet had to cap per-cluster state
// (fleet#4160). Bound cuts further when the whole status is too large.
const (
	// maxResources bounds the objects listed.
	maxResources = 500
	// maxClustersPerState bounds each of a resource's per-cluster lists;
	// a list cut short sets incompleteState.
	maxClustersPerState = 100
)

// resources lists the objects Flotilla knows individually — those the
// clusters' watches report missing, modified or orphaned — with the
// clusters per state, sorted by type and ID. Flotilla does not keep each
// release's list of objects in its status, so Ready objects are counted
// (resourceCounts) but not listed.
func resources(deps []status.Deployment) []Resource {
	byID := map[string]*Resource{}
	for _, d := range deps {
		for _, m := range d.ModifiedStatus {
			r := resourceOf(byID, m)
			if d.Incomplete {
				r.IncompleteState = true
			}
			switch {
			case m.Missing:
				r.PerClusterState.Missing = appendCluster(r, r.PerClusterState.Missing, d.Cluster)
			case m.Delete:
				r.PerClusterState.Orphaned = appendCluster(r, r.PerClusterState.Orphaned, d.Cluster)
			default:
				r.PerClusterState.Modified = appendCluster(r, r.PerClusterState.Modified, d.Cluster)
			}
		}
	}
	out := make([]Resource, 0, len(byID))
	for _, r := range byID {
		r.State = resourceState(r.PerClusterState)
		for _, l := range []*[]string{&r.PerClusterState.Missing, &r.PerClusterState.Modified, &r.PerClusterState.Orphaned} {
			sort.Strings(*l)
		}
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Type != out[j].Type {
			return out[i].Type < out[j].Type
		}
		return out[i].ID < out[j].ID
	})
	if len(out) > maxResources {
		out = out[:maxResources]
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func resourceOf(byID map[string]*Resource, m status.ModifiedStatus) *Resource {
	typ := resourceType(m.APIVersion, m.Kind)
	id := m.Name
	if m.Namespace != "" {
		id = m.Namespace + "/" + m.Name
	}
	k := typ + "\x00" + id
	r, ok := byID[k]
	if !ok {
		r = &Resource{APIVersion: m.APIVersion, Kind: m.Kind, Type: typ, ID: id, Namespace: m.Namespace, Name: m.Name}
		byID[k] = r
	}
	if r.Message == "" {
		r.Message = m.String()
	}
	return r
}

// appendCluster adds cluster to list unless it is full, which marks r
// incomplete.
func appendCluster(r *Resource, list []string, cluster string) []string {
	if len(list) >= maxClustersPerState {
		r.IncompleteState = true
		return list
	}
	return append(list, cluster)
}

// resourceState is the worst state of a resource over its clusters, with
// Fleet's names.
func resourceState(p PerClusterState) string {
	switch {
	case len(p.Missing) > 0:
		return "Missing"
	case len(p.Modified) > 0:
		return string(status.Modified)
	case len(p.Orphaned) > 0:
		return "Orphaned"
	}
	return string(status.Ready)
}

// resourceType is Fleet's resource type: the lower-case kind, prefixed
// with the API group when there is one ("apps.deployment", "configmap").
func resourceType(apiVersion, kind string) string {
	k := strings.ToLower(kind)
	if g, _, ok := strings.Cut(apiVersion, "/"); ok && g != "" {
		return g + "." + k
	}
	return k
}
