package gitprovider_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/gitprovider"
)

const token = "s3cr3t-token"

// request is what the fake host saw.
type request struct {
	Method, Path, Auth, PrivateToken string
	Body                             map[string]any
}

// host is a fake API: it records requests and answers with the handler.
type host struct {
	mu     sync.Mutex
	reqs   []request
	answer func(w http.ResponseWriter, r *http.Request)
}

func newHost(t *testing.T, answer func(w http.ResponseWriter, r *http.Request)) (*host, *httptest.Server) {
	t.Helper()
	h := &host{answer: answer}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rq := request{Method: r.Method, Path: r.URL.EscapedPath(), Auth: r.Header.Get("Authorization"), PrivateToken: r.Header.Get("PRIVATE-TOKEN")}
		if r.URL.RawQuery != "" {
			rq.Path += "?" + r.URL.RawQuery
		}
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		if len(b) > 0 {
			_ = json.Unmarshal(b, &rq.Body)
		}
		h.mu.Lock()
		h.reqs = append(h.reqs, rq)
		h.mu.Unlock()
		if h.answer != nil {
			h.answer(w, r)
			return
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"id": 1}`)
	}))
	t.Cleanup(srv.Close)
	return h, srv
}

func (h *host) requests() []request {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]request(nil), h.reqs...)
}

func TestSetStatus(t *testing.T) {
	tests := []struct {
		name     string
		kind     gitprovider.Kind
		repoURL  string
		state    string
		wantPath string
		wantAuth string // Authorization header
		wantPT   string // PRIVATE-TOKEN header
		wantBody map[string]any
	}{
		{"github", gitprovider.GitHub, "https://github.com/acme/app.git", "pending", "/repos/acme/app/statuses/abc123",
			"Bearer " + token, "", map[string]any{"state": "pending", "context": "flotilla/plan/app", "description": "planning…"}},
		{"gitea", gitprovider.Gitea, "git@gitea.local:acme/app.git", "failure", "/repos/acme/app/statuses/abc123",
			"token " + token, "", map[string]any{"state": "failure", "context": "flotilla/plan/app", "description": "planning…"}},
		{"gitlab subgroup pending is running", gitprovider.GitLab, "https://gitlab.local/group/sub/app.git", "pending", "/projects/group%2Fsub%2Fapp/statuses/abc123",
			"", token, map[string]any{"state": "running", "name": "flotilla/plan/app", "description": "planning…"}},
		{"gitlab failure is failed", gitprovider.GitLab, "ssh://git@gitlab.local:2222/group/app", "failure", "/projects/group%2Fapp/statuses/abc123",
			"", token, map[string]any{"state": "failed", "name": "flotilla/plan/app", "description": "planning…"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, srv := newHost(t, nil)
			c, err := gitprovider.For(tt.kind, tt.repoURL, srv.URL, token, nil)
			require.NoError(t, err)
			err = c.SetStatus(context.Background(), gitprovider.Status{Commit: "abc123", State: tt.state, Context: "flotilla/plan/app", Description: "planning…"})
			require.NoError(t, err)
			reqs := h.requests()
			require.Len(t, reqs, 1)
			assert.Equal(t, "POST", reqs[0].Method)
			assert.Equal(t, tt.wantPath, reqs[0].Path)
			assert.Equal(t, tt.wantAuth, reqs[0].Auth)
			assert.Equal(t, tt.wantPT, reqs[0].PrivateToken)
			assert.Equal(t, tt.wantBody, reqs[0].Body)
		})
	}
}

func TestSetStatus_Invalid(t *testing.T) {
	h, srv := newHost(t, nil)
	c, err := gitprovider.For(gitprovider.GitHub, "https://github.com/acme/app", srv.URL, token, nil)
	require.NoError(t, err)
	err = c.SetStatus(context.Background(), gitprovider.Status{Commit: "abc", State: "done"})
	require.ErrorIs(t, err, gitprovider.ErrInvalid)
	assert.Empty(t, h.requests(), "nothing is sent for an invalid status")
}

func TestFor(t *testing.T) {
	tests := []struct {
		name    string
		kind    gitprovider.Kind
		repoURL string
		want    string // c.String()
		wantErr error
	}{
		{"github.com", gitprovider.GitHub, "https://github.com/acme/app.git", "github https://api.github.com/repos/acme/app", nil},
		{"github scp", gitprovider.GitHub, "git@github.com:acme/app.git", "github https://api.github.com/repos/acme/app", nil},
		{"GHE ssh port dropped", gitprovider.GitHub, "ssh://git@ghe.corp:7999/acme/app.git", "github https://ghe.corp/api/v3/repos/acme/app", nil},
		{"GHE https port kept", gitprovider.GitHub, "https://ghe.corp:8443/acme/app", "github https://ghe.corp:8443/api/v3/repos/acme/app", nil},
		{"gitlab", gitprovider.GitLab, "https://gitlab.com/g/s/app.git", "gitlab https://gitlab.com/api/v4/projects/g%2Fs%2Fapp", nil},
		{"gitea http prefix", gitprovider.Gitea, "http://h:3000/git/acme/app.git", "gitea http://h:3000/git/api/v1/repos/acme/app", nil},
		{"no owner", gitprovider.GitHub, "https://github.com/app", "", gitprovider.ErrInvalid},
		{"unknown kind", gitprovider.Kind("bitbucket"), "https://b.org/acme/app", "", gitprovider.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := gitprovider.For(tt.kind, tt.repoURL, "", token, nil)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, c.String())
		})
	}
}

func TestErrors(t *testing.T) {
	reset := time.Now().Add(90 * time.Second).Unix()
	tests := []struct {
		name      string
		code      int
		header    map[string]string
		want      error
		wantRetry bool
	}{
		{"401", 401, nil, gitprovider.ErrUnauthorized, false},
		{"403 without rate limit", 403, nil, gitprovider.ErrUnauthorized, false},
		{"403 rate limited", 403, map[string]string{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": fmt.Sprint(reset)}, gitprovider.ErrRateLimited, true},
		{"429 retry-after", 429, map[string]string{"Retry-After": "30"}, gitprovider.ErrRateLimited, true},
		{"404", 404, nil, gitprovider.ErrNotFound, false},
		{"502", 502, nil, gitprovider.ErrTransient, false},
		{"422", 422, nil, gitprovider.ErrRejected, false},
		{"redirect not followed", 302, map[string]string{"Location": "http://127.0.0.1:1/elsewhere"}, gitprovider.ErrRejected, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, srv := newHost(t, func(w http.ResponseWriter, _ *http.Request) {
				for k, v := range tt.header {
					w.Header().Set(k, v)
				}
				w.WriteHeader(tt.code)
				_, _ = io.WriteString(w, `{"message": "no: `+token[:2]+`"}`)
			})
			c, err := gitprovider.For(gitprovider.GitHub, "https://github.com/acme/app", srv.URL, token, nil)
			require.NoError(t, err)
			err = c.SetStatus(context.Background(), gitprovider.Status{Commit: "abc", State: "success"})
			require.ErrorIs(t, err, tt.want)
			var se *gitprovider.StatusError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, tt.code, se.StatusCode)
			assert.Equal(t, tt.wantRetry, se.RetryAfter > 0, "RetryAfter %s", se.RetryAfter)
			assert.NotContains(t, err.Error(), token)
		})
	}
	t.Run("unreachable is transient", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		srv.Close()
		c, err := gitprovider.For(gitprovider.GitHub, "https://github.com/acme/app", srv.URL, token, nil)
		require.NoError(t, err)
		err = c.SetStatus(context.Background(), gitprovider.Status{Commit: "abc", State: "success"})
		require.ErrorIs(t, err, gitprovider.ErrTransient)
		assert.NotContains(t, err.Error(), token)
	})
}

// comments is a fake comment store answering GitHub/Gitea/GitLab paths.
type comments struct {
	mu     sync.Mutex
	bodies map[int64]string
	next   int64
}

func (s *comments) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var in struct{ Body string }
	_ = json.NewDecoder(r.Body).Decode(&in)
	switch r.Method {
	case "GET":
		page := r.URL.Query().Get("page")
		list := []map[string]any{}
		for id := int64(1); id <= s.next; id++ {
			b, ok := s.bodies[id]
			// page 1 holds ids 1..100, page 2 the rest (or all for Gitea).
			if !ok || (page == "1" && id > 100) || (page == "2" && id <= 100) {
				continue
			}
			list = append(list, map[string]any{"id": id, "body": b})
		}
		_ = json.NewEncoder(w).Encode(list)
	case "POST":
		s.next++
		s.bodies[s.next] = in.Body
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{"id": s.next, "body": in.Body})
	default: // PATCH/PUT …/<id>
		var id int64
		_, _ = fmt.Sscan(r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:], &id)
		if _, ok := s.bodies[id]; !ok {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		s.bodies[id] = in.Body
		_, _ = io.WriteString(w, `{}`)
	}
}

func TestUpsertComment(t *testing.T) {
	const marker = "<!-- flotilla-preview ns/app -->"
	tests := []struct {
		name        string
		kind        gitprovider.Kind
		others      int    // unrelated comments already on the PR
		wantList    string // path of the first list request
		wantUpdate  string // method and path of the update
		wantRequest int    // requests of the second upsert (found by search)
	}{
		{"github", gitprovider.GitHub, 0, "/repos/acme/app/issues/7/comments?per_page=100&page=1", "PATCH /repos/acme/app/issues/comments/1", 2},
		{"github second page", gitprovider.GitHub, 120, "/repos/acme/app/issues/7/comments?per_page=100&page=1", "PATCH /repos/acme/app/issues/comments/121", 3},
		{"gitea unpaged", gitprovider.Gitea, 120, "/repos/acme/app/issues/7/comments", "PATCH /repos/acme/app/issues/comments/121", 2},
		{"gitlab notes", gitprovider.GitLab, 0, "/projects/acme%2Fapp/merge_requests/7/notes?per_page=100&page=1", "PUT /projects/acme%2Fapp/merge_requests/7/notes/1", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := &comments{bodies: map[int64]string{}}
			for i := 0; i < tt.others; i++ {
				store.next++
				store.bodies[store.next] = "lgtm"
			}
			h, srv := newHost(t, store.serve)
			c, err := gitprovider.For(tt.kind, "https://example.com/acme/app.git", srv.URL, token, nil)
			require.NoError(t, err)
			ctx := context.Background()

			id, err := c.UpsertComment(ctx, 7, marker, "first")
			require.NoError(t, err)
			assert.Equal(t, int64(tt.others+1), id)
			assert.Equal(t, marker+"\nfirst", store.bodies[id], "the marker is prepended")
			require.NotEmpty(t, h.requests())
			assert.Equal(t, tt.wantList, h.requests()[0].Path)

			before := len(h.requests())
			id2, err := c.UpsertComment(ctx, 7, marker, marker+"\nsecond")
			require.NoError(t, err)
			assert.Equal(t, id, id2, "the same comment is updated")
			reqs := h.requests()[before:]
			assert.Len(t, reqs, tt.wantRequest)
			last := reqs[len(reqs)-1]
			assert.Equal(t, tt.wantUpdate, last.Method+" "+last.Path)
			assert.Equal(t, marker+"\nsecond", store.bodies[id])
			assert.Len(t, store.bodies, tt.others+1, "no second comment")
		})
	}
}

func TestUpsertCommentAt(t *testing.T) {
	const marker = "<!-- m -->"
	store := &comments{bodies: map[int64]string{}}
	h, srv := newHost(t, store.serve)
	c, err := gitprovider.For(gitprovider.GitHub, "https://github.com/acme/app", srv.URL, token, nil)
	require.NoError(t, err)
	ctx := context.Background()
	id, err := c.UpsertComment(ctx, 3, marker, "a")
	require.NoError(t, err)

	before := len(h.requests())
	got, err := c.UpsertCommentAt(ctx, 3, id, marker, "b")
	require.NoError(t, err)
	assert.Equal(t, id, got)
	assert.Len(t, h.requests()[before:], 1, "a known ID is updated without listing")

	delete(store.bodies, id) // someone deleted the comment
	got, err = c.UpsertCommentAt(ctx, 3, id, marker, "c")
	require.NoError(t, err)
	assert.NotEqual(t, id, got, "a deleted comment is created again")
	assert.Equal(t, marker+"\nc", store.bodies[got])
}

func TestUpsertComment_Errors(t *testing.T) {
	_, srv := newHost(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusUnauthorized) })
	c, err := gitprovider.For(gitprovider.GitLab, "https://gitlab.com/acme/app", srv.URL, token, nil)
	require.NoError(t, err)
	_, err = c.UpsertComment(context.Background(), 3, "<!-- m -->", "x")
	require.ErrorIs(t, err, gitprovider.ErrUnauthorized)
	_, err = c.UpsertComment(context.Background(), 0, "<!-- m -->", "x")
	require.ErrorIs(t, err, gitprovider.ErrInvalid)
	assert.False(t, errors.Is(err, gitprovider.ErrUnauthorized))
}
