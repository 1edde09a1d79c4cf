package tests

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/flotilla-gitops/flotilla/internal/devserver"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/temporalx"
)

// uiBudget bounds everything the browser does once the rollouts are Ready.
const uiBudget = 90 * time.Second

// TestTemporalUI_FindRolloutByGitRepo: the Temporal Web UI that
// `flotilla-worker --dev` embeds is a usable monitoring surface for
// rollouts. Driving a headless Chromium against it:
//
//  1. the workflows list, filtered through the URL's query parameter by
//     the FlotillaGitRepo search attribute, lists exactly the workflows of
//     that GitRepo (its entity workflow and its RolloutWorkflow) and
//     nothing of a second GitRepo;
//  2. the rollout's page (reached by clicking its row) shows one Deploy
//     activity per cluster on its timeline, labelled with the activity's
//     summary when the workflow sets one; its event history shows each
//     Deploy's ActivityTaskScheduled event, which, expanded, shows the
//     input naming the cluster; its User Metadata tab shows the current
//     details the workflow set.
//
// What the UI must show is taken from Temporal's API (visibility, history
// and the metadata query), so the test checks the UI against the server,
// not against guesses. Screenshots of the pages are written to a temporary
// directory and, when FLOTILLA_ARTIFACTS is set, copied there. The browser
// resolves no host name but 127.0.0.1, so nothing leaves the machine.
func TestTemporalUI_FindRolloutByGitRepo(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a fleet and a headless Chromium")
	}
	chromium := uiChromiumPath(t)
	f := startFleet(t, 2, 2)

	const ns = "fleet-default"
	web := f.git.CreateRepo(t, "web", map[string]string{"fleet.yaml": fleetYAML("web-ns"), "cm.yaml": configMapDoc("web-config", "v1")})
	api := f.git.CreateRepo(t, "api", map[string]string{"fleet.yaml": fleetYAML("api-ns"), "cm.yaml": configMapDoc("api-config", "v1")})
	require.Contains(t, f.apply(t, gitRepoDoc("web", web.URL(), allClusters)), "gitrepo/"+ns+"/web created")
	require.Contains(t, f.apply(t, gitRepoDoc("api", api.URL(), allClusters)), "gitrepo/"+ns+"/api created")
	st := f.waitFor(t, "web", "Ready on both clusters", settledAt(web.Head(t), 2))
	f.waitFor(t, "api", "Ready on both clusters", settledAt(api.Head(t), 2))
	rolloutID := protocol.RolloutID(ns, "web", st.Commit, st.Generation)
	require.Equal(t, rolloutID, st.LastRollout)

	// What the UI must show, from Temporal's API.
	c := f.w.client(t)
	query := fmt.Sprintf("%s=%q", temporalx.SearchAttrGitRepo, ns+"/web")
	want := uiListWorkflows(t, c, query, rolloutID)
	require.Equal(t, protocol.RolloutWorkflow, want[rolloutID], "type of %s", rolloutID)
	require.Equal(t, protocol.GitRepoWorkflow, want[protocol.GitRepoID(ns, "web")])
	other := uiListWorkflows(t, c, fmt.Sprintf("%s=%q", temporalx.SearchAttrGitRepo, ns+"/api"), "rollout/"+ns+"/api/")
	require.NotEmpty(t, other, "the second GitRepo has workflows for the filter to leave out")
	deploys := uiDeployEvents(t, c, rolloutID)
	require.Len(t, deploys, 2, "one Deploy per cluster: %v", deploys)
	details := uiCurrentDetails(t, c, rolloutID)
	t.Logf("rollout %s: Deploy activities %+v, current details %q", rolloutID, deploys, details)

	start := time.Now()
	b := newUIBrowser(t, chromium)

	// 1. The workflows list filtered by the GitRepo search attribute.
	listURL := f.w.uiURL + "/namespaces/" + devserver.DefaultNamespace + "/workflows?query=" + url.QueryEscape(query)
	t.Logf("workflows list: %s", listURL)
	rolloutLink := fmt.Sprintf(`//tr[@data-testid="workflows-summary-configurable-table-row"]//a[normalize-space()=%q]`, rolloutID)
	b.do("open the filtered workflows list", chromedp.Navigate(listURL), chromedp.WaitVisible(rolloutLink))
	rows := b.waitRows(want)
	for _, r := range rows {
		if r.id == rolloutID {
			b.check(slices.Contains(r.cells, protocol.RolloutWorkflow) && slices.Contains(r.cells, "Completed"),
				"the rollout's row shows type %s and status Completed: %q", protocol.RolloutWorkflow, r.cells)
		}
	}
	text := b.text()
	b.check(!strings.Contains(text, ns+"/api"), "the filtered list mentions the other GitRepo %s/api", ns)
	b.screenshot("1-workflows-filtered-by-gitrepo")

	// 2a. The rollout's page (its timeline) shows a Deploy per cluster,
	// labelled with the activity's summary where the workflow set one.
	deployButton := `button[aria-label="Event Deploy: Completed"]`
	b.do("open the rollout from its row", chromedp.Click(rolloutLink), chromedp.WaitVisible(chromedp.CSS(deployButton)))
	loc := b.location()
	b.check(strings.Contains(loc, "/workflows/"+url.PathEscape(rolloutID)+"/"), "the rollout's page is open, not %s", loc)
	var summaries, flat []string
	for _, d := range deploys {
		if d.summary != "" {
			summaries, flat = append(summaries, d.summary), append(flat, uiFlat(d.summary))
		}
	}
	// The bars are laid out after they appear (wait for their width, or the
	// screenshot catches them squashed); summaries render in iframes.
	b.waitJS(fmt.Sprintf("the timeline shows %d Deploy activities labelled %q", len(deploys), summaries),
		fmt.Sprintf(`(() => { %s
			const bs = [...document.querySelectorAll(%q)];
			return bs.length === %d && bs.every(b => b.getBoundingClientRect().width > 100) &&
				%s.every(s => bs.some(b => uiFlat(uiText(b)).includes(s))); })()`,
			uiTextJS, deployButton, len(deploys), uiJSON(b, flat)))
	b.screenshot("2-rollout-timeline")

	// 2b. Its event history lists each Deploy's ActivityTaskScheduled
	// event; expanded, the event shows the input naming the cluster (and
	// the summary).
	b.do("open the Event History tab", chromedp.Click(chromedp.CSS(`a[data-testid="history-tab"]`)))
	for _, d := range deploys {
		row := uiEventRow(d.eventID)
		b.do(fmt.Sprintf("find event %d (Deploy on %s)", d.eventID, d.cluster), chromedp.WaitVisible(chromedp.CSS(row)))
		rowText := b.textContent(row)
		b.check(strings.Contains(rowText, "Activity Task Scheduled") && strings.Contains(rowText, "Deploy"),
			"event %d's row reads Activity Task Scheduled / Deploy: %q", d.eventID, rowText)
		b.do(fmt.Sprintf("expand event %d", d.eventID), chromedp.Click(chromedp.CSS(row+` button[aria-label="Expand details"]`)))
		b.waitExpanded(d)
	}

	// 2c. The Compact view has one row per activity (carrying its
	// ActivityTaskScheduled event's ID): expanded, both Deploys and their
	// clusters fit one screenshot.
	b.do("switch the history to Compact", chromedp.Click(chromedp.CSS(`button[data-testid="compact"]`)))
	for _, d := range deploys {
		row := uiEventRow(d.eventID)
		b.do(fmt.Sprintf("expand the Deploy activity on %s in the Compact view", d.cluster),
			chromedp.WaitVisible(chromedp.CSS(row)),
			chromedp.Click(chromedp.CSS(row+` button[aria-label="Expand details"]`)))
		b.waitExpanded(d)
	}
	b.screenshot("3-rollout-history-deploy-per-cluster")

	// 2d. Its User Metadata tab shows the workflow's current details (the
	// UI asks the worker with the __temporal_workflow_metadata query).
	if details != "" {
		b.do("open the User Metadata tab", chromedp.Click(chromedp.CSS(`a[data-testid="user-metadata-tab"]`)))
		b.waitJS(fmt.Sprintf("User Metadata shows the current details %q", details),
			fmt.Sprintf(`(() => { %s
				const main = document.querySelector("main");
				return uiFlat(uiText(main)).includes(%s); })()`,
				uiTextJS, uiJSON(b, uiFlat(details))))
	}

	t.Logf("UI checks took %s (budget %s)", time.Since(start).Round(time.Millisecond), uiBudget)
	b.logBlocked()
}

