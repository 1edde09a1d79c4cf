package activities

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/flotilla-gitops/flotilla/internal/bundle"
	"github.com/flotilla-gitops/flotilla/internal/cluster"
	"github.com/flotilla-gitops/flotilla/internal/content"
	"github.com/flotilla-gitops/flotilla/internal/deployer"
	"github.com/flotilla-gitops/flotilla/internal/drift"
	"github.com/flotilla-gitops/flotilla/internal/outcome"
	"github.com/flotilla-gitops/flotilla/internal/render"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

// Labels and annotations Flotilla puts on every object it deploys.
const (
	LabelBundle       = drift.BundleLabel
	AnnotationGitRepo = "flotilla.dev/gitrepo"
	AnnotationCommit  = "flotilla.dev/commit"
)

// ClusterActivities deploy to, check, roll back and clean up clusters.
// In push mode the controller's worker registers them once on its own
// task queue (default "flotilla") and each call names its cluster; an
// agent (pull mode) registers them on its cluster's queue with Clusters
// limited to that cluster.
type ClusterActivities struct {
	// Clusters connects to the clusters served and caches their
	// RESTClientGetters. For an agent it serves only the agent's cluster
	// (ConnectionsOptions.Only); calls for another cluster fail.
	Clusters *cluster.Connections
	Deployer *deployer.Deployer
	Content  *content.Store
	// Refill re-derives content that Content (and its registry, if any)
	// misses from its source, checked against its ID: the controller
	// renders the GitRepo's commit again (see Refill), so any
	// controller replica can deploy what another one rendered. Optional:
	// nil in agents, which read content from the registry only.
	Refill Refiller
	Logger *zap.Logger
	// ReadyPoll is how often WaitReady re-checks. Default 500ms.
	ReadyPoll time.Duration
	// Signal reports what Watch sees to the GitRepos (required by Watch).
	Signal Signaller
	// Downstream delivers the Secrets and ConfigMaps bundles copy
	// (downstreamResources; see downstream.go). Optional: without it such
	// bundles fail.
	Downstream DownstreamSource
	// watches keeps each cluster's drift monitor between Watch calls.
	watches drift.Watches
	// live batches the watches' reports per GitRepo.
	liveOnce sync.Once
	live     *liveBatcher
}

// Deploy makes the cluster run each bundle at its deployment ID, each on
// its own, and reports a typed outcome per bundle (see internal/outcome).
// A release already at the ID is left alone (no Helm call beyond reading
// it); otherwise it is installed or upgraded and "Deployed bundle" is
// logged once. A bundle that fails (BundleFailed, Invalid) or whose
// content cannot be read (ContentUnavailable) does not stop the others.
// A cluster that does not answer returns Retry (Unreachable) and one that
// refuses the credentials reports every bundle Unauthorized: nothing is
// tried there.
func (c *ClusterActivities) Deploy(ctx context.Context, in DeployInput) (DeployResult, error) {
	defer keepAlive(ctx)()
	k, err := c.Clusters.Open(ctx, in.Cluster)
	if err != nil {
		return c.unreached(in, in.Bundles, err), nil
	}
	var out DeployResult
	for i, b := range in.Bundles {
		d, gone := c.deployOne(ctx, k, in, b)
		if gone != nil {
			// The cluster stopped answering: what is left is not tried.
			res := c.unreached(in, in.Bundles[i:], gone)
			res.Deployments = append(out.Deployments, res.Deployments...)
			return res, nil
		}
		out.Deployments = append(out.Deployments, d)
		activity.RecordHeartbeat(ctx, b.Name)
	}
	return out, nil
}

