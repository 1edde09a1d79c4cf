package activities

import (
	"context"
	"fmt"
	"sort"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/flotilla-gitops/flotilla/internal/bundle"
	"github.com/flotilla-gitops/flotilla/internal/outcome"
	"github.com/flotilla-gitops/flotilla/internal/render"
	"github.com/flotilla-gitops/flotilla/internal/status"
	"github.com/flotilla-gitops/flotilla/internal/strategy"
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
	clusters, groups, err := a.registry(ctx)
	if err != nil {
		return TargetsResult{}, err
	}
	bundles := make([]bundle.Bundle, len(in.Bundles))
	for i, rb := range in.Bundles {
		if bundles[i], err = a.Content.GetBundle(rb.BundleKey); err != nil {
			return TargetsResult{}, fmt.Errorf("bundle %s: %w", rb.Name, err)
		}
	}
	restrict := in.Spec.EffectiveTargets()
	tgs := targetGroups(groups)
	local := a.Content.WithRemote(nil)
	out := TargetsResult{Registered: []string{}, Matched: []TargetCluster{}, Backoff: a.Retry}
	targeted := make([][]bundle.Cluster, len(in.Bundles))
	for _, c := range clusters {
		out.Registered = append(out.Registered, c.Name)
		agent := c.PullMode()
		// Only agents read options from the registry: a push-mode
		// cluster's options stay on this host (no registry round trip per
		// cluster and rollout).
		options := local
		if agent {
			options = a.Content
		}
		if agent {
			out.Agents = append(out.Agents, c.Name)
			if c.Agent != nil && c.Agent.Offline {
				out.Offline = append(out.Offline, c.Name)
			}
		}
		// Clusters are not namespaced in Flotilla; .ClusterNamespace is the
		// GitRepo's namespace, where Fleet keeps the clusters it targets.
		bc := bundle.Cluster{Name: c.Name, Namespace: in.GitRepo.Namespace, Labels: c.Labels,
			Annotations: c.Annotations, Values: c.TemplateValues}
		if bc.Groups, err = target.Memberships(c.Labels, tgs); err != nil {
			return TargetsResult{}, err
		}
		tc := TargetCluster{Name: c.Name, Paused: c.Paused, Agent: agent}
		for i, rb := range in.Bundles {
			dep, err := render.ForCluster(bundles[i], rb.ManifestID, bc, restrict)
			if err != nil {
				out.Errors = append(out.Errors, status.Deployment{Bundle: rb.Name, Cluster: c.Name, Release: rb.Release,
					Namespace: rb.Namespace, State: status.ErrApplied, Outcome: outcome.Invalid, Message: err.Error()})
				continue
			}
			if !dep.Deploy {
				continue
			}
			hash, err := options.PutOptionsContext(ctx, dep.Options)
			if err != nil {
				return TargetsResult{}, fmt.Errorf("store options of bundle %s for cluster %s: %w", rb.Name, c.Name, err)
			}
			targeted[i] = append(targeted[i], bc)
			pb := rb
			pb.Paused = bundles[i].Spec.Paused
			pb.OptionsHash, pb.DeploymentID, pb.Release, pb.Namespace = hash, dep.DeploymentID, dep.Release, dep.Namespace
			pb.KeepResources, pb.DeleteNamespace = dep.Options.KeepResources, dep.Options.DeleteNamespace
			tc.Bundles = append(tc.Bundles, pb)
		}
		if len(tc.Bundles) > 0 {
			out.Matched = append(out.Matched, tc)
		}
		activity.RecordHeartbeat(ctx, c.Name)
	}
	now := time.Now()
	for i, b := range bundles {
		if len(targeted[i]) == 0 {
			continue
		}
		bs, err := bundleStrategy(b, bundles, targeted[i], now)
		if err != nil {
			return TargetsResult{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("bundle %s: %v", b.Name, err), ErrTypeInvalidBundle, nil)
		}
		out.Strategies = append(out.Strategies, bs)
	}
	return out, nil
}

// maxWindows is how many upcoming deployment windows a rollout is given.
const maxWindows = 20

// bundleStrategy computes b's rollout over the clusters it targets and
// resolves its dependsOn against the GitRepo's bundles.
func bundleStrategy(b bundle.Bundle, all []bundle.Bundle, clusters []bundle.Cluster, now time.Time) (BundleStrategy, error) {
	out := BundleStrategy{Bundle: b.Name}
	var err error
	if out.Plan, err = strategy.Compute(b.Spec.RolloutStrategy, clusters); err != nil {
		return out, fmt.Errorf("rolloutStrategy: %w", err)
	}
	if rs := b.Spec.RolloutStrategy; rs != nil && len(rs.Windows) > 0 {
		if out.Windows, err = strategy.Windows(rs.Windows, now, maxWindows); err != nil {
			return out, fmt.Errorf("rolloutStrategy.windows: %w", err)
		}
	}
	for _, ref := range b.Spec.DependsOn {
		dep := Dependency{}
		for _, s := range ref.AcceptedStates {
			dep.AcceptedStates = append(dep.AcceptedStates, status.State(s))
		}
		switch {
		case ref.Name != "":
			dep.Describe = ref.Name
			dep.Bundles = []string{ref.Name}
		case ref.Selector != nil:
			sel, err := metav1.LabelSelectorAsSelector(ref.Selector)
			if err != nil {
				return out, fmt.Errorf("dependsOn selector: %w", err)
			}
			dep.Describe = "selector " + sel.String()
			for _, o := range all {
				if o.Name != b.Name && sel.Matches(labels.Set(o.Labels)) {
					dep.Bundles = append(dep.Bundles, o.Name)
				}
			}
		}
		sort.Strings(dep.Bundles)
		out.DependsOn = append(out.DependsOn, dep)
	}
	return out, nil
}
