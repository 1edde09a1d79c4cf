package target

import (
	"fmt"
	"slices"
)

// Known is what exists to be targeted: registered clusters, by name and
// by display name (DisplayNameLabel), and cluster groups by name.
type Known struct {
	Clusters, Groups map[string]bool
}

// NewKnown indexes clusters (name and labels) and groups.
func NewKnown(clusters []Cluster, groups []Group) Known {
	k := Known{Clusters: map[string]bool{}, Groups: map[string]bool{}}
	for _, c := range clusters {
		k.Clusters[c.Name] = true
		if dn := c.Labels[DisplayNameLabel]; dn != "" {
			k.Clusters[dn] = true
		}
	}
	for _, g := range groups {
		k.Groups[g.Name] = true
	}
	return k
}

// Missing returns what the bundle's targets name that does not exist
// ("clusterGroup \"prod\" not found", "cluster \"edge-9\" not found"),
// sorted. A target naming something missing selects nothing; what it
// selected before is not a reason to remove anything: a typo, a group not
// created yet or one missing from a listing must not uninstall.
func (p *Compiled) Missing(k Known) []string {
	var out []string
	for _, t := range p.targets {
		if t.group != "" && !k.Groups[t.group] {
			out = append(out, fmt.Sprintf("clusterGroup %q not found", t.group))
		}
		if t.clusterName != "" && !k.Clusters[t.clusterName] {
			out = append(out, fmt.Sprintf("cluster %q not found", t.clusterName))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
