package webhook

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"github.com/flotilla-gitops/flotilla/internal/gitsource"
	"go.uber.org/zap"
)

// PRAction is what happened to a pull (merge) request, normalised across
// providers.
type PRAction string

// The pull request actions the receiver acts on; any other (labelled,
// assigned, approved, …) makes the event Unknown.
const (
	// PROpen: opened or reopened (GitHub opened, reopened,
	// ready_for_review; GitLab open, reopen; Gitea opened, reopened).
	PROpen PRAction = "open"
	// PRUpdate: the head may have moved (GitHub synchronize, GitLab
	// update, Gitea synchronized).
	PRUpdate PRAction = "update"
	// PRClose: closed or merged; the preview ends.
	PRClose PRAction = "close"
)

// PullRequest is a pull (GitLab: merge) request event of the repository
// the event's RepoURLs name (the base repository, which also serves the
// head at HeadRef, forks included).
type PullRequest struct {
	Provider Provider
	// Number is GitHub's and Gitea's number, GitLab's iid.
	Number int
	Action PRAction
	// HeadSHA is the head commit, 40 lower-case hex; HeadRef the ref the
	// base repository serves it at: refs/pull/N/head (GitHub, Gitea),
	// refs/merge-requests/N/head (GitLab).
	HeadSHA, HeadRef string
	// BaseBranch is the branch the request merges into (no refs/heads/).
	BaseBranch string
	// RepoURLs are the base repository's URLs, as Event.RepoURLs.
	RepoURLs []string
	// Delivery is the delivery's ID, "" when the host sends none.
	Delivery string
	// Fork is set when the head comes from another repository than the
	// base (a fork), or from one the host no longer names (a deleted
	// fork): its content is the fork author's, not the repository's.
	Fork bool
}

// githubPRActions maps GitHub's and Gitea's pull_request actions.
var githubPRActions = map[string]PRAction{
	"opened": PROpen, "reopened": PROpen, "ready_for_review": PROpen,
	"synchronize": PRUpdate, "synchronized": PRUpdate, "closed": PRClose,
}

// gitlabMRActions maps GitLab's object_attributes.action.
var gitlabMRActions = map[string]PRAction{
	"open": PROpen, "reopen": PROpen, "update": PRUpdate, "close": PRClose, "merge": PRClose,
}

// isGitHubPR reports whether a GitHub-like event name is a pull request's
// (Gitea names a head update "pull_request_sync" in some versions).
func isGitHubPR(p Provider, name string) bool {
	return (p == GitHub || p == Gitea) && (name == "pull_request" || (p == Gitea && name == "pull_request_sync"))
}

// parseGitHubPR decodes a GitHub or Gitea pull_request delivery.
func parseGitHubPR(ev *Event, h http.Header, body []byte) error {
	body, err := formPayload(h, body)
	if err != nil {
		return err
	}
	var p struct {
		Action      string `json:"action"`
		Number      int    `json:"number"`
		PullRequest *struct {
			Number int `json:"number"`
			Head   struct {
				SHA  string      `json:"sha"`
				Repo *githubRepo `json:"repo"`
			} `json:"head"`
			Base struct {
				Ref  string      `json:"ref"`
				Repo *githubRepo `json:"repo"`
			} `json:"base"`
		} `json:"pull_request"`
		Repository *githubRepo `json:"repository"`
	}
	if err := decode(body, &p); err != nil {
		return err
	}
	action, ok := githubPRActions[p.Action]
	if !ok || p.PullRequest == nil {
		return nil // an action that does not move the head: ignored
	}
	n := p.Number
	if n == 0 {
		n = p.PullRequest.Number
	}
	var urls []string
	switch {
	case p.Repository != nil:
		urls, ev.DefaultBranch = p.Repository.urls(), p.Repository.DefaultBranch
	case p.PullRequest.Base.Repo != nil:
		urls, ev.DefaultBranch = p.PullRequest.Base.Repo.urls(), p.PullRequest.Base.Repo.DefaultBranch
	}
	if err := setPR(ev, action, n, p.PullRequest.Head.SHA, "refs/pull/"+strconv.Itoa(n)+"/head", p.PullRequest.Base.Ref, urls); err != nil || ev.PullRequest == nil {
		return err
	}
	head, base := p.PullRequest.Head.Repo, p.PullRequest.Base.Repo
	if base == nil {
		base = p.Repository
	}
	ev.PullRequest.Fork = head == nil || base == nil || !strings.EqualFold(head.FullName, base.FullName)
	return nil
}

