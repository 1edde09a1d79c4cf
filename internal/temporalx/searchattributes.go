package temporalx

import (
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
)

// Names of Flotilla's custom search attributes. Every Flotilla workflow sets
// the ones that apply, so the Temporal UI and `flotilla get` can filter by
// repo, commit, cluster and state.
const (
	// SearchAttrGitRepo is "<namespace>/<name>" of the GitRepo.
	SearchAttrGitRepo = "FlotillaGitRepo"
	// SearchAttrCommit is the Git commit being rolled out.
	SearchAttrCommit = "FlotillaCommit"
	// SearchAttrCluster lists the clusters a workflow touches. A KeywordList,
	// because a rollout spans many clusters and "everything on cluster Y" must
	// find it.
	SearchAttrCluster = "FlotillaCluster"
	// SearchAttrState is the display state (Ready, NotReady, ErrApplied, …).
	SearchAttrState = "FlotillaState"
	// SearchAttrRepoURL is the normalised repository URL, for webhook matching.
	SearchAttrRepoURL = "FlotillaRepoURL"
)

// Typed keys for workflow.UpsertTypedSearchAttributes and start options.
var (
	KeyGitRepo = temporal.NewSearchAttributeKeyKeyword(SearchAttrGitRepo)
	KeyCommit  = temporal.NewSearchAttributeKeyKeyword(SearchAttrCommit)
	KeyCluster = temporal.NewSearchAttributeKeyKeywordList(SearchAttrCluster)
	KeyState   = temporal.NewSearchAttributeKeyKeyword(SearchAttrState)
	KeyRepoURL = temporal.NewSearchAttributeKeyKeyword(SearchAttrRepoURL)
)

// SearchAttributes returns Flotilla's custom search attributes and their
// types, as a fresh map the caller may keep.
func SearchAttributes() map[string]enumspb.IndexedValueType {
	return map[string]enumspb.IndexedValueType{
		SearchAttrGitRepo: enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		SearchAttrCommit:  enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		SearchAttrCluster: enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST,
		SearchAttrState:   enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		SearchAttrRepoURL: enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	}
}
