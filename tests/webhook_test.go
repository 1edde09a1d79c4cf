package tests

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

// Webhook secrets of TestWebhook and BenchmarkWebhook: the global ones
// (files of --webhook-secrets) and the GitLab key of a GitRepo's own
// webhookSecret, which must differ from the global GitLab secret.
const (
	globalGitHubSecret = "gh-global-5f0c2a9e"
	globalGitLabSecret = "gl-global-81d3b7c4"
	repoGitLabSecret   = "gl-repo-only-3e9a61f0"
	webhookMaxBody     = 64 << 10
)

// TestWebhook drives the controller's Git webhook receiver end to end on
// one fleet of three clusters: a real worker (started with global secrets
// and a small body cap), real kube-apiservers and a Git server. The
// scenarios run in order and share state: each starts where the previous
// one left the GitRepo.
func TestWebhook(t *testing.T) {
	start := time.Now()
	f := startWebhookFleet(t, 3,
		"--webhook-secrets", writeWebhookSecrets(t, map[string]string{"github": globalGitHubSecret, "gitlab": globalGitLabSecret}),
		"--webhook-max-body", fmt.Sprint(webhookMaxBody))
	h := newHookClient(t, f)
	t.Logf("webhook receiver at %s", h.base)

	w := &webhookScenario{f: f, h: h}
	steps := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"DeployedOnlyByWebhook", w.deployedOnlyByWebhook},
		{"GitHubPushDeploys", w.gitHubPushDeploys},
		{"BadSignatureRefused", w.badSignatureRefused},
		{"DuplicateDelivery", w.duplicateDelivery},
		{"UnrelatedRepoAndTagPush", w.unrelatedRepoAndTagPush},
		{"GitLabPerRepoSecret", w.gitLabPerRepoSecret},
		{"HTTPErrors", w.httpErrors},
		{"SecretsNotLogged", w.secretsNotLogged},
	}
	for _, s := range steps {
		if !t.Run(s.name, s.run) {
			t.Fatalf("%s failed; later scenarios depend on it", s.name)
		}
	}
	t.Logf("TestWebhook took %s", time.Since(start).Round(time.Millisecond))
}

// webhookScenario is the state TestWebhook's scenarios hand on.
type webhookScenario struct {
	f    *fleet
	h    *hookClient
	repo *testenv.GitRepo
	// first, second and third are the commits of repo, in order.
	first, second, third string
	// delivery2 is the delivery ID and body of the push of second;
	// delivery3 the ID first used with bad signatures for third.
	delivery2     string
	body2         []byte
	delivery3     string
	deployedAfter map[string]int // "Deployed bundle" lines after second
	lastRollout   string         // the rollout of second
}

const (
	hookRepo = "hooked"
	hookNS   = "hook-ns"
	hookCM   = "hook-config"
)

// 1. A GitRepo with polling disabled (Fleet bug #2969: such a GitRepo
// must still follow webhooks) is deployed at its first commit.
func (w *webhookScenario) deployedOnlyByWebhook(t *testing.T) {
	f := w.f
	w.repo = f.git.CreateRepo(t, "app", map[string]string{"fleet.yaml": fleetYAML(hookNS), "cm.yaml": configMapDoc(hookCM, "v1")})
	out := f.apply(t, gitRepoDoc(hookRepo, w.repo.URL(), "  disablePolling: true\n"+allClusters))
	require.Contains(t, out, "gitrepo/fleet-default/"+hookRepo+" created")
	w.first = w.repo.Head(t)
	st := f.waitFor(t, hookRepo, "first commit Ready on 3 clusters", settledAt(w.first, 3))
	assert.Empty(t, st.PollingInterval, "polling is disabled: no interval in effect")
	assert.Empty(t, st.WebhookCommit)
	assert.Nil(t, st.LastWebhookTime)
	for _, c := range f.clusters {
		cm, ok := f.configMap(t, c.Name, hookNS, hookCM)
		require.True(t, ok, "ConfigMap on %s", c.Name)
		assert.Equal(t, "v1", cm.Data["value"])
	}
}

