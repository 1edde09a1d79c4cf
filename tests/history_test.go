package tests

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/history"
	"github.com/flotilla-gitops/flotilla/internal/notify"
	"github.com/flotilla-gitops/flotilla/internal/status"
	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

const (
	histRepo = "audited"
	histNS   = "audit-ns"
	histCM   = "audit-config"
	// histSecret signs the test's GitHub pushes.
	histSecret = "gh-history-7c1e40b2"
)

// TestHistoryRollback drives a GitRepo through five commits (webhook
// pushes and CLI syncs), a failing commit, a partition approved with the
// CLI and a drift correction, then reads `flotilla history -o json`, rolls
// back to the second commit, checks that a new commit does not roll it
// forward while pinned, and that `flotilla resume` does. One fleet of two
// clusters, a real worker with a webhook receiver and a Git server. A
// webhook Notification of every event type, applied first, must deliver
// each event of all that once, signed, as a CloudEvent, with a History
// event per history entry.
func TestHistoryRollback(t *testing.T) {
	start := time.Now()
	// A short failure backoff: the refused commit is retried within the
	// step, and its retries must tell nobody again.
	f := startWebhookFleet(t, 2, "--webhook-secrets", writeWebhookSecrets(t, map[string]string{"github": histSecret}),
		"--retry-backoff", "1s")
	h := newHookClient(t, f)
	s := &historyScenario{f: f, h: h}
	s.subscribe(t)
	for _, step := range []struct {
		name string
		run  func(t *testing.T)
	}{
		{"CommitsByWebhookAndSync", s.fiveCommits},
		{"FailureApprovalAndCorrection", s.failureApprovalCorrection},
		{"HistoryListsTriggersAndIdentities", s.history},
		{"RollbackPinsUntilResume", s.rollback},
		{"NotificationsDelivered", s.notifications},
	} {
		if !t.Run(step.name, step.run) {
			t.Fatalf("%s failed; later steps depend on it", step.name)
		}
	}
	t.Logf("TestHistoryRollback took %s", time.Since(start).Round(time.Millisecond))
}

type historyScenario struct {
	f *fleet
	h *hookClient
	// commits are the repository's commits in order; deliveries the
	// webhook deliveries that pushed some of them.
	commits    []string
	deliveries []string
	repo       *testenv.GitRepo
	// hook is the webhook Notification's stand-in receiver; hookRequests
	// counts every request it got, verified or not.
	hook         *standIn
	hookRequests atomic.Int64
}

// push posts a signed GitHub push of after and returns its delivery ID.
func (s *historyScenario) push(t *testing.T, before, after string) string {
	delivery := newDeliveryID()
	body := githubPush(s.repo, "refs/heads/master", before, after)
	resp := s.h.post(t, "/", githubHeaders(delivery, signGitHub(histSecret, body)), body)
	require.Equal(t, http.StatusAccepted, resp.status, "body: %s", resp.body)
	return delivery
}

func (s *historyScenario) fiveCommits(t *testing.T) {
	f := s.f
	repo := f.git.CreateRepo(t, "audited", map[string]string{"fleet.yaml": fleetYAML(histNS), "cm.yaml": configMapDoc(histCM, "v1")})
	s.repo = repo
	f.apply(t, gitRepoDoc(histRepo, repo.URL(), "  disablePolling: true\n  correctDrift:\n    enabled: true\n"+allClusters))
	s.commits = append(s.commits, repo.Head(t))
	f.waitFor(t, histRepo, "commit 1 on both clusters", settledAt(s.commits[0], 2))
	for i, how := range []string{"webhook", "sync", "webhook", "sync"} {
		c := repo.Commit(t, map[string]string{"cm.yaml": configMapDoc(histCM, fmt.Sprint("v", i+2))}, "v")
		prev := s.commits[len(s.commits)-1]
		s.commits = append(s.commits, c)
		if how == "webhook" {
			s.deliveries = append(s.deliveries, s.push(t, prev, c))
		} else {
			f.cli(t, "sync", histRepo)
		}
		f.waitFor(t, histRepo, fmt.Sprintf("commit %d on both clusters", i+2), settledAt(c, 2))
	}
	require.Len(t, s.commits, 5)
}

