package deployer

import (
	"fmt"

	"go.uber.org/zap"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/release"
)

// recoveredDescription is the description of a pending record that
// recovery marked failed.
const recoveredDescription = "interrupted operation recovered by Flotilla"

// recoverPending settles last, a release's newest record, left pending
// (or uninstalling) by a Helm operation whose writer is known gone
// (statePendingAbandoned); the caller then observes the release again.
//
//   - An interrupted uninstall is finished: it was asked for.
//   - An interrupted first install's record is dropped, and the next step
//     installs afresh at revision 1: a crash adds no Helm revision. Its
//     objects are never deleted (uninstalling would delete objects it
//     adopted with Release.TakeOwnership): those it created or adopted
//     carry this release's ownership metadata, so the new install takes
//     them over in place. A later install's record (after an uninstall
//     that kept its history) is marked failed and upgraded instead.
//   - An interrupted upgrade or rollback whose previous record is settled
//     is dropped, so the retried operation takes its revision number: a
//     crash adds no Helm revision (objects the interrupted operation
//     created carry this release's ownership metadata and are adopted).
//   - Otherwise the record is marked failed, and upgraded from.
func (d *Deployer) recoverPending(cfg *action.Configuration, last *release.Release) error {
	d.log.Info("Recovering interrupted Helm operation",
		zap.String("release", last.Name), zap.String("namespace", last.Namespace),
		zap.String("status", last.Info.Status.String()), zap.Int("revision", last.Version))
	switch last.Info.Status {
	case release.StatusUninstalling:
		return d.purge(cfg, last)
	case release.StatusPendingInstall:
		if last.Version == 1 {
			if _, err := cfg.Releases.Delete(last.Name, last.Version); err != nil {
				return fmt.Errorf("drop interrupted install of %s/%s: %w", last.Namespace, last.Name, err)
			}
			return nil
		}
		return markFailed(cfg, last)
	}
	if prev, err := cfg.Releases.Get(last.Name, last.Version-1); err == nil && settled(prev) {
		if _, err := cfg.Releases.Delete(last.Name, last.Version); err != nil {
			return fmt.Errorf("drop interrupted revision %d of %s/%s: %w", last.Version, last.Namespace, last.Name, err)
		}
		return nil
	}
	return markFailed(cfg, last)
}

// settled reports whether rec is neither pending nor part of an uninstall.
func settled(rec *release.Release) bool {
	s := rec.Info.Status
	return !s.IsPending() && s != release.StatusUninstalled && s != release.StatusUninstalling
}

// markFailed records that last's operation was interrupted.
func markFailed(cfg *action.Configuration, last *release.Release) error {
	last.Info.Status = release.StatusFailed
	last.Info.Description = recoveredDescription
	if err := cfg.Releases.Update(last); err != nil {
		return fmt.Errorf("mark interrupted release %s/%s failed: %w", last.Namespace, last.Name, err)
	}
	return nil
}

// purge finishes an uninstall: it removes what the release's records
// name and drops them. It serves an interrupted uninstall and the records
// of one that kept its history, never a release that was deployed.
func (d *Deployer) purge(cfg *action.Configuration, last *release.Release) error {
	un := action.NewUninstall(cfg)
	un.Timeout = d.timeout
	un.IgnoreNotFound = true
	if _, err := un.Run(last.Name); err != nil {
		return fmt.Errorf("finish uninstall of %s/%s: %w", last.Namespace, last.Name, err)
	}
	return nil
}
