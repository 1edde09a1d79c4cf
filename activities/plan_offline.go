package activities

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/flotilla-gitops/flotilla/internal/deployer"
	"github.com/flotilla-gitops/flotilla/internal/plan"
)

// PlanOffline plans a cluster that could not be reached, on the
// controller, without any cluster: each of in.Bundles is rendered (as
// `flotilla render` does, for the default Kubernetes version) and
// compared with what in.Current says the GitRepo last deployed there,
// rendered the same way, release by release (matched by namespace and
// release name). A release not in Current is installed, one at the same
// deployment ID unchanged (not rendered), any other upgraded; in.Remove
// are uninstalled, with the objects of their Current render deleted. The
// result is Offline with in.Reason: it has no server defaults, admission
// or immutable-field checks, and does not know of changes made on the
// cluster. Content the controller's store misses is rendered again from
// the GitRepo (Refill); a bundle that does not render is an Error in its
// release.
func (a *Activities) PlanOffline(ctx context.Context, in PlanOfflineInput) (plan.Cluster, error) {
	defer keepAlive(ctx)()
	logger := a.Logger
	if logger == nil {
		logger = zap.NewNop()
	}
	r := &offlineRenderer{
		c: &ClusterActivities{Content: a.Content, Refill: Refill(a), Logger: logger},
		d: deployer.New(deployer.Options{Logger: logger.Named("helm")}),
	}
	current := make(map[string]Bundle, len(in.Current))
	for _, b := range in.Current {
		current[b.Namespace+"/"+b.Release] = b
	}
	out := plan.Cluster{Name: in.Cluster, Offline: true, Reason: in.Reason}
	for _, b := range in.Bundles {
		cur, ok := current[b.Namespace+"/"+b.Release]
		out.Releases = append(out.Releases, r.release(ctx, in.PlanInput, b, cur, ok))
	}
	for _, rm := range in.Remove {
		rel := plan.Release{Bundle: rm.Bundle, Release: rm.Release, Namespace: rm.Namespace, Action: plan.Uninstall}
		if cur, ok := current[rm.Namespace+"/"+rm.Release]; ok {
			rel.From = cur.DeploymentID
			if !rm.KeepResources {
				before, err := r.render(ctx, in.PlanInput, cur, "")
				rel.Objects, rel.Error = plan.Objects(before, nil), errorText(err)
			}
		}
		out.Releases = append(out.Releases, rel)
	}
	slices.SortFunc(out.Releases, func(a, b plan.Release) int { return strings.Compare(a.Bundle, b.Bundle) })
	return out, nil
}

// offlineRenderer renders bundles on the controller, for PlanOffline.
type offlineRenderer struct {
	// c reads content through the controller's store and refill.
	c *ClusterActivities
	d *deployer.Deployer
}

// release plans bundle b against cur (the current deployment; ok false
// when there is none).
func (r *offlineRenderer) release(ctx context.Context, in PlanInput, b, cur Bundle, ok bool) plan.Release {
	rel := plan.Release{Bundle: b.Name, Release: b.Release, Namespace: b.Namespace, To: b.DeploymentID}
	if ok {
		rel.From = cur.DeploymentID
	}
	rel.Action = plan.ActionFor(rel.From, rel.To)
	if rel.Action == plan.Unchanged {
		return rel
	}
	after, err := r.render(ctx, in, b, in.Commit)
	if err != nil {
		rel.Error = errorText(err)
		return rel
	}
	var before []*unstructured.Unstructured
	if ok {
		// The current render's commit is not known: refill tries the
		// GitRepo's running, last and latest commits.
		if before, err = r.render(ctx, in, cur, ""); err != nil {
			rel.Error = fmt.Sprintf("what runs there (%s): %s", cur.DeploymentID, errorText(err))
		}
	}
	rel.Objects = plan.Objects(before, after, AnnotationCommit)
	return rel
}

// render renders b as the deploy would, offline, from commit.
func (r *offlineRenderer) render(ctx context.Context, in PlanInput, b Bundle, commit string) ([]*unstructured.Unstructured, error) {
	rel, _, _, err := r.c.release(ctx, DeployInput{Cluster: in.Cluster, GitRepo: in.GitRepo, Commit: commit, WorkflowID: in.WorkflowID}, b)
	if err != nil {
		return nil, fmt.Errorf("bundle %s: %w", b.Name, err)
	}
	out, err := r.d.Template(ctx, rel, "")
	if err != nil {
		return nil, fmt.Errorf("bundle %s: %w", b.Name, err)
	}
	// Objects without a namespace keep none: which kinds are namespaced
	// is the cluster's to say. Both sides are read alike.
	objs, err := plan.ParseManifest(string(out))
	if err != nil {
		return nil, fmt.Errorf("bundle %s: %w", b.Name, err)
	}
	return objs, nil
}

// errorText is err's message, "" for nil.
func errorText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
