// Package policy enforces Fleet's GitRepoRestriction and Policy for the
// GitRepos and HelmOps of their namespace, whether these come from the
// management cluster or from `flotilla apply`.
//
// The decision is pure (Set.GitRepo, Set.HelmOp): from all restrictions
// and policies of one namespace it computes a spec's effective form (the
// defaults applied) or a *Violation naming the rule, with Fleet's
// semantics: documents of a kind are combined sorted by name, the first
// non-empty default wins (a GitRepoRestriction's over a Policy's), allowed
// lists are a union. The documents themselves live in Temporal, one
// PolicyWorkflow per namespace (ApplyDocument, DeleteDocument, Load);
// activities.CheckPolicy asks it before a GitRepo resolves, renders or
// deploys anything.
package policy