// 2. A signed GitHub push of a new commit, reporting the repository by
// URLs spelled differently from the GitRepo's (no .git, other case, scp
// form, another port), rolls the commit out everywhere.
func (w *webhookScenario) gitHubPushDeploys(t *testing.T) {
	f, h := w.f, w.h
	before := f.countDeployed(t, hookRepo, "")
	w.second = w.repo.Commit(t, map[string]string{"cm.yaml": configMapDoc(hookCM, "v2")}, "v2")
	// Polling is off: without a webhook nothing sees the commit.
	st := f.status(t, hookRepo)
	require.Equal(t, w.first, st.Commit)
	require.Equal(t, w.first, st.LatestCommit, "polling is disabled, yet the remote was checked")

	w.delivery2 = newDeliveryID()
	w.body2 = githubPush(w.repo, "refs/heads/master", w.first, w.second)
	posted := time.Now()
	resp := h.post(t, "/", githubHeaders(w.delivery2, signGitHub(globalGitHubSecret, w.body2)), w.body2)
	require.Equal(t, http.StatusAccepted, resp.status, "body: %s", resp.body)
	r := resp.decode(t)
	assert.Equal(t, "github", r.Provider)
	assert.Equal(t, "push", r.Event)
	assert.Equal(t, w.delivery2, r.Delivery)
	assert.Equal(t, []hookSignalled{{GitRepo: "fleet-default/" + hookRepo, Ref: "refs/heads/master", Commit: w.second}}, r.Signalled)
	assert.Empty(t, r.Skipped)
	assert.False(t, r.Duplicate)

	took := waitHookConfigMaps(t, f.clusters, hookNS, hookCM, "v2", posted, 30*time.Second)
	t.Logf("webhook POST → ConfigMap v2 on all 3 clusters: %s (HTTP response after %s)",
		took.Round(time.Millisecond), resp.took.Round(time.Millisecond))

	st = f.waitFor(t, hookRepo, "second commit Ready on 3 clusters", settledAt(w.second, 3))
	assert.Equal(t, w.second, st.Commit)
	assert.Equal(t, w.second, st.LatestCommit)
	assert.Equal(t, w.second, st.WebhookCommit)
	if assert.NotNil(t, st.LastWebhookTime) {
		assert.WithinRange(t, *st.LastWebhookTime, posted.Add(-5*time.Second), time.Now().Add(5*time.Second))
	}
	assert.Empty(t, st.PollingInterval, "disablePolling wins over the webhook interval")
	assert.Zero(t, st.PollFailures)
	w.deployedAfter = f.countDeployed(t, hookRepo, "")
	w.lastRollout = st.LastRollout
	for _, c := range f.clusters {
		assert.Equal(t, before[c.Name]+1, w.deployedAfter[c.Name], "one new Deployed bundle line on %s", c.Name)
	}
}

// 3 and 4. Deliveries with a wrong or no signature are refused with a
// bare 401 and change nothing; a delivery ID already handled is a
// duplicate even with another payload; a refused delivery's ID is not
// remembered, so its correctly signed redelivery is handled.
func (w *webhookScenario) badSignatureRefused(t *testing.T) {
	h := w.h
	w.third = w.repo.Commit(t, map[string]string{"cm.yaml": configMapDoc(hookCM, "v3")}, "v3")
	w.delivery3 = newDeliveryID()
	body := githubPush(w.repo, "refs/heads/master", w.second, w.third)

	cases := map[string]string{
		"wrong secret":      signGitHub("not-the-secret", body),
		"no signature":      "",
		"signature of body": signGitHub(globalGitHubSecret, append([]byte(" "), body...)),
		"sha1 form":         "sha1=" + strings.TrimPrefix(signGitHub(globalGitHubSecret, body), "sha256="),
		"not hex":           "sha256=zz",
	}
	for name, sig := range cases {
		for _, path := range []string{"/", "/webhooks/github"} {
			resp := h.post(t, path, githubHeaders(w.delivery3, sig), body)
			assert.Equal(t, http.StatusUnauthorized, resp.status, "%s to %s: %s", name, path, resp.body)
			assertBareRefusal(t, resp.body)
		}
	}
}

