package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

const (
	globalSecret = "global-s3cret-value"
	repoSecret   = "per-gitrepo-s3cret"
	githubKey    = "github.com/flotilla-gitops/app"
	gitlabKey    = "gitlab.com/flotilla-gitops/app"
	pushCommit   = "7dd52b69157ba70883ba3c139d6ffad9547a71f7"
)

// registry is the GitRepos the receiver under test serves, and the
// signals it sent.
type registry struct {
	mu       sync.Mutex
	byKey    map[string][]Target
	signals  []string // "ns/name ref commit"
	failNext error
	lookups  int
}

func (r *registry) targets(_ context.Context, keys []string) ([]Target, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lookups++
	var out []Target
	for _, k := range keys {
		out = append(out, r.byKey[k]...)
	}
	return out, nil
}

func (r *registry) signal(_ context.Context, t Target, _ *Event, c Change, authenticated bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.failNext; err != nil {
		r.failNext = nil
		return err
	}
	sig := t.String() + " " + c.Ref + " " + c.Commit
	if !authenticated {
		sig += " (unsigned)"
	}
	r.signals = append(r.signals, sig)
	return nil
}

func (r *registry) sent() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.signals...)
}

type harness struct {
	t    *testing.T
	reg  *registry
	recv *Receiver
	logs *observer.ObservedLogs
	now  time.Time
}

func newHarness(t *testing.T, mutate func(*Config)) *harness {
	core, logs := observer.New(zap.DebugLevel)
	h := &harness{t: t, logs: logs, now: time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC), reg: &registry{byKey: map[string][]Target{
		githubKey: {
			{Namespace: "fleet-default", Name: "app"},                    // the remote's default branch (main)
			{Namespace: "fleet-default", Name: "app-dev", Branch: "dev"}, // another branch
			{Namespace: "fleet-default", Name: "app-pinned", Revision: "v0.9.0"},
		},
		gitlabKey: {{Namespace: "team-a", Name: "lab", Branch: "main", WebhookSecret: "hooks"}},
	}}}
	cfg := Config{
		Targets: h.reg.targets,
		Signal:  h.reg.signal,
		GlobalSecrets: func() (map[Provider]Secret, error) {
			return map[Provider]Secret{GitHub: {Token: globalSecret}}, nil
		},
		RepoSecret: func(ns, name string, p Provider) (Secret, error) {
			if ns == "team-a" && name == "hooks" {
				return SecretFor(p, map[string]string{"gitlab": repoSecret}), nil
			}
			return Secret{}, errors.New("secret " + ns + "/" + name + " not found")
		},
		Logger: zap.New(core),
		Now:    func() time.Time { return h.now },
	}
	if mutate != nil {
		mutate(&cfg)
	}
	h.recv = NewReceiver(cfg)
	return h
}

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "payloads", name))
	require.NoError(t, err)
	return b
}

// post sends body to path with headers, signing it for p with s unless s
// is zero.
func (h *harness) post(path string, p Provider, hdr map[string]string, body []byte, s Secret) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	if !s.IsZero() {
		sign(p, req.Header, body, s)
	}
	rec := httptest.NewRecorder()
	h.recv.ServeHTTP(rec, req)
	return rec
}

func githubHeaders(event, delivery string) map[string]string {
	return map[string]string{"X-GitHub-Event": event, "X-GitHub-Delivery": delivery, "Content-Type": "application/json"}
}

func decodeResponse(t *testing.T, rec *httptest.ResponseRecorder) Response {
	t.Helper()
	var resp Response
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &resp), rec.Body.String())
	return resp
}

func TestReceiver_GitHubPush(t *testing.T) {
	h := newHarness(t, nil)
	rec := h.post("/", GitHub, githubHeaders("push", "d-1"), fixture(t, "github-push.json"), Secret{Token: globalSecret})
	require.Equal(t, http.StatusAccepted, rec.Code, rec.Body.String())
	resp := decodeResponse(t, rec)
	assert.Equal(t, []Signaled{{GitRepo: "fleet-default/app", Ref: "refs/heads/main", Commit: pushCommit}}, resp.Signalled)
	assert.Equal(t, []Skip{
		{GitRepo: "fleet-default/app-dev", Reason: "follows branch dev; push changed refs/heads/main"},
		{GitRepo: "fleet-default/app-pinned", Reason: "pinned to revision v0.9.0"},
	}, resp.Skipped)
	assert.Equal(t, []string{"fleet-default/app refs/heads/main " + pushCommit}, h.reg.sent())

	// GitHub's redelivery of the same delivery is not handled twice.
	rec = h.post("/", GitHub, githubHeaders("push", "d-1"), fixture(t, "github-push.json"), Secret{Token: globalSecret})
	assert.Equal(t, http.StatusOK, rec.Code)
	assert.True(t, decodeResponse(t, rec).Duplicate)
	assert.Len(t, h.reg.sent(), 1)
	// After the window it is new again.
	h.now = h.now.Add(DefaultDedupeWindow + time.Second)
	rec = h.post("/", GitHub, githubHeaders("push", "d-1"), fixture(t, "github-push.json"), Secret{Token: globalSecret})
	assert.Equal(t, http.StatusAccepted, rec.Code)
	assert.Len(t, h.reg.sent(), 2)
}

