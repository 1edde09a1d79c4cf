package webhook

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParse_PullRequests(t *testing.T) {
	tests := []struct {
		name    string
		p       Provider
		header  map[string]string
		fixture string
		edit    func([]byte) []byte // changes the fixture; nil: as is
		want    *PullRequest        // nil: Kind Unknown
		wantErr bool
	}{
		{name: "github synchronize", p: GitHub, header: map[string]string{"X-GitHub-Event": "pull_request", "X-GitHub-Delivery": "d-1"},
			fixture: "github-pull-request.json", want: &PullRequest{Provider: GitHub, Number: 42, Action: PRUpdate,
				HeadSHA: "9a3c5e7f9b1d3f5a7c9e1b3d5f7a9c1e3b5d7f9a", HeadRef: "refs/pull/42/head", BaseBranch: "main", Delivery: "d-1", Fork: true,
				RepoURLs: []string{"https://github.com/flotilla-gitops/app.git", "git@github.com:flotilla-gitops/app.git",
					"git://github.com/flotilla-gitops/app.git", "https://github.com/flotilla-gitops/app"}}},
		{name: "github opened", p: GitHub, header: map[string]string{"X-GitHub-Event": "pull_request"}, fixture: "github-pull-request.json",
			edit: replace(`"synchronize"`, `"opened"`), want: &PullRequest{Action: PROpen, Fork: true}},
		{name: "github head in the base repository", p: GitHub, header: map[string]string{"X-GitHub-Event": "pull_request"}, fixture: "github-pull-request.json",
			edit: replace(`"alice/app"`, `"flotilla-gitops/app"`), want: &PullRequest{Action: PRUpdate}},
		{name: "github closed (merged or not)", p: GitHub, header: map[string]string{"X-GitHub-Event": "pull_request"}, fixture: "github-pull-request.json",
			edit: replace(`"synchronize"`, `"closed"`), want: &PullRequest{Action: PRClose, Fork: true}},
		{name: "github labeled is ignored", p: GitHub, header: map[string]string{"X-GitHub-Event": "pull_request"}, fixture: "github-pull-request.json",
			edit: replace(`"synchronize"`, `"labeled"`)},
		{name: "github bad head", p: GitHub, header: map[string]string{"X-GitHub-Event": "pull_request"}, fixture: "github-pull-request.json",
			edit: replace(`9A3C5E7F9B1D3F5A7C9E1B3D5F7A9C1E3B5D7F9A`, `main`), wantErr: true},
		{name: "gitea opened", p: Gitea, header: map[string]string{"X-Gitea-Event": "pull_request", "X-Gitea-Delivery": "g-1"},
			fixture: "gitea-pull-request.json", want: &PullRequest{Provider: Gitea, Number: 5, Action: PROpen,
				HeadSHA: "52e2c40a2f20ff1457da29183ad485d1901e940f", HeadRef: "refs/pull/5/head", BaseBranch: "main", Delivery: "g-1", Fork: true,
				RepoURLs: []string{"https://gitea.example.com/flotilla-gitops/app.git", "git@gitea.example.com:flotilla-gitops/app.git",
					"https://gitea.example.com/flotilla-gitops/app"}}},
		{name: "gitea synchronized", p: Gitea, header: map[string]string{"X-Gitea-Event": "pull_request_sync"}, fixture: "gitea-pull-request.json",
			edit: replace(`"opened"`, `"synchronized"`), want: &PullRequest{Action: PRUpdate, Fork: true}},
		{name: "gitlab update", p: GitLab, header: map[string]string{"X-Gitlab-Event": "Merge Request Hook", "X-Gitlab-Event-UUID": "u-1"},
			fixture: "gitlab-merge-request.json", want: &PullRequest{Provider: GitLab, Number: 3, Action: PRUpdate,
				HeadSHA: "da1560886d4f094c3e6c9ef40349f7d38b5d27d7", HeadRef: "refs/merge-requests/3/head", BaseBranch: "main", Delivery: "u-1", Fork: true,
				RepoURLs: []string{"https://gitlab.com/flotilla-gitops/app.git", "git@gitlab.com:flotilla-gitops/app.git",
					"https://gitlab.com/flotilla-gitops/app"}}},
		{name: "gitlab merge closes", p: GitLab, header: map[string]string{"X-Gitlab-Event": "Merge Request Hook"}, fixture: "gitlab-merge-request.json",
			edit: replace(`"action": "update"`, `"action": "merge"`), want: &PullRequest{Action: PRClose, Fork: true}},
		{name: "gitlab source project is the target", p: GitLab, header: map[string]string{"X-Gitlab-Event": "Merge Request Hook"}, fixture: "gitlab-merge-request.json",
			edit: replace(`"source_project_id": 16`, `"source_project_id": 15`), want: &PullRequest{Action: PRUpdate}},
		{name: "gitlab approved is ignored", p: GitLab, header: map[string]string{"X-Gitlab-Event": "Merge Request Hook"}, fixture: "gitlab-merge-request.json",
			edit: replace(`"action": "update"`, `"action": "approved"`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := fixture(t, tt.fixture)
			if tt.edit != nil {
				body = tt.edit(body)
			}
			h := http.Header{}
			for k, v := range tt.header {
				h.Set(k, v)
			}
			ev, err := Parse(tt.p, h, body)
			if tt.wantErr {
				require.ErrorIs(t, err, ErrMalformed)
				return
			}
			require.NoError(t, err)
			if tt.want == nil {
				assert.Equal(t, Unknown, ev.Kind)
				assert.Nil(t, ev.PullRequest)
				return
			}
			require.Equal(t, PR, ev.Kind)
			require.NotNil(t, ev.PullRequest)
			if tt.want.Provider == "" { // only the action and origin are checked
				assert.Equal(t, tt.want.Action, ev.PullRequest.Action)
				assert.Equal(t, tt.want.Fork, ev.PullRequest.Fork, "fork")
				return
			}
			assert.Equal(t, tt.want, ev.PullRequest)
			assert.Equal(t, tt.want.RepoURLs, ev.RepoURLs)
		})
	}
}