func (w *webhookScenario) duplicateDelivery(t *testing.T) {
	f, h := w.f, w.h
	// The same delivery again, exactly.
	resp := h.post(t, "/", githubHeaders(w.delivery2, signGitHub(globalGitHubSecret, w.body2)), w.body2)
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	r := resp.decode(t)
	assert.True(t, r.Duplicate, "body: %s", resp.body)
	assert.Empty(t, r.Signalled)
	// The same delivery ID with another (validly signed) payload is still
	// the delivery already handled: the third commit is not signalled.
	body := githubPush(w.repo, "refs/heads/master", w.second, w.third)
	resp = h.post(t, "/", githubHeaders(w.delivery2, signGitHub(globalGitHubSecret, body)), body)
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	r = resp.decode(t)
	assert.True(t, r.Duplicate)
	assert.Empty(t, r.Signalled)

	// Neither the refused deliveries nor the duplicates deployed anything.
	time.Sleep(2 * time.Second)
	st := f.status(t, hookRepo)
	assert.Equal(t, w.second, st.Commit, "commit changed without an accepted webhook")
	assert.Equal(t, w.second, st.LatestCommit, "the remote was checked without an accepted webhook")
	assert.Equal(t, w.second, st.WebhookCommit)
	assert.Empty(t, st.Rollout, "no rollout may run")
	assert.Equal(t, w.lastRollout, st.LastRollout, "no rollout may have run")
	assert.Equal(t, w.deployedAfter, f.countDeployed(t, hookRepo, ""), "no new Deployed bundle lines")
	for _, c := range f.clusters {
		cm, ok := f.configMap(t, c.Name, hookNS, hookCM)
		require.True(t, ok)
		assert.Equal(t, "v2", cm.Data["value"], "ConfigMap on %s", c.Name)
	}
	if t.Failed() {
		return
	}

	// The ID refused with bad signatures was not taken: signed properly,
	// its delivery is handled and the third commit rolls out.
	posted := time.Now()
	resp = h.post(t, "/webhooks/github", githubHeaders(w.delivery3, signGitHub(globalGitHubSecret, body)), body)
	require.Equal(t, http.StatusAccepted, resp.status, "body: %s", resp.body)
	r = resp.decode(t)
	assert.False(t, r.Duplicate, "a refused delivery must not be remembered as handled")
	assert.Equal(t, []hookSignalled{{GitRepo: "fleet-default/" + hookRepo, Ref: "refs/heads/master", Commit: w.third}}, r.Signalled)
	took := waitHookConfigMaps(t, f.clusters, hookNS, hookCM, "v3", posted, 30*time.Second)
	t.Logf("webhook POST → ConfigMap v3 on all 3 clusters: %s", took.Round(time.Millisecond))
	st = f.waitFor(t, hookRepo, "third commit Ready", settledAt(w.third, 3))
	assert.Equal(t, w.third, st.WebhookCommit)
}

