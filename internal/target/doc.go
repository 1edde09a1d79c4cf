// Package target decides which clusters a GitRepo's targets select, with
// Fleet's matching rules (fleet.md §1.2, Fleet's
// target/matcher/clustermatcher.go and bundlematch.go):
//
//   - A target's criteria — clusterName, clusterSelector, clusterGroup and
//     clusterGroupSelector — are AND-ed. A target with no criteria matches
//     nothing.
//   - clusterName matches the cluster's name or its
//     management.cattle.io/cluster-display-name label.
//   - A nil selector is not a criterion; an empty selector ({}) matches
//     everything.
//   - clusterGroup and clusterGroupSelector are checked against one group at
//     a time: a cluster matches when one of the groups whose selector
//     selects it satisfies both. A cluster in no group is checked once with
//     an empty group name and no group labels, as Fleet does, so
//     clusterGroupSelector {} also matches it but clusterGroup never does.
//   - Targets are evaluated in order and the first match wins: each cluster
//     gets at most one target.
//
// The package is pure (no I/O), so workflow code may call it.
package target
