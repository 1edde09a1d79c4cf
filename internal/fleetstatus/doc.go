// Package fleetstatus writes Fleet's status back to the management
// cluster: it projects Flotilla's status (status.GitRepo, cluster and
// group records) onto the status JSON of Fleet's GitRepo, HelmOp, Cluster
// and ClusterGroup (Project*, pure), writes it through a debounced Writer
// (at most one write per resource per MinInterval, none when nothing
// changed, bounded in size), emits Kubernetes Events on transitions
// (Transitions, pure) and keeps read-only Bundle mirrors of each GitRepo's
// bundles. Per-cluster BundleDeployments are never written.
package fleetstatus
