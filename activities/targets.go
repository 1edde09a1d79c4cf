package activities

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/activity"

	"github.com/flotilla-gitops/flotilla/internal/bundle"
	"github.com/flotilla-gitops/flotilla/internal/render"
	"github.com/flotilla-gitops/flotilla/internal/status"
	"github.com/flotilla-gitops/flotilla/internal/target"
)

// TargetBundles decides, for every registered cluster, which of the
// GitRepo's bundles it gets and with which options: the GitRepo's targets
// (or a bundle's overrideTargets) select clusters, fleet.yaml's
// customizations are merged for each, helm values are templated with the
// cluster's name, labels, annotations and template values, and the
// deployment ID is computed. The per-cluster options go to the content
// store; only their hashes and IDs are returned. A template that fails
// for one cluster is reported for that cluster, naming it, and the other
// clusters proceed.
func (a *Activities) TargetBundles(ctx context.Context, in BundleTargetsInput) (TargetsResult, error) {
	clusters, err := a.clusters(ctx)
	if err != nil {
		return TargetsResult{}, err
	}
	groups, err := a.groups(ctx)
	if err != nil {
		return TargetsResult{}, err
	}
	bundles := make([]bundle.Bundle, len(in.Bundles))
	for i, rb := range in.Bundles {
		if bundles[i], err = a.Content.GetBundle(rb.BundleKey); err != nil {
			return TargetsResult{}, fmt.Errorf("bundle %s: %w", rb.Name, err)
		}
	}
	var restrict []bundle.TargetSelector
	for _, t := range in.Spec.EffectiveTargets() {
		restrict = append(restrict, target.Selector(t))
	}
	tgs := targetGroups(groups)
	out := TargetsResult{Registered: []string{}, Matched: []TargetCluster{}}
	for _, c := range clusters {
		out.Registered = append(out.Registered, c.Name)
		// Clusters are not namespaced in Flotilla; .ClusterNamespace is the
		// GitRepo's namespace, where Fleet keeps the clusters it targets.
		bc := bundle.Cluster{Name: c.Name, Namespace: in.GitRepo.Namespace, Labels: c.Labels,
			Annotations: c.Annotations, Values: c.TemplateValues}
		if bc.Groups, err = target.Memberships(c.Labels, tgs); err != nil {
			return TargetsResult{}, err
		}
		tc := TargetCluster{Name: c.Name, Paused: c.Paused}
		for i, rb := range in.Bundles {
			dep, err := render.ForCluster(bundles[i], rb.ManifestID, bc, restrict)
			if err != nil {
				out.Errors = append(out.Errors, status.Deployment{Bundle: rb.Name, Cluster: c.Name, Release: rb.Release,
					Namespace: rb.Namespace, State: status.ErrApplied, Message: err.Error()})
				continue
			}
			if !dep.Deploy {
				continue
			}
			hash, err := a.Content.PutOptions(dep.Options)
			if err != nil {
				return TargetsResult{}, fmt.Errorf("store options of bundle %s for cluster %s: %w", rb.Name, c.Name, err)
			}
			pb := rb
			pb.OptionsHash, pb.DeploymentID, pb.Release, pb.Namespace = hash, dep.DeploymentID, dep.Release, dep.Namespace
			pb.KeepResources, pb.DeleteNamespace = dep.Options.KeepResources, dep.Options.DeleteNamespace
			tc.Bundles = append(tc.Bundles, pb)
		}
		if len(tc.Bundles) > 0 {
			out.Matched = append(out.Matched, tc)
		}
		activity.RecordHeartbeat(ctx, c.Name)
	}
	return out, nil
}
