package bundle

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// ClusterDisplayNameLabel is the cluster label that a selector's
// clusterName also matches: Rancher stores the cluster's display name
// there (Fleet target/matcher/clustermatcher.go).
const ClusterDisplayNameLabel = "management.cattle.io/cluster-display-name"

// Cluster is what per-cluster processing knows of a cluster. The fields are
// the data of Fleet's ${ } value templates.
type Cluster struct {
	// Name is the cluster's name (.ClusterName).
	Name string
	// Namespace is the namespace of Fleet's Cluster object, e.g.
	// fleet-default (.ClusterNamespace).
	Namespace string
	// Labels are the cluster's labels (.ClusterLabels, after Fleet's
	// filtering; see ProcessValues).
	Labels map[string]string
	// Annotations are the cluster's annotations (.ClusterAnnotations,
	// filtered like the labels).
	Annotations map[string]string
	// Values are the cluster's template values, Fleet's
	// Cluster.spec.templateValues (.ClusterValues).
	Values map[string]any
	// Groups are the cluster groups whose selector selects the cluster.
	Groups []Group
}

// Group is a cluster group the cluster belongs to: its name (which
// clusterGroup matches) and its own labels (which clusterGroupSelector
// matches).
type Group struct {
	Name   string
	Labels map[string]string
}

// Matches reports whether the selector selects c, as Fleet's cluster
// matcher does: the criteria present (clusterName, which also matches the
// label management.cattle.io/cluster-display-name; clusterSelector over the
// cluster's labels; clusterGroup; clusterGroupSelector over the group's
// labels) are AND-ed, and evaluated once per group c belongs to, or once
// for "no group" (empty name, no labels) when it belongs to none; c is
// selected when one evaluation passes. A selector without criteria selects
// nothing; clusterSelector {} selects every cluster. An invalid label
// selector is an error naming the target.
func (t TargetSelector) Matches(c Cluster) (bool, error) {
	m, err := t.compileMatcher()
	if err != nil {
		name := t.Name
		if name == "" {
			name = "(unnamed)"
		}
		return false, fmt.Errorf("target %s: %w", name, err)
	}
	return m.matches(c), nil
}

// clusterMatcher is a TargetSelector with its label selectors parsed.
type clusterMatcher struct {
	clusterName, group string
	// A nil selector is not a criterion.
	clusterSelector, groupSelector labels.Selector
}

func (t TargetSelector) compileMatcher() (clusterMatcher, error) {
	m := clusterMatcher{clusterName: t.ClusterName, group: t.ClusterGroup}
	var err error
	if m.clusterSelector, err = parseLabelSelector(t.ClusterSelector); err != nil {
		return m, fmt.Errorf("clusterSelector: %w", err)
	}
	if m.groupSelector, err = parseLabelSelector(t.ClusterGroupSelector); err != nil {
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

func (m clusterMatcher) matches(c Cluster) bool {
	if len(c.Groups) == 0 {
		return m.matchesIn(c, Group{})
	}
	for _, g := range c.Groups {
		if m.matchesIn(c, g) {
			return true
		}
	}
	return false
}

// matchesIn ANDs the criteria for c seen as a member of g.
func (m clusterMatcher) matchesIn(c Cluster, g Group) bool {
	checked := false
	if m.clusterName != "" {
		checked = true
		if m.clusterName != c.Name && m.clusterName != c.Labels[ClusterDisplayNameLabel] {
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

// customizationMatcher is a fleet.yaml target or target customization with its
// selector parsed.
type customizationMatcher struct {
	target  *Target
	matcher clusterMatcher
}

// customizationMatchers returns the bundle's customizations in Fleet's order:
// fleet.yaml targets first, then targetCustomizations. Fleet's bundle
// reader appends targetCustomizations to targets (bundlereader/read.go
// bundleFromDir) and its matcher treats that whole list, which precedes
// the GitRepo's targets, as customizations (target/matcher/bundlematch.go),
// so a matching fleet.yaml target wins over a matching targetCustomization
// in FirstMatch mode. Like Fleet's matcher.New, any invalid selector fails
// the whole bundle, even one that would not be reached.
func (b Bundle) customizationMatchers() ([]customizationMatcher, error) {
	lists := []struct {
		field   string
		targets []Target
	}{
		{"targets", b.Spec.Targets},
		{"targetCustomizations", b.Spec.TargetCustomizations},
	}
	var out []customizationMatcher
	for _, l := range lists {
		for i := range l.targets {
			t := &l.targets[i]
			m, err := t.compileMatcher()
			if err != nil {
				where := fmt.Sprintf("%s[%d]", l.field, i)
				if t.Name != "" {
					where += fmt.Sprintf(" (%s)", t.Name)
				}
				return nil, fmt.Errorf("%s: %w", where, err)
			}
			out = append(out, customizationMatcher{target: t, matcher: m})
		}
	}
	return out, nil
}

// ForCluster returns bundle b's options on cluster c, and whether b deploys
// there, given that c is already targeted (the caller matched the GitRepo's
// targets or the bundle's overrideTargets). When deploy is false the
// options are empty.
//
// The customizations are b.Spec.Targets followed by
// b.Spec.TargetCustomizations (Fleet's order, see customizationMatchers). In
// FirstMatch mode (the default: any mode but AllMatches) the first
// customization selecting c applies; in AllMatches mode every one selecting
// c does, merged in order. A selected customization with doNotDeploy keeps
// the bundle off c: in FirstMatch mode only when it is the first selected,
// in AllMatches mode when any selected one has it.
//
// As in Fleet (target/builder.go Targets), the selected customizations are
// first merged with each other, starting from empty options, and the
// result is then merged onto b.Options once. This is not always the same
// as merging each customization onto b.Options in turn: a negative
// helm.timeoutSeconds in an AllMatches customization only zeroes the
// accumulated value, and then no longer resets the bundle's own timeout;
// and when one customization sets a value to a scalar and a later one to
// a map, the map is merged with the bundle's map.
//
// The helm values are then processed for c (ProcessValues). Errors (an
// invalid selector, a failing template) name the bundle and the cluster,
// e.g. "bundle B: cluster C: helm.values: ...".
func (b Bundle) ForCluster(c Cluster) (opts Options, deploy bool, err error) {
	cs, err := b.customizationMatchers()
	if err != nil {
		return Options{}, false, fmt.Errorf("bundle %s: cluster %s: %w", b.Name, c.Name, err)
	}
	allMatches := b.Spec.TargetCustomizationMode == AllMatches
	var custom Options
	for _, cu := range cs {
		if !cu.matcher.matches(c) {
			continue
		}
		if cu.target.DoNotDeploy {
			return Options{}, false, nil
		}
		if !allMatches {
			custom = cu.target.Options
			break
		}
		custom = MergeOptions(custom, cu.target.Options)
	}
	opts = MergeOptions(b.Options, custom)
	opts, err = ProcessValues(opts, c)
	if err != nil {
		return Options{}, false, fmt.Errorf("bundle %s: cluster %s: %w", b.Name, c.Name, err)
	}
	return opts, true, nil
}
