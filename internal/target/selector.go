package target

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/fleetyaml"
)

// DisplayNameLabel is the cluster label that a selector's clusterName also
// matches: Rancher stores the cluster's display name there (Fleet
// target/matcher/clustermatcher.go).
const DisplayNameLabel = "management.cattle.io/cluster-display-name"

// Matches reports whether sel selects c, as Fleet's cluster matcher does:
// the criteria present (clusterName, which also matches the label
// DisplayNameLabel; clusterSelector over the cluster's labels;
// clusterGroup; clusterGroupSelector over the group's labels) are AND-ed,
// and evaluated once per group c belongs to, or once for "no group" (empty
// name, no labels) when it belongs to none; c is selected when one
// evaluation passes. A selector without criteria selects nothing;
// clusterSelector {} selects every cluster. An invalid label selector is an
// error naming the target.
func Matches(sel api.TargetSelector, c fleetyaml.Cluster) (bool, error) {
	m, err := compile(sel)
	if err != nil {
		name := sel.Name
		if name == "" {
			name = "(unnamed)"
		}
		return false, fmt.Errorf("target %s: %w", name, err)
	}
	return m.matches(c), nil
}

// matcher is a selector with its label selectors parsed.
type matcher struct {
	clusterName, group string
	// A nil selector is not a criterion.
	clusterSelector, groupSelector labels.Selector
}

func compile(sel api.TargetSelector) (matcher, error) {
	m := matcher{clusterName: sel.ClusterName, group: sel.ClusterGroup}
	var err error
	if m.clusterSelector, err = parseLabelSelector(sel.ClusterSelector); err != nil {
		return m, fmt.Errorf("clusterSelector: %w", err)
	}
	if m.groupSelector, err = parseLabelSelector(sel.ClusterGroupSelector); err != nil {
		return m, fmt.Errorf("clusterGroupSelector: %w", err)
	}
	return m, nil
}

// parseLabelSelector parses s, keeping nil as nil (no criterion) where
// metav1.LabelSelectorAsSelector would turn it into "select nothing".
func parseLabelSelector(s *metav1.LabelSelector) (labels.Selector, error) {
	if s == nil {
		return nil, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		return nil, fmt.Errorf("invalid label selector: %w", err)
	}
	return sel, nil
}

func (m matcher) matches(c fleetyaml.Cluster) bool {
	if len(c.Groups) == 0 {
		return m.matchesIn(c, fleetyaml.Group{})
	}
	for _, g := range c.Groups {
		if m.matchesIn(c, g) {
			return true
		}
	}
	return false
}

// matchesIn ANDs the criteria for c seen as a member of g.
func (m matcher) matchesIn(c fleetyaml.Cluster, g fleetyaml.Group) bool {
	checked := false
	if m.clusterName != "" {
		checked = true
		if m.clusterName != c.Name && m.clusterName != c.Labels[DisplayNameLabel] {
			return false
		}
	}
	if m.group != "" {
		checked = true
		if m.group != g.Name {
			return false
		}
	}
	if m.groupSelector != nil {
		checked = true
		if !m.groupSelector.Matches(labels.Set(g.Labels)) {
			return false
		}
	}
	if m.clusterSelector != nil {
		checked = true
		if !m.clusterSelector.Matches(labels.Set(c.Labels)) {
			return false
		}
	}
	return checked
}