func (s *historyScenario) failureApprovalCorrection(t *testing.T) {
	f := s.f
	// A ConfigMap the API server refuses: a data key with a space.
	bad := s.repo.Commit(t, map[string]string{"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + histCM +
		"\ndata:\n  \"bad key\": x\n"}, "broken")
	f.cli(t, "sync", histRepo)
	f.waitFor(t, histRepo, "the broken commit failed", func(st status.GitRepo) bool {
		return st.Rollout == "" && st.LatestCommit == bad && slices.ContainsFunc(st.Deployments, func(d status.Deployment) bool { return d.State == status.ErrApplied })
	})
	waitUntil(t, 20*time.Second, "a retry of the broken commit, failed alike, folded into its entry", func() bool {
		return slices.ContainsFunc(s.historyJSON(t), func(e history.Entry) bool { return e.Commit == bad && e.Retries > 0 })
	})
	// A partition that requires approval on cluster-2.
	gated := s.repo.Commit(t, map[string]string{"cm.yaml": configMapDoc(histCM, "v7"), "fleet.yaml": fleetYAML(histNS) +
		"rolloutStrategy:\n  partitions:\n  - name: canary\n    clusterName: cluster-1\n  - name: rest\n    clusterName: cluster-2\n    requireApproval: true\n"}, "gated")
	f.cli(t, "sync", histRepo)
	f.waitFor(t, histRepo, "partition rest waiting for approval", func(st status.GitRepo) bool {
		c, ok := st.Condition("WaitingForApproval")
		return ok && c.Status == "True"
	})
	out := f.cli(t, "approve", histRepo, "--partition", "rest")
	assert.Contains(t, out, "rest")
	f.waitFor(t, histRepo, "the gated commit on both clusters", settledAt(gated, 2))
	s.commits = append(s.commits, bad, gated)
	// Drift on cluster-1, corrected by its watch.
	ff := &failureFleet{fleet: f}
	ff.editConfigMap(t, "cluster-1", histNS, histCM, "value", "by-hand")
	waitUntil(t, driftWait, "edit corrected", func() bool { return ff.cmValue(t, "cluster-1", histNS, histCM, "value") == "v7" })
	waitUntil(t, driftWait, "the correction in the history", func() bool {
		return slices.ContainsFunc(s.historyJSON(t), func(e history.Entry) bool { return e.Kind == history.KindCorrection })
	})
}

func (s *historyScenario) historyJSON(t *testing.T) []history.Entry {
	var entries []history.Entry
	require.NoError(t, json.Unmarshal([]byte(s.f.cli(t, "history", histRepo, "-o", "json")), &entries))
	return entries
}

func (s *historyScenario) history(t *testing.T) {
	entries := s.historyJSON(t)
	find := func(what string, ok func(history.Entry) bool) history.Entry {
		t.Helper()
		i := slices.IndexFunc(entries, ok)
		require.GreaterOrEqual(t, i, 0, "no entry for %s in %+v", what, entries)
		return entries[i]
	}
	rolloutOf := func(c string, kind history.TriggerKind) func(history.Entry) bool {
		return func(e history.Entry) bool { return e.Commit == c && e.Trigger.Kind == kind }
	}
	first := find("commit 1", rolloutOf(s.commits[0], history.TriggerSpec))
	assert.Equal(t, history.Succeeded, first.Outcome)
	assert.Len(t, first.Clusters, 2, "both clusters installed it")
	for i, c := range []int{1, 3} {
		e := find("webhook commit", rolloutOf(s.commits[c], history.TriggerWebhook))
		assert.Equal(t, s.deliveries[i], e.Trigger.Delivery, "the delivery ID")
	}
	for _, c := range []int{2, 4} {
		e := find("synced commit", rolloutOf(s.commits[c], history.TriggerSync))
		assert.Regexp(t, `^\S+@\S+$`, e.Trigger.Identity.User, "the CLI's identity")
		assert.Equal(t, history.Succeeded, e.Outcome)
	}
	failed := find("the broken commit", func(e history.Entry) bool { return e.Commit == s.commits[5] })
	assert.Equal(t, history.Failed, failed.Outcome)
	require.NotEmpty(t, failed.Failures())
	assert.Equal(t, "BundleFailed", failed.Failures()[0].FailureClass(), "the failure's class")
	gated := find("the gated commit", func(e history.Entry) bool { return e.Commit == s.commits[6] && len(e.Approvals) > 0 })
	assert.Equal(t, "rest", gated.Approvals[0].Partition)
	assert.Regexp(t, `^\S+@\S+$`, gated.Approvals[0].Identity.User, "who approved")
	corr := find("the correction", func(e history.Entry) bool { return e.Kind == history.KindCorrection })
	assert.Equal(t, history.TriggerDrift, corr.Trigger.Kind)
	require.NotEmpty(t, corr.Clusters)
	assert.Equal(t, "cluster-1", corr.Clusters[0].Cluster)
	assert.NotEmpty(t, corr.Clusters[0].ManifestID, "the manifest digest")
	for i := 1; i < len(entries); i++ {
		assert.Equal(t, entries[i-1].Seq+1, entries[i].Seq)
	}
	table := s.f.cli(t, "history", histRepo)
	assert.Contains(t, table, "webhook "+s.deliveries[0][:8]+"…")
	assert.Regexp(t, `sync by \S+@\S+`, table)
	assert.Regexp(t, `approved \S+/rest by \S+@\S+`, table)
	assert.Contains(t, table, ": BundleFailed")
	filtered := s.f.cli(t, "history", histRepo, "--cluster", "cluster-2", "-o", "json")
	assert.NotContains(t, filtered, `"cluster": "cluster-1"`, "--cluster keeps that cluster's rows")
}

