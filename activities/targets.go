package activities

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/activity"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/flotilla-gitops/flotilla/internal/bundle"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/render"
	"github.com/flotilla-gitops/flotilla/internal/status"
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
func (a *Activities) TargetBundles(ctx context.Context, in BundleTargetsInput) (BundleTargetsResult, error) {
	clusters, err := a.clusters(ctx)
	if err != nil {
		return BundleTargetsResult{}, err
	}
	groups, err := a.groups(ctx)
	if err != nil {
		return BundleTargetsResult{}, err
	}
	bundles := make([]bundle.Bundle, len(in.Bundles))
	for i, rb := range in.Bundles {
		if bundles[i], err = a.Content.GetBundle(rb.BundleKey); err != nil {
			return BundleTargetsResult{}, fmt.Errorf("bundle %s: %w", rb.Name, err)
		}
	}
	restrict := make([]bundle.TargetSelector, 0, len(in.Spec.EffectiveTargets()))
	for _, t := range in.Spec.EffectiveTargets() {
		restrict = append(restrict, bundle.TargetSelector{Name: t.Name, ClusterName: t.ClusterName,
			ClusterSelector: t.ClusterSelector, ClusterGroup: t.ClusterGroup, ClusterGroupSelector: t.ClusterGroupSelector})
	}
	out := BundleTargetsResult{Registered: []string{}, Matched: []TargetCluster{}}
	for _, c := range clusters {
		out.Registered = append(out.Registered, c.Name)
		bc, err := clusterOf(c, groups, in.GitRepo.Namespace)
		if err != nil {
			return BundleTargetsResult{}, err
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
				return BundleTargetsResult{}, fmt.Errorf("store options of bundle %s for cluster %s: %w", rb.Name, c.Name, err)
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

// clusterOf describes a registered cluster for per-cluster processing:
// its labels, annotations, template values and the groups that select it.
// Clusters are not namespaced in Flotilla; .ClusterNamespace is the
// GitRepo's namespace, where Fleet keeps the clusters a GitRepo targets.
func clusterOf(c protocol.ClusterRecord, groups []protocol.GroupRecord, namespace string) (bundle.Cluster, error) {
	bc := bundle.Cluster{Name: c.Name, Namespace: namespace, Labels: c.Labels, Annotations: c.Annotations, Values: c.TemplateValues}
	for _, g := range groups {
		if g.Selector == nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(g.Selector)
		if err != nil {
			return bc, fmt.Errorf("cluster group %s: selector: %w", g.Name, err)
		}
		if sel.Matches(labels.Set(c.Labels)) {
			bc.Groups = append(bc.Groups, bundle.Group{Name: g.Name, Labels: g.Labels})
		}
	}
	return bc, nil
}
