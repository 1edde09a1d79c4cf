package target

import (
	"fmt"
	"slices"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/fleetyaml"
)

// Compiled is one bundle's targets and customizations with their
// selectors parsed once and indexed, for targeting many clusters: a
// customization whose only criterion is clusterName is looked up by the
// cluster's name (and display name), one whose only criterion is
// clusterGroup by the cluster's groups, and only the rest is evaluated
// for every cluster. Targeting n clusters with m customizations then
// costs O(n + m) for the common per-cluster and per-group
// customizations, where evaluating each one for each cluster costs
// O(n × m). Decisions are exactly Targeted's and Customize's. A Compiled
// is read-only after Compile and safe for concurrent use.
type Compiled struct {
	b fleetyaml.Bundle
	// targets are the selectors that decide whether b goes to a cluster
	// (see Targeted), and targetsErr why one did not parse.
	targets    []namedMatcher
	targetsErr error
	// custom are the customizations in Fleet's order, and customErr why
	// one did not parse.
	custom    []customization
	customErr error
	// byName, byGroup and general index custom by position.
	byName, byGroup map[string][]int
	general         []int
	// bounds are the GitRepo's (see Bind).
	bounds Bounds
}

type namedMatcher struct {
	name string
	matcher
}

// Compile parses bundle b's targets (restrict, see Targeted) and
// customizations. A selector that does not parse is reported by every
// Targeted or Customize call, naming the cluster, as the uncompiled
// functions report it.
func Compile(b fleetyaml.Bundle, restrict []api.TargetSelector) *Compiled {
	p := &Compiled{b: b, byName: map[string][]int{}, byGroup: map[string][]int{}}
	for _, t := range effectiveTargets(b, restrict) {
		m, err := compile(t)
		if err != nil {
			name := t.Name
			if name == "" {
				name = "(unnamed)"
			}
			p.targetsErr = fmt.Errorf("target %s: %w", name, err)
			break
		}
		p.targets = append(p.targets, namedMatcher{t.Name, m})
	}
	p.custom, p.customErr = customizations(b)
	for i, cu := range p.custom {
		m := cu.matcher
		onlyName := m.clusterName != "" && m.group == "" && m.clusterSelector == nil && m.groupSelector == nil
		onlyGroup := m.group != "" && m.clusterName == "" && m.clusterSelector == nil && m.groupSelector == nil
		switch {
		case onlyName:
			p.byName[m.clusterName] = append(p.byName[m.clusterName], i)
		case onlyGroup:
			p.byGroup[m.group] = append(p.byGroup[m.group], i)
		default:
			p.general = append(p.general, i)
		}
	}
	return p
}

// effectiveTargets are the selectors Targeted evaluates: the bundle's
// overrideTargets, else restrict, else (restrict nil) fleet.yaml's own
// targets and targetCustomizations, else api.DefaultTarget.
func effectiveTargets(b fleetyaml.Bundle, restrict []api.TargetSelector) []api.TargetSelector {
	if len(b.Spec.OverrideTargets) > 0 {
		return b.Spec.OverrideTargets
	}
	if restrict != nil {
		return restrict
	}
	var targets []api.TargetSelector
	for _, list := range [][]fleetyaml.Target{b.Spec.TargetCustomizations, b.Spec.Targets} {
		for _, t := range list {
			targets = append(targets, t.TargetSelector)
		}
	}
	if len(targets) == 0 {
		targets = []api.TargetSelector{api.DefaultTarget}
	}
	return targets
}

// Targeted reports whether the bundle goes to cluster c (see the
// package-level Targeted).
func (p *Compiled) Targeted(c fleetyaml.Cluster) (bool, error) {
	for _, t := range p.targets {
		if t.matches(c) {
			return true, nil
		}
	}
	if p.targetsErr != nil {
		return false, fmt.Errorf("bundle %s: cluster %s: %w", p.b.Name, c.Name, p.targetsErr)
	}
	return false, nil
}

// Customize returns the bundle's options on cluster c and whether it
// deploys there (see the package-level Customize). With Bounds (Bind),
// the bundle's own options and each customization selected for c that
// name another namespace (namespace, a valuesFrom namespace) or service
// account than the bounds fail, naming the bundle, the cluster, the file
// and the field (a *BoundsError).
func (p *Compiled) Customize(c fleetyaml.Cluster) (opts fleetyaml.Options, deploy bool, err error) {
	if p.customErr != nil {
		return fleetyaml.Options{}, false, fmt.Errorf("bundle %s: cluster %s: %w", p.b.Name, c.Name, p.customErr)
	}
	allMatches := p.b.Spec.TargetCustomizationMode == fleetyaml.AllMatches
	var custom fleetyaml.Options
	var selected []int
	for _, i := range p.candidates(c) {
		cu := p.custom[i]
		if !cu.matcher.matches(c) {
			continue
		}
		if cu.target.DoNotDeploy {
			return fleetyaml.Options{}, false, nil
		}
		selected = append(selected, i)
		if !allMatches {
			custom = cu.target.Options
			break
		}
		custom = fleetyaml.MergeOptions(custom, cu.target.Options)
	}
	if err := p.checkBounds(selected); err != nil {
		return fleetyaml.Options{}, false, fmt.Errorf("bundle %s: cluster %s: %w", p.b.Name, c.Name, err)
	}
	return fleetyaml.MergeOptions(p.b.Options, custom), true, nil
}

// candidates are the positions of the customizations that can select c,
// in order: those indexed under its name, display name or groups, and
// every one not indexed.
func (p *Compiled) candidates(c fleetyaml.Cluster) []int {
	if len(p.byName) == 0 && len(p.byGroup) == 0 {
		return p.general
	}
	out := slices.Clone(p.general)
	out = append(out, p.byName[c.Name]...)
	if dn := c.Labels[DisplayNameLabel]; dn != "" && dn != c.Name {
		out = append(out, p.byName[dn]...)
	}
	for _, g := range c.Groups {
		out = append(out, p.byGroup[g.Name]...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}