// uiTextJS defines uiText(el), the text an element shows, including that
// of the same-origin iframes the UI renders Temporal markdown (summaries,
// current details) in, and uiFlat(s), which drops whitespace and undoes the
// markdown renderer's typography (2/2 is shown as 2⁄2, quotes curl) so that
// texts compare as the workflow wrote them.
const uiTextJS = `function uiText(el) {
	if (!el) return "";
	let s = el.innerText || "";
	for (const f of el.querySelectorAll("iframe")) {
		try { s += "\n" + uiText(f.contentDocument.body); } catch (e) {}
	}
	return s;
}
function uiFlat(s) {
	return s.replace(/\s+/g, "").replace(/\u2044/g, "/").replace(/[\u2018\u2019]/g, "'").replace(/[\u201c\u201d]/g, '"');
}`

// uiFlat drops the whitespace of a text the workflow wrote, to compare it
// with uiTextJS's uiFlat of what the page shows.
func uiFlat(s string) string { return strings.Join(strings.Fields(s), "") }

// uiJSON encodes v for a JavaScript expression.
func uiJSON(b *uiBrowser, v any) string {
	js, err := json.Marshal(v)
	if err != nil {
		b.fail("encode %v: %v", v, err)
	}
	return string(js)
}

// waitExpanded waits until the history's expanded details of a Deploy's
// event (in the Compact view: of its activity) show the input's cluster
// and the summary, if any.
func (b *uiBrowser) waitExpanded(d uiDeploy) {
	b.t.Helper()
	want := []string{fmt.Sprintf(`"cluster":%q`, d.cluster)}
	if d.summary != "" {
		want = append(want, uiFlat(d.summary))
	}
	b.waitJS(fmt.Sprintf("expanded event %d shows %q", d.eventID, want),
		fmt.Sprintf(`(() => { %s
			const el = document.querySelector('tr[data-testid="event-summary-row-expanded"][id^="event-details-%d-"]');
			if (!el || el.getBoundingClientRect().height === 0) return false;
			const text = uiFlat(uiText(el));
			return %s.every(w => text.includes(w)); })()`, uiTextJS, d.eventID, uiJSON(b, want)))
}

