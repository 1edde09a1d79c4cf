package gitprovider

import (
	"context"
	"fmt"
	"net/url"
)

// The commit states, GitHub's spelling.
const (
	StatePending = "pending"
	StateSuccess = "success"
	StateFailure = "failure"
	StateError   = "error"
)

// maxDescription is GitHub's limit for a status description (140).
const maxDescription = 140

// Status is one commit status.
type Status struct {
	// Commit is the full SHA the status is set on.
	Commit string
	// State is pending, success, failure or error. GitLab gets running,
	// success, failed and failed (GitLab refuses a "pending" after a
	// "running" on one commit, and error has no equivalent).
	State string
	// Context names the check ("flotilla/plan/<gitrepo>"); GitLab's
	// "name".
	Context string
	// Description is a one-line summary, cut to 140 characters.
	Description string
	// TargetURL links to details; optional.
	TargetURL string
}

// SetStatus sets a commit status. It does not retry; a *StatusError says
// whether trying again is worth it (errors.Is ErrRateLimited/ErrTransient).
func (c *Client) SetStatus(ctx context.Context, s Status) error {
	state, ok := c.state(s.State)
	if !ok {
		return fmt.Errorf("%w: %s: status state %q is not one of pending, success, failure, error", ErrInvalid, c.kind, s.State)
	}
	if s.Commit == "" {
		return fmt.Errorf("%w: %s: status without a commit", ErrInvalid, c.kind)
	}
	desc := cut(s.Description, maxDescription)
	path := c.repo + "/statuses/" + url.PathEscape(s.Commit)
	var body map[string]string
	if c.kind == GitLab {
		body = map[string]string{"state": state, "name": s.Context, "description": desc}
	} else {
		body = map[string]string{"state": state, "context": s.Context, "description": desc}
	}
	if s.TargetURL != "" {
		body["target_url"] = s.TargetURL
	}
	_, err := c.do(ctx, "set status", "POST", path, body, nil)
	return err
}

func (c *Client) state(s string) (string, bool) {
	switch s {
	case StatePending, StateSuccess, StateFailure, StateError:
	default:
		return "", false
	}
	if c.kind != GitLab {
		return s, true
	}
	switch s {
	case StatePending:
		return "running", true
	case StateSuccess:
		return "success", true
	}
	return "failed", true
}

// cut shortens s to at most n runes, marking the cut.
func cut(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