func TestReceiver_TagPushAndUnrelatedRepo(t *testing.T) {
	h := newHarness(t, nil)
	rec := h.post("/webhooks/github", GitHub, githubHeaders("push", "d-tag"), fixture(t, "github-push-tag.json"), Secret{Token: globalSecret})
	require.Equal(t, http.StatusAccepted, rec.Code, rec.Body.String())
	resp := decodeResponse(t, rec)
	assert.Empty(t, resp.Signalled)
	assert.Len(t, resp.Skipped, 3)
	assert.Equal(t, "follows branch main; push changed refs/tags/v1.0.0", resp.Skipped[0].Reason)

	other := bytes.ReplaceAll(fixture(t, "github-push.json"), []byte("flotilla-gitops/app"), []byte("someone/else"))
	rec = h.post("/", GitHub, githubHeaders("push", "d-other"), other, Secret{Token: globalSecret})
	require.Equal(t, http.StatusAccepted, rec.Code)
	resp = decodeResponse(t, rec)
	assert.Empty(t, resp.Signalled)
	assert.Contains(t, resp.Message, "no GitRepo watches https://github.com/someone/else")
	assert.Empty(t, h.reg.sent())
}

func TestReceiver_Authentication(t *testing.T) {
	push := fixture(t, "github-push.json")
	for _, tt := range []struct {
		name   string
		secret Secret
		body   []byte
	}{
		{"wrong secret", Secret{Token: "not-the-secret"}, push},
		{"missing signature", Secret{}, push},
		{"tampered body", Secret{Token: globalSecret}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil)
			req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(push))
			for k, v := range githubHeaders("push", "d-"+tt.name) {
				req.Header.Set(k, v)
			}
			if !tt.secret.IsZero() {
				signed := tt.body
				if signed == nil {
					signed = bytes.Replace(push, []byte(pushCommit), []byte(strings.Repeat("a", 40)), 1)
				}
				sign(GitHub, req.Header, signed, tt.secret)
			}
			rec := httptest.NewRecorder()
			h.recv.ServeHTTP(rec, req)
			assert.Equal(t, http.StatusUnauthorized, rec.Code)
			assert.Equal(t, "Unauthorized\n", rec.Body.String(), "no detail")
			assert.NotContains(t, rec.Body.String(), globalSecret)
			assert.Empty(t, h.reg.sent())
			if tt.secret.IsZero() {
				assert.Zero(t, h.reg.lookups, "unsigned: refused before any lookup")
			}
			for _, e := range h.logs.All() {
				for _, v := range e.ContextMap() {
					assert.NotContains(t, toString(v), globalSecret, "secret in log %q", e.Message)
				}
			}
			// A refused delivery does not use up its ID.
			rec = h.post("/", GitHub, githubHeaders("push", "d-"+tt.name), push, Secret{Token: globalSecret})
			assert.Equal(t, http.StatusAccepted, rec.Code)
		})
	}
}

func toString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// A GitRepo's webhookSecret replaces the global secret; GitLab sends the
// token itself.
func TestReceiver_PerGitRepoSecret(t *testing.T) {
	h := newHarness(t, nil)
	hdr := map[string]string{"X-Gitlab-Event": "Push Hook", "X-Gitlab-Event-UUID": "g-1"}
	body := fixture(t, "gitlab-push.json")
	rec := h.post("/", GitLab, hdr, body, Secret{Token: globalSecret})
	assert.Equal(t, http.StatusUnauthorized, rec.Code, "the global secret does not open a GitRepo with its own")
	rec = h.post("/", GitLab, hdr, body, Secret{})
	assert.Equal(t, http.StatusUnauthorized, rec.Code, "a configured secret is mandatory")
	rec = h.post("/webhooks/gitlab", GitLab, hdr, body, Secret{Token: repoSecret})
	require.Equal(t, http.StatusAccepted, rec.Code, rec.Body.String())
	assert.Equal(t, []string{"team-a/lab refs/heads/main 6c3bd43f199a9726419025c836310fe4b071af14"}, h.reg.sent())
}

