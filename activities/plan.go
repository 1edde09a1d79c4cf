package activities

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/flotilla-gitops/flotilla/internal/cluster"
	"github.com/flotilla-gitops/flotilla/internal/deployer"
	"github.com/flotilla-gitops/flotilla/internal/outcome"
	"github.com/flotilla-gitops/flotilla/internal/plan"
)

// planParallelism bounds the releases one Plan call plans at once.
const planParallelism = 8

// Plan says what deploying in.Bundles and removing in.Remove would do on
// the cluster whose queue runs it, applying nothing: per release install,
// upgrade, uninstall or unchanged (see deployer.Preview for how each is
// decided and rendered), and for releases that change, each object that
// would be created, updated (the API server's server-side apply dry run
// against the live object) or deleted, with Secret values redacted (see
// internal/plan). It reads and dry-runs as the release's ServiceAccount
// when the bundle names one, so a plan sees what the deploy could.
//
// A bundle that does not render, or an object the API server refuses, is
// an Error in the plan, not a failed activity. A cluster that cannot be
// reached, or refuses the credentials, fails the activity with a
// non-retryable ErrTypeClusterUnreachable or ErrTypeClusterUnauthorized
// error (details: the outcome.Class): the planner plans it offline.
func (c *ClusterActivities) Plan(ctx context.Context, in PlanInput) (plan.Cluster, error) {
	defer keepAlive(ctx)()
	k, err := c.Clusters.Open(ctx, in.Cluster)
	if err != nil {
		return plan.Cluster{}, c.notPlanned(in, err)
	}
	out := plan.Cluster{Name: in.Cluster, Releases: make([]plan.Release, len(in.Bundles)+len(in.Remove))}
	var g errgroup.Group
	g.SetLimit(planParallelism)
	for i, b := range in.Bundles {
		g.Go(func() error {
			out.Releases[i] = c.planBundle(ctx, k, in, b)
			return nil
		})
	}
	for i, r := range in.Remove {
		g.Go(func() error {
			out.Releases[len(in.Bundles)+i] = c.planRemoval(ctx, k, r)
			return nil
		})
	}
	_ = g.Wait() // the functions report into Releases and never fail
	if slices.ContainsFunc(out.Releases, func(r plan.Release) bool { return r.Error != "" }) {
		if err := k.Reachable(ctx); err != nil {
			return plan.Cluster{}, c.notPlanned(in, err) // the cluster, not the releases, failed
		}
	}
	slices.SortFunc(out.Releases, func(a, b plan.Release) int { return strings.Compare(a.Bundle, b.Bundle) })
	return out, nil
}

// notPlanned is Plan's error for a cluster that did not answer or refused
// the credentials (classified as Deploy's unreached does).
func (c *ClusterActivities) notPlanned(in PlanInput, err error) error {
	class, typ := outcome.Unreachable, ErrTypeClusterUnreachable
	if deployer.Classify(err) == outcome.Unauthorized {
		class, typ = outcome.Unauthorized, ErrTypeClusterUnauthorized
	}
	c.Logger.Warn("Cluster not planned", zap.String("cluster", in.Cluster), zap.String("workflowID", in.WorkflowID),
		zap.String("class", string(class)), zap.Error(err))
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf("cluster %s: %v", in.Cluster, err), typ, err, class)
}

// planBundle plans one bundle's release on the cluster k.
func (c *ClusterActivities) planBundle(ctx context.Context, k *cluster.Conn, in PlanInput, b Bundle) plan.Release {
	r := plan.Release{Bundle: b.Name, Release: b.Release, Namespace: b.Namespace, To: b.DeploymentID}
	getter, err := k.Getter(b.Namespace)
	if err != nil {
		r.Action, r.Error = plan.Install, err.Error()
		return r
	}
	rel, _, _, err := c.release(ctx, DeployInput{Cluster: in.Cluster, GitRepo: in.GitRepo, Commit: in.Commit, WorkflowID: in.WorkflowID}, b)
	if err != nil {
		// What runs there is still worth showing.
		r.From, _, _ = c.Deployer.Current(getter, b.Namespace, b.Release)
		r.Action, r.Error = plan.ActionFor(r.From, r.To), fmt.Sprintf("bundle %s: %v", b.Name, err)
		return r
	}
	pv, err := c.Deployer.Preview(ctx, getter, rel)
	r.From = pv.Current.DeploymentID
	r.Action = plan.ActionFor(r.From, r.To)
	if err != nil {
		r.Error = fmt.Sprintf("bundle %s: %v", b.Name, err)
		return r
	}
	if pv.Unchanged {
		return r
	}
	if r.Action == plan.Unchanged {
		// Same ID, but its valuesFrom data changed or a record is pending:
		// Deploy upgrades it.
		r.Action = plan.Upgrade
	}
	r.Objects, r.Error = planObjects(ctx, pv, b.Namespace)
	return r
}

// planRemoval plans the uninstall of a release the change drops: every
// object of its deployed revision deleted, unless the bundle keeps its
// resources. A release that is not there is Uninstall without objects.
func (c *ClusterActivities) planRemoval(ctx context.Context, k *cluster.Conn, rel Release) plan.Release {
	r := plan.Release{Bundle: rel.Bundle, Release: rel.Release, Namespace: rel.Namespace, Action: plan.Uninstall}
	getter, err := k.Getter(rel.Namespace)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	actor, _, err := c.Deployer.Actor(getter, rel.Namespace, rel.Release)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	rev, err := c.Deployer.Deployed(actor, rel.Namespace, rel.Release)
	switch {
	case errors.Is(err, deployer.ErrNotFound):
		return r
	case err != nil:
		r.Error = err.Error()
		return r
	}
	r.From = rev.DeploymentID
	if rel.KeepResources {
		return r
	}
	r.Objects, r.Error = deletions(ctx, actor, rev, nil)
	return r
}
