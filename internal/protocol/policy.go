package protocol

import "github.com/flotilla-gitops/flotilla/internal/api"

// PolicyWorkflow holds the GitRepoRestrictions and Policies of one
// namespace (PolicyRecord), ID PolicyID(namespace). UpdateApply stores a
// document (PolicyApply), UpdatePolicyDelete removes one (PolicyDelete),
// QueryStatus answers the record. A change signals SignalPolicyChanged to
// every GitRepo and HelmOp of the namespace; the workflow ends when its
// last document is deleted.
const PolicyWorkflow = "PolicyWorkflow"

// UpdatePolicyDelete removes one document from a PolicyWorkflow.
const UpdatePolicyDelete = "delete"

// SignalPolicyChanged tells a GitRepo or HelmOp that the restrictions
// and policies of its namespace changed: it checks its spec against them
// again before it resolves, renders or deploys anything more.
const SignalPolicyChanged = "policyChanged"

// PolicyID is the ID of a namespace's PolicyWorkflow.
func PolicyID(namespace string) string { return "policy/" + namespace }

// PolicyRecord is a namespace's GitRepoRestrictions and Policies, each
// list sorted by name.
type PolicyRecord struct {
	Namespace    string                   `json:"namespace"`
	Restrictions []api.GitRepoRestriction `json:"restrictions,omitempty"`
	Policies     []api.Policy             `json:"policies,omitempty"`
	// Generation counts changes.
	Generation int64 `json:"generation"`
}

// PolicyStart starts (or continues) a PolicyWorkflow.
type PolicyStart struct {
	Record PolicyRecord `json:"record"`
}

// PolicyApply stores one document: exactly one of the two is set.
type PolicyApply struct {
	Restriction *api.GitRepoRestriction `json:"restriction,omitempty"`
	Policy      *api.Policy             `json:"policy,omitempty"`
}

// PolicyDelete removes the document of Kind (api.KindGitRepoRestriction
// or api.KindPolicy) and Name.
type PolicyDelete struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
}

// PolicyResult answers UpdateApply and UpdatePolicyDelete: whether the
// document is new, whether anything changed, and whether it was there
// (a delete of a missing document changes nothing).
type PolicyResult struct {
	Created    bool  `json:"created,omitempty"`
	Changed    bool  `json:"changed,omitempty"`
	Found      bool  `json:"found,omitempty"`
	Generation int64 `json:"generation"`
}