// parseGitLabMR decodes a GitLab "Merge Request Hook" delivery.
func parseGitLabMR(ev *Event, body []byte) error {
	var p struct {
		Attrs *struct {
			IID             int    `json:"iid"`
			Action          string `json:"action"`
			SourceProjectID int64  `json:"source_project_id"`
			TargetProjectID int64  `json:"target_project_id"`
			TargetBranch    string `json:"target_branch"`
			LastCommit      struct {
				ID string `json:"id"`
			} `json:"last_commit"`
			Target *struct {
				HTTPURL string `json:"git_http_url"`
				SSHURL  string `json:"git_ssh_url"`
				WebURL  string `json:"web_url"`
			} `json:"target"`
		} `json:"object_attributes"`
		Project *struct {
			HTTPURL       string `json:"git_http_url"`
			SSHURL        string `json:"git_ssh_url"`
			WebURL        string `json:"web_url"`
			DefaultBranch string `json:"default_branch"`
		} `json:"project"`
	}
	if err := decode(body, &p); err != nil {
		return err
	}
	if p.Attrs == nil {
		return malformed("gitlab %s has no object_attributes", ev.Name)
	}
	action, ok := gitlabMRActions[p.Attrs.Action]
	if !ok {
		return nil
	}
	var urls []string
	if p.Project != nil {
		urls = append(urls, nonEmpty(p.Project.HTTPURL, p.Project.SSHURL, p.Project.WebURL)...)
		ev.DefaultBranch = p.Project.DefaultBranch
	}
	if t := p.Attrs.Target; t != nil {
		urls = append(urls, nonEmpty(t.HTTPURL, t.SSHURL, t.WebURL)...)
	}
	n := p.Attrs.IID
	if err := setPR(ev, action, n, p.Attrs.LastCommit.ID, "refs/merge-requests/"+strconv.Itoa(n)+"/head", p.Attrs.TargetBranch, dedupe(urls)); err != nil || ev.PullRequest == nil {
		return err
	}
	ev.PullRequest.Fork = p.Attrs.SourceProjectID != p.Attrs.TargetProjectID
	return nil
}

// setPR checks a pull request's fields and makes ev a PR event.
func setPR(ev *Event, action PRAction, n int, sha, ref, base string, urls []string) error {
	sha = strings.ToLower(sha)
	base = strings.TrimPrefix(base, "refs/heads/")
	switch {
	case n <= 0:
		return malformed("%s %s: pull request number %d", ev.Provider, ev.Name, n)
	case !gitsource.IsFullHash(sha) && action != PRClose:
		return malformed("%s %s: head commit %q is not a 40-hex hash", ev.Provider, ev.Name, sha)
	case base == "" || strings.ContainsAny(base, " \x00"):
		return malformed("%s %s: base branch %q", ev.Provider, ev.Name, base)
	case len(urls) == 0:
		return malformed("%s %s names no repository URL", ev.Provider, ev.Name)
	}
	ev.Kind, ev.RepoURLs = PR, urls
	ev.PullRequest = &PullRequest{Provider: ev.Provider, Number: n, Action: action, HeadSHA: sha, HeadRef: ref,
		BaseBranch: base, RepoURLs: urls, Delivery: ev.Delivery}
	return nil
}

// matchPR says whether t previews the pull request: the request merges
// into the branch t follows; or why not.
func matchPR(t Target, ev *Event) string {
	pr := ev.PullRequest
	branch := strings.TrimPrefix(t.Branch, "refs/heads/")
	switch {
	case t.Revision != "":
		return "pinned to revision " + t.Revision
	case branch == "" && ev.DefaultBranch == "":
		return "follows the remote's HEAD, which the event does not name; set spec.branch to preview pull requests"
	case branch == "":
		branch = ev.DefaultBranch
	}
	if pr.BaseBranch != branch {
		return "follows branch " + branch + "; pull request #" + strconv.Itoa(pr.Number) + " merges into " + pr.BaseBranch
	}
	return ""
}

// previews tells each GitRepo that follows the pull request's base
// branch about it, as handle does pushes, when a secret vouched for the
// delivery (unsigned deliveries, accepted without any secret configured,
// only ever make GitRepos check their remote).
func (r *Receiver) previews(ctx context.Context, log *zap.Logger, ev *Event, authed []Target, authenticated map[string]bool,
	resp Response) (int, Response) {
	pr := ev.PullRequest
	for _, t := range authed {
		reason := matchPR(t, ev)
		if reason == "" && !authenticated[t.String()] {
			// A preview posts the plan on the pull request with the
			// GitRepo's API token: only a delivery a secret vouched for
			// may ask for one.
			reason = "previews need a signed delivery: set a webhook secret"
		}
		if reason != "" {
			resp.Skipped = append(resp.Skipped, Skip{GitRepo: t.String(), Reason: reason})
			continue
		}
		skip, err := r.cfg.Preview(ctx, t, ev, authenticated[t.String()])
		if err != nil {
			r.release(ev)
			log.Error("Cannot signal the preview of a pull request", zap.Stringer("gitrepo", t), zap.Int("pr", pr.Number), zap.Error(err))
			resp.Message = "cannot signal the preview of GitRepo " + t.String() + "; retry"
			return http.StatusServiceUnavailable, resp
		}
		if skip != "" {
			resp.Skipped = append(resp.Skipped, Skip{GitRepo: t.String(), Reason: skip})
			continue
		}
		resp.Signalled = append(resp.Signalled, Signaled{GitRepo: t.String(), Ref: pr.HeadRef, Commit: pr.HeadSHA})
	}
	if len(authed) == 0 {
		resp.Message = "no GitRepo watches " + strings.Join(ev.RepoURLs, ", ")
	}
	return http.StatusAccepted, resp
}