// unreached is the result of a deploy of bundles to a cluster that did
// not answer (Retry: the rollout tries again shortly) or refused the
// credentials (every bundle WaitApplied, retried on the failure backoff).
func (c *ClusterActivities) unreached(in DeployInput, bundles []Bundle, err error) DeployResult {
	msg := fmt.Sprintf("cluster %s: %v", in.Cluster, err)
	fields := []zap.Field{zap.String("cluster", in.Cluster), zap.String("workflowID", in.WorkflowID), zap.Error(err)}
	class := deployer.Classify(err)
	if class != outcome.Unauthorized {
		// However else the cluster failed, it was not reached.
		class = outcome.Unreachable
	}
	if class.Policy().Retry == outcome.RetrySoon {
		c.Logger.Warn("Cluster not reachable", fields...)
		return DeployResult{Retry: true, Class: class, Message: msg}
	}
	c.Logger.Warn("Cluster refused credentials", fields...)
	out := DeployResult{Class: class, Message: msg}
	for _, b := range bundles {
		out.Deployments = append(out.Deployments, status.Deployment{Bundle: b.Name, Cluster: in.Cluster, Release: b.Release,
			Namespace: b.Namespace, DeploymentID: b.DeploymentID, State: status.StateOf(class), Outcome: class, Message: msg})
	}
	return out
}

// deployOne deploys one bundle and reports its outcome. gone is set, and
// nothing reported, when the cluster itself stopped answering.
func (c *ClusterActivities) deployOne(ctx context.Context, k *cluster.Conn, in DeployInput, b Bundle) (d status.Deployment, gone error) {
	d = status.Deployment{Bundle: b.Name, Cluster: k.Name(), Release: b.Release, Namespace: b.Namespace, DeploymentID: b.DeploymentID}
	rel, opts, class, err := c.release(ctx, in, b)
	if err != nil {
		return c.failed(in, d, class, err), nil
	}
	if class, err := c.copyDownstream(ctx, k, in, b, opts); err != nil {
		return c.downstreamFailed(ctx, k, in, d, class, err)
	}
	getter, err := k.Getter(b.Namespace)
	if err != nil {
		return d, err
	}
	res, err := c.Deployer.Deploy(ctx, getter, rel)
	if err != nil {
		class := deployer.Classify(err)
		if errors.Is(err, deployer.ErrInvalidRelease) || class == outcome.Invalid {
			class = outcome.Invalid // nothing was applied: the cluster answered
		} else if perr := k.Reachable(ctx); perr != nil {
			return d, perr // the cluster, not the bundle, failed
		}
		d.AppliedDeploymentID = res.Previous
		return c.failed(in, d, class, err), nil
	}
	fields := []zap.Field{zap.String("bundle", b.Name), zap.String("cluster", k.Name()),
		zap.String("release", b.Namespace+"/"+b.Release), zap.Int("revision", res.Revision),
		zap.String("deploymentID", b.DeploymentID), zap.String("workflowID", in.WorkflowID)}
	switch {
	case res.Changed:
		c.Logger.Info("Deployed bundle", fields...)
	case interrupted(res, rel.Description):
		// An earlier attempt of this very activity deployed the revision
		// and then died: its "Deployed bundle" line may or may not have
		// been written (a kill can land between Helm's final write and the
		// log). "Deployed bundle" stays at most once per deploy; this line
		// makes sure no deploy goes unrecorded.
		c.Logger.Info("Confirmed interrupted deploy", append(fields, zap.Int32("attempt", activity.GetInfo(ctx).Attempt))...)
	case len(b.Repair) > 0:
		c.repair(ctx, getter, k.Name(), in, b, opts)
	}
	d.AppliedDeploymentID = b.DeploymentID
	seen, err := c.observe(ctx, k, d, render.ReadyOptions(opts))
	if err != nil {
		// Deployed, but its readiness could not be read: deploy again (a
		// no-op at the same ID) to read it.
		return c.failed(in, d, outcome.Unreachable, err), nil
	}
	return seen, nil
}