// With no secret configured deliveries are accepted, unless signatures
// are required.
func TestReceiver_Unsigned(t *testing.T) {
	noGlobal := func(c *Config) { c.GlobalSecrets = nil }
	h := newHarness(t, noGlobal)
	rec := h.post("/", GitHub, githubHeaders("push", "u-1"), fixture(t, "github-push.json"), Secret{})
	assert.Equal(t, http.StatusAccepted, rec.Code)
	assert.Equal(t, []string{"fleet-default/app refs/heads/main " + pushCommit + " (unsigned)"}, h.reg.sent())

	h = newHarness(t, func(c *Config) { noGlobal(c); c.RequireSignature = true })
	rec = h.post("/", GitHub, githubHeaders("push", "u-2"), fixture(t, "github-push.json"), Secret{Token: "anything"})
	assert.Equal(t, http.StatusUnauthorized, rec.Code)
	other := bytes.ReplaceAll(fixture(t, "github-push.json"), []byte("flotilla-gitops/app"), []byte("someone/else"))
	rec = h.post("/", GitHub, githubHeaders("push", "u-3"), other, Secret{})
	assert.Equal(t, http.StatusUnauthorized, rec.Code, "required even when no GitRepo matches")
	assert.Empty(t, h.reg.sent())
}

func TestReceiver_HTTPErrors(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxBody = 1024 })
	get := httptest.NewRequest(http.MethodGet, "/", nil)
	rec := httptest.NewRecorder()
	h.recv.ServeHTTP(rec, get)
	assert.Equal(t, http.StatusMethodNotAllowed, rec.Code)
	assert.Equal(t, "POST", rec.Header().Get("Allow"))

	assert.Equal(t, http.StatusNotFound, h.post("/webhooks/svn", GitHub, githubHeaders("push", "x"), []byte("{}"), Secret{}).Code)
	assert.Equal(t, http.StatusNotFound, h.post("/other", GitHub, githubHeaders("push", "x"), []byte("{}"), Secret{}).Code)
	big := bytes.Repeat([]byte(" "), 2048)
	assert.Equal(t, http.StatusRequestEntityTooLarge, h.post("/", GitHub, githubHeaders("push", "x"), big, Secret{}).Code)
	rec = h.post("/", GitHub, githubHeaders("push", "x"), []byte(`{"ref": `), Secret{})
	assert.Equal(t, http.StatusBadRequest, rec.Code)
	assert.Contains(t, rec.Body.String(), "malformed webhook payload")
	rec = h.post("/", GitHub, map[string]string{"Content-Type": "application/json"}, []byte("{}"), Secret{})
	assert.Equal(t, http.StatusBadRequest, rec.Code)
	assert.Contains(t, rec.Body.String(), "X-GitHub-Event")

	for range 3 {
		rec = h.post("/", GitHub, githubHeaders("issues", "x"), []byte("{}"), Secret{})
		assert.Equal(t, http.StatusNoContent, rec.Code)
	}
	assert.Equal(t, 1, h.logs.FilterMessageSnippet("Ignoring webhook event").Len(), "logged once")
	assert.Zero(t, h.reg.lookups, "nothing looked up for unknown events")
}

// A ping is answered once authenticated; it signals nothing.
func TestReceiver_Ping(t *testing.T) {
	h := newHarness(t, nil)
	rec := h.post("/", GitHub, githubHeaders("ping", "p-1"), fixture(t, "github-ping.json"), Secret{Token: globalSecret})
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	assert.Equal(t, "pong", decodeResponse(t, rec).Message)
	assert.Equal(t, http.StatusUnauthorized, h.post("/", GitHub, githubHeaders("ping", "p-2"), fixture(t, "github-ping.json"), Secret{Token: "x"}).Code)
	assert.Empty(t, h.reg.sent())
}

// A failed signal answers 503 and forgets the delivery, so a host that
// retries (GitLab, Bitbucket) gets it handled.
func TestReceiver_SignalFailure(t *testing.T) {
	h := newHarness(t, nil)
	h.reg.failNext = errors.New("frontend unavailable")
	rec := h.post("/", GitHub, githubHeaders("push", "f-1"), fixture(t, "github-push.json"), Secret{Token: globalSecret})
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	rec = h.post("/", GitHub, githubHeaders("push", "f-1"), fixture(t, "github-push.json"), Secret{Token: globalSecret})
	assert.Equal(t, http.StatusAccepted, rec.Code)
	assert.Len(t, h.reg.sent(), 1)
}

