// Package target owns all cluster matching, with Fleet's rules (fleet.md
// §1.2, Fleet's target/matcher/clustermatcher.go and bundlematch.go): which
// clusters a selector (api.TargetSelector: a GitRepo target, a fleet.yaml
// overrideTargets entry, the selector of a fleet.yaml target or
// targetCustomization, a rollout partition) selects, which cluster groups
// a cluster belongs to, whether a bundle goes to a cluster, and which of
// its customizations apply there.
//
//   - A selector's criteria — clusterName, clusterSelector, clusterGroup and
//     clusterGroupSelector — are AND-ed. A selector with no criteria matches
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
// The package is pure (no I/O), so workflow code may call it. The selector
// type lives in internal/api, the leaf package that decodes GitRepos, so
// that internal/bundle can embed it without importing this package.
package target
