package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

// The preview's GitHub API token and webhook secret of TestPRPreview.
const (
	previewToken  = "ghp_e2e-preview-token-71c3"
	previewSecret = "gh-hook-preview-2b8e"
	previewNS     = "preview-ns"
	previewCM     = "preview-config"
)

// TestPRPreview: a signed GitHub pull_request webhook makes Flotilla plan
// the pull request's head on every cluster of the GitRepo following its
// base branch and report it to a local HTTP server standing in for the
// GitHub API (spec.previews.apiURL): one comment, updated on the next
// push, and per head one commit status pending then success; "closed"
// ends the preview. The PR's heads are never deployed.
func TestPRPreview(t *testing.T) {
	start := time.Now()
	api := newFakeGitHub(t)
	f := startWebhookFleet(t, 2, "--webhook-secrets", writeWebhookSecrets(t, map[string]string{"github": previewSecret}))
	h := newHookClient(t, f)

	// Its own Git server serves a PR head by hash, as GitHub's does.
	gs := testenv.NewGitServer(t, testenv.GitServerOptions{AllowReachableSHA1InWant: true})
	repo := gs.CreateRepo(t, "acme/app", map[string]string{"fleet.yaml": fleetYAML(previewNS), "cm.yaml": configMapDoc(previewCM, "v1")})
	f.apply(t, "apiVersion: v1\nkind: Secret\nmetadata:\n  name: gh-api\nstringData:\n  token: "+previewToken+"\n")
	f.apply(t, gitRepoDoc("app", repo.URL(), "  branch: master\n  previews:\n    secretName: gh-api\n    apiURL: "+api.srv.URL+"\n"+allClusters))
	base := repo.Head(t)
	f.waitFor(t, "app", "base commit Ready on 2 clusters", settledAt(base, 2))

	t.Run("OpenedCreatesCommentAndStatuses", func(t *testing.T) {
		head := repo.CommitToRef(t, "refs/pull/1/head", map[string]string{"cm.yaml": configMapDoc(previewCM, "v2")}, "pr: v2")
		r := postPR(t, h, repo, "opened", head)
		assert.Equal(t, []hookSignalled{{GitRepo: "fleet-default/app", Ref: "refs/pull/1/head", Commit: head}}, r.Signalled)
		final := api.waitFinal(t, f, head)
		assert.Equal(t, []string{"pending planning…", "success 2 clusters: 2 upgrade"}, api.statusesOf(head))
		assert.Equal(t, "success", final)
		created, updated, bodies := api.comments()
		assert.Equal(t, 1, created, "one comment")
		assert.Zero(t, updated)
		require.Len(t, bodies, 1)
		for _, want := range []string{"<!-- flotilla-preview fleet-default/app -->", "### Flotilla plan for `fleet-default/app` at `" + head[:12] + "` (pull request #1)",
			"#### Cluster `" + f.clusters[0].Name + "`", "upgrade", "```diff", "+  value: v2"} {
			assert.Contains(t, bodies[0], want)
		}
	})

	t.Run("SynchronizeUpdatesTheSameComment", func(t *testing.T) {
		head := repo.CommitToRef(t, "refs/pull/1/head", map[string]string{"cm.yaml": configMapDoc(previewCM, "v3")}, "pr: v3")
		postPR(t, h, repo, "synchronize", head)
		api.waitFinal(t, f, head)
		assert.Equal(t, []string{"pending planning…", "success 2 clusters: 2 upgrade"}, api.statusesOf(head), "statuses on the new head")
		created, updated, bodies := api.comments()
		assert.Equal(t, 1, created, "no second comment")
		assert.Equal(t, 1, updated, "the comment is updated")
		require.Len(t, bodies, 1)
		assert.Contains(t, bodies[0], "at `"+head[:12]+"`")
		assert.Contains(t, bodies[0], "+  value: v3")
	})

	t.Run("ForkIsNotPreviewed", func(t *testing.T) {
		head := repo.CommitToRef(t, "refs/pull/2/head", map[string]string{"cm.yaml": configMapDoc(previewCM, "fork")}, "fork: v9")
		body := githubPullRequestFrom(repo, "opened", 2, head, "mallory/app")
		hdr := githubHeaders(newDeliveryID(), signGitHub(previewSecret, body))
		hdr.Set("X-GitHub-Event", "pull_request")
		resp := h.post(t, "/", hdr, body)
		require.Less(t, resp.status, 300, "body: %s", resp.body)
		r := resp.decode(t)
		assert.Empty(t, r.Signalled, "a fork's pull request is not previewed without spec.previews.forks")
		require.Len(t, r.Skipped, 1)
		assert.Contains(t, r.Skipped[0].Reason, "comes from a fork")
		assert.Empty(t, api.statusesOf(head), "no status on the fork's head")
	})

	t.Run("ClosedEndsThePreview", func(t *testing.T) {
		postPR(t, h, repo, "closed", repo.Head(t))
		c := policyClient(t, f)
		id := protocol.PreviewID("fleet-default", "app", 1)
		require.Eventually(t, func() bool {
			d, err := c.DescribeWorkflowExecution(context.Background(), id, "")
			return err == nil && d.WorkflowExecutionInfo.Status == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED
		}, 20*time.Second, 200*time.Millisecond, "the preview workflow completes")
		for _, c := range f.clusters {
			cm, ok := f.configMap(t, c.Name, previewNS, previewCM)
			require.True(t, ok)
			assert.Equal(t, "v1", cm.Data["value"], "a pull request's head is planned, never deployed (%s)", c.Name)
		}
		assert.Zero(t, api.refused(), "every API request carried the token")
		log, err := os.ReadFile(f.w.proc.LogPath())
		require.NoError(t, err)
		assert.NotContains(t, string(log), previewToken, "the token never reaches the log")
	})
	t.Logf("TestPRPreview took %s", time.Since(start).Round(time.Millisecond))
}

