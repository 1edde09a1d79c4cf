package target

import (
	"fmt"
	"path"

	"github.com/flotilla-gitops/flotilla/internal/fleetyaml"
	"github.com/flotilla-gitops/flotilla/internal/outcome"
)

// Bounds are what a GitRepo binds every one of its bundles to, on every
// cluster: its targetNamespace and its serviceAccount ("" for none). A
// bundle's fleet.yaml, or a customization selected for a cluster, that
// names another namespace or service account tries to leave them and is
// refused for that cluster (a *BoundsError).
type Bounds struct {
	// Namespace is the GitRepo's targetNamespace: every object goes
	// there, and valuesFrom reads only there.
	Namespace string
	// ServiceAccount is the GitRepo's serviceAccount: every deploy acts
	// as it.
	ServiceAccount string
}

// Setting names of a BoundsError.
const (
	BoundTargetNamespace = "targetNamespace"
	BoundServiceAccount  = "serviceAccount"
)

// BoundsError is a bundle setting that leaves its GitRepo's Bounds. It is
// classed outcome.Invalid: the repository must change, and nothing of the
// bundle is applied on the cluster.
type BoundsError struct {
	// File is the bundle's fleet.yaml, relative to the repository root.
	File string
	// Field is the fleet.yaml field, such as
	// "targetCustomizations[2].namespace".
	Field string
	// Customization is the name of the customization that sets Field, if
	// it has one.
	Customization string
	// Value is what Field says; Bound what the GitRepo binds it to.
	Value, Bound string
	// Setting is the GitRepo field that binds it: BoundTargetNamespace
	// or BoundServiceAccount.
	Setting string
}

func (e *BoundsError) Error() string {
	field := e.Field
	if e.Customization != "" {
		field += " (customization " + e.Customization + ")"
	}
	return fmt.Sprintf("%s: %s: %q leaves the GitRepo's %s %q, which binds every bundle and customization",
		e.File, field, e.Value, e.Setting, e.Bound)
}

// Class is outcome.Invalid.
func (e *BoundsError) Class() outcome.Class { return outcome.Invalid }

// Bind returns p checking every cluster's options against bounds: see
// Customize. p is not modified.
func (p *Compiled) Bind(bounds Bounds) *Compiled {
	q := *p
	q.bounds = bounds
	return &q
}

// boundsCheck is one part of a bundle's fleet.yaml checked against the
// GitRepo's bounds: the bundle's own options (prefix "") or one selected
// customization's (prefix "targetCustomizations[2]").
type boundsCheck struct {
	prefix, name string
	opts         *fleetyaml.Options
}

// checkBounds returns the first setting of the bundle's own options, or
// of the customizations selected for a cluster, that leaves p's bounds,
// as a *BoundsError; nil when none does.
func (p *Compiled) checkBounds(selected []int) error {
	if p.bounds == (Bounds{}) {
		return nil
	}
	checks := []boundsCheck{{opts: &p.b.Options}}
	for _, i := range selected {
		cu := p.custom[i]
		checks = append(checks, boundsCheck{prefix: cu.field, name: cu.target.Name, opts: &cu.target.Options})
	}
	for _, c := range checks {
		if err := p.checkOptions(c); err != nil {
			return err
		}
	}
	return nil
}

// checkOptions checks one part's namespace, valuesFrom namespaces and
// service account.
func (p *Compiled) checkOptions(c boundsCheck) error {
	fail := func(field, value, bound, setting string) error {
		if c.prefix != "" {
			field = c.prefix + "." + field
		}
		return &BoundsError{File: path.Join(p.b.Dir, "fleet.yaml"), Field: field, Customization: c.name,
			Value: value, Bound: bound, Setting: setting}
	}
	ns, sa := p.bounds.Namespace, p.bounds.ServiceAccount
	o := c.opts
	if ns != "" && o.TargetNamespace != "" && o.TargetNamespace != ns {
		return fail("namespace", o.TargetNamespace, ns, BoundTargetNamespace)
	}
	if sa != "" && o.ServiceAccount != "" && o.ServiceAccount != sa {
		return fail("serviceAccount", o.ServiceAccount, sa, BoundServiceAccount)
	}
	if ns == "" || o.Helm == nil {
		return nil
	}
	for i, vf := range o.Helm.ValuesFrom {
		for _, ref := range []struct {
			field string
			ref   *fleetyaml.KeyRef
		}{{"configMapKeyRef", vf.ConfigMapKeyRef}, {"secretKeyRef", vf.SecretKeyRef}} {
			if ref.ref != nil && ref.ref.Namespace != "" && ref.ref.Namespace != ns {
				return fail(fmt.Sprintf("helm.valuesFrom[%d].%s.namespace", i, ref.field), ref.ref.Namespace, ns, BoundTargetNamespace)
			}
		}
	}
	return nil
}
