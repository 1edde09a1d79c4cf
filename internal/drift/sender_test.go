package drift

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/flotilla-gitops/flotilla/internal/status"
)

// sent is one call of the sender's Report.
type sent struct {
	at      time.Time
	gitRepo string
	reports []status.LiveReport
}

// reportRecorder is a Report func that records its calls; fail, when
// set, makes call n (1-based) fail. It runs on the sender's goroutine.
type reportRecorder struct {
	mu    sync.Mutex
	calls []sent
	fail  func(n int, reports []status.LiveReport) error
}

func (r *reportRecorder) report(_ context.Context, gitRepo string, reports []status.LiveReport) error {
	r.mu.Lock()
	r.calls = append(r.calls, sent{at: time.Now(), gitRepo: gitRepo, reports: append([]status.LiveReport(nil), reports...)})
	n, fail := len(r.calls), r.fail
	r.mu.Unlock()
	if fail != nil {
		return fail(n, reports)
	}
	return nil
}

// sent returns the calls so far.
func (r *reportRecorder) sent() []sent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]sent(nil), r.calls...)
}

// waitCalls waits until Report was called n times.
func (r *reportRecorder) waitCalls(t *testing.T, n int, within time.Duration) []sent {
	t.Helper()
	require.Eventually(t, func() bool { return len(r.sent()) >= n }, within, 5*time.Millisecond,
		"Report called %d times, want %d", len(r.sent()), n)
	return r.sent()
}

// testSender is a sender with burst and interval, reporting to rec.
func testSender(t *testing.T, rec *reportRecorder, burst int, interval time.Duration) *sender {
	return newSender(Config{Cluster: "c1", Logger: zaptest.NewLogger(t), Report: rec.report,
		ReportBurst: burst, ReportInterval: interval})
}

// startSender runs a testSender until the test ends.
func startSender(t *testing.T, rec *reportRecorder, burst int, interval time.Duration) *sender {
	t.Helper()
	s := testSender(t, rec, burst, interval)
	runSender(t, s)
	return s
}

// runSender runs s until the test ends.
func runSender(t *testing.T, s *sender) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// report is a report about release namespace/name of GitRepo bundle
// "app" with ready objects out of 100.
func report(namespace, name string, ready int) status.LiveReport {
	return status.LiveReport{Bundle: "app", Release: name, Namespace: namespace, DeploymentID: "s-1:h",
		Resources: 100, Ready: ready, NotReady: 100 - ready}
}

// readies lists the Ready counts of a call's reports.
func readies(c sent) []int {
	var out []int
	for _, r := range c.reports {
		out = append(out, r.Ready)
	}
	return out
}

// quiet is how long a test waits to see that nothing more is sent.
const quiet = 150 * time.Millisecond

func TestSender_SendsAChangedReportOnce(t *testing.T) {
	t.Parallel()
	rec := &reportRecorder{}
	s := startSender(t, rec, 10, time.Minute)

	s.put("fleet-default/app", report("default", "app", 1))
	calls := rec.waitCalls(t, 1, time.Second)
	s.put("fleet-default/app", report("default", "app", 1))
	s.put("fleet-default/app", report("default", "app", 1))
	time.Sleep(quiet)
	require.Len(t, rec.sent(), 1, "the same report again is not sent")
	assert.Equal(t, "fleet-default/app", calls[0].gitRepo)
	assert.Equal(t, []status.LiveReport{report("default", "app", 1)}, calls[0].reports)

	// A change is sent; a change back is a change too.
	s.put("fleet-default/app", report("default", "app", 2))
	rec.waitCalls(t, 2, time.Second)
	s.put("fleet-default/app", report("default", "app", 1))
	calls = rec.waitCalls(t, 3, time.Second)
	time.Sleep(quiet)
	require.Len(t, rec.sent(), 3)
	assert.Equal(t, []int{2}, readies(calls[1]))
	assert.Equal(t, []int{1}, readies(calls[2]))
}

