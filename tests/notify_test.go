package tests

import (
	"encoding/json"
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

	"github.com/flotilla-gitops/flotilla/internal/notify"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

// hookKey is the webhook Notification's HMAC key.
const hookKey = "e2e-hmac-key"

// delivery is one request a stand-in accepted: the event's type and ID
// (as the payload says) and, for commit statuses, the commit and state.
type delivery struct {
	Type, ID      string
	Commit, State string
	Context       string
}

// standIn is a local HTTP server in place of one provider's receiver.
type standIn struct {
	t   *testing.T
	srv *httptest.Server
	// parse reads a request into a delivery; an error answers 400.
	parse func(r *http.Request, body []byte) (delivery, error)

	mu       sync.Mutex
	accepted []delivery
	// refused are the types of the events answered 503, by event ID.
	refused map[string]string
	// failing: answer 503 to every event of this type.
	failing notify.Type
}

func newStandIn(t *testing.T, parse func(*http.Request, []byte) (delivery, error)) *standIn {
	s := &standIn{t: t, parse: parse, refused: map[string]string{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *standIn) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	d, err := s.parse(r, body)
	if err != nil {
		s.t.Errorf("%s %s: %v", r.Method, r.URL.Path, err)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failing != "" && d.Type == string(s.failing) {
		s.refused[d.ID] = d.Type
		http.Error(w, "try later", http.StatusServiceUnavailable)
		return
	}
	s.accepted = append(s.accepted, d)
	w.WriteHeader(http.StatusCreated)
}

func (s *standIn) got() []delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]delivery(nil), s.accepted...)
}

func (s *standIn) setFailing(v notify.Type) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failing = v
}

// refusedOf returns the IDs of the events of typ answered 503.
func (s *standIn) refusedOf(typ notify.Type) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for id, t := range s.refused {
		if t == string(typ) {
			ids = append(ids, id)
		}
	}
	return ids
}

// count is how many accepted deliveries pass match.
func (s *standIn) count(match func(delivery) bool) int {
	n := 0
	for _, d := range s.got() {
		if match(d) {
			n++
		}
	}
	return n
}

func ofType(typ notify.Type) func(delivery) bool {
	return func(d delivery) bool { return d.Type == string(typ) }
}

// parseWebhook checks the documented webhook request: POST, CloudEvents
// JSON, the event ID header, and the signature.
func parseWebhook(r *http.Request, body []byte) (delivery, error) {
	var ce notify.CloudEvent
	switch {
	case r.Method != http.MethodPost || r.Header.Get("Content-Type") != notify.CloudEventsContentType:
		return delivery{}, fmt.Errorf("webhook: %s with Content-Type %q", r.Method, r.Header.Get("Content-Type"))
	case !notify.Verify([]byte(hookKey), body, r.Header.Get(notify.HeaderSignature)):
		return delivery{}, fmt.Errorf("webhook: bad signature %q", r.Header.Get(notify.HeaderSignature))
	case json.Unmarshal(body, &ce) != nil:
		return delivery{}, fmt.Errorf("webhook: not JSON: %s", body)
	case ce.SpecVersion != "1.0" || ce.ID != r.Header.Get(notify.HeaderEventID) || ce.ID != ce.Data.ID ||
		ce.Type != notify.CloudEventType(ce.Data.Type) || !strings.HasPrefix(ce.Source, "flotilla/fleet-default/"):
		return delivery{}, fmt.Errorf("webhook: not the documented CloudEvent: %s", body)
	}
	return delivery{Type: string(ce.Data.Type), ID: ce.ID, Commit: ce.Data.Commit}, nil
}

