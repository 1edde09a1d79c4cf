package target

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/flotilla-gitops/flotilla/internal/api"
)

// DisplayNameLabel is the cluster label that a target's clusterName also
// matches (Rancher sets it to the cluster's display name).
const DisplayNameLabel = "management.cattle.io/cluster-display-name"

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
func Match(targets []api.GitTarget, clusters []Cluster, groups []Group) ([]Matched, error) {
	ms, err := compileTargets(targets)
	if err != nil {
		return nil, err
	}
	gs, err := compileGroups(groups)
	if err != nil {
		return nil, err
	}
	sorted := slices.Clone(clusters)
	slices.SortStableFunc(sorted, func(a, b Cluster) int { return strings.Compare(a.Name, b.Name) })
	var out []Matched
	for i, c := range sorted {
		if i > 0 && sorted[i-1].Name == c.Name {
			return nil, fmt.Errorf("cluster %q is listed twice", c.Name)
		}
		member := memberships(c, gs)
		for _, m := range ms {
			if m.matchAny(c, member) {
				out = append(out, Matched{Cluster: c.Name, Target: m.name})
				break
			}
		}
	}
	return out, nil
}

// matcher is a target with its selectors parsed.
type matcher struct {
	name            string
	clusterName     string
	group           string
	clusterSelector labels.Selector // nil: not a criterion
	groupSelector   labels.Selector // nil: not a criterion
}

func compileTargets(targets []api.GitTarget) ([]matcher, error) {
	ms := make([]matcher, 0, len(targets))
	for i, t := range targets {
		m := matcher{name: t.Name, clusterName: t.ClusterName, group: t.ClusterGroup}
		if m.name == "" {
			m.name = fmt.Sprintf("target[%d]", i)
		}
		var err error
		if m.clusterSelector, err = selector(t.ClusterSelector); err != nil {
			return nil, fmt.Errorf("target %s: clusterSelector: %w", m.name, err)
		}
		if m.groupSelector, err = selector(t.ClusterGroupSelector); err != nil {
			return nil, fmt.Errorf("target %s: clusterGroupSelector: %w", m.name, err)
		}
		ms = append(ms, m)
	}
	return ms, nil
}

// selector parses s; nil stays nil so that it is not a criterion, whereas
// metav1.LabelSelectorAsSelector would turn it into "nothing".
func selector(s *metav1.LabelSelector) (labels.Selector, error) {
	if s == nil {
		return nil, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		return nil, fmt.Errorf("invalid label selector: %w", err)
	}
	return sel, nil
}

// group is a Group with its selector parsed.
type group struct {
	name     string
	labels   map[string]string
	selector labels.Selector // nil: selects no cluster
}

func compileGroups(groups []Group) ([]group, error) {
	gs := make([]group, 0, len(groups))
	for _, g := range groups {
		sel, err := selector(g.Selector)
		if err != nil {
			return nil, fmt.Errorf("cluster group %s: selector: %w", g.Name, err)
		}
		gs = append(gs, group{name: g.Name, labels: g.Labels, selector: sel})
	}
	return gs, nil
}

// memberships returns the groups whose selector selects c, in input order.
func memberships(c Cluster, gs []group) []group {
	var member []group
	for _, g := range gs {
		if g.selector != nil && g.selector.Matches(labels.Set(c.Labels)) {
			member = append(member, g)
		}
	}
	return member
}

// matchAny reports whether the target selects c through one of its groups
// or, for a cluster in no group, through the empty group.
func (m matcher) matchAny(c Cluster, member []group) bool {
	if len(member) == 0 {
		return m.match(c, group{})
	}
	for _, g := range member {
		if m.match(c, g) {
			return true
		}
	}
	return false
}

// match ANDs the target's criteria for c seen as a member of g.
func (m matcher) match(c Cluster, g group) bool {
	checked := false
	if m.clusterName != "" {
		checked = true
		if m.clusterName != c.Name && m.clusterName != c.Labels[DisplayNameLabel] {
			return false
		}
	}
	if m.clusterSelector != nil {
		checked = true
		if !m.clusterSelector.Matches(labels.Set(c.Labels)) {
			return false
		}
	}
	if m.group != "" {
		checked = true
		if m.group != g.name {
			return false
		}
	}
	if m.groupSelector != nil {
		checked = true
		if !m.groupSelector.Matches(labels.Set(g.labels)) {
			return false
		}
	}
	return checked
}
