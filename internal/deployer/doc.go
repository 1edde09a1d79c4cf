// Package deployer owns every Helm call Flotilla makes. A Deployer installs
// or upgrades one release on one cluster and records the deployment ID
// (manifestID:optionsHash) on the release, so that deploying an ID the
// cluster already runs is a no-op: no Helm upgrade, no new revision. Retries,
// workflow replays and worker restarts are therefore safe.
//
// An interrupted Helm operation (a release left pending-install,
// pending-upgrade or pending-rollback by a crash) is recovered by the next
// Deploy instead of blocking the release until a human intervenes.
//
// The package does not log "Deployed bundle": it reports Result.Changed and
// the caller (an activity, which knows the workflow) logs once per real
// deploy.
package deployer