// repair restores a release that runs its deployment ID but drifted (a
// sync's deploy of b.Repair): the correction correctDrift makes, logged
// the same way. A failed repair is logged; the readiness check that
// follows shows what is still missing.
func (c *ClusterActivities) repair(ctx context.Context, getter genericclioptions.RESTClientGetter, cluster string, in DeployInput, b Bundle,
	opts bundle.Options) {
	co := deployer.CorrectOptions{Owner: ownerOf(in.GitRepo)}
	if cd := opts.CorrectDrift; cd != nil {
		co.Force, co.KeepFailHistory = cd.Force, cd.KeepFailHistory
	}
	if opts.Helm != nil {
		co.MaxHistory = opts.Helm.MaxHistory
	}
	fields := []zap.Field{zap.String("bundle", b.Name), zap.String("cluster", cluster), zap.String("release", b.Namespace+"/"+b.Release),
		zap.String("deploymentID", b.DeploymentID), zap.Strings("objects", b.Repair), zap.String("reason", "sync"),
		zap.String("workflowID", in.WorkflowID)}
	rev, err := c.Deployer.Correct(ctx, getter, b.Namespace, b.Release, b.DeploymentID, co)
	if err != nil {
		drift.Corrections.WithLabelValues("failure").Inc()
		c.Logger.Warn("Drift correction failed", append(fields, zap.Error(err))...)
		return
	}
	drift.Corrections.WithLabelValues("success").Inc()
	c.Logger.Info("Corrected drift", append(fields, zap.Int("revision", rev))...)
}

// failed reports a bundle's failure on a cluster: its state, message and
// log line from the outcome class's policy.
func (c *ClusterActivities) failed(in DeployInput, d status.Deployment, class outcome.Class, err error) status.Deployment {
	p := class.Policy()
	if class == outcome.OK {
		p = outcome.Unclassified // no caller passes OK: every error has a class
	}
	d.Outcome, d.State = class, status.State(p.State)
	d.Message = fmt.Sprintf("cluster %s: bundle %s: %v", d.Cluster, d.Bundle, err)
	if p.Note != "" {
		d.Message = fmt.Sprintf("cluster %s: bundle %s: %s: %v", d.Cluster, d.Bundle, p.Note, err)
	}
	c.Logger.Warn(p.Log, zap.String("bundle", d.Bundle), zap.String("cluster", d.Cluster),
		zap.String("release", d.Namespace+"/"+d.Release), zap.String("deploymentID", d.DeploymentID),
		zap.String("class", string(class)), zap.String("workflowID", in.WorkflowID), zap.Error(err))
	return d
}

// observe fills in readiness and resource counts.
func (c *ClusterActivities) observe(ctx context.Context, k *cluster.Conn, d status.Deployment, opts deployer.ReadyOptions) (status.Deployment, error) {
	getter, err := k.Getter(d.Namespace)
	if err != nil {
		return d, err
	}
	st, err := c.Deployer.Status(ctx, getter, d.Namespace, d.Release, opts)
	if err != nil {
		return d, fmt.Errorf("bundle %s: %w", d.Bundle, err)
	}
	return observed(k, d, st), nil
}

// observed fills in d's readiness and resource counts from the status of
// its release.
func observed(k *cluster.Conn, d status.Deployment, st deployer.Status) status.Deployment {
	d.AppliedDeploymentID = st.DeploymentID
	d.Resources, d.ReadyResources = st.Resources, st.Ready
	d.Missing, d.NotReadyResources, d.Unknown = st.MissingCount, st.NotReadyCount, st.UnknownCount
	d.State, d.Message = status.Ready, ""
	if st.DeploymentID != d.DeploymentID && d.DeploymentID != "" {
		d.State, d.Message = status.WaitApplied, fmt.Sprintf("cluster %s: release runs %s", k.Name(), st.DeploymentID)
	} else if notReady := append(st.Missing, st.NotReady...); len(notReady) > 0 {
		d.State = status.NotReady
		d.Message = fmt.Sprintf("cluster %s: %s", k.Name(), strings.Join(notReady, "; "))
	}
	return d
}

