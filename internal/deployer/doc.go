// Package deployer owns every Helm call Flotilla makes. A Deployer installs
// or upgrades one release on one cluster and records the deployment ID
// (manifestID:optionsHash) on the release, so that deploying an ID the
// cluster already runs is a no-op: no Helm upgrade, no new revision. Retries,
// workflow replays and worker restarts are therefore safe.
//
// Deploy decides as fluxcd/helm-controller does: determineReleaseState
// reads the release's records and writer lease and names one state
// (state.go: Absent, OwnedByAnother, PendingLive, PendingAbandoned,
// NoDeployedRevision, Unowned, InSync, OutOfSync, Failed); actionForState
// maps it to one action, each in its own file (action_install.go,
// action_upgrade.go, action_recover.go, action_repair.go,
// action_adopt.go); Deploy repeats until an action finished it. Correct
// and Rollback settle the release the same way first (settle.go).
//
// A release records its Owner (a GitRepo or HelmOp and bundle) on every
// revision; another owner's Deploy, Correct, Rollback, Uninstall or Forget
// of it fails with an *OwnedError and changes nothing (owner.go).
//
// An interrupted Helm operation (a release left pending-install,
// pending-upgrade, pending-rollback or uninstalling by a crash) is
// recovered by the next Deploy instead of blocking the release until a
// human intervenes, but only once its writer is known gone: every write
// happens under the release's writer lease, renewed while Helm works
// (lease.go), and a live lease of another process fails the call with
// ErrReleaseBusy. An interrupted first install is upgraded, never
// uninstalled, so objects it adopted stay; a release left without a
// deployed revision by a rollback killed between its two writes is
// repaired by the next Deploy or Correct.
//
// Every install and upgrade runs a post-render step over what the chart's
// templates render, before Helm applies anything: it confines the release
// to Release.ForceNamespace, adds Release.Labels and Release.Annotations to
// every object, and rejects labels and annotations the API server would
// (ErrInvalidMetadata), so that an invalid chart fails without a partial
// apply. Helm v3 does not post-render hooks; they are applied as rendered.
//
// CustomResourceDefinitions among the templates' output (a raw-YAML bundle
// holds every file as a template) are installed before Helm builds the
// release's objects, as Helm itself does only for a chart's crds/: once
// every check passed, the post-render step server-side applies each CRD
// with the release's ownership metadata, waits (within the release's
// timeout) until it is established and the REST mapper serves its kinds,
// so custom resources of it in the same release deploy in the same Deploy.
// The CRDs stay in the release manifest, and Helm adopts and upgrades them.
// Unless Release.DeleteCRDResources, every such CRD is annotated
// helm.sh/resource-policy: keep, so that Uninstall (or an upgrade that drops
// it) leaves it, and the custom resources outside the release, in place, as
// Fleet does; another release that renders a kept CRD later takes it over
// once its previous release no longer exists.
//
// Three of Fleet's options act at deploy time, with the getter's own
// credentials unless said otherwise. Release.ServiceAccount: Helm acts as
// that ServiceAccount of the release namespace (impersonation), after
// Deploy checked that it exists; the revision records it, and Status,
// Rollback, Correct, Uninstall and Forget of the release act as it too; a
// refusal (403) names the account. Release.ValuesFrom: ConfigMap and
// Secret keys read when Deploy runs and merged over Release.Values in
// order; the revision records a digest of each key's data, and a release
// at its deployment ID whose keys hold other data since is upgraded.
// Release.NamespaceLabels and NamespaceAnnotations: server-side applied to
// the namespace, one field manager per release (NamespaceFieldManager), by
// installs and upgrades only, once the templates rendered and passed the
// checks.
//
// A Deploy that runs out of time waiting on the cluster (Release.Wait,
// hooks, CRDs) fails with ErrWaitTimeout. Every release keeps at most
// Release.MaxHistory revisions, failed ones included.
//
// Besides Deploy and Uninstall, a Deployer reports a deployed release's
// readiness (Status, WaitReady, judged by kstatus from sigs.k8s.io/cli-utils
// with Fleet's waitForJobs and ignore.conditions, see ReadyOptions), forgets a
// release while keeping its objects (Forget, Fleet's keepResources) and
// deletes a release namespace (DeleteNamespace, Fleet's deleteNamespace),
// unless it is Kubernetes', Flotilla's or an agent's, or holds another
// release's objects: then it keeps it and says why (NamespaceKeptError).
//
// Deploy, Correct and Rollback of one release on one API server wait for
// each other within a process; the same release name on other clusters
// does not wait.
//
// The package does not log "Deployed bundle": it reports Result.Changed and
// the caller (an activity, which knows the workflow) logs once per real
// deploy.
package deployer