func (s *historyScenario) rollback(t *testing.T) {
	f := s.f
	second := s.commits[1]
	out := f.cli(t, "rollback", histRepo, "--to", second[:8])
	assert.Contains(t, out, "pinned to "+second)
	f.waitFor(t, histRepo, "the second commit back on both clusters", settledAt(second, 2))
	for _, c := range []string{"cluster-1", "cluster-2"} {
		cm, ok := f.configMap(t, c, histNS, histCM)
		require.True(t, ok)
		assert.Equal(t, "v2", cm.Data["value"], "cluster %s runs the second commit", c)
	}
	_, stderr, err := f.cliErr(t, "rollback", histRepo, "--to", "0123456789abcdef")
	require.Error(t, err)
	assert.Contains(t, stderr, `"0123456789abcdef" not found`, "an unknown commit is refused, named")

	newest := s.repo.Commit(t, map[string]string{"cm.yaml": configMapDoc(histCM, "v9"), "fleet.yaml": fleetYAML(histNS)}, "v9")
	f.cli(t, "sync", histRepo)
	st := f.waitFor(t, histRepo, "the new commit seen, not rolled out", func(st status.GitRepo) bool {
		return st.Settled && st.LatestCommit == newest
	})
	assert.Equal(t, second, st.Commit, "pinned: no roll forward")
	require.NotNil(t, st.Pinned)
	assert.Equal(t, second, st.Pinned.Commit)
	assert.Contains(t, f.cli(t, "status", histRepo), "Pinned:   "+second[:12])

	f.cli(t, "resume", histRepo)
	f.waitFor(t, histRepo, "resume rolls forward to the head", settledAt(newest, 2))
	cm, _ := f.configMap(t, "cluster-1", histNS, histCM)
	require.NotNil(t, cm)
	assert.Equal(t, "v9", cm.Data["value"])
	entries := s.historyJSON(t)
	assert.True(t, slices.ContainsFunc(entries, func(e history.Entry) bool {
		return e.Kind == history.KindRollback && e.Commit == second && strings.Contains(e.Trigger.String(), "rollback by ")
	}), "the rollback and who asked")
}

// subscribe applies a Secret with the HMAC key and a webhook Notification
// of every event type, delivering to a stand-in that checks each
// request's signature and CloudEvents shape (parseWebhook).
func (s *historyScenario) subscribe(t *testing.T) {
	s.hook = newStandIn(t, func(r *http.Request, body []byte) (delivery, error) {
		s.hookRequests.Add(1)
		return parseWebhook(r, body)
	})
	types := make([]string, 0, len(notify.Types))
	for _, typ := range notify.Types {
		types = append(types, string(typ))
	}
	out := s.f.apply(t, "apiVersion: v1\nkind: Secret\nmetadata: {name: audit-hook}\nstringData: {token: \""+hookKey+"\"}\n---\n"+
		"apiVersion: flotilla.dev/v1alpha1\nkind: Notification\nmetadata: {name: audit-hook}\nspec:\n  provider: webhook\n"+
		"  address: "+s.hook.srv.URL+"/hook\n  secretRef: {name: audit-hook}\n  eventTypes: ["+strings.Join(types, ", ")+"]\n")
	require.Contains(t, out, "notification/fleet-default/audit-hook created")
}