// uiEventRow selects the event history's row of an event (in the Compact
// view: of the activity whose ActivityTaskScheduled event it is).
func uiEventRow(eventID int64) string {
	return fmt.Sprintf(`tr[data-testid="event-summary-row"][data-eventid="%d"]`, eventID)
}

// uiChromiumPath is $FLOTILLA_CHROMIUM or chromium on PATH (hack/chromium.sh
// installs it; make test runs it).
func uiChromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("FLOTILLA_CHROMIUM"); p != "" {
		return p
	}
	p, err := exec.LookPath("chromium")
	require.NoError(t, err, "no Chromium for the UI test: run `bash hack/chromium.sh` (make test does) or set FLOTILLA_CHROMIUM")
	return p
}

// uiListWorkflows lists the workflows a visibility query finds, by ID with
// their type, once one whose ID starts with mustHave is among them (the
// visibility store is written asynchronously).
func uiListWorkflows(t *testing.T, c client.Client, query, mustHave string) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		out := map[string]string{}
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: devserver.DefaultNamespace, Query: query, PageSize: 100})
		if err == nil {
			for _, e := range resp.GetExecutions() {
				out[e.GetExecution().GetWorkflowId()] = e.GetType().GetName()
			}
			for id := range out {
				if strings.HasPrefix(id, mustHave) {
					return out
				}
			}
		}
		require.NoError(t, ctx.Err(), "visibility query %s never listed %s; last answer %v (error %v)", query, mustHave, out, err)
		time.Sleep(200 * time.Millisecond)
	}
}

