package protocol

import "github.com/flotilla-gitops/flotilla/internal/api"

// QuerySource asks a GitRepo what it renders from (GitRepoSource). A
// controller whose content store misses a rendered bundle (its state dir
// is a cache, and another replica may have rendered the rollout) renders
// the commit again from there and checks the result against the IDs it
// was asked for.
const QuerySource = "source"

// GitRepoSource is a GitRepo's spec and the commits its releases come
// from. The spec names Secrets, never holds their values.
type GitRepoSource struct {
	Spec       api.GitRepoSpec `json:"spec"`
	Generation int64           `json:"generation"`
	// RolloutCommit is the running rollout's commit, Commit the last
	// finished rollout's and LatestCommit the newest seen on the remote.
	RolloutCommit string `json:"rolloutCommit,omitempty"`
	Commit        string `json:"commit,omitempty"`
	LatestCommit  string `json:"latestCommit,omitempty"`
}

// Commits lists the distinct commits a release of the GitRepo most likely
// runs, most likely first: the running rollout's, the last finished
// rollout's, the latest.
func (s GitRepoSource) Commits() []string {
	var out []string
	for _, c := range []string{s.RolloutCommit, s.Commit, s.LatestCommit} {
		seen := c == ""
		for _, o := range out {
			seen = seen || o == c
		}
		if !seen {
			out = append(out, c)
		}
	}
	return out
}