// 5. A push of a repository no GitRepo follows is accepted and signals
// nothing; a tag push names the GitRepo as skipped; an event the
// receiver does not handle is a 204; a ping is answered.
func (w *webhookScenario) unrelatedRepoAndTagPush(t *testing.T) {
	f, h := w.f, w.h
	before := f.status(t, hookRepo)

	other := f.git.CreateRepo(t, "unrelated", map[string]string{"README": "x"})
	body := githubPush(other, "refs/heads/master", zeroCommit, other.Head(t))
	resp := h.post(t, "/", githubHeaders(newDeliveryID(), signGitHub(globalGitHubSecret, body)), body)
	require.Equal(t, http.StatusAccepted, resp.status, "body: %s", resp.body)
	r := resp.decode(t)
	assert.NotNil(t, r.Signalled, "signalled is an empty list, not null: %s", resp.body)
	assert.Empty(t, r.Signalled)
	assert.Empty(t, r.Skipped)
	assert.NotEmpty(t, r.Message, "the response says no GitRepo follows the repository")
	// Unrelated and unsigned is still refused: without a GitRepo the
	// global secret applies.
	resp = h.post(t, "/", githubHeaders(newDeliveryID(), ""), body)
	assert.Equal(t, http.StatusUnauthorized, resp.status, "body: %s", resp.body)

	w.repo.Tag(t, "v1")
	body = githubPush(w.repo, "refs/tags/v1", zeroCommit, w.third)
	resp = h.post(t, "/", githubHeaders(newDeliveryID(), signGitHub(globalGitHubSecret, body)), body)
	require.Equal(t, http.StatusAccepted, resp.status, "body: %s", resp.body)
	r = resp.decode(t)
	assert.Empty(t, r.Signalled)
	if assert.Len(t, r.Skipped, 1, "body: %s", resp.body) {
		assert.Equal(t, "fleet-default/"+hookRepo, r.Skipped[0].GitRepo)
		assert.Contains(t, r.Skipped[0].Reason, "refs/tags/v1")
	}

	// A push of another branch is skipped too.
	body = githubPush(w.repo, "refs/heads/feature", zeroCommit, w.third)
	resp = h.post(t, "/", githubHeaders(newDeliveryID(), signGitHub(globalGitHubSecret, body)), body)
	require.Equal(t, http.StatusAccepted, resp.status, "body: %s", resp.body)
	r = resp.decode(t)
	assert.Empty(t, r.Signalled)
	assert.Len(t, r.Skipped, 1, "body: %s", resp.body)

	// Events other than push and ping are acknowledged and ignored.
	issue := []byte(`{"action":"opened","issue":{"number":1}}`)
	hdr := githubHeaders(newDeliveryID(), signGitHub(globalGitHubSecret, issue))
	hdr.Set("X-GitHub-Event", "issues")
	resp = h.post(t, "/", hdr, issue)
	assert.Equal(t, http.StatusNoContent, resp.status, "body: %s", resp.body)

	ping := []byte(fmt.Sprintf(`{"zen":"Keep it logically awesome.","hook_id":1,"repository":{"clone_url":%q,"default_branch":"master"}}`, w.repo.URL()))
	hdr = githubHeaders(newDeliveryID(), signGitHub(globalGitHubSecret, ping))
	hdr.Set("X-GitHub-Event", "ping")
	resp = h.post(t, "/", hdr, ping)
	assert.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)

	st := f.status(t, hookRepo)
	assert.Equal(t, before.Commit, st.Commit)
	assert.Equal(t, before.WebhookCommit, st.WebhookCommit, "a skipped push is not the GitRepo's webhook")
	assert.Equal(t, before.LastWebhookTime, st.LastWebhookTime)
	assert.Empty(t, st.Rollout)
}

// 6. A GitRepo with its own webhookSecret takes GitLab pushes signed with
// that secret only (not the global GitLab secret), at /webhooks/gitlab;
// its first webhook relaxes its polling to hourly.
func (w *webhookScenario) gitLabPerRepoSecret(t *testing.T) {
	f, h := w.f, w.h
	const name, ns, cmName = "lab-hooked", "lab-ns", "lab-config"
	repo := f.git.CreateRepo(t, "lab", map[string]string{"fleet.yaml": fleetYAML(ns), "cm.yaml": configMapDoc(cmName, "v1")})
	out := f.apply(t, "apiVersion: v1\nkind: Secret\nmetadata:\n  name: lab-webhook\nstringData:\n  gitlab: "+repoGitLabSecret+"\n")
	require.Contains(t, out, "lab-webhook")
	f.apply(t, gitRepoDoc(name, repo.URL(), "  webhookSecret: lab-webhook\n"+allClusters))
	first := repo.Head(t)
	st := f.waitFor(t, name, "first commit Ready on 3 clusters", settledAt(first, 3))
	assert.Equal(t, "15s", st.PollingInterval, "the default interval before any webhook")

	second := repo.Commit(t, map[string]string{"cm.yaml": configMapDoc(cmName, "v2")}, "v2")
	body := gitlabPush(repo, "refs/heads/master", first, second)

	// The global GitLab secret does not apply to this GitRepo.
	resp := h.post(t, "/webhooks/gitlab", gitlabHeaders(newDeliveryID(), globalGitLabSecret), body)
	assert.Equal(t, http.StatusUnauthorized, resp.status, "body: %s", resp.body)
	assertBareRefusal(t, resp.body)
	resp = h.post(t, "/webhooks/gitlab", gitlabHeaders(newDeliveryID(), ""), body)
	assert.Equal(t, http.StatusUnauthorized, resp.status, "body: %s", resp.body)
	// Named provider and payload disagree: a GitLab delivery at the
	// GitHub path is not a GitHub push.
	resp = h.post(t, "/webhooks/github", gitlabHeaders(newDeliveryID(), repoGitLabSecret), body)
	assert.NotEqual(t, http.StatusAccepted, resp.status, "body: %s", resp.body)

	posted := time.Now()
	resp = h.post(t, "/webhooks/gitlab", gitlabHeaders(newDeliveryID(), repoGitLabSecret), body)
	require.Equal(t, http.StatusAccepted, resp.status, "body: %s", resp.body)
	r := resp.decode(t)
	assert.Equal(t, "gitlab", r.Provider)
	assert.Equal(t, "Push Hook", r.Event)
	assert.Equal(t, []hookSignalled{{GitRepo: "fleet-default/" + name, Ref: "refs/heads/master", Commit: second}}, r.Signalled)
	took := waitHookConfigMaps(t, f.clusters, ns, cmName, "v2", posted, 30*time.Second)
	t.Logf("GitLab webhook POST → ConfigMap v2 on all 3 clusters: %s", took.Round(time.Millisecond))
	assert.Less(t, took, 10*time.Second, "deployed by the webhook, not by the next poll")

	st = f.waitFor(t, name, "second commit Ready", settledAt(second, 3))
	assert.Equal(t, second, st.WebhookCommit)
	assert.NotNil(t, st.LastWebhookTime)
	assert.Equal(t, "1h0m0s", st.PollingInterval, "webhooks relax polling to hourly")

	// The first GitRepo was not concerned.
	assert.Equal(t, w.third, f.status(t, hookRepo).WebhookCommit)
}

