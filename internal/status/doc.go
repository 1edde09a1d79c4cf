// Package status holds the pure status types Flotilla reports: the state of
// one bundle on one cluster (Fleet's BundleDeployment states), and the
// summaries the CLI and queries show for a GitRepo. It has no I/O so
// workflow code can use it.
package status
