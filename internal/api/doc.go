// Package api defines the resources users apply with `flotilla apply`:
// GitRepo, Cluster and ClusterGroup (apiVersion flotilla.dev/v1alpha1, and
// Fleet's fleet.cattle.io/v1alpha1 GitRepo and ClusterGroup unchanged), how
// they are decoded from YAML, defaulted and validated.
//
// The package is pure: no I/O beyond the reader handed to Decode, so
// workflow code may call Validate and Default.
package api