func replace(old, new string) func([]byte) []byte {
	return func(b []byte) []byte { return bytes.Replace(b, []byte(old), []byte(new), 1) }
}

// previewer records Preview calls; skip names GitRepos without previews.
type previewer struct {
	calls []string
	skip  map[string]bool
	fail  error
}

func (p *previewer) preview(_ context.Context, t Target, ev *Event, authenticated bool) (string, error) {
	if p.fail != nil {
		return "", p.fail
	}
	if p.skip[t.String()] {
		return "spec.previews is not set", nil
	}
	call := t.String() + " #" + string(rune('0'+ev.PullRequest.Number%10)) + " " + string(ev.PullRequest.Action) + " " + ev.PullRequest.HeadSHA
	if !authenticated {
		call += " (unsigned)"
	}
	p.calls = append(p.calls, call)
	return "", nil
}

func TestReceiver_PullRequest(t *testing.T) {
	pv := &previewer{}
	h := newHarness(t, func(c *Config) { c.Preview = pv.preview })
	const head = "9a3c5e7f9b1d3f5a7c9e1b3d5f7a9c1e3b5d7f9a"
	body := fixture(t, "github-pull-request.json")

	rec := h.post("/", GitHub, githubHeaders("pull_request", "pr-1"), body, Secret{})
	assert.Equal(t, http.StatusUnauthorized, rec.Code, "an unsigned pull request event is refused like a push")
	assert.Empty(t, pv.calls)

	rec = h.post("/", GitHub, githubHeaders("pull_request", "pr-1"), body, Secret{Token: globalSecret})
	require.Equal(t, http.StatusAccepted, rec.Code, rec.Body.String())
	resp := decodeResponse(t, rec)
	assert.Equal(t, []Signaled{{GitRepo: "fleet-default/app", Ref: "refs/pull/42/head", Commit: head}}, resp.Signalled)
	assert.Equal(t, []Skip{
		{GitRepo: "fleet-default/app-dev", Reason: "follows branch dev; pull request #42 merges into main"},
		{GitRepo: "fleet-default/app-pinned", Reason: "pinned to revision v0.9.0"},
	}, resp.Skipped)
	assert.Equal(t, []string{"fleet-default/app #2 update " + head}, pv.calls)
	assert.Empty(t, h.reg.sent(), "a pull request is no push")

	rec = h.post("/", GitHub, githubHeaders("pull_request", "pr-1"), body, Secret{Token: globalSecret})
	assert.Equal(t, http.StatusOK, rec.Code)
	assert.True(t, decodeResponse(t, rec).Duplicate, "a redelivery is not handled twice")

	pv.skip = map[string]bool{"fleet-default/app": true}
	rec = h.post("/", GitHub, githubHeaders("pull_request", "pr-2"), body, Secret{Token: globalSecret})
	require.Equal(t, http.StatusAccepted, rec.Code)
	assert.Empty(t, decodeResponse(t, rec).Signalled)
	assert.Contains(t, decodeResponse(t, rec).Skipped, Skip{GitRepo: "fleet-default/app", Reason: "spec.previews is not set"})

	pv.skip, pv.fail = nil, errors.New("temporal down")
	rec = h.post("/", GitHub, githubHeaders("pull_request", "pr-3"), body, Secret{Token: globalSecret})
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	pv.fail = nil
	rec = h.post("/", GitHub, githubHeaders("pull_request", "pr-3"), body, Secret{Token: globalSecret})
	assert.Equal(t, http.StatusAccepted, rec.Code, "a failed delivery is handled when redelivered")

	labeled := replace(`"synchronize"`, `"labeled"`)(body)
	rec = h.post("/", GitHub, githubHeaders("pull_request", "pr-4"), labeled, Secret{Token: globalSecret})
	assert.Equal(t, http.StatusNoContent, rec.Code, "an action that does not move the head is ignored")
}

func TestReceiver_PullRequestWithoutPreview(t *testing.T) {
	h := newHarness(t, nil)
	rec := h.post("/", GitHub, githubHeaders("pull_request", "pr-1"), fixture(t, "github-pull-request.json"), Secret{Token: globalSecret})
	assert.Equal(t, http.StatusNoContent, rec.Code, "without Config.Preview pull requests are ignored")
}

func TestReceiver_PullRequestUnsigned(t *testing.T) {
	pv := &previewer{}
	h := newHarness(t, func(c *Config) {
		c.Preview = pv.preview
		c.GlobalSecrets = func() (map[Provider]Secret, error) { return nil, nil }
	})
	rec := h.post("/", GitHub, githubHeaders("pull_request", "pr-u"), fixture(t, "github-pull-request.json"), Secret{})
	require.Equal(t, http.StatusAccepted, rec.Code, rec.Body.String())
	resp := decodeResponse(t, rec)
	assert.Empty(t, resp.Signalled)
	assert.Contains(t, resp.Skipped, Skip{GitRepo: "fleet-default/app", Reason: "previews need a signed delivery: set a webhook secret"})
	assert.Empty(t, pv.calls, "no secret configured: no preview")
}
