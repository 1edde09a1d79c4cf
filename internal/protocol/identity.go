package protocol

import "strings"

// Identity is who asked for something through the CLI (an approval, a
// sync, a rollback), as the history records it. It is what the CLI knows
// of itself, not an authenticated claim: Temporal authorises the call;
// this names the caller for people reading the history.
type Identity struct {
	// User is the operating system's user and host ("alice@laptop").
	User string `json:"user,omitempty"`
	// Subject is the subject of the mTLS client certificate the CLI
	// dialled Temporal with ("CN=alice,O=platform").
	Subject string `json:"subject,omitempty"`
	// APIKey names the Temporal API key: its JWT subject when it is one,
	// else "sha256:" and the first 12 hex digits of its digest.
	APIKey string `json:"apiKey,omitempty"`
	// Via says through which door the request came: "cli" (default),
	// "webhook" (with the delivery ID), "kubernetes".
	Via string `json:"via,omitempty"`
}

// IsZero reports whether nothing is known of the caller.
func (i Identity) IsZero() bool { return i == Identity{} }

// String renders the identity for people: "alice@laptop (cert
// CN=alice; api key ci-bot)". Empty for the zero identity.
func (i Identity) String() string {
	var extra []string
	if i.Subject != "" {
		extra = append(extra, "cert "+i.Subject)
	}
	if i.APIKey != "" {
		extra = append(extra, "api key "+i.APIKey)
	}
	if i.Via != "" && i.Via != "cli" {
		extra = append(extra, "via "+i.Via)
	}
	s := i.User
	if len(extra) > 0 {
		if s != "" {
			s += " "
		}
		s += "(" + strings.Join(extra, "; ") + ")"
	}
	return s
}

// Sync is the optional argument of the sync signal: who asked. A nil
// argument (CLIs from before it existed) is a sync by nobody known.
type Sync struct {
	Identity Identity `json:"identity,omitzero"`
}

// Rollback is the argument of the rollback update (UpdateRollback): roll
// Commit out as a pinned revision, through the GitRepo's rollout
// strategy, and keep it until `flotilla resume`.
type Rollback struct {
	Commit   string   `json:"commit"`
	Identity Identity `json:"identity,omitzero"`
}

// RollbackResult is the rollback update's answer.
type RollbackResult struct {
	// Commit is the full hash pinned.
	Commit string `json:"commit"`
	// Rollout names the rollout started (or to be started) for it.
	Rollout string `json:"rollout,omitempty"`
}

const (
	// UpdateRollback pins a GitRepo to a commit (Rollback).
	UpdateRollback = "rollback"
	// QueryHistory returns a GitRepo's history (history.Entries, newest
	// last).
	QueryHistory = "history"
)
