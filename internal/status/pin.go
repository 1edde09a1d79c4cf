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