// historyNotified are the event types the scenario must deliver. Not
// required: DriftDetected (the watch may correct an edit before the agent
// reports it modified), RolloutHalted, DriftConflict and DeletionHeld (no
// halt, conflict or held uninstall), ClusterOffline/Online (agents stay).
var historyNotified = []notify.Type{notify.RolloutStarted, notify.RolloutSucceeded, notify.RolloutFailed,
	notify.ApprovalWaiting, notify.DriftCorrected, notify.RolloutRolledBack, notify.History}

// settledDeliveries waits until no delivery came for a second, each
// required type came, and the History events are as many as the history
// entries, which it returns.
func (s *historyScenario) settledDeliveries(t *testing.T) []history.Entry {
	var entries []history.Entry
	last, since := -1, time.Now()
	waitUntil(t, 30*time.Second, "deliveries settled, a History event per entry", func() bool {
		if n := len(s.hook.got()); n != last {
			last, since = n, time.Now()
		}
		if time.Since(since) < time.Second || slices.ContainsFunc(historyNotified, func(typ notify.Type) bool {
			return s.hook.count(ofType(typ)) == 0
		}) {
			return false
		}
		entries = s.historyJSON(t)
		return s.hook.count(ofType(notify.History)) == len(entries)
	})
	return entries
}

func (s *historyScenario) notifications(t *testing.T) {
	began := time.Now()
	entries := s.settledDeliveries(t)
	got := s.hook.got()
	assert.EqualValues(t, len(got), s.hookRequests.Load(), "every request signed and a CloudEvent")
	seen, counts, historyCommits := map[string]bool{}, map[string]int{}, []string{}
	for _, d := range got {
		require.NotEmpty(t, d.ID)
		assert.False(t, seen[d.ID], "event %s %s delivered twice", d.Type, d.ID)
		seen[d.ID] = true
		counts[d.Type]++
		if d.Type == string(notify.History) {
			historyCommits = append(historyCommits, d.Commit)
		}
	}
	t.Logf("%d deliveries %v, settled %s after the last step", len(got), counts, time.Since(began).Round(time.Millisecond))
	entryCommits := make([]string, 0, len(entries))
	for _, e := range entries {
		entryCommits = append(entryCommits, e.Commit)
	}
	sort.Strings(historyCommits)
	sort.Strings(entryCommits)
	assert.Equal(t, entryCommits, historyCommits, "a History event per history entry")
	broken, gated, second := s.commits[5], s.commits[6], s.commits[1]
	if i := slices.IndexFunc(entries, func(e history.Entry) bool { return e.Commit == broken }); i >= 0 {
		t.Logf("the broken commit's entry: %s, %d retries folded", entries[i].Outcome, entries[i].Retries)
	}
	failed := deliveriesOf(got, notify.RolloutFailed)
	require.Len(t, failed, 1, "one RolloutFailed for the refused commit, its retries folded")
	assert.Equal(t, broken, failed[0].Commit)
	assert.Contains(t, commitsOf(deliveriesOf(got, notify.ApprovalWaiting)), gated, "ApprovalWaiting for the gated commit")
	assert.Contains(t, commitsOf(deliveriesOf(got, notify.RolloutRolledBack)), second, "RolloutRolledBack to the second commit")
	assert.Contains(t, commitsOf(deliveriesOf(got, notify.DriftCorrected)), gated, "DriftCorrected of the gated commit")
	for _, c := range s.commits[:5] {
		assert.Contains(t, commitsOf(deliveriesOf(got, notify.RolloutStarted)), c, "RolloutStarted")
		assert.Contains(t, commitsOf(deliveriesOf(got, notify.RolloutSucceeded)), c, "RolloutSucceeded")
	}
}

func deliveriesOf(ds []delivery, typ notify.Type) []delivery {
	var out []delivery
	for _, d := range ds {
		if d.Type == string(typ) {
			out = append(out, d)
		}
	}
	return out
}

func commitsOf(ds []delivery) []string {
	out := make([]string, 0, len(ds))
	for _, d := range ds {
		out = append(out, d.Commit)
	}
	return out
}