// 7. What is not a webhook delivery: other methods, other paths,
// oversized and malformed bodies.
func (w *webhookScenario) httpErrors(t *testing.T) {
	h := w.h
	for _, path := range []string{"/", "/webhooks/github"} {
		req, err := http.NewRequest(http.MethodGet, h.base+path, nil)
		require.NoError(t, err)
		resp := h.do(t, req)
		assert.Equal(t, http.StatusMethodNotAllowed, resp.status, "GET %s", path)
		assert.Equal(t, http.MethodPost, resp.header.Get("Allow"), "GET %s", path)
	}
	body := githubPush(w.repo, "refs/heads/master", w.second, w.third)
	resp := h.post(t, "/webhooks/unknown-host", githubHeaders(newDeliveryID(), signGitHub(globalGitHubSecret, body)), body)
	assert.Equal(t, http.StatusNotFound, resp.status, "unknown provider path")
	resp = h.post(t, "/hooks", githubHeaders(newDeliveryID(), signGitHub(globalGitHubSecret, body)), body)
	assert.Equal(t, http.StatusNotFound, resp.status, "path outside the receiver")

	// No provider header at "/": the provider cannot be detected.
	resp = h.post(t, "/", http.Header{"Content-Type": {"application/json"}}, body)
	assert.Equal(t, http.StatusBadRequest, resp.status, "body: %s", resp.body)

	big := append([]byte(`{"ref":"refs/heads/master","pad":"`), bytes.Repeat([]byte("x"), webhookMaxBody+1)...)
	big = append(big, `"}`...)
	resp = h.post(t, "/", githubHeaders(newDeliveryID(), signGitHub(globalGitHubSecret, big)), big)
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.status, "body over --webhook-max-body")

	bad := []byte(`{"ref": "refs/heads/master", "after": `)
	resp = h.post(t, "/", githubHeaders(newDeliveryID(), signGitHub(globalGitHubSecret, bad)), bad)
	assert.Equal(t, http.StatusBadRequest, resp.status, "malformed JSON: %s", resp.body)

	// The receiver still works after all that.
	resp = h.post(t, "/", githubHeaders(w.delivery2, signGitHub(globalGitHubSecret, w.body2)), w.body2)
	assert.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
}

// No secret, wrong or right, appears in the controller's log.
func (w *webhookScenario) secretsNotLogged(t *testing.T) {
	data, err := os.ReadFile(w.f.w.proc.LogPath())
	require.NoError(t, err)
	log := string(data)
	require.Contains(t, log, `"msg":"Webhook delivery"`, "deliveries are logged")
	for _, s := range []string{globalGitHubSecret, globalGitLabSecret, repoGitLabSecret, "not-the-secret"} {
		assert.NotContains(t, log, s, "the worker log shows a webhook secret")
	}
}