func TestDirSecrets(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "github"), []byte("gh\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "gogs"), []byte("gogs"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "azure-username"), []byte("u"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "azure-password"), []byte("p\r\n"), 0o600))
	get := DirSecrets(dir)
	got, err := get()
	require.NoError(t, err)
	assert.Equal(t, map[Provider]Secret{
		GitHub:      {Token: "gh"},
		Gitea:       {Token: "gogs"}, // Fleet's key for Gitea
		Gogs:        {Token: "gogs"},
		AzureDevOps: {Username: "u", Password: "p"},
	}, got)
	// Rotation applies to the next delivery.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "github"), []byte("rotated"), 0o600))
	got, err = get()
	require.NoError(t, err)
	assert.Equal(t, Secret{Token: "rotated"}, got[GitHub])
	assert.NotContains(t, got[GitHub].String(), "rotated")
}

// More deliveries at once than MaxInFlight are answered 429.
func TestReceiver_MaxInFlight(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 4)
	h := newHarness(t, func(c *Config) {
		c.MaxInFlight = 1
		targets := c.Targets
		c.Targets = func(ctx context.Context, keys []string) ([]Target, error) {
			entered <- struct{}{}
			<-release
			return targets(ctx, keys)
		}
	})
	done := make(chan int)
	go func() {
		done <- h.post("/", GitHub, githubHeaders("push", "m-1"), fixture(t, "github-push.json"), Secret{Token: globalSecret}).Code
	}()
	<-entered
	rec := h.post("/", GitHub, githubHeaders("push", "m-2"), fixture(t, "github-push.json"), Secret{Token: globalSecret})
	assert.Equal(t, http.StatusTooManyRequests, rec.Code)
	assert.Equal(t, "1", rec.Header().Get("Retry-After"))
	close(release)
	assert.Equal(t, http.StatusAccepted, <-done)
}

// Every provider's documented push, posted to the receiver at "/" (the
// provider detected from its headers) and at /webhooks/<provider>: signed
// with the provider's secret it reaches the GitRepo following the pushed
// branch (a tag push or a deleted branch reaches none); wrongly signed or
// unsigned it is refused.
func TestReceiver_EveryProvider(t *testing.T) {
	secretOf := func(p Provider) Secret {
		if p == AzureDevOps {
			return Secret{Username: "azure", Password: "pw-" + string(p)}
		}
		return Secret{Token: "tok-" + string(p)}
	}
	for _, fc := range fixtureCases {
		if fc.want.Kind != Push {
			continue
		}
		for _, path := range []string{"/", "/webhooks/" + string(fc.provider)} {
			t.Run(fc.file+path, func(t *testing.T) {
				key, err := RepoKey(fc.clone)
				require.NoError(t, err)
				// The GitRepo follows the first branch the push moved,
				// else the default branch.
				target := Target{Namespace: "ns", Name: "app", Branch: fc.want.DefaultBranch}
				var want []string
				for _, c := range fc.want.Changes {
					if name, ok := strings.CutPrefix(c.Ref, "refs/heads/"); ok {
						target.Branch = name
						if !c.Deleted {
							want = []string{"ns/app " + c.Ref + " " + c.Commit}
						}
						break
					}
				}
				reg := &registry{byKey: map[string][]Target{key: {target}}}
				recv := NewReceiver(Config{Targets: reg.targets, Signal: reg.signal,
					GlobalSecrets: func() (map[Provider]Secret, error) {
						return map[Provider]Secret{fc.provider: secretOf(fc.provider)}, nil
					}})
				body := readFixture(t, fc.file)
				send := func(s Secret, tamper bool) int {
					req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
					req.Header = deliveryHeaders(fc.provider, fc.event, fc.delivery)
					signed := body
					if tamper {
						signed = append(bytes.Clone(body), ' ')
					}
					if !s.IsZero() {
						sign(fc.provider, req.Header, signed, s)
					}
					rec := httptest.NewRecorder()
					recv.ServeHTTP(rec, req)
					return rec.Code
				}
				wrong := secretOf(fc.provider)
				wrong.Token, wrong.Password = wrong.Token+"x", wrong.Password+"x"
				assert.Equal(t, http.StatusUnauthorized, send(wrong, false), "wrong secret")
				assert.Equal(t, http.StatusUnauthorized, send(Secret{}, false), "unsigned")
				if fc.provider != GitLab && fc.provider != AzureDevOps { // their credential does not cover the body
					assert.Equal(t, http.StatusUnauthorized, send(secretOf(fc.provider), true), "tampered body")
				}
				assert.Empty(t, reg.sent())
				assert.Equal(t, http.StatusAccepted, send(secretOf(fc.provider), false))
				assert.Equal(t, want, reg.sent())
			})
		}
	}
}