// release builds the Helm release of a bundle from the content store. A
// store or registry that cannot deliver the content is ContentUnavailable;
// content that cannot be made into a release is BundleFailed.
func (c *ClusterActivities) release(ctx context.Context, in DeployInput, b Bundle) (deployer.Release, bundle.Options, outcome.Class, error) {
	m, err := c.manifest(ctx, in, b)
	if err != nil {
		return deployer.Release{}, bundle.Options{}, outcome.ContentUnavailable, err
	}
	opts, err := c.options(ctx, optionsOf(in, b))
	if err != nil {
		return deployer.Release{}, opts, outcome.ContentUnavailable, err
	}
	rel, err := render.Release(bundle.Bundle{Name: b.Name, Dir: b.Path, ManifestID: b.ManifestID}, m, opts, b.DeploymentID)
	if err != nil {
		return deployer.Release{}, opts, outcome.BundleFailed, err
	}
	// The plan's release and namespace were computed from the same
	// options; they win so cleanup and status always agree with it.
	rel.Name, rel.Namespace = b.Release, b.Namespace
	rel.Owner, rel.OwnerBundle = ownerOf(in.GitRepo), b.Name
	rel.Labels = map[string]string{LabelBundle: b.Name}
	rel.Annotations = map[string]string{AnnotationGitRepo: in.GitRepo.String(), AnnotationCommit: in.Commit}
	rel.Description = deployedBy(ctx)
	rel.ServiceAccount = opts.ServiceAccount
	rel.NamespaceLabels, rel.NamespaceAnnotations = opts.NamespaceLabels, opts.NamespaceAnnotations
	rel.ValuesFrom = valuesRefs(opts, b.Namespace)
	return rel, opts, outcome.OK, nil
}

// valuesRefs lists the ConfigMap and Secret keys of opts' helm.valuesFrom,
// read on the cluster at deploy time, in Fleet's order: entries in list
// order, an entry's ConfigMap before its Secret. A reference without a
// namespace is in the bundle's target namespace ns; one without a key
// names deployer.DefaultValuesKey.
func valuesRefs(opts bundle.Options, ns string) []deployer.ValuesRef {
	if opts.Helm == nil {
		return nil
	}
	var out []deployer.ValuesRef
	add := func(r *bundle.KeyRef, secret bool) {
		if r == nil {
			return
		}
		ref := deployer.ValuesRef{Secret: secret, Namespace: r.Namespace, Name: r.Name, Key: r.Key}
		if ref.Namespace == "" {
			ref.Namespace = ns
		}
		out = append(out, ref)
	}
	for _, vf := range opts.Helm.ValuesFrom {
		add(vf.ConfigMapKeyRef, false)
		add(vf.SecretKeyRef, true)
	}
	return out
}

// manifest reads b's manifest from the content store; a miss is refilled
// from its source when the worker can (push mode).
func (c *ClusterActivities) manifest(ctx context.Context, in DeployInput, b Bundle) (bundle.Manifest, error) {
	m, err := c.Content.GetManifestContext(ctx, b.ManifestID)
	if c.Refill == nil || !errors.Is(err, content.ErrNotFound) {
		return m, err
	}
	if rerr := c.Refill(ctx, RefillInput{GitRepo: in.GitRepo, Commit: in.Commit, Bundle: b.Name, ManifestID: b.ManifestID}); rerr != nil {
		return m, refillFailed(err, rerr)
	}
	return c.Content.GetManifestContext(ctx, b.ManifestID)
}

// options reads the options in names from the content store; a miss is
// refilled from its source when the worker can (push mode).
func (c *ClusterActivities) options(ctx context.Context, in RefillInput) (bundle.Options, error) {
	o, err := c.Content.GetOptionsContext(ctx, in.OptionsHash)
	if c.Refill == nil || !errors.Is(err, content.ErrNotFound) {
		return o, err
	}
	if rerr := c.Refill(ctx, in); rerr != nil {
		return o, refillFailed(err, rerr)
	}
	return c.Content.GetOptionsContext(ctx, in.OptionsHash)
}

