package deployer

import (
	"fmt"

	"go.uber.org/zap"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/release"
)

// repair marks superseded, the newest superseded record of a release that
// has no deployed revision (stateNoDeployed), deployed again: it is what
// the cluster ran last. Helm's rollback (a drift correction, or a halted
// rollout's rollback) marks the deployed revision superseded before it
// records the new one; a process killed in between leaves no deployed
// revision, which neither a correction (a rollback to the deployed
// revision) nor a Helm rollback can start from. After the repair the
// release is in sync or out of sync again: a Deploy upgrades it if
// needed, a correction restores its objects.
func (d *Deployer) repair(cfg *action.Configuration, superseded *release.Release) error {
	d.log.Info("Repairing release without a deployed revision",
		zap.String("release", superseded.Name), zap.String("namespace", superseded.Namespace),
		zap.Int("revision", superseded.Version))
	superseded.Info.Status = release.StatusDeployed
	if err := cfg.Releases.Update(superseded); err != nil {
		return fmt.Errorf("mark revision %d of %s/%s deployed: %w", superseded.Version, superseded.Namespace, superseded.Name, err)
	}
	return nil
}
