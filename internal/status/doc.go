// Package status holds the pure status types Flotilla reports: the state of
// one bundle on one cluster (Fleet's BundleDeployment states), the
// summaries the CLI and queries show for a GitRepo (GitRepo.Finish derives
// Fleet's display, per-bundle summaries, resource counts and conditions),
// and a rollout's gating state (waits, partitions, halts, Progress). It has
// no I/O, reads no clock and never lets map order reach a result, so
// workflow code can use it.
package status