// parseChat reads a Slack or Teams message: the type from the headline,
// the ID from the "Event" detail.
func parseChat(provider notify.Provider) func(*http.Request, []byte) (delivery, error) {
	return func(_ *http.Request, body []byte) (delivery, error) {
		var title string
		facts := map[string]string{}
		if provider == notify.Slack {
			var m notify.SlackMessage
			if json.Unmarshal(body, &m) != nil || len(m.Attachments) != 1 || m.Attachments[0].Color == "" {
				return delivery{}, fmt.Errorf("slack: not the documented message: %s", body)
			}
			title = m.Text
			for _, f := range m.Attachments[0].Fields {
				facts[f.Title] = f.Value
			}
		} else {
			var m struct {
				Type        string `json:"type"`
				Attachments []struct {
					ContentType string `json:"contentType"`
					Content     struct {
						Type string `json:"type"`
						Body []struct {
							Text  string              `json:"text"`
							Facts []map[string]string `json:"facts"`
						} `json:"body"`
					} `json:"content"`
				} `json:"attachments"`
			}
			if json.Unmarshal(body, &m) != nil || m.Type != "message" || len(m.Attachments) != 1 ||
				m.Attachments[0].ContentType != "application/vnd.microsoft.card.adaptive" || len(m.Attachments[0].Content.Body) != 3 {
				return delivery{}, fmt.Errorf("msteams: not the documented Adaptive Card: %s", body)
			}
			title = m.Attachments[0].Content.Body[0].Text
			for _, f := range m.Attachments[0].Content.Body[2].Facts {
				facts[f["title"]] = f["value"]
			}
		}
		typ, _, _ := strings.Cut(title, ":")
		return delivery{Type: typ, ID: facts["Event"], Commit: facts["Commit"]}, nil
	}
}

// parseStatus reads a commit status request of provider.
func parseStatus(provider notify.Provider) func(*http.Request, []byte) (delivery, error) {
	return func(r *http.Request, body []byte) (delivery, error) {
		prefix, auth, ctxKey := "/repos/org/notify/statuses/", r.Header.Get("Authorization"), "context"
		switch provider {
		case notify.GitLab:
			prefix, auth, ctxKey = "/projects/org%2Fnotify/statuses/", "Bearer "+r.Header.Get("PRIVATE-TOKEN"), "name"
		case notify.Gitea:
			auth = strings.Replace(auth, "token ", "Bearer ", 1)
		}
		var m map[string]string
		switch {
		case r.Method != http.MethodPost || !strings.HasPrefix(r.URL.EscapedPath(), prefix):
			return delivery{}, fmt.Errorf("%s: %s %s", provider, r.Method, r.URL.EscapedPath())
		case auth != "Bearer "+string(provider)+"-token":
			return delivery{}, fmt.Errorf("%s: token header %q", provider, auth)
		case json.Unmarshal(body, &m) != nil:
			return delivery{}, fmt.Errorf("%s: not JSON: %s", provider, body)
		}
		return delivery{Commit: strings.TrimPrefix(r.URL.EscapedPath(), prefix), State: m["state"], Context: m[ctxKey]}, nil
	}
}

// notifyDocs are the Secrets and Notifications of TestNotifications.
func notifyDocs(hook, slack, teams, gh, gl, gitea string) string {
	secret := func(name, key, value string) string {
		return "apiVersion: v1\nkind: Secret\nmetadata: {name: " + name + "}\nstringData: {" + key + ": \"" + value + "\"}\n"
	}
	n := func(name, spec string) string {
		return "apiVersion: flotilla.dev/v1alpha1\nkind: Notification\nmetadata: {name: " + name + "}\nspec:\n" + spec
	}
	return strings.Join([]string{
		secret("hook-secret", "token", hookKey),
		secret("slack-secret", "address", slack+"/services/T0/B0/xyz"),
		secret("github-secret", "token", "github-token"),
		secret("gitlab-secret", "token", "gitlab-token"),
		secret("gitea-secret", "token", "gitea-token"),
		n("hook", "  provider: webhook\n  address: "+hook+"/hook\n  secretRef: {name: hook-secret}\n"),
		n("slack", "  provider: slack\n  secretRef: {name: slack-secret}\n  severity: error\n"),
		n("teams", "  provider: msteams\n  address: "+teams+"/webhook\n  eventTypes: [ClusterOffline, ClusterOnline]\n  clusters: [\"cluster-*\"]\n"),
		n("github", "  provider: github\n  address: "+gh+"\n  secretRef: {name: github-secret}\n  gitRepos: [notify]\n"),
		n("gitlab", "  provider: gitlab\n  address: "+gl+"\n  secretRef: {name: gitlab-secret}\n  eventTypes: [RolloutSucceeded]\n"),
		n("gitea", "  provider: gitea\n  address: "+gitea+"\n  secretRef: {name: gitea-secret}\n  severity: error\n"),
	}, "---\n")
}

