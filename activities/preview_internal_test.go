package activities

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
)

const previewToken = "ghp_preview-token-value"

// TestPreviewActivities: the token comes from the Secret's "token" key and
// goes to the host only; the host's refusals are typed, non-retryable
// errors without the token; a rate limit carries the host's delay.
func TestPreviewActivities(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	answer := http.StatusCreated
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization")+" "+string(b))
		code := answer
		mu.Unlock()
		if code == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "42")
		}
		w.WriteHeader(code)
		if r.Method == http.MethodGet {
			_, _ = io.WriteString(w, `[]`)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"id": 9})
	}))
	defer srv.Close()

	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	a := &Activities{Secrets: gitSecrets{"gh-api": {"token": previewToken}, "empty": {"other": "x"}}}
	env.RegisterActivity(a)
	target := PreviewTarget{Namespace: "ns", GitRepo: "app", Number: 7, Provider: "github", RepoURL: "https://github.com/acme/app",
		APIURL: srv.URL, SecretName: "gh-api"}

	_, err := env.ExecuteActivity(a.PreviewStatus, PreviewStatusInput{Target: target, Commit: "abc", State: PreviewPending, Description: "planning…"})
	require.NoError(t, err)
	v, err := env.ExecuteActivity(a.PreviewComment, PreviewCommentInput{Target: target, Body: "plan"})
	require.NoError(t, err)
	var id int64
	require.NoError(t, v.Get(&id))
	assert.Equal(t, int64(9), id)
	assert.Equal(t, []string{
		`POST /repos/acme/app/statuses/abc Bearer ` + previewToken + ` {"context":"flotilla/plan/app","description":"planning…","state":"pending"}`,
		`GET /repos/acme/app/issues/7/comments Bearer ` + previewToken + ` `,
		`POST /repos/acme/app/issues/7/comments Bearer ` + previewToken + ` {"body":"\u003c!-- flotilla-preview ns/app --\u003e\nplan"}`,
	}, seen)

	for _, tt := range []struct {
		name     string
		target   PreviewTarget
		code     int
		wantType string
		retry    bool
	}{
		{"no such secret", PreviewTarget{Namespace: "ns", GitRepo: "app", Number: 7, Provider: "github", RepoURL: target.RepoURL, APIURL: srv.URL, SecretName: "nope"},
			http.StatusCreated, ErrTypeSecretNotFound, false},
		{"secret without token", PreviewTarget{Namespace: "ns", GitRepo: "app", Number: 7, Provider: "github", RepoURL: target.RepoURL, APIURL: srv.URL, SecretName: "empty"},
			http.StatusCreated, ErrTypeSecretNotFound, false},
		{"unknown provider", PreviewTarget{Namespace: "ns", GitRepo: "app", Number: 7, Provider: "gogs", RepoURL: target.RepoURL, SecretName: "gh-api"},
			http.StatusCreated, ErrTypeGitHostRefused, false},
		{"bad token", target, http.StatusUnauthorized, ErrTypeGitHostRefused, false},
		{"rate limited", target, http.StatusTooManyRequests, ErrTypeGitHostRateLimited, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			mu.Lock()
			answer = tt.code
			mu.Unlock()
			_, err := env.ExecuteActivity(a.PreviewStatus, PreviewStatusInput{Target: tt.target, Commit: "abc", State: PreviewSuccess})
			var ae *temporal.ApplicationError
			require.True(t, errors.As(err, &ae), "%v", err)
			assert.Equal(t, tt.wantType, ae.Type())
			assert.Equal(t, tt.retry, !ae.NonRetryable())
			assert.NotContains(t, err.Error(), previewToken)
			if tt.retry {
				assert.Equal(t, "42s", ae.NextRetryDelay().String())
			}
		})
	}
}