// assertBareRefusal checks a 401's body gives nothing away.
func assertBareRefusal(t *testing.T, body []byte) {
	t.Helper()
	lower := strings.ToLower(string(body))
	for _, s := range []string{"signature", "secret", "token", "hmac", "sha256", hookRepo, strings.ToLower(globalGitHubSecret), "lab-"} {
		assert.NotContains(t, lower, strings.ToLower(s), "401 body: %q", body)
	}
	assert.LessOrEqual(t, len(body), len("Unauthorized\n"), "401 body: %q", body)
}

// --- helpers shared with BenchmarkWebhook ---

// zeroCommit is a push's "before" when the ref is new.
const zeroCommit = "0000000000000000000000000000000000000000"

// startWebhookFleet is startFleet (all nClusters registered) with extra
// flags for the worker.
func startWebhookFleet(t testing.TB, nClusters int, workerArgs ...string) *fleet {
	t.Helper()
	if testing.Short() {
		t.Skip("starts kube-apiservers, a Temporal dev server and a Git server")
	}
	start := time.Now()
	f := &fleet{t: t, stateDir: t.TempDir()}
	f.clusters = testenv.StartClusters(t, nClusters, testenv.Options{})
	f.git = testenv.NewGitServer(t, testenv.GitServerOptions{})
	f.w = startDevWorker(t, f.stateDir, workerArgs...)
	f.logs = append(f.logs, f.w.proc.LogPath())
	for i, c := range f.clusters {
		out := f.cli(t, "cluster", "add", c.Name, "--kubeconfig", c.KubeconfigPath, "--label", clusterLabels(i))
		require.Contains(t, out, "cluster/"+c.Name+" created")
	}
	t.Logf("fleet of %d clusters ready in %s", nClusters, time.Since(start).Round(time.Millisecond))
	return f
}

// writeWebhookSecrets writes a --webhook-secrets directory.
func writeWebhookSecrets(t testing.TB, secrets map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for k, v := range secrets {
		require.NoError(t, os.WriteFile(filepath.Join(dir, k), []byte(v+"\n"), 0o600))
	}
	return dir
}

// hookClient posts to the worker's webhook receiver.
type hookClient struct {
	base string
	c    *http.Client
}

// newHookClient finds the receiver's address in the worker's log line
// "Serving webhooks".
func newHookClient(t testing.TB, f *fleet) *hookClient {
	t.Helper()
	lines := logLines(t, "Serving webhooks", []string{f.w.proc.LogPath()})
	require.NotEmpty(t, lines, "no \"Serving webhooks\" line in the worker log:\n%s", f.w.proc.LogTail(30))
	addr, _ := lines[len(lines)-1]["address"].(string)
	require.True(t, strings.HasPrefix(addr, "127.0.0.1:"), "webhook address %q", addr)
	return &hookClient{
		base: "http://" + addr,
		// No proxy: only 127.0.0.1 is ever contacted.
		c: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 4}},
	}
}

type hookResponse struct {
	status int
	header http.Header
	body   []byte
	took   time.Duration // request sent → body read
}

func (h *hookClient) do(t testing.TB, req *http.Request) hookResponse {
	t.Helper()
	start := time.Now()
	resp, err := h.c.Do(req)
	require.NoError(t, err, "%s %s", req.Method, req.URL)
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return hookResponse{status: resp.StatusCode, header: resp.Header, body: body, took: time.Since(start)}
}

func (h *hookClient) post(t testing.TB, path string, hdr http.Header, body []byte) hookResponse {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, h.base+path, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header = hdr.Clone()
	return h.do(t, req)
}

// hookReply is the receiver's JSON reply, as documented.
type hookReply struct {
	Provider  string          `json:"provider"`
	Event     string          `json:"event"`
	Delivery  string          `json:"delivery"`
	Duplicate bool            `json:"duplicate"`
	Signalled []hookSignalled `json:"signalled"`
	Skipped   []struct {
		GitRepo string `json:"gitRepo"`
		Reason  string `json:"reason"`
	} `json:"skipped"`
	Message string `json:"message"`
}

type hookSignalled struct {
	GitRepo string `json:"gitRepo"`
	Ref     string `json:"ref"`
	Commit  string `json:"commit"`
}

func (r hookResponse) decode(t testing.TB) hookReply {
	t.Helper()
	assert.Equal(t, "application/json", r.header.Get("Content-Type"))
	var out hookReply
	require.NoError(t, json.Unmarshal(r.body, &out), "reply: %s", r.body)
	return out
}