// A burst of changes spends the GitRepo's budget; what comes after is
// merged into one send per interval carrying the release's latest report.
func TestSender_MergesChangesBeyondTheBurst(t *testing.T) {
	t.Parallel()
	const burst, interval = 2, 200 * time.Millisecond
	rec := &reportRecorder{}
	s := startSender(t, rec, burst, interval)

	start := time.Now()
	for i := 1; i <= 10; i++ {
		s.put("fleet-default/app", report("default", "app", i))
	}
	require.Eventually(t, func() bool {
		c := rec.sent()
		return len(c) > 0 && c[len(c)-1].reports[0].Ready == 10
	}, 2*time.Second, 5*time.Millisecond, "the latest report is delivered")
	time.Sleep(interval + quiet) // nothing more is pending
	calls := rec.sent()
	require.LessOrEqual(t, len(calls), 3, "two sends from the burst, then one merged send")
	early := 0
	for _, c := range calls {
		if c.at.Sub(start) < interval*3/4 {
			early++
		}
	}
	assert.LessOrEqual(t, early, burst, "at most ReportBurst sends before the budget refills")
	if len(calls) == 3 {
		assert.GreaterOrEqual(t, calls[2].at.Sub(calls[0].at), interval*3/4,
			"the third send waits for the budget to refill")
	}
	last := 0
	for i, c := range calls {
		require.Len(t, c.reports, 1, "send %d: one report per release", i)
		assert.Greater(t, c.reports[0].Ready, last, "send %d: never an older report after a newer one", i)
		last = c.reports[0].Ready
	}

	// Constant churn: the budget is spent, so sends come one per interval,
	// each with the latest report only.
	churnStart := time.Now()
	before := len(rec.sent())
	const churn = 900 * time.Millisecond
	n := 10
	for time.Since(churnStart) < churn {
		n++
		s.put("fleet-default/app", report("default", "app", n))
		time.Sleep(5 * time.Millisecond)
	}
	require.Eventually(t, func() bool {
		c := rec.sent()
		return c[len(c)-1].reports[0].Ready == n
	}, 2*interval+time.Second, 5*time.Millisecond, "the last change is delivered")
	calls = rec.sent()[before:]
	assert.GreaterOrEqual(t, len(calls), 3, "%d changes over %v are still reported about every %v", n-10, churn, interval)
	// The pause above refilled the budget: ReportBurst sends at once, one
	// per interval during the churn, and the last change after it.
	assert.LessOrEqual(t, len(calls), burst+int(churn/interval)+1, "%d changes over %v: one send per %v", n-10, churn, interval)
	for i, c := range calls {
		require.Len(t, c.reports, 1, "churn send %d", i)
		if i > 0 {
			assert.Greater(t, c.reports[0].Ready, calls[i-1].reports[0].Ready, "churn send %d is newer", i)
		}
		if i >= burst {
			assert.GreaterOrEqual(t, c.at.Sub(calls[i-burst].at), interval*3/4,
				"churn sends %d to %d: more than ReportBurst sends take an interval", i-burst, i)
		}
	}
}

// Each GitRepo has its own budget: one spending it does not hold back
// another.
func TestSender_BudgetIsPerGitRepo(t *testing.T) {
	t.Parallel()
	rec := &reportRecorder{}
	s := startSender(t, rec, 1, time.Minute)

	s.put("fleet-default/one", report("one", "app", 1))
	rec.waitCalls(t, 1, time.Second)
	s.put("fleet-default/one", report("one", "app", 2)) // over one's budget
	s.put("fleet-default/two", report("two", "app", 1))
	calls := rec.waitCalls(t, 2, time.Second)
	time.Sleep(quiet)
	require.Len(t, rec.sent(), 2, "one's second change waits for its budget")
	assert.Equal(t, "fleet-default/two", calls[1].gitRepo)
	assert.Equal(t, []status.LiveReport{report("two", "app", 1)}, calls[1].reports)
}