// Once any global secret is configured, a delivery claiming a provider
// without one is refused: it cannot dodge the GitHub secret by posting
// its GitHub payload as GitLab.
func TestReceiver_ProviderWithoutSecretIsRefusedOnceSecretsExist(t *testing.T) {
	h := newHarness(t, nil) // a global secret for GitHub only
	gitlabish := []byte(`{"object_kind":"push","ref":"refs/heads/main","after":"` + pushCommit +
		`","project":{"git_http_url":"https://github.com/flotilla-gitops/app.git"}}`)
	rec := h.post("/webhooks/gitlab", GitLab, map[string]string{"X-Gitlab-Event": "Push Hook"}, gitlabish, Secret{})
	assert.Equal(t, http.StatusUnauthorized, rec.Code)
	rec = h.post("/webhooks/gitlab", GitLab, map[string]string{"X-Gitlab-Event": "Push Hook"}, gitlabish, Secret{Token: "guess"})
	assert.Equal(t, http.StatusUnauthorized, rec.Code)
	assert.Empty(t, h.reg.sent())
}

// The branch may be written as a full ref; a deleted branch does not hide
// the default branch's update in the same push; a delivery nobody is
// signalled for does not use up its ID.
func TestReceiver_MatchEdges(t *testing.T) {
	ev := &Event{Changes: []Change{{Ref: "refs/heads/old", Deleted: true}, {Ref: "refs/heads/main", Commit: pushCommit}}}
	c, reason := match(Target{Branch: "refs/heads/main"}, ev)
	assert.Empty(t, reason)
	assert.Equal(t, pushCommit, c.Commit)
	c, reason = match(Target{}, ev)
	assert.Empty(t, reason)
	assert.Equal(t, "refs/heads/main", c.Ref)
	_, reason = match(Target{Branch: "old"}, ev)
	assert.Equal(t, "branch old was deleted", reason)

	h := newHarness(t, nil)
	other := bytes.ReplaceAll(fixture(t, "github-push.json"), []byte("flotilla-gitops/app"), []byte("someone/else"))
	assert.Equal(t, http.StatusAccepted, h.post("/", GitHub, githubHeaders("push", "same"), other, Secret{Token: globalSecret}).Code)
	assert.Equal(t, http.StatusAccepted, h.post("/", GitHub, githubHeaders("push", "same"), fixture(t, "github-push.json"), Secret{Token: globalSecret}).Code)
	assert.Len(t, h.reg.sent(), 1)
}

// Sender-chosen strings the receiver keeps or queries are bounded.
func TestParse_Bounds(t *testing.T) {
	hdr := http.Header{"X-Github-Event": {strings.Repeat("e", 10000)}, "X-Github-Delivery": {strings.Repeat("d", 10000)}}
	ev, err := Parse(GitHub, hdr, []byte("{}"))
	require.NoError(t, err)
	assert.Len(t, ev.Name, maxIDLength)
	assert.Len(t, ev.Delivery, maxIDLength)

	var links []string
	for i := range 1000 {
		links = append(links, `{"href":"https://bb.example/scm/p/r`+strings.Repeat("x", i)+`.git","name":"http"}`)
	}
	body := `{"changes":[{"ref":{"id":"refs/heads/main"},"toHash":"` + pushCommit + `","type":"UPDATE"}],` +
		`"repository":{"slug":"r","project":{"key":"P"},"links":{"clone":[` + strings.Join(links, ",") + `]}}}`
	ev, err = Parse(BitbucketServer, http.Header{"X-Event-Key": {"repo:refs_changed"}}, []byte(body))
	require.NoError(t, err)
	assert.Len(t, ev.RepoURLs, maxRepoURLs)
}

// blockingBody is a request body that blocks its first Read until
// release is closed, and records whether it was read at all.
type blockingBody struct {
	read    chan struct{}
	release chan struct{}
	data    *bytes.Reader
	once    sync.Once
}