// postPR posts a signed GitHub pull_request event for PR #1 and checks it
// was accepted.
func postPR(t *testing.T, h *hookClient, repo *testenv.GitRepo, action, head string) hookReply {
	t.Helper()
	body := githubPullRequest(repo, action, 1, head)
	hdr := githubHeaders(newDeliveryID(), signGitHub(previewSecret, body))
	hdr.Set("X-GitHub-Event", "pull_request")
	resp := h.post(t, "/", hdr, body)
	require.Equal(t, http.StatusAccepted, resp.status, "body: %s", resp.body)
	return resp.decode(t)
}

// githubPullRequest is a GitHub pull_request payload of repo's PR n into
// master.
func githubPullRequest(repo *testenv.GitRepo, action string, n int, head string) []byte {
	return githubPullRequestFrom(repo, action, n, head, "acme/app")
}

// githubPullRequestFrom is githubPullRequest with its head in the
// repository named headRepo (another than acme/app: a fork).
func githubPullRequestFrom(repo *testenv.GitRepo, action string, n int, head, headRepo string) []byte {
	r := map[string]any{"name": "app", "full_name": "acme/app", "clone_url": repo.URL(), "default_branch": "master"}
	p := map[string]any{"action": action, "number": n, "repository": r, "pull_request": map[string]any{
		"number": n, "state": "open", "head": map[string]any{"sha": head, "ref": "feature", "repo": map[string]any{"full_name": headRepo}},
		"base": map[string]any{"ref": "master", "repo": r}}}
	b, _ := json.Marshal(p)
	return b
}

// fakeGitHub records what GitHub's REST API would receive: commit
// statuses per SHA and the comments of pull request 1.
type fakeGitHub struct {
	srv *httptest.Server

	mu       sync.Mutex
	statuses map[string][]string // sha → "state description"
	bodies   map[int64]string
	created  int
	updated  int
	denied   int
}

func newFakeGitHub(t *testing.T) *fakeGitHub {
	g := &fakeGitHub{statuses: map[string][]string{}, bodies: map[int64]string{}}
	g.srv = httptest.NewServer(http.HandlerFunc(g.serve))
	t.Cleanup(g.srv.Close)
	return g
}

func (g *fakeGitHub) serve(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if r.Header.Get("Authorization") != "Bearer "+previewToken {
		g.denied++
		http.Error(w, `{"message": "Bad credentials"}`, http.StatusUnauthorized)
		return
	}
	var in map[string]string
	_ = json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&in)
	path := r.URL.Path
	switch {
	case r.Method == http.MethodPost && strings.HasPrefix(path, "/repos/acme/app/statuses/"):
		sha := strings.TrimPrefix(path, "/repos/acme/app/statuses/")
		g.statuses[sha] = append(g.statuses[sha], in["state"]+" "+in["description"])
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{}`)
	case r.Method == http.MethodGet && path == "/repos/acme/app/issues/1/comments":
		list := []map[string]any{}
		for id, b := range g.bodies {
			list = append(list, map[string]any{"id": id, "body": b})
		}
		_ = json.NewEncoder(w).Encode(list)
	case r.Method == http.MethodPost && path == "/repos/acme/app/issues/1/comments":
		g.created++
		id := int64(1000 + g.created)
		g.bodies[id] = in["body"]
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{"id": id})
	case r.Method == http.MethodPatch && strings.HasPrefix(path, "/repos/acme/app/issues/comments/"):
		id, _ := strconv.ParseInt(strings.TrimPrefix(path, "/repos/acme/app/issues/comments/"), 10, 64)
		if _, ok := g.bodies[id]; !ok {
			http.Error(w, `{"message": "Not Found"}`, http.StatusNotFound)
			return
		}
		g.updated++
		g.bodies[id] = in["body"]
		_, _ = io.WriteString(w, `{}`)
	default:
		http.Error(w, fmt.Sprintf(`{"message": "no route %s %s"}`, r.Method, path), http.StatusNotFound)
	}
}

func (g *fakeGitHub) statusesOf(sha string) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.statuses[sha]...)
}

// comments returns how many comments were created and updated, and their
// bodies.
func (g *fakeGitHub) comments() (created, updated int, bodies []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, b := range g.bodies {
		bodies = append(bodies, b)
	}
	return g.created, g.updated, bodies
}

func (g *fakeGitHub) refused() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.denied
}

// waitFinal waits for a status other than pending on sha and returns its
// state.
func (g *fakeGitHub) waitFinal(t *testing.T, f *fleet, sha string) string {
	t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for {
		if s := g.statusesOf(sha); len(s) > 0 && !strings.HasPrefix(s[len(s)-1], "pending") {
			return strings.Fields(s[len(s)-1])[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no final status on %s; statuses %v\nworker log tail:\n%s", sha, g.statusesOf(sha), f.w.proc.LogTail(40))
		}
		time.Sleep(200 * time.Millisecond)
	}
}