// refillFailed is a miss (err) that a refill could not fill (rerr). A
// render's failure is the Temporal application error Render would return:
// its message is shown without the type and retry suffix, which would
// mislead in a deployment's message.
func refillFailed(err, rerr error) error {
	var ae *temporal.ApplicationError
	if errors.As(rerr, &ae) {
		return fmt.Errorf("%w; not refilled: %s", err, ae.Message())
	}
	return fmt.Errorf("%w; not refilled: %w", err, rerr)
}

// optionsOf names b's options on the cluster in deploys to.
func optionsOf(in DeployInput, b Bundle) RefillInput {
	return RefillInput{GitRepo: in.GitRepo, Commit: in.Commit, Bundle: b.Name, BundleKey: b.BundleKey,
		Cluster: in.Cluster, OptionsHash: b.OptionsHash}
}

// ownerOf is the owner of the releases of the GitRepo or HelmOp ref:
// "GitRepo ns/name". Ownership is the GitRepo's, not the bundle's: a
// bundle renamed with its releaseName kept takes its release over, as
// the plan intends (the bundle is recorded beside the owner). It is ""
// (nothing recorded or checked) for input without a GitRepo, as
// histories from before it was set have none.
func ownerOf(ref GitRepoRef) deployer.Owner {
	if ref.Name == "" {
		return ""
	}
	return deployer.Owner(ref.Title())
}

// interrupted reports whether Deploy, called by the activity execution
// by, found the revision an earlier, interrupted attempt of that same
// execution recorded: the deploy happened, but its attempt died before
// reporting it.
func interrupted(res deployer.Result, by string) bool {
	return !res.Changed && by != "" && res.Description == by
}

// deployedBy names the activity execution that deploys, for the Helm
// revision's description: `helm history` shows which rollout made each
// revision, and a retried attempt recognises a revision its interrupted
// predecessor recorded. Outside an activity it is "" (Helm's default).
func deployedBy(ctx context.Context) string {
	if !activity.IsActivity(ctx) {
		return ""
	}
	info := activity.GetInfo(ctx)
	return fmt.Sprintf("Flotilla %s (run %s, activity %s)", info.WorkflowExecution.ID, info.WorkflowExecution.RunID, info.ActivityID)
}

// WaitReady polls the bundles' resources until all are ready, the
// timeout (or the activity's deadline) passes, or the rollout cancels it;
// it reports what it saw last either way, heartbeating as it goes.
func (c *ClusterActivities) WaitReady(ctx context.Context, in WaitReadyInput) (DeployResult, error) {
	var deadline time.Time
	if d, ok := ctx.Deadline(); ok {
		deadline = d.Add(-2 * time.Second)
	}
	if limit := time.Now().Add(in.Timeout); in.Timeout > 0 && (deadline.IsZero() || limit.Before(deadline)) {
		deadline = limit
	}
	k, err := c.Clusters.Connect(in.Cluster)
	if err != nil {
		return DeployResult{}, err
	}
	// Only the bundles' options are needed to judge readiness, not their
	// rendered releases. Options that cannot be read leave the defaults.
	stop := keepAlive(ctx) // a refill may render
	awaited := make([]deployer.Awaited, len(in.Bundles))
	for i, b := range in.Bundles {
		awaited[i] = deployer.Awaited{Namespace: b.Namespace, Name: b.Release, DeploymentID: b.DeploymentID}
		if o, err := c.options(ctx, optionsOf(in.DeployInput, b)); err == nil {
			awaited[i].Ready = render.ReadyOptions(o)
		}
	}
	stop()
	poll := c.ReadyPoll
	if poll <= 0 {
		poll = 500 * time.Millisecond
	}
	seen := c.Deployer.WaitAll(ctx, k.Getter, awaited, deployer.WaitOptions{
		Interval: poll, Deadline: deadline, Progress: func([]deployer.Observed) { activity.RecordHeartbeat(ctx) }})
	var out DeployResult
	for i, b := range in.Bundles {
		d := status.Deployment{Bundle: b.Name, Cluster: k.Name(), Release: b.Release, Namespace: b.Namespace, DeploymentID: b.DeploymentID}
		if err := seen[i].Err; err != nil {
			d.State, d.Message = status.NotReady, fmt.Sprintf("cluster %s: bundle %s: %v", k.Name(), b.Name, err)
		} else {
			d = observed(k, d, seen[i].Status)
		}
		out.Deployments = append(out.Deployments, d)
	}
	return out, nil
}