// uiDeploy is one Deploy activity of a rollout, as its ActivityTaskScheduled
// event has it: the event's ID, the cluster its input names and the
// activity's summary (user metadata; "" when the workflow set none).
type uiDeploy struct {
	eventID int64
	cluster string
	summary string
}

// uiDeployEvents reads the rollout's history for its Deploy activities,
// ordered by cluster.
func uiDeployEvents(t *testing.T, c client.Client, workflowID string) []uiDeploy {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dc := converter.GetDefaultDataConverter()
	var out []uiDeploy
	it := c.GetWorkflowHistory(ctx, workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		a := ev.GetActivityTaskScheduledEventAttributes()
		if a == nil || a.GetActivityType().GetName() != "Deploy" {
			continue
		}
		var in struct {
			Cluster string `json:"cluster"`
		}
		require.NoError(t, dc.FromPayloads(a.GetInput(), &in), "input of Deploy event %d", ev.GetEventId())
		require.NotEmpty(t, in.Cluster, "Deploy event %d names no cluster", ev.GetEventId())
		d := uiDeploy{eventID: ev.GetEventId(), cluster: in.Cluster}
		if p := ev.GetUserMetadata().GetSummary(); p != nil {
			require.NoError(t, dc.FromPayload(p, &d.summary), "summary of Deploy event %d", ev.GetEventId())
		}
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].cluster < out[j].cluster })
	return out
}

// uiCurrentDetails asks a workflow for the current details it set
// (workflow.SetCurrentDetails), as the UI does.
func uiCurrentDetails(t *testing.T, c client.Client, workflowID string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	v, err := c.QueryWorkflow(ctx, workflowID, "", "__temporal_workflow_metadata")
	require.NoError(t, err, "query %s for its metadata", workflowID)
	var md sdkpb.WorkflowMetadata
	require.NoError(t, v.Get(&md))
	return md.GetCurrentDetails()
}

// uiBrowser is a headless Chromium tab for one test. Every step has a
// deadline within uiBudget; a failed step saves a screenshot and the page's
// HTML and fails the test with the page's URL and text.
type uiBrowser struct {
	t        *testing.T
	ctx      context.Context // the tab, alive until the test ends
	deadline time.Time       // of uiBudget
	dir      string

	mu      sync.Mutex
	blocked map[string]int // requests to hosts other than 127.0.0.1, by host
}

func newUIBrowser(t *testing.T, chromium string) *uiBrowser {
	t.Helper()
	b := &uiBrowser{t: t, deadline: time.Now().Add(uiBudget), dir: t.TempDir(), blocked: map[string]int{}}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium),
		chromedp.DisableGPU,
		// The UI scrolls inside a full-height layout, so a full-page
		// screenshot is the window: make it tall enough for the history
		// with both Deploy events expanded.
		chromedp.WindowSize(1600, 2800),
		// Nothing leaves the machine: every host name but 127.0.0.1 fails
		// to resolve. The UI's own calls all go to 127.0.0.1.
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"),
	)
	if os.Geteuid() == 0 {
		// Chromium refuses to start as root with its sandbox.
		opts = append(opts, chromedp.NoSandbox)
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx, chromedp.WithListener(func(ev any) {
		e, ok := ev.(*network.EventRequestWillBeSent)
		if !ok || e.Request == nil {
			return
		}
		if u, err := url.Parse(e.Request.URL); err == nil && u.Host != "" && u.Hostname() != "127.0.0.1" {
			b.mu.Lock()
			b.blocked[u.Host]++
			b.mu.Unlock()
		}
	}))
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc() // waits for Chromium to exit
	})
	b.ctx = ctx
	// The first call starts Chromium, which then lives as long as the
	// call's context: so it gets the tab's own, and a timer instead.
	started := make(chan error, 1)
	go func() {
		_, err := chromedp.Call(ctx, network.Enable, network.EnableParams{})
		started <- err
	}()
	select {
	case err := <-started:
		require.NoError(t, err, "start Chromium %s", chromium)
	case <-time.After(stepTimeout):
		t.Fatalf("Chromium %s did not start within %s", chromium, stepTimeout)
	}
	return b
}

