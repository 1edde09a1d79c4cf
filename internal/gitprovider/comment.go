package gitprovider

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// perPage is the comment list's page size (GitHub's and GitLab's maximum).
const perPage = 100

type comment struct {
	ID   int64  `json:"id"`
	Body string `json:"body"`
}

// UpsertComment makes the pull (merge) request pr carry one comment with
// body: the existing comment containing marker (a hidden HTML comment such
// as "<!-- flotilla-preview ns/name -->") is updated, else one is created.
// The body gets the marker prepended when it lacks it, so the next call
// finds it. It returns the comment's ID.
func (c *Client) UpsertComment(ctx context.Context, pr int, marker, body string) (int64, error) {
	return c.UpsertCommentAt(ctx, pr, 0, marker, body)
}

// UpsertCommentAt is UpsertComment with the comment's ID known from an
// earlier call (0: unknown): it updates that comment without listing, and
// falls back to the search when the comment is gone (deleted by someone).
func (c *Client) UpsertCommentAt(ctx context.Context, pr int, id int64, marker, body string) (int64, error) {
	if pr <= 0 {
		return 0, fmt.Errorf("%w: %s: pull request number %d", ErrInvalid, c.kind, pr)
	}
	if marker == "" {
		return 0, fmt.Errorf("%w: %s: comment without a marker", ErrInvalid, c.kind)
	}
	if !strings.Contains(body, marker) {
		body = marker + "\n" + body
	}
	if id > 0 {
		err := c.updateComment(ctx, pr, id, body)
		if !errors.Is(err, ErrNotFound) {
			return id, err
		}
	}
	found, err := c.findComment(ctx, pr, marker)
	if err != nil {
		return 0, err
	}
	if found > 0 {
		return found, c.updateComment(ctx, pr, found, body)
	}
	var created comment
	if _, err := c.do(ctx, "create comment", "POST", c.commentsPath(pr), map[string]string{"body": body}, &created); err != nil {
		return 0, err
	}
	return created.ID, nil
}

// commentsPath lists and creates a pull request's comments (GitHub and
// Gitea: the comments; GitLab: the merge request's notes).
func (c *Client) commentsPath(pr int) string {
	n := strconv.Itoa(pr)
	if c.kind == GitLab {
		return c.repo + "/merge_requests/" + n + "/notes"
	}
	return c.repo + "/issues/" + n + "/comments"
}

func (c *Client) updateComment(ctx context.Context, pr int, id int64, body string) error {
	method, path := "PATCH", c.repo+"/issues/comments/"+strconv.FormatInt(id, 10)
	if c.kind == GitLab {
		method, path = "PUT", c.commentsPath(pr)+"/"+strconv.FormatInt(id, 10)
	}
	_, err := c.do(ctx, "update comment", method, path, map[string]string{"body": body}, nil)
	return err
}

// findComment returns the ID of the first comment containing marker, 0
// when none does. Gitea lists all of an issue's comments in one answer;
// GitHub and GitLab are paged (100 a page, at most maxPages pages).
func (c *Client) findComment(ctx context.Context, pr int, marker string) (int64, error) {
	for page := 1; page <= maxPages; page++ {
		path := c.commentsPath(pr)
		if c.kind != Gitea {
			path += "?per_page=" + strconv.Itoa(perPage) + "&page=" + strconv.Itoa(page)
		}
		var list []comment
		if _, err := c.do(ctx, "list comments", "GET", path, nil, &list); err != nil {
			return 0, err
		}
		for _, cm := range list {
			if strings.Contains(cm.Body, marker) {
				return cm.ID, nil
			}
		}
		if c.kind == Gitea || len(list) < perPage {
			return 0, nil
		}
	}
	return 0, nil
}