// Cleanup removes releases: helm uninstall, or with keepResources only
// Helm's record of them; deleteNamespace then deletes the namespace.
func (c *ClusterActivities) Cleanup(ctx context.Context, in CleanupInput) (CleanupResult, error) {
	defer keepAlive(ctx)()
	var out CleanupResult
	k, err := c.Clusters.Open(ctx, in.Cluster)
	if err != nil {
		out.Retry, out.Class, out.Message = true, deployer.Classify(err), fmt.Sprintf("cluster %s: %v", in.Cluster, err)
		return out, nil
	}
	for _, r := range in.Releases {
		kept, err := c.cleanupOne(ctx, k, in, r)
		out.Kept = append(out.Kept, kept...)
		if err != nil {
			// Each release on its own: the others are still removed.
			out.Retry, out.Class = true, deployer.Classify(err)
			out.Message = fmt.Sprintf("cluster %s: release %s/%s: %v", k.Name(), r.Namespace, r.Release, err)
			continue
		}
		out.Removed = append(out.Removed, r.Namespace+"/"+r.Release)
		activity.RecordHeartbeat(ctx, r.Release)
	}
	sort.Strings(out.Removed)
	return out, nil
}

// cleanupOne removes release r from cluster k, and says what it kept on
// purpose.
func (c *ClusterActivities) cleanupOne(ctx context.Context, k *cluster.Conn, in CleanupInput, r Release) (kept []string, err error) {
	getter, err := k.Getter(r.Namespace)
	if err != nil {
		return nil, err
	}
	id, _, err := c.Deployer.Current(getter, r.Namespace, r.Release)
	if err != nil {
		return nil, err
	}
	// Everything beside Helm's own removal acts as the release's
	// ServiceAccount too, read before the release is gone.
	actor, sa, err := c.Deployer.Actor(getter, r.Namespace, r.Release)
	if err != nil {
		return nil, err
	}
	owner := ownerOf(in.GitRepo)
	if r.KeepResources {
		err = c.Deployer.Forget(ctx, getter, r.Namespace, r.Release, owner)
	} else {
		err = c.Deployer.Uninstall(ctx, getter, r.Namespace, r.Release, owner)
	}
	var owned *deployer.OwnedError
	if errors.As(err, &owned) {
		// Another GitRepo's release of the same name: never ours to
		// remove. It leaves this GitRepo's inventory, untouched.
		c.Logger.Warn("Kept release of another owner", zap.String("bundle", r.Bundle), zap.String("cluster", k.Name()),
			zap.String("release", r.Namespace+"/"+r.Release), zap.String("owner", string(owned.Owner)),
			zap.String("workflowID", in.WorkflowID))
		return []string{fmt.Sprintf("cluster %s: bundle %s: not removed: %v", k.Name(), r.Bundle, owned)}, nil
	}
	if err != nil {
		return nil, err
	}
	if err := c.removeDownstream(ctx, actor, sa, r); err != nil {
		return nil, err
	}
	if r.DeleteNamespace && !r.KeepResources {
		err := c.Deployer.DeleteNamespace(ctx, actor, deployer.NamespaceDeletion{Namespace: r.Namespace, Release: r.Release,
			Labels: map[string]string{LabelBundle: r.Bundle}})
		var kept *deployer.NamespaceKeptError
		switch {
		case errors.As(err, &kept):
			// The release is removed; its namespace stays, and a retry
			// would keep it again.
			c.Logger.Warn("Kept namespace", zap.String("bundle", r.Bundle), zap.String("cluster", k.Name()),
				zap.String("namespace", r.Namespace), zap.String("reason", string(kept.Reason)), zap.String("message", kept.Error()))
			c.logRemoved(id, k, in, r)
			return []string{fmt.Sprintf("cluster %s: bundle %s: %v", k.Name(), r.Bundle, kept)}, nil
		case err != nil:
			return nil, err
		}
	}
	c.logRemoved(id, k, in, r)
	return nil, nil
}

