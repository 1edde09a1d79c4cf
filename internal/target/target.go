package target

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/fleetyaml"
)

// Cluster is a cluster as seen by matching: its name and labels.
type Cluster struct {
	Name   string
	Labels map[string]string
}

// Group is a cluster group: Selector picks its member clusters (nil selects
// none), Labels are the group's own labels, which clusterGroupSelector
// matches.
type Group struct {
	Name     string
	Selector *metav1.LabelSelector
	Labels   map[string]string
}

// Matched pairs a cluster with the target that selected it.
type Matched struct {
	// Cluster is the cluster's name.
	Cluster string
	// Target is the target's name, or "target[i]" (i its index) when unnamed.
	Target string
}

// Match returns, for every cluster that some target selects, the first such
// target, sorted by cluster name. Clusters no target selects are left out.
// A target naming a group that does not exist matches nothing. Match fails
// when a target's or group's selector is invalid (the error names it) or
// when two clusters share a name; it never returns a partial result.
// Selection is Matches, the rule bundles use too.
func Match(targets []api.TargetSelector, clusters []Cluster, groups []Group) ([]Matched, error) {
	sels := slices.Clone(targets)
	for i := range sels {
		if sels[i].Name == "" {
			sels[i].Name = fmt.Sprintf("target[%d]", i)
		}
	}
	sorted := slices.Clone(clusters)
	slices.SortStableFunc(sorted, func(a, b Cluster) int { return strings.Compare(a.Name, b.Name) })
	var out []Matched
	for i, c := range sorted {
		if i > 0 && sorted[i-1].Name == c.Name {
			return nil, fmt.Errorf("cluster %q is listed twice", c.Name)
		}
		member, err := Memberships(c.Labels, groups)
		if err != nil {
			return nil, err
		}
		bc := fleetyaml.Cluster{Name: c.Name, Labels: c.Labels, Groups: member}
		for _, sel := range sels {
			ok, err := Matches(sel, bc)
			if err != nil {
				return nil, err
			}
			if ok {
				out = append(out, Matched{Cluster: c.Name, Target: sel.Name})
				break
			}
		}
	}
	return out, nil
}

// Memberships returns the groups whose selector selects a cluster with
// these labels, in input order (a group without selector selects none).
func Memberships(clusterLabels map[string]string, groups []Group) ([]fleetyaml.Group, error) {
	var member []fleetyaml.Group
	for _, g := range groups {
		if g.Selector == nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(g.Selector)
		if err != nil {
			return nil, fmt.Errorf("cluster group %s: selector: invalid label selector: %w", g.Name, err)
		}
		if sel.Matches(labels.Set(clusterLabels)) {
			member = append(member, fleetyaml.Group{Name: g.Name, Labels: g.Labels})
		}
	}
	return member, nil
}
