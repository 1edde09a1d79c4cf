package deployer

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/release"
	"k8s.io/cli-runtime/pkg/genericclioptions"
)

// ErrNoRevision marks a rollback whose target deployment is no longer in
// the release's Helm history (pruned by maxHistory).
var ErrNoRevision = errors.New("no revision carries the deployment ID")

// Rollback returns the release from deployment ID from to deployment ID
// to: a Helm rollback to the newest revision that carried to. It does
// nothing (returning the deployed revision) when the release no longer
// runs from — a newer rollout already changed it — or already runs to.
// It acts as the ServiceAccount the release's newest record names, if any.
// An operation an earlier process left pending is recovered first, and a
// release without a deployed revision repaired (see Correct); another
// owner's release is not touched (an *OwnedError).
func (d *Deployer) Rollback(ctx context.Context, getter genericclioptions.RESTClientGetter, namespace, name, from, to string,
	owner Owner) (int, error) {
	unlock, err := d.lock(ctx, getter, namespace, name)
	if err != nil {
		return 0, err
	}
	defer unlock()
	cfg, sa, err := d.releaseConfiguration(getter, namespace, name)
	if err != nil {
		return 0, err
	}
	_, h, err := d.settle(ctx, cfg, helmGetterOf(getter, namespace, sa), namespace, name, owner, false)
	if errors.Is(err, ErrNotFound) {
		return 0, fmt.Errorf("release %s/%s: %w %s", namespace, name, ErrNoRevision, to)
	}
	if err != nil {
		return 0, fmt.Errorf("roll back release %s/%s: %w", namespace, name, err)
	}
	defer h.release(ctx)
	current, target, err := rollbackTarget(cfg, namespace, name, from, to)
	if err != nil || target == 0 {
		return current, err
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("roll back release %s/%s: %w", namespace, name, err)
	}
	rb := action.NewRollback(cfg)
	rb.Version = target
	rb.Timeout = d.timeout
	rb.MaxHistory = DefaultMaxHistory // as upgrades keep by default
	if err := rb.Run(name); err != nil {
		return 0, asServiceAccount(fmt.Errorf("roll back release %s/%s to revision %d: %w", namespace, name, target, err), namespace, sa)
	}
	rel, err := cfg.Releases.Deployed(name)
	if err != nil {
		return 0, fmt.Errorf("read release %s/%s after rollback: %w", namespace, name, err)
	}
	return rel.Version, nil
}

// rollbackTarget returns the revision to roll release namespace/name back
// to, the newest before its newest that carried deployment ID to; or 0 and
// the deployed revision when there is nothing to do (it runs to, or no
// longer runs from).
func rollbackTarget(cfg *action.Configuration, namespace, name, from, to string) (current, target int, err error) {
	history, err := cfg.Releases.History(name)
	if err != nil {
		return 0, 0, fmt.Errorf("read history of release %s/%s: %w", namespace, name, err)
	}
	sort.Slice(history, func(i, j int) bool { return history[i].Version > history[j].Version })
	if len(history) == 0 {
		return 0, 0, fmt.Errorf("release %s/%s: %w %s", namespace, name, ErrNoRevision, to)
	}
	if current := history[0]; current.Info != nil && current.Info.Status == release.StatusDeployed {
		if id := DeploymentIDOf(current); id == to || id != from {
			return current.Version, 0, nil
		}
	}
	for _, r := range history[1:] {
		if DeploymentIDOf(r) == to {
			target = r.Version
			break
		}
	}
	if target == 0 {
		return 0, 0, fmt.Errorf("release %s/%s: %w %s", namespace, name, ErrNoRevision, to)
	}
	return 0, target, nil
}
