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
// Every install and upgrade runs a post-render step over what the chart's
// templates render, before Helm applies anything: it confines the release
// to Release.ForceNamespace, adds Release.Labels and Release.Annotations to
// every object, and rejects labels and annotations the API server would
// (ErrInvalidMetadata), so that an invalid chart fails without a partial
// apply. Helm v3 does not post-render hooks; they are applied as rendered.
//
// Besides Deploy and Uninstall, a Deployer reports a deployed release's
// readiness (Status, WaitReady, judged by kstatus from sigs.k8s.io/cli-utils
// with Fleet's waitForJobs and ignore.conditions, see ReadyOptions), forgets a
// release while keeping its objects (Forget, Fleet's keepResources) and
// deletes a release namespace (DeleteNamespace, Fleet's deleteNamespace).
//
// The package does not log "Deployed bundle": it reports Result.Changed and
// the caller (an activity, which knows the workflow) logs once per real
// deploy.
package deployer