// A failed send is tried again; a report that came meanwhile replaces the
// failed one of its release, the others of the batch are kept.
func TestSender_RetriesAndNewerReportsWin(t *testing.T) {
	t.Parallel()
	rec := &reportRecorder{}
	s := testSender(t, rec, 10, time.Minute)
	rec.fail = func(n int, _ []status.LiveReport) error {
		if n == 1 {
			// A newer report arrives while the batch is on its way.
			s.put("fleet-default/app", report("default", "web", 2))
			return errors.New("signal: deadline exceeded")
		}
		return nil
	}
	s.put("fleet-default/app", report("default", "web", 1))
	s.put("fleet-default/app", report("default", "db", 1))
	runSender(t, s) // both in the first batch

	calls := rec.waitCalls(t, 2, 3*time.Second)
	time.Sleep(quiet)

	require.Len(t, rec.sent(), 2, "delivered on the second try")
	assert.Equal(t, []status.LiveReport{report("default", "db", 1), report("default", "web", 1)}, calls[0].reports)
	assert.Less(t, calls[1].at.Sub(calls[0].at), sendRetry, "the newer report wakes the sender at once")
	assert.Equal(t, []status.LiveReport{report("default", "db", 1), report("default", "web", 2)}, calls[1].reports,
		"the retry carries the failed batch's db report and web's newer report, sorted")
}

// Without new reports, a failed send is retried after sendRetry, not at
// once (regression: the wake of the put that queued the batch was still
// pending after the send and retried it immediately).
func TestSender_RetriesAFailedSendLater(t *testing.T) {
	t.Parallel()
	rec := &reportRecorder{fail: func(n int, _ []status.LiveReport) error {
		if n == 1 {
			return errors.New("workflow not found")
		}
		return nil
	}}
	s := testSender(t, rec, 10, time.Minute)
	s.put("fleet-default/app", report("default", "app", 1)) // before the first flush
	runSender(t, s)

	calls := rec.waitCalls(t, 2, sendRetry+2*time.Second)
	assert.GreaterOrEqual(t, calls[1].at.Sub(calls[0].at), sendRetry*3/4, "the retry waits")
	assert.Equal(t, calls[0].reports, calls[1].reports, "the retry carries the same batch")
	assert.Equal(t, []status.LiveReport{report("default", "app", 1)}, calls[1].reports)
}

// A batch holds the GitRepo's releases sorted by namespace, then release.
func TestSender_SortsReports(t *testing.T) {
	t.Parallel()
	rec := &reportRecorder{}
	s := testSender(t, rec, 10, time.Minute)
	for _, r := range []status.LiveReport{report("web", "b", 1), report("api", "z", 1), report("web", "a", 1),
		report("api", "b", 1)} {
		s.put("fleet-default/app", r)
	}
	s.put("fleet-default/other", report("other", "x", 1))

	// One flush sends each GitRepo's batch, GitRepos in order.
	s.flush(context.Background())

	calls := rec.sent()
	require.Len(t, calls, 2)
	assert.Equal(t, "fleet-default/app", calls[0].gitRepo)
	var got []string
	for _, r := range calls[0].reports {
		got = append(got, r.Namespace+"/"+r.Release)
	}
	assert.Equal(t, []string{"api/b", "api/z", "web/a", "web/b"}, got)
	assert.Equal(t, "fleet-default/other", calls[1].gitRepo)
	assert.Equal(t, []status.LiveReport{report("other", "x", 1)}, calls[1].reports)
}

// A GitRepo the monitor no longer watches is forgotten: what waited for
// it is not sent (a deleted GitRepo would refuse it forever).
func TestSender_ForgetsGitReposNoLongerWatched(t *testing.T) {
	rec := &reportRecorder{}
	s := testSender(t, rec, 1, time.Hour)
	s.put("fleet/a", report("ns", "a", 1))
	s.put("fleet/b", report("ns", "b", 1))
	s.flush(context.Background()) // spends each budget
	require.Len(t, rec.sent(), 2)
	s.put("fleet/a", report("ns", "a", 2))
	s.put("fleet/b", report("ns", "b", 2))
	s.keep(map[string]bool{"fleet/b": true})
	s.mu.Lock()
	_, pendingA := s.pending["fleet/a"]
	_, pendingB := s.pending["fleet/b"]
	s.mu.Unlock()
	assert.False(t, pendingA, "fleet/a's report is dropped")
	assert.True(t, pendingB, "fleet/b's still waits")
}