// stepTimeout bounds one step; the whole browser session has uiBudget.
const stepTimeout = 30 * time.Second

// step is the context of one step: stepTimeout, within uiBudget.
func (b *uiBrowser) step() (context.Context, context.CancelFunc) {
	d := time.Now().Add(stepTimeout)
	if b.deadline.Before(d) {
		d = b.deadline
	}
	return context.WithDeadline(b.ctx, d)
}

// do runs steps within a step's deadline, failing the test with what was
// on the page when they could not.
func (b *uiBrowser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := b.step()
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.fail("%s: %v", what, err)
	}
}

// check fails the test with the page's state unless ok.
func (b *uiBrowser) check(ok bool, format string, args ...any) {
	b.t.Helper()
	if !ok {
		b.fail(format, args...)
	}
}

// waitJS waits until a JavaScript expression is true.
func (b *uiBrowser) waitJS(what, expr string) {
	b.t.Helper()
	b.do(what, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(100*time.Millisecond),
		chromedp.WithPollingTimeout(stepTimeout)))
}

type uiRow struct {
	id    string
	cells []string
}

// waitRows waits until the workflows table lists exactly the workflow IDs
// of want and returns its rows.
func (b *uiBrowser) waitRows(want map[string]string) []uiRow {
	b.t.Helper()
	type jsRow struct {
		Href  string   `json:"href"`
		Cells []string `json:"cells"`
	}
	const js = `[...document.querySelectorAll('tr[data-testid="workflows-summary-configurable-table-row"]')].map(tr => {
		const a = tr.querySelector('a[href*="/workflows/"]');
		return {href: a ? a.getAttribute('href') : '', cells: [...tr.querySelectorAll('td')].map(td => td.textContent.trim())};
	})`
	wantIDs := make([]string, 0, len(want))
	for id := range want {
		wantIDs = append(wantIDs, id)
	}
	sort.Strings(wantIDs)
	ctx, cancel := b.step()
	defer cancel()
	for {
		var rows []uiRow
		var ids []string
		got, err := chromedp.Run(ctx, chromedp.Evaluate[[]jsRow](js))
		for _, r := range got {
			id, perr := uiWorkflowIDFromHref(r.Href)
			if perr != nil {
				err = errors.Join(err, perr)
			}
			rows = append(rows, uiRow{id: id, cells: r.Cells})
			ids = append(ids, id)
		}
		sort.Strings(ids)
		if err == nil && slices.Equal(ids, wantIDs) {
			return rows
		}
		if ctx.Err() != nil {
			b.fail("the filtered list shows workflows %q, want exactly %q (error %v)", ids, wantIDs, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// uiWorkflowIDFromHref extracts the workflow ID from a link of the form
// /namespaces/<ns>/workflows/<escaped ID>/<run ID>/<tab>.
func uiWorkflowIDFromHref(href string) (string, error) {
	parts := strings.Split(href, "/")
	if len(parts) < 6 || parts[1] != "namespaces" || parts[3] != "workflows" {
		return "", fmt.Errorf("unexpected workflow link %q", href)
	}
	return url.PathUnescape(parts[4])
}

func (b *uiBrowser) text() string {
	b.t.Helper()
	ctx, cancel := b.step()
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
	if err != nil {
		b.fail("read the page's text: %v", err)
	}
	return s
}

// textContent is the text of the first element css selects.
func (b *uiBrowser) textContent(css string) string {
	b.t.Helper()
	ctx, cancel := b.step()
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS(css)))
	if err != nil {
		b.fail("read the text of %s: %v", css, err)
	}
	return s
}

func (b *uiBrowser) location() string {
	b.t.Helper()
	ctx, cancel := b.step()
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		b.fail("read the page's URL: %v", err)
	}
	return s
}

// screenshot saves a full-page PNG as name.png and logs where.
func (b *uiBrowser) screenshot(name string) {
	b.t.Helper()
	ctx, cancel := b.step()
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.fail("screenshot %s: %v", name, err)
	}
	b.t.Logf("screenshot %s", b.save(name+".png", png))
}