func (b *blockingBody) Read(p []byte) (int, error) {
	b.once.Do(func() { close(b.read); <-b.release })
	return b.data.Read(p)
}

// The in-flight slot is taken before the body is read: while one
// delivery's body is still arriving, the next is answered 429 with
// Retry-After and its body is never read.
func TestReceiver_SlotBeforeBody(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxInFlight = 1 })
	push := fixture(t, "github-push.json")
	slow := &blockingBody{read: make(chan struct{}), release: make(chan struct{}), data: bytes.NewReader(push)}
	req := httptest.NewRequest(http.MethodPost, "/", slow)
	for k, v := range githubHeaders("push", "s-1") {
		req.Header.Set(k, v)
	}
	sign(GitHub, req.Header, push, Secret{Token: globalSecret})
	done := make(chan int)
	go func() {
		rec := httptest.NewRecorder()
		h.recv.ServeHTTP(rec, req)
		done <- rec.Code
	}()
	<-slow.read // the first delivery holds the slot while its body arrives

	unread := &blockingBody{read: make(chan struct{}), release: make(chan struct{}), data: bytes.NewReader(push)}
	close(unread.release)
	second := httptest.NewRequest(http.MethodPost, "/", unread)
	for k, v := range githubHeaders("push", "s-2") {
		second.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.recv.ServeHTTP(rec, second)
	assert.Equal(t, http.StatusTooManyRequests, rec.Code)
	assert.Equal(t, "1", rec.Header().Get("Retry-After"))
	select {
	case <-unread.read:
		t.Error("the refused delivery's body was read")
	default:
	}
	close(slow.release)
	assert.Equal(t, http.StatusAccepted, <-done)
}

// Once a secret applies, a delivery whose credential is missing or not
// of its provider's form is refused before any GitRepo or Secret is
// looked up; one the global secret verifies is looked up; a well-formed
// one the global secret refuses is looked up only for GitRepos with
// their own webhookSecret, and signals nothing without it.
func TestReceiver_RefusedBeforeLookup(t *testing.T) {
	push := fixture(t, "github-push.json")
	mac := hmacHex(globalSecret, push)
	tests := []struct {
		name       string
		header     map[string]string // the credential headers
		wantCode   int
		wantLookup bool
	}{
		{"unsigned", nil, http.StatusUnauthorized, false},
		{"sha1 signature", map[string]string{"X-Hub-Signature": "sha1=" + hmacSHA1Hex(globalSecret, push)}, http.StatusUnauthorized, false},
		{"no prefix", map[string]string{"X-Hub-Signature-256": mac}, http.StatusUnauthorized, false},
		{"short", map[string]string{"X-Hub-Signature-256": "sha256=" + mac[:62]}, http.StatusUnauthorized, false},
		{"not hex", map[string]string{"X-Hub-Signature-256": "sha256=" + strings.Repeat("z", 64)}, http.StatusUnauthorized, false},
		{"well formed, wrong secret", map[string]string{"X-Hub-Signature-256": "sha256=" + hmacHex("guess", push)}, http.StatusUnauthorized, true},
		{"global secret", map[string]string{"X-Hub-Signature-256": "sha256=" + mac}, http.StatusAccepted, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil)
			hdr := githubHeaders("push", "b-"+tt.name)
			for k, v := range tt.header {
				hdr[k] = v
			}
			rec := h.post("/", GitHub, hdr, push, Secret{})
			assert.Equal(t, tt.wantCode, rec.Code, rec.Body.String())
			assert.Equal(t, tt.wantLookup, h.reg.lookups > 0, "lookups: %d", h.reg.lookups)
			if tt.wantCode != http.StatusAccepted {
				assert.Empty(t, h.reg.sent())
			}
		})
	}

	// The same for a provider with no global secret (GitLab here), whose
	// GitRepos may have their own: a token is needed before the lookup.
	h := newHarness(t, nil)
	gl := map[string]string{"X-Gitlab-Event": "Push Hook"}
	assert.Equal(t, http.StatusUnauthorized, h.post("/", GitLab, gl, fixture(t, "gitlab-push.json"), Secret{}).Code)
	assert.Zero(t, h.reg.lookups)
	gl["X-Gitlab-Token"] = strings.Repeat("t", 1025)
	assert.Equal(t, http.StatusUnauthorized, h.post("/", GitLab, gl, fixture(t, "gitlab-push.json"), Secret{}).Code)
	assert.Zero(t, h.reg.lookups, "an over-long token is not a token")
}
