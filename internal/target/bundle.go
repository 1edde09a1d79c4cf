package target

import (
	"fmt"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/fleetyaml"
)

// Targeted reports whether bundle b goes to cluster c.
//
// restrict are the GitRepo's targets. A bundle's overrideTargets replace
// them. With neither (restrict nil, as for `flotilla render` and Fleet's
// `fleet test`), fleet.yaml's targets and targetCustomizations are the
// targets, and a bundle with none of those targets api.DefaultTarget.
// Errors (an invalid selector) name the bundle and the cluster.
func Targeted(b fleetyaml.Bundle, c fleetyaml.Cluster, restrict []api.TargetSelector) (bool, error) {
	return Compile(b, restrict).Targeted(c)
}

// Customize returns bundle b's options on cluster c with fleet.yaml's
// customizations applied, and whether b deploys there, given that c is
// already targeted (Targeted). When deploy is false the options are empty.
// Helm values are not templated yet: fleetyaml.ProcessValues does that.
//
// The customizations are b.Spec.Targets followed by
// b.Spec.TargetCustomizations (Fleet's order, see customizations). In
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
// An invalid selector fails the whole bundle, even one that would not be
// reached; the error names the bundle, the cluster and the customization,
// e.g. "bundle B: cluster C: targetCustomizations[1] (bad): ...".
func Customize(b fleetyaml.Bundle, c fleetyaml.Cluster) (opts fleetyaml.Options, deploy bool, err error) {
	return Compile(b, nil).Customize(c)
}

// customization is a fleet.yaml target or target customization with its
// selector parsed.
type customization struct {
	target  *fleetyaml.Target
	matcher matcher
	// field is where fleet.yaml sets it: "targetCustomizations[2]".
	field string
}

// customizations returns b's customizations in Fleet's order: fleet.yaml
// targets first, then targetCustomizations. Fleet's bundle reader appends
// targetCustomizations to targets (bundlereader/read.go bundleFromDir) and
// its matcher treats that whole list, which precedes the GitRepo's
// targets, as customizations (target/matcher/bundlematch.go), so a
// matching fleet.yaml target wins over a matching targetCustomization in
// FirstMatch mode. Like Fleet's matcher.New, any invalid selector fails
// the whole bundle, even one that would not be reached.
func customizations(b fleetyaml.Bundle) ([]customization, error) {
	lists := []struct {
		field   string
		targets []fleetyaml.Target
	}{
		{"targets", b.Spec.Targets},
		{"targetCustomizations", b.Spec.TargetCustomizations},
	}
	var out []customization
	for _, l := range lists {
		for i := range l.targets {
			t := &l.targets[i]
			field := fmt.Sprintf("%s[%d]", l.field, i)
			m, err := compile(t.TargetSelector)
			if err != nil {
				where := field
				if t.Name != "" {
					where += fmt.Sprintf(" (%s)", t.Name)
				}
				return nil, fmt.Errorf("%s: %w", where, err)
			}
			out = append(out, customization{target: t, matcher: m, field: field})
		}
	}
	return out, nil
}
