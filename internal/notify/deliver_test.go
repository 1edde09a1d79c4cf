package notify

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// received is one request a test server got.
type received struct {
	Method, Path string
	Header       http.Header
	Body         []byte
}

// receiver answers code to every request and records it.
func receiver(t *testing.T, code int, hdr http.Header) (*httptest.Server, *[]received) {
	t.Helper()
	var got []received
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = append(got, received{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: b})
		for k, v := range hdr {
			w.Header()[k] = v
		}
		w.WriteHeader(code)
		_, _ = w.Write([]byte(`{"message":"nope"}`))
	}))
	t.Cleanup(srv.Close)
	return srv, &got
}

func testEvent() Event {
	return Event{ID: "gitrepo/ns/app/run-1/3", Type: RolloutFailed, Severity: Error, Time: time.Date(2026, 11, 30, 5, 0, 0, 0, time.UTC),
		Namespace: "ns", Kind: "GitRepo", GitRepo: "app", RepoURL: "https://git.example/org/app.git", Commit: "0123456789abcdef0123456789abcdef01234567",
		Bundles: []string{"app-web"}, Clusters: []string{"prod-1"}, Rollout: "rollout/ns/app/0123", Message: "bundle app-web failed on prod-1"}
}

func TestSend_Webhook(t *testing.T) {
	srv, got := receiver(t, http.StatusAccepted, nil)
	ev := testEvent()
	err := Send(context.Background(), NewHTTPClient(0), Spec{Provider: Webhook, Address: srv.URL + "/hook"}, Credentials{Token: "s3cret"}, ev)
	require.NoError(t, err)
	require.Len(t, *got, 1)
	r := (*got)[0]
	assert.Equal(t, "POST", r.Method)
	assert.Equal(t, "/hook", r.Path)
	assert.Equal(t, CloudEventsContentType, r.Header.Get("Content-Type"))
	assert.Equal(t, ev.ID, r.Header.Get(HeaderEventID))
	assert.True(t, Verify([]byte("s3cret"), r.Body, r.Header.Get(HeaderSignature)), "signature %s", r.Header.Get(HeaderSignature))
	assert.False(t, Verify([]byte("other"), r.Body, r.Header.Get(HeaderSignature)))
	var ce CloudEvent
	require.NoError(t, json.Unmarshal(r.Body, &ce))
	assert.Equal(t, CloudEvent{SpecVersion: "1.0", ID: ev.ID, Source: "flotilla/ns/app", Type: "dev.flotilla.rollout-failed",
		Subject: ev.Commit, Time: ev.Time, DataContentType: "application/json", Data: ev}, ce)
	assert.NotContains(t, string(r.Body), "s3cret")
}

func TestSend_WebhookUnsigned(t *testing.T) {
	srv, got := receiver(t, http.StatusOK, nil)
	ev := Event{ID: "cluster/c1/r/1", Type: ClusterOffline, Severity: Warning, Namespace: "fleet-default", Clusters: []string{"c1"}}
	require.NoError(t, Send(context.Background(), NewHTTPClient(0), Spec{Provider: Webhook, Address: srv.URL}, Credentials{}, ev))
	require.Len(t, *got, 1)
	assert.Empty(t, (*got)[0].Header.Get(HeaderSignature))
	var ce CloudEvent
	require.NoError(t, json.Unmarshal((*got)[0].Body, &ce))
	assert.Equal(t, "flotilla/fleet-default/cluster/c1", ce.Source)
	assert.Equal(t, "c1", ce.Subject)
}

func TestSend_Slack(t *testing.T) {
	srv, got := receiver(t, http.StatusOK, nil)
	// The address comes from the Secret: the spec has none.
	require.NoError(t, Send(context.Background(), NewHTTPClient(0), Spec{Provider: Slack}, Credentials{Address: srv.URL + "/services/T/B/X"}, testEvent()))
	require.Len(t, *got, 1)
	assert.Equal(t, "/services/T/B/X", (*got)[0].Path)
	var m SlackMessage
	require.NoError(t, json.Unmarshal((*got)[0].Body, &m))
	assert.Equal(t, "RolloutFailed: ns/app at 0123456", m.Text)
	require.Len(t, m.Attachments, 1)
	a := m.Attachments[0]
	assert.Equal(t, "#a30200", a.Color)
	assert.Equal(t, "bundle app-web failed on prod-1", a.Text)
	assert.Contains(t, a.Fields, SlackField{Title: "Clusters", Value: "prod-1", Short: true})
	assert.Contains(t, a.Fields, SlackField{Title: "Event", Value: "gitrepo/ns/app/run-1/3", Short: true})
}

func TestSend_MSTeams(t *testing.T) {
	srv, got := receiver(t, http.StatusOK, nil)
	ev := testEvent()
	ev.Severity = Warning
	require.NoError(t, Send(context.Background(), NewHTTPClient(0), Spec{Provider: MSTeams, Address: srv.URL}, Credentials{}, ev))
	require.Len(t, *got, 1)
	var m struct {
		Type        string `json:"type"`
		Attachments []struct {
			ContentType string `json:"contentType"`
			Content     struct {
				Type    string `json:"type"`
				Version string `json:"version"`
				Body    []struct {
					Type  string              `json:"type"`
					Text  string              `json:"text"`
					Color string              `json:"color"`
					Facts []map[string]string `json:"facts"`
				} `json:"body"`
			} `json:"content"`
		} `json:"attachments"`
	}
	require.NoError(t, json.Unmarshal((*got)[0].Body, &m))
	assert.Equal(t, "message", m.Type)
	require.Len(t, m.Attachments, 1)
	c := m.Attachments[0]
	assert.Equal(t, "application/vnd.microsoft.card.adaptive", c.ContentType)
	assert.Equal(t, "AdaptiveCard", c.Content.Type)
	require.Len(t, c.Content.Body, 3)
	assert.Equal(t, "RolloutFailed: ns/app at 0123456", c.Content.Body[0].Text)
	assert.Equal(t, "Warning", c.Content.Body[0].Color)
	assert.Contains(t, c.Content.Body[2].Facts, map[string]string{"title": "GitRepo", "value": "app"})
}