// save writes an artifact to the test's directory and, when
// FLOTILLA_ARTIFACTS is set, copies it to $FLOTILLA_ARTIFACTS/<test name>/.
// It returns where the artifact can be seen after the test.
func (b *uiBrowser) save(name string, data []byte) string {
	p := filepath.Join(b.dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		b.t.Errorf("save %s: %v", p, err)
		return p
	}
	dir := os.Getenv("FLOTILLA_ARTIFACTS")
	if dir == "" {
		return p + " (removed after the test; set FLOTILLA_ARTIFACTS=<dir> to keep it)"
	}
	dir = filepath.Join(dir, b.t.Name())
	kept := filepath.Join(dir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.t.Errorf("artifacts dir: %v", err)
		return p
	}
	if err := os.WriteFile(kept, data, 0o644); err != nil {
		b.t.Errorf("save %s: %v", kept, err)
		return p
	}
	return kept
}

// fail saves a screenshot and the page's HTML, and fails the test with
// the URL, the page's text and the start of its HTML.
func (b *uiBrowser) fail(format string, args ...any) {
	b.t.Helper()
	msg := fmt.Sprintf(format, args...)
	// The step's deadline may be what ran out: the tab has its own.
	ctx, cancel := context.WithTimeout(b.ctx, 15*time.Second)
	defer cancel()
	var state []string
	if loc, err := chromedp.Run(ctx, chromedp.Location()); err == nil {
		state = append(state, "URL: "+loc)
	}
	if png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)); err == nil {
		state = append(state, "screenshot: "+b.save("failure.png", png))
	} else {
		state = append(state, fmt.Sprintf("screenshot failed: %v", err))
	}
	if text, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`)); err == nil {
		state = append(state, "page text:\n"+uiTruncate(text, 3000))
	}
	if frames, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("iframe")].map(f => {
		let text = "(not readable)";
		try { text = JSON.stringify(f.contentDocument.body.innerText) + " (textContent " + JSON.stringify(f.contentDocument.body.textContent.slice(0, 300)) + ")"; } catch (e) { text += " " + e; }
		return (f.id || f.title) + ": " + text; })`)); err == nil && len(frames) > 0 {
		state = append(state, "iframes:\n"+strings.Join(frames, "\n"))
	}
	if html, err := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("main"))); err == nil {
		state = append(state, "HTML: "+b.save("failure.html", []byte(html)), "HTML of <main>:\n"+uiTruncate(html, 3000))
	}
	b.logBlocked()
	b.t.Fatalf("Temporal UI: %s\n%s", msg, strings.Join(state, "\n"))
}

// logBlocked reports requests the page tried to send off the machine.
func (b *uiBrowser) logBlocked() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.blocked) > 0 {
		b.t.Logf("requests to hosts other than 127.0.0.1 (not resolved, so never sent): %v", b.blocked)
	}
}

func uiTruncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + fmt.Sprintf("\n… (%d more bytes)", len(s)-n)
}
