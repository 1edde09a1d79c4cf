package activities

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/cluster"
	"github.com/flotilla-gitops/flotilla/internal/gitprovider"
)

// PreviewTarget is where a preview reports: the GitRepo, its pull request
// and the Git host's API. It names the token's Secret, never the token.
type PreviewTarget struct {
	Namespace string `json:"namespace"`
	GitRepo   string `json:"gitRepo"`
	Number    int    `json:"number"`
	// Provider is github, gitlab or gitea.
	Provider string `json:"provider"`
	// RepoURL is the GitRepo's spec.repo; APIURL spec.previews.apiURL
	// ("" derives it from RepoURL).
	RepoURL string `json:"repoURL"`
	APIURL  string `json:"apiURL,omitempty"`
	// SecretName is spec.previews.secretName: its "token" key is read
	// inside the activity.
	SecretName string `json:"secretName"`
}

// Context is the commit status's context: "flotilla/plan/<gitrepo>".
func (t PreviewTarget) Context() string { return "flotilla/plan/" + t.GitRepo }

// Marker is the hidden HTML comment that identifies the GitRepo's preview
// comment on the pull request.
func (t PreviewTarget) Marker() string {
	return "<!-- flotilla-preview " + t.Namespace + "/" + t.GitRepo + " -->"
}

// PreviewStatusInput sets a commit status on a pull request's head.
type PreviewStatusInput struct {
	Target      PreviewTarget `json:"target"`
	Commit      string        `json:"commit"`
	State       string        `json:"state"`
	Description string        `json:"description"`
}

// PreviewCommentInput creates or updates the preview's PR comment.
type PreviewCommentInput struct {
	Target PreviewTarget `json:"target"`
	// CommentID is the comment posted before (0: none known).
	CommentID int64 `json:"commentID,omitempty"`
	// Body is the markdown (the marker is added).
	Body string `json:"body"`
}

// The commit states of PreviewStatusInput.State (gitprovider's).
const (
	PreviewPending = gitprovider.StatePending
	PreviewSuccess = gitprovider.StateSuccess
	PreviewFailure = gitprovider.StateFailure
	PreviewError   = gitprovider.StateError
)

// previewTimeout bounds one request to the Git host's API.
const previewTimeout = 30 * time.Second

// PreviewStatus sets a commit status (context "flotilla/plan/<gitrepo>")
// on the pull request's head.
func (a *Activities) PreviewStatus(ctx context.Context, in PreviewStatusInput) error {
	c, err := a.previewClient(ctx, in.Target)
	if err != nil {
		return err
	}
	err = c.SetStatus(ctx, gitprovider.Status{Commit: in.Commit, State: in.State, Context: in.Target.Context(),
		Description: in.Description})
	if err != nil {
		return previewError(in.Target, "commit status", err)
	}
	activity.GetLogger(ctx).Info("Preview status set", "gitrepo", in.Target.Namespace+"/"+in.Target.GitRepo,
		"pr", in.Target.Number, "commit", in.Commit, "state", in.State)
	return nil
}

// PreviewComment creates or updates the preview's comment on the pull
// request and returns its ID.
func (a *Activities) PreviewComment(ctx context.Context, in PreviewCommentInput) (int64, error) {
	c, err := a.previewClient(ctx, in.Target)
	if err != nil {
		return 0, err
	}
	id, err := c.UpsertCommentAt(ctx, in.Target.Number, in.CommentID, in.Target.Marker(), in.Body)
	if err != nil {
		return 0, previewError(in.Target, "comment", err)
	}
	return id, nil
}

// previewClient reads the token from the Secret and builds the client.
func (a *Activities) previewClient(ctx context.Context, t PreviewTarget) (*gitprovider.Client, error) {
	title := fmt.Sprintf("GitRepo %s/%s: spec.previews", t.Namespace, t.GitRepo)
	refused := func(why string) error {
		return temporal.NewNonRetryableApplicationError(title+": "+why, ErrTypeSecretNotFound, nil)
	}
	if t.SecretName == "" {
		return nil, refused("no secretName")
	}
	_, data, err := a.Secrets.SecretData(ctx, t.Namespace, t.SecretName)
	switch {
	case errors.Is(err, cluster.ErrNotFound):
		return nil, refused(fmt.Sprintf("secretName %q: no such secret in namespace %s (apply a v1 Secret with key %q with `flotilla apply`)",
			t.SecretName, t.Namespace, api.PreviewSecretKey))
	case errors.Is(err, cluster.ErrNoData):
		return nil, refused(fmt.Sprintf("secretName %q: sealed by an older version that kept only credentials: apply it again", t.SecretName))
	case err != nil:
		return nil, fmt.Errorf("%s: read secret %s: %w", title, t.SecretName, err)
	}
	token := string(data[api.PreviewSecretKey])
	if token == "" {
		return nil, refused(fmt.Sprintf("secretName %q has no key %q", t.SecretName, api.PreviewSecretKey))
	}
	c, err := gitprovider.For(gitprovider.Kind(t.Provider), t.RepoURL, t.APIURL, token, &http.Client{Timeout: previewTimeout})
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError(title+": "+err.Error(), ErrTypeGitHostRefused, nil)
	}
	return c, nil
}

// previewError maps a Git host's error to a Temporal error: a rate limit
// retries after the time the host named, a refusal does not retry, an
// unavailable host retries on the activity's policy.
func previewError(t PreviewTarget, what string, err error) error {
	msg := fmt.Sprintf("GitRepo %s/%s: pull request #%d: %s: %s", t.Namespace, t.GitRepo, t.Number, what, err)
	var se *gitprovider.StatusError
	switch {
	case errors.Is(err, gitprovider.ErrRateLimited):
		opts := temporal.ApplicationErrorOptions{}
		if errors.As(err, &se) && se.RetryAfter > 0 {
			opts.NextRetryDelay = se.RetryAfter
		}
		return temporal.NewApplicationErrorWithOptions(msg, ErrTypeGitHostRateLimited, opts)
	case errors.Is(err, gitprovider.ErrTransient), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return errors.New(msg)
	}
	return temporal.NewNonRetryableApplicationError(msg, ErrTypeGitHostRefused, nil)
}
