package status

import "time"

// Pin is the commit a GitRepo is pinned to by `flotilla rollback --to`:
// it rolls out that commit and no other until `flotilla resume`, while
// checks of the remote still record the newest commit (LatestCommit).
type Pin struct {
	Commit string `json:"commit"`
	// By is who pinned it (the CLI's identity, rendered).
	By string    `json:"by,omitempty"`
	At time.Time `json:"at"`
}

// ConditionPinned is True while `flotilla rollback --to` pins the GitRepo
// (reason ReasonRollback); absent otherwise, so GitRepos never pinned
// carry the conditions they always did. The Kubernetes-native status
// projection (internal/fleetstatus) shows it as any other condition.
const (
	ConditionPinned = "Pinned"
	ReasonRollback  = "Rollback"
)

// pinnedCondition says to which commit the GitRepo is pinned, by whom,
// and how to follow the branch again.
func (g *GitRepo) pinnedCondition() Condition {
	p := g.Pinned
	msg := "pinned to " + p.Commit
	if p.By != "" {
		msg += " by " + p.By
	}
	msg += " (rollback); `flotilla resume " + g.Name + "` follows the branch again"
	if g.LatestCommit != "" && g.LatestCommit != p.Commit {
		msg += "; newest commit " + g.LatestCommit + " is not rolled out"
	}
	return Condition{Type: ConditionPinned, Status: ConditionTrue, Reason: ReasonRollback, Message: msg}
}
