package activities

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/bundle"
	"github.com/flotilla-gitops/flotilla/internal/content"
	"github.com/flotilla-gitops/flotilla/internal/outcome"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
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
	t := &targeting{a: a, in: in, restrict: in.Spec.EffectiveTargets(), groups: targetGroups(groups),
		local: a.Content.WithRemote(nil), shared: a.Content.NewOptionsBatch(), bundles: make([]bundle.Bundle, len(in.Bundles)),
		targeted: make([][]bundle.Cluster, len(in.Bundles)),
		out: TargetsResult{Registered: []string{}, Matched: []TargetCluster{}, Backoff: a.Retry, PickupTimeout: a.PickupTimeout,
			DeletionGuard: a.DeletionGuard}}
	t.compiled = make([]*target.Compiled, len(in.Bundles))
	for i, rb := range in.Bundles {
		if t.bundles[i], err = a.bundle(ctx, in, rb); err != nil {
			return TargetsResult{}, err
		}
		t.compiled[i] = target.Compile(t.bundles[i], t.restrict).Bind(render.Bounds(in.Spec))
	}
	for _, c := range clusters {
		if err := t.cluster(ctx, c); err != nil {
			return TargetsResult{}, err
		}
		activity.RecordHeartbeat(ctx, c.Name)
	}
	t.missing(clusters)
	if err := t.shared.Push(ctx); err != nil {
		return TargetsResult{}, fmt.Errorf("store the options of agents' bundles: %w", err)
	}
	now := time.Now()
	for i, b := range t.bundles {
		if len(t.targeted[i]) == 0 {
			continue
		}
		bs, err := bundleStrategy(b, t.bundles, t.targeted[i], now)
		if err != nil {
			return TargetsResult{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("bundle %s: %v", b.Name, err), ErrTypeInvalidBundle, nil)
		}
		t.out.Strategies = append(t.out.Strategies, bs)
	}
	return t.out, nil
}

// bundle reads a rendered bundle from the content store. One the store
// misses (another controller rendered the commit) is rendered again and
// checked against its key; one that renders differently now fails
// non-retryably (ErrTypeContentChanged).
func (a *Activities) bundle(ctx context.Context, in BundleTargetsInput, rb Bundle) (bundle.Bundle, error) {
	b, err := a.Content.GetBundle(rb.BundleKey)
	if errors.Is(err, content.ErrNotFound) {
		spec := in.Spec
		err = a.refill(ctx, RefillInput{GitRepo: in.GitRepo, Commit: in.Commit, Spec: &spec, Bundle: rb.Name, BundleKey: rb.BundleKey})
		if errors.Is(err, ErrContentChanged) {
			return b, temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeContentChanged, nil)
		}
		if err != nil {
			return b, err // a render's failure, translated as Render's
		}
		b, err = a.Content.GetBundle(rb.BundleKey)
	}
	if err != nil {
		return b, fmt.Errorf("bundle %s: %w", rb.Name, err)
	}
	return b, nil
}

// targeting is one TargetBundles call's work in progress.
type targeting struct {
	a        *Activities
	in       BundleTargetsInput
	restrict []api.TargetSelector
	groups   []target.Group
	local    *content.Store
	// shared holds the options agents read from the registry, pushed
	// together once every cluster was targeted.
	shared  *content.OptionsBatch
	bundles []bundle.Bundle
	// compiled are the bundles' selectors, parsed and indexed once per
	// call, not once per cluster.
	compiled []*target.Compiled
	// targeted lists, per bundle, the clusters it goes to.
	targeted [][]bundle.Cluster
	out      TargetsResult
	// sources reads the downstreamResources, each once per call.
	sources *sourceReader
}

// cluster decides which bundles one registered cluster gets.
func (t *targeting) cluster(ctx context.Context, c protocol.ClusterRecord) error {
	t.out.Registered = append(t.out.Registered, c.Name)
	agent := c.PullMode()
	// Only agents read options from the registry: a push-mode cluster's
	// options stay on this host (no registry round trip per cluster and
	// rollout).
	put := t.local.PutOptions
	if agent {
		put = t.shared.Put
		t.out.Agents = append(t.out.Agents, c.Name)
		if c.Agent != nil && c.Agent.Offline {
			t.out.Offline = append(t.out.Offline, c.Name)
		}
	}
	bc, err := bundleCluster(c, t.in.GitRepo.Namespace, t.groups)
	if err != nil {
		return err
	}
	tc := TargetCluster{Name: c.Name, Paused: c.Paused, Agent: agent}
	for i, rb := range t.in.Bundles {
		dep, err := render.ForClusterCompiled(t.compiled[i], t.bundles[i], rb.ManifestID, bc)
		if err != nil {
			t.out.Errors = append(t.out.Errors, status.Deployment{Bundle: rb.Name, Cluster: c.Name, Release: rb.Release,
				Namespace: rb.Namespace, State: status.ErrApplied, Outcome: outcome.Invalid, Message: err.Error()})
			continue
		}
		if !dep.Deploy {
			continue
		}
		if failed, err := t.downstream(ctx, &dep, rb, c.Name); err != nil || failed != nil {
			if err != nil {
				return fmt.Errorf("bundle %s: cluster %s: %w", rb.Name, c.Name, err)
			}
			t.out.Errors = append(t.out.Errors, *failed)
			continue
		}
		dep.Options.CorrectionWindows = nil // for the drift watch: the bundle's windows
		if rs := t.bundles[i].Spec.RolloutStrategy; rs != nil {
			dep.Options.CorrectionWindows = rs.Windows
		}
		hash, err := put(dep.Options)
		if err != nil {
			return fmt.Errorf("store options of bundle %s for cluster %s: %w", rb.Name, c.Name, err)
		}
		t.targeted[i] = append(t.targeted[i], bc)
		pb := rb
		pb.Paused = t.bundles[i].Spec.Paused
		pb.OptionsHash, pb.DeploymentID, pb.Release, pb.Namespace = hash, dep.DeploymentID, dep.Release, dep.Namespace
		pb.KeepResources, pb.DeleteNamespace = dep.Options.KeepResources, dep.Options.DeleteNamespace
		tc.Bundles = append(tc.Bundles, pb)
	}
	if len(tc.Bundles) > 0 {
		t.out.Matched = append(t.out.Matched, tc)
	}
	return nil
}

// missing lists what the bundles' targets name that does not exist: the
// rollout removes nothing while one does (rollout.Targets.Missing).
func (t *targeting) missing(clusters []protocol.ClusterRecord) {
	tc := make([]target.Cluster, 0, len(clusters))
	for _, c := range clusters {
		tc = append(tc, target.Cluster{Name: c.Name, Labels: c.Labels})
	}
	known := target.NewKnown(tc, t.groups)
	for _, p := range t.compiled {
		t.out.Missing = append(t.out.Missing, p.Missing(known)...)
	}
	slices.Sort(t.out.Missing)
	t.out.Missing = slices.Compact(t.out.Missing)
}

// bundleCluster is a registered cluster as bundles target and template
// it. Clusters are not namespaced in Flotilla; .ClusterNamespace is the
// GitRepo's namespace, where Fleet keeps the clusters it targets.
func bundleCluster(c protocol.ClusterRecord, gitRepoNamespace string, groups []target.Group) (bundle.Cluster, error) {
	bc := bundle.Cluster{Name: c.Name, Namespace: gitRepoNamespace, Labels: c.Labels,
		Annotations: c.Annotations, Values: c.TemplateValues}
	var err error
	bc.Groups, err = target.Memberships(c.Labels, groups)
	return bc, err
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