func newDeliveryID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	x := hex.EncodeToString(b)
	return x[:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:]
}

func signGitHub(secret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// githubHeaders are a GitHub push delivery's headers; sig "" sends none.
func githubHeaders(delivery, sig string) http.Header {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "GitHub-Hookshot/flotilla-e2e")
	h.Set("X-GitHub-Event", "push")
	h.Set("X-GitHub-Delivery", delivery)
	if sig != "" {
		h.Set("X-Hub-Signature-256", sig)
	}
	return h
}

// githubPush is a GitHub push payload. The repository's URLs are spelled
// unlike the GitRepo's (http://127.0.0.1:PORT/<name>.git): without .git,
// upper case, scp-like ssh, https without port.
func githubPush(repo *testenv.GitRepo, ref, before, after string) []byte {
	base := strings.TrimSuffix(repo.URL(), ".git")
	name := base[strings.LastIndex(base, "/")+1:]
	p := map[string]any{
		"ref": ref, "before": before, "after": after,
		"created": before == zeroCommit, "deleted": false, "forced": false,
		"repository": map[string]any{
			"name": name, "full_name": "flotilla/" + name,
			"clone_url":      base,
			"ssh_url":        "git@127.0.0.1:" + name + ".git",
			"html_url":       "HTTPS://127.0.0.1/" + strings.ToUpper(name) + "/",
			"default_branch": "master",
		},
		"pusher":  map[string]any{"name": "e2e"},
		"commits": []any{map[string]any{"id": after, "message": "e2e"}},
	}
	b, _ := json.Marshal(p)
	return b
}

// gitlabHeaders are a GitLab push delivery's headers; token "" sends none.
func gitlabHeaders(delivery, token string) http.Header {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "GitLab/17.0.0")
	h.Set("X-Gitlab-Event", "Push Hook")
	h.Set("X-Gitlab-Event-UUID", delivery)
	if token != "" {
		h.Set("X-Gitlab-Token", token)
	}
	return h
}

func gitlabPush(repo *testenv.GitRepo, ref, before, after string) []byte {
	base := strings.TrimSuffix(repo.URL(), ".git")
	name := base[strings.LastIndex(base, "/")+1:]
	p := map[string]any{
		"object_kind": "push", "event_name": "push",
		"ref": ref, "before": before, "after": after, "checkout_sha": after,
		"project": map[string]any{
			"name": name, "path_with_namespace": "flotilla/" + name,
			"git_http_url":   base,
			"git_ssh_url":    "ssh://git@127.0.0.1:2222/" + name + ".git",
			"web_url":        "http://127.0.0.1/" + name,
			"default_branch": "master",
		},
		"commits":             []any{map[string]any{"id": after, "message": "e2e"}},
		"total_commits_count": 1,
	}
	b, _ := json.Marshal(p)
	return b
}

// waitHookConfigMaps polls the ConfigMap on every cluster each 10 ms until
// it has data value on all of them and returns the time from since to
// the moment the last cluster showed it.
func waitHookConfigMaps(t testing.TB, clusters []*testenv.Cluster, ns, name, value string, since time.Time, timeout time.Duration) time.Duration {
	t.Helper()
	cs := make([]kubernetes.Interface, len(clusters))
	for i, c := range clusters {
		cs[i] = c.Clientset(t)
	}
	return waitHookConfigMapsOn(t, cs, ns, name, value, since, timeout)
}

func waitHookConfigMapsOn(t testing.TB, cs []kubernetes.Interface, ns, name, value string, since time.Time, timeout time.Duration) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	seen := make([]time.Time, len(cs))
	errs := make([]error, len(cs))
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Go(func() {
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			for {
				cm, err := c.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
				if err == nil && cm.Data["value"] == value {
					seen[i] = time.Now()
					return
				}
				if err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
					errs[i] = err
				}
				select {
				case <-ctx.Done():
					if errs[i] == nil {
						errs[i] = ctx.Err()
					}
					return
				case <-tick.C:
				}
			}
		})
	}
	wg.Wait()
	var last time.Time
	for i, s := range seen {
		require.False(t, s.IsZero(), "ConfigMap %s/%s=%q not seen on cluster %d within %s: %v", ns, name, value, i+1, timeout, errs[i])
		if s.After(last) {
			last = s
		}
	}
	return last.Sub(since)
}