func TestSend_CommitStatus(t *testing.T) {
	tests := []struct {
		provider   Provider
		typ        Type
		path       string
		authHeader string
		authValue  string
		state      string
		ctxKey     string
	}{
		{GitHub, RolloutStarted, "/repos/org/app/statuses/", "Authorization", "Bearer tok", "pending", "context"},
		{GitHub, RolloutSucceeded, "/repos/org/app/statuses/", "Authorization", "Bearer tok", "success", "context"},
		{Gitea, RolloutHalted, "/repos/org/app/statuses/", "Authorization", "token tok", "failure", "context"},
		{GitLab, RolloutStarted, "/projects/org%2Fapp/statuses/", "Private-Token", "tok", "running", "name"},
		{GitLab, RolloutFailed, "/projects/org%2Fapp/statuses/", "Private-Token", "tok", "failed", "name"},
	}
	for _, tt := range tests {
		t.Run(string(tt.provider)+"/"+string(tt.typ), func(t *testing.T) {
			var got []received
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				got = append(got, received{Method: r.Method, Path: r.URL.EscapedPath(), Header: r.Header.Clone(), Body: b})
				w.WriteHeader(http.StatusCreated)
			}))
			defer srv.Close()
			ev := testEvent()
			ev.Type = tt.typ
			require.NoError(t, Send(context.Background(), NewHTTPClient(0), Spec{Provider: tt.provider, Address: srv.URL}, Credentials{Token: "tok"}, ev))
			require.Len(t, got, 1)
			assert.Equal(t, tt.path+ev.Commit, got[0].Path)
			assert.Equal(t, tt.authValue, got[0].Header.Get(tt.authHeader))
			var body map[string]string
			require.NoError(t, json.Unmarshal(got[0].Body, &body))
			assert.Equal(t, tt.state, body["state"])
			assert.Equal(t, "flotilla/app", body[tt.ctxKey])
			assert.Equal(t, ev.Message, body["description"])
		})
	}
}

func TestSend_Errors(t *testing.T) {
	tests := []struct {
		name      string
		provider  Provider
		code      int
		hdr       http.Header
		wantClass error
		wantRetry time.Duration
	}{
		{"webhook 503 is transient", Webhook, http.StatusServiceUnavailable, nil, ErrTransient, 0},
		{"webhook 429 with Retry-After", Webhook, http.StatusTooManyRequests, http.Header{"Retry-After": {"7"}}, ErrTransient, 7 * time.Second},
		{"webhook 408 is transient", Webhook, http.StatusRequestTimeout, nil, ErrTransient, 0},
		{"webhook 400 is rejected", Webhook, http.StatusBadRequest, nil, ErrRejected, 0},
		{"webhook 403 is rejected", Webhook, http.StatusForbidden, nil, ErrRejected, 0},
		{"a redirect is not followed", Webhook, http.StatusFound, http.Header{"Location": {"http://127.0.0.1:1/elsewhere"}}, ErrRejected, 0},
		{"slack 404 is rejected", Slack, http.StatusNotFound, nil, ErrRejected, 0},
		{"github 502 is transient", GitHub, http.StatusBadGateway, nil, ErrTransient, 0},
		{"github 401 is rejected", GitHub, http.StatusUnauthorized, nil, ErrRejected, 0},
		{"gitlab 429 is transient", GitLab, http.StatusTooManyRequests, http.Header{"Retry-After": {"3"}}, ErrTransient, 3 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, got := receiver(t, tt.code, tt.hdr)
			err := Send(context.Background(), NewHTTPClient(0), Spec{Provider: tt.provider, Address: srv.URL + "/secret-path"},
				Credentials{Token: "tok"}, testEvent())
			require.ErrorIs(t, err, tt.wantClass)
			var de *DeliveryError
			require.ErrorAs(t, err, &de)
			assert.Equal(t, tt.code, de.StatusCode)
			assert.Equal(t, tt.wantRetry, de.RetryAfter)
			assert.NotContains(t, err.Error(), "secret-path", "the address is a credential for slack and teams")
			assert.Len(t, *got, 1, "one request, no redirect followed")
		})
	}
}

func TestSend_Unreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := srv.URL + "/T0/B0/XXXX"
	srv.Close()
	err := Send(context.Background(), NewHTTPClient(time.Second), Spec{Provider: Slack, Address: addr}, Credentials{}, testEvent())
	require.ErrorIs(t, err, ErrTransient)
	assert.False(t, strings.Contains(err.Error(), "XXXX"), "error %q names the address", err)
}

func TestSend_Invalid(t *testing.T) {
	ctx := context.Background()
	err := Send(ctx, NewHTTPClient(0), Spec{Provider: MSTeams}, Credentials{}, testEvent())
	require.ErrorIs(t, err, ErrInvalid, "no address anywhere")
	err = Send(ctx, NewHTTPClient(0), Spec{Provider: GitHub}, Credentials{}, testEvent())
	require.ErrorIs(t, err, ErrInvalid, "no token")
	ev := testEvent()
	ev.Type = DriftDetected
	err = Send(ctx, NewHTTPClient(0), Spec{Provider: GitHub}, Credentials{Token: "t"}, ev)
	require.ErrorIs(t, err, ErrInvalid, "no state for the type")
	require.False(t, errors.Is(err, ErrTransient))
}