// TestNotifications (issue 31, "Be told"): a local server per provider
// receives each event it subscribed to once, in the documented shape: a
// rollout that succeeds (started, succeeded; commit statuses pending and
// success), a commit that fails (failed; failure), the cluster's agent
// stopped (offline) and restarted (online). Then the webhook answers 503,
// the controller is killed with SIGKILL and restarted, and the event is
// delivered once all the same.
func TestNotifications(t *testing.T) {
	began := time.Now()
	f := startAgentFleet(t, 1)
	f.startAgent(t, "cluster-1", f.newToken(t, "1h"))
	f.waitCluster(t, "cluster-1", "agent online", 30*time.Second, func(rec protocol.ClusterRecord) bool {
		return rec.Agent != nil && rec.Agent.LastSeen != nil
	})
	hook, slack, teams := newStandIn(t, parseWebhook), newStandIn(t, parseChat(notify.Slack)), newStandIn(t, parseChat(notify.MSTeams))
	gh, gl, gitea := newStandIn(t, parseStatus(notify.GitHub)), newStandIn(t, parseStatus(notify.GitLab)), newStandIn(t, parseStatus(notify.Gitea))
	out := f.cli(t, "apply", "-f", writeTemp(t, "notify.yaml", notifyDocs(hook.srv.URL, slack.srv.URL, teams.srv.URL, gh.srv.URL, gl.srv.URL, gitea.srv.URL)))
	assert.Contains(t, out, "notification/fleet-default/hook created")

	// Step 1: a rollout that succeeds.
	repo := f.git.CreateRepo(t, "org/notify", map[string]string{"fleet.yaml": fleetYAML("notify-ns"), "cm.yaml": configMapDoc("notify", "v1")})
	f.cli(t, "apply", "-f", writeTemp(t, "gitrepo.yaml", gitRepoDoc("notify", repo.URL(), allClusters)))
	v1 := repo.Head(t)
	f.waitGitRepo(t, "notify", "v1 Ready", time.Minute, settledAt(v1, 1))
	waitUntil(t, 20*time.Second, "webhook: RolloutSucceeded; statuses success", func() bool {
		return hook.count(ofType(notify.RolloutSucceeded)) == 1 && gh.count(stateOf(v1, "success")) == 1 &&
			gl.count(stateOf(v1, "success")) == 1
	})
	t.Logf("v1 rolled out and told after %s", time.Since(began).Round(time.Millisecond))

	// Step 2: a commit whose object the API server refuses.
	v2 := repo.Commit(t, map[string]string{"cm.yaml": configMapDoc("Bad_Name", "v2")}, "v2")
	f.sync(t, "notify")
	f.waitGitRepo(t, "notify", "v2 failed", time.Minute, func(st status.GitRepo) bool {
		return st.Commit == v2 && st.Settled && st.Summary.State != status.Ready
	})
	waitUntil(t, 20*time.Second, "RolloutFailed told", func() bool {
		return hook.count(ofType(notify.RolloutFailed)) >= 1 && slack.count(ofType(notify.RolloutFailed)) >= 1 &&
			gh.count(stateOf(v2, "failure")) >= 1 && gitea.count(stateOf(v2, "failure")) >= 1
	})

	// Step 3: the agent stops (offline) and comes back (online).
	kill9(t, f.agents["cluster-1"].proc)
	waitUntil(t, 20*time.Second, "ClusterOffline told", func() bool {
		return hook.count(ofType(notify.ClusterOffline)) == 1 && teams.count(ofType(notify.ClusterOffline)) == 1
	})
	f.startAgent(t, "cluster-1", "")
	waitUntil(t, 20*time.Second, "ClusterOnline told", func() bool {
		return hook.count(ofType(notify.ClusterOnline)) == 1 && teams.count(ofType(notify.ClusterOnline)) == 1
	})
	t.Logf("offline and online told after %s", time.Since(began).Round(time.Millisecond))

	// Step 4: the webhook answers 503 to the next ClusterOffline; the
	// controller dies meanwhile; the event is delivered once after its
	// restart. (Only that type is refused: a Notification delivers in
	// order, so a refused retry rollout event would hold it back.)
	hook.setFailing(notify.ClusterOffline)
	kill9(t, f.agents["cluster-1"].proc)
	waitUntil(t, 20*time.Second, "the webhook refused ClusterOffline", func() bool { return len(hook.refusedOf(notify.ClusterOffline)) > 0 })
	f.killController(t)
	hook.setFailing("")
	f.restartController(t)
	refused := hook.refusedOf(notify.ClusterOffline)
	require.Len(t, refused, 1)
	waitUntil(t, 30*time.Second, "the refused ClusterOffline delivered after the restart", func() bool {
		return hook.count(func(d delivery) bool { return d.ID == refused[0] }) == 1
	})
	assert.Equal(t, 2, hook.count(ofType(notify.ClusterOffline)), "the second offline, delivered once after the restart")
	t.Logf("refused ClusterOffline delivered after the restart, %s in", time.Since(began).Round(time.Millisecond))

	// Every stand-in got each event once, the shapes were the documented
	// ones (parse), and the filters held.
	for name, s := range map[string]*standIn{"webhook": hook, "slack": slack, "msteams": teams} {
		seen := map[string]int{}
		for _, d := range s.got() {
			require.NotEmpty(t, d.ID, name)
			seen[d.ID]++
			assert.Equal(t, 1, seen[d.ID], "%s: event %s %s delivered twice", name, d.Type, d.ID)
		}
	}
	// Failed rollouts are retried: a retry may be under way at the end.
	started, ended := hook.count(ofType(notify.RolloutStarted)), hook.count(ofType(notify.RolloutSucceeded))+hook.count(ofType(notify.RolloutFailed))
	t.Logf("webhook: %d RolloutStarted, %d ended; %d deliveries in all", started, ended, len(hook.got()))
	assert.Contains(t, []int{ended, ended + 1}, started, "webhook: a RolloutStarted for each rollout")
	for _, d := range slack.got() {
		assert.Equal(t, string(notify.RolloutFailed), d.Type, "slack takes errors only")
	}
	for _, d := range teams.got() {
		assert.Contains(t, []string{"ClusterOffline", "ClusterOnline"}, d.Type)
	}
	assert.Equal(t, 1, gh.count(stateOf(v1, "pending")), "github: pending once for v1")
	assert.Equal(t, 1, gh.count(stateOf(v1, "success")), "github: success once for v1")
	failures := gh.count(stateOf(v2, "failure"))
	assert.Contains(t, []int{failures, failures + 1}, gh.count(stateOf(v2, "pending")), "github: a pending per v2 rollout")
	assert.Equal(t, []delivery{{Commit: v1, State: "success", Context: "flotilla/notify"}}, gl.got(), "gitlab: RolloutSucceeded only")
	for _, d := range gitea.got() {
		assert.Equal(t, "failure", d.State, "gitea: errors only")
	}

	list := f.cli(t, "get", "notifications")
	assert.Regexp(t, `fleet-default\s+hook\s+webhook\s+all\s+false\s+[1-9]`, list)
	f.cli(t, "delete", "notification/gitlab")
	assert.NotContains(t, f.cli(t, "get", "notifications"), "gitlab")
	t.Logf("TestNotifications took %s", time.Since(began).Round(time.Millisecond))
}

// stateOf matches the commit statuses of commit in state.
func stateOf(commit, state string) func(delivery) bool {
	return func(d delivery) bool { return d.Commit == commit && d.State == state }
}
