// Package applier stores Flotilla's resources in Temporal: a GitRepo or
// HelmOp goes to its entity workflow's apply update (starting the workflow
// when it is new), a Cluster or ClusterGroup to its workflow, a Secret is
// sealed and stored as ciphertext, a ConfigMap is stored as it is, and a
// GitRepoRestriction or Policy goes to internal/policy. The `flotilla
// apply` command and the management controller (internal/kubenative) both
// apply through it, so a document means the same from either door.
package applier