// logRemoved logs the removal of release r, which ran deployment id ("":
// none was deployed, nothing to log).
func (c *ClusterActivities) logRemoved(id string, k *cluster.Conn, in CleanupInput, r Release) {
	if id != "" {
		c.Logger.Info("Removed bundle", zap.String("bundle", r.Bundle), zap.String("cluster", k.Name()),
			zap.String("release", r.Namespace+"/"+r.Release), zap.Bool("keepResources", r.KeepResources),
			zap.String("deploymentID", id), zap.String("workflowID", in.WorkflowID))
	}
}

// Rollback returns releases to the deployment they ran before a halted
// rollout (Helm rollback to the newest revision carrying that deployment
// ID). Each release is reported OutOfSync with a typed outcome: RolledBack
// ("rolled back to ...") or RollbackFailed (the error, naming the
// cluster); a release that no longer runs the halted rollout's deployment
// is left alone. When the cluster cannot be reached, every release's
// rollback fails with that error.
func (c *ClusterActivities) Rollback(ctx context.Context, in RollbackInput) (DeployResult, error) {
	defer keepAlive(ctx)()
	k, connErr := c.Clusters.Open(ctx, in.Cluster)
	var out DeployResult
	for _, r := range in.Releases {
		d := status.Deployment{Bundle: r.Bundle, Cluster: in.Cluster, Release: r.Release, Namespace: r.Namespace,
			DeploymentID: r.From, State: status.OutOfSync}
		err := connErr
		if err == nil {
			err = c.rollbackOne(ctx, k, in, r)
		}
		if err != nil {
			d.Rollback, d.Outcome = outcome.RollbackFailed, deployer.Classify(err)
			d.Message = fmt.Sprintf("rollback failed: cluster %s: bundle %s: %v", in.Cluster, r.Bundle, err)
			d.AppliedDeploymentID = r.From
		} else {
			d.Rollback = outcome.RolledBack
			d.Message = fmt.Sprintf("rolled back to %s on cluster %s: rollout halted", r.To, in.Cluster)
			d.AppliedDeploymentID = r.To
		}
		out.Deployments = append(out.Deployments, d)
		activity.RecordHeartbeat(ctx, r.Bundle)
	}
	return out, nil
}

func (c *ClusterActivities) rollbackOne(ctx context.Context, k *cluster.Conn, in RollbackInput, r RollbackRelease) error {
	getter, err := k.Getter(r.Namespace)
	if err != nil {
		return err
	}
	rev, err := c.Deployer.Rollback(ctx, getter, r.Namespace, r.Release, r.From, r.To, ownerOf(in.GitRepo))
	if err != nil {
		return err
	}
	c.Logger.Info("Rolled back bundle", zap.String("bundle", r.Bundle), zap.String("cluster", in.Cluster),
		zap.String("release", r.Namespace+"/"+r.Release), zap.Int("revision", rev),
		zap.String("deploymentID", r.To), zap.String("from", r.From), zap.String("workflowID", in.WorkflowID))
	return nil
}
