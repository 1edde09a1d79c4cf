package deployer

import (
	"context"

	"go.uber.org/zap"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/release"
)

// upgrade upgrades the release to what is wanted (stateOutOfSync,
// stateFailed). Helm upgrades a release whose newest record is failed,
// with or without a deployed revision before it, from that record: the
// objects of an interrupted first install (stateFailed once recovered)
// are updated in place, never deleted.
func (r *deployRun) upgrade(ctx context.Context) (*release.Release, error) {
	rel := r.rel
	up := action.NewUpgrade(r.cfg)
	up.PostRenderer = r.pr
	up.Namespace = rel.Namespace
	up.Timeout = r.d.timeoutOf(rel)
	up.Wait = rel.Wait
	up.WaitForJobs = rel.Wait && rel.WaitForJobs
	up.Atomic = rel.Atomic
	up.Force = rel.Force
	up.TakeOwnership = rel.TakeOwnership
	up.EnableDNS = !rel.DisableDNS
	up.SkipSchemaValidation = rel.SkipSchemaValidation
	up.DisableOpenAPIValidation = true // see install
	up.Description = rel.Description
	up.MaxHistory = rel.MaxHistory
	if up.MaxHistory <= 0 {
		up.MaxHistory = DefaultMaxHistory
	}
	return r.withCapabilities(func() (*release.Release, error) {
		out, err := up.RunWithContext(helmContext(ctx), rel.Name, r.chrt, rel.Values)
		if err == nil {
			return out, nil
		}
		if rel.Atomic {
			// Helm stores the rollback of a failed atomic upgrade without
			// pruning the history.
			if capErr := capHistory(r.cfg, rel.Name, up.MaxHistory); capErr != nil {
				r.d.log.Warn("Could not prune release history", zap.String("release", rel.Name),
					zap.String("namespace", rel.Namespace), zap.Error(capErr))
			}
		}
		return nil, actionError(ctx, "upgrade", rel, err)
	})
}
