package drift_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/bundle"
	"github.com/flotilla-gitops/flotilla/internal/drift"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

// shiftedClock is the real clock moved to a chosen moment, running at the
// real rate from there: the monitor's re-checks run on real timers.
type shiftedClock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *shiftedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

// set makes Now return t now.
func (c *shiftedClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset = time.Until(t)
}

// testMonitorWindows: with correctDrift and a daily window at noon, a hand
// edit made 12 s before noon is reported at once, saying the correction
// waits for the window and when it opens, and is not corrected; once the
// window opens it is corrected without another event.
func testMonitorWindows(t *testing.T, e *monitorEnv) {
	const ns, bundleName = "drift-window", "window"
	const wait = 12 * time.Second // from the edit to the window's opening
	e.deploy(t, ns, bundleName, monConfigMapTemplate("first"))
	target := monTarget(ns, bundleName)
	target.Correct = &bundle.CorrectDrift{Enabled: true}
	target.Windows = []bundle.Window{{Schedule: "0 12 * * *", Duration: "1h"}}
	noon := time.Date(2026, time.March, 10, 12, 0, 0, 0, time.UTC)
	clock := &shiftedClock{}
	clock.set(noon.Add(-4 * time.Hour))
	run := e.start(t, drift.Config{Now: clock.Now}, target)
	run.reports.waitFor(t, 0, 30*time.Second, "of the unchanged release", clean(1))
	settle()

	clock.set(noon.Add(-wait))
	opens := time.Now().Add(wait) // noon, on the real clock
	from := run.reports.mark()
	e.update(t, monConfigMaps, ns, "first", "kubectl-edit", setKey("by-hand"))
	rep := run.reports.waitFor(t, from, detectWithin, "with the edit", func(r status.LiveReport) bool { return r.Modified == 1 })
	require.True(t, time.Now().Before(opens), "the edit was reported after the window opened: slow machine")
	assert.Equal(t, status.LiveReport{Bundle: bundleName, Release: monRelease, Namespace: ns, DeploymentID: monDeploymentID,
		Resources: 1, Modified: 1,
		ModifiedStatus: []status.ModifiedStatus{{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: "first", Patch: monGitPatch}},
		Error: `bundle window is outside its deployment window; drift correction waits until window "0 12 * * *" (1h, UTC) ` +
			`opens 2026-03-10T12:00:00Z`}, normal(rep))
	assert.Equal(t, "by-hand", e.dataKey(t, ns, "first"), "not corrected outside the window")

	// The window opens: the re-check set for it corrects the drift.
	rep = run.reports.waitFor(t, from, wait+correctWithin, "after the correction", func(r status.LiveReport) bool {
		return r.Corrections == 1 && !r.Drifted()
	})
	assert.Equal(t, status.LiveReport{Bundle: bundleName, Release: monRelease, Namespace: ns, DeploymentID: monDeploymentID,
		Resources: 1, Ready: 1, Corrections: 1}, normal(rep))
	assert.Equal(t, "from-git", e.dataKey(t, ns, "first"))
	lines := run.logs.FilterMessage("Corrected drift").All()
	require.Len(t, lines, 1)
	assert.False(t, lines[0].Time.Before(opens), "corrected at %s, before the window opened at %s",
		lines[0].Time.Format("15:04:05.000"), opens.Format("15:04:05.000"))
	t.Logf("corrected %s after the window opened", lines[0].Time.Sub(opens).Round(time.Millisecond))
	assert.Equal(t, map[string]int{"success": 1}, run.results, "Corrected calls")
	e.assertCurrent(t, ns, 2)
}

// testMonitorBadWindows: windows that do not parse (rendering rejects
// them, so only a bug gets them here) gate nothing, and every report says
// so.
func testMonitorBadWindows(t *testing.T, e *monitorEnv) {
	const ns, bundleName = "drift-bad-window", "bad-window"
	const why = `drift is corrected at any time: deployment windows[0] does not parse: schedule: "61 * * * *": ` +
		`end of range (61) above maximum (59): 61`
	e.deploy(t, ns, bundleName, monConfigMapTemplate("first"))
	target := monTarget(ns, bundleName)
	target.Correct = &bundle.CorrectDrift{Enabled: true}
	target.Windows = []bundle.Window{{Schedule: "61 * * * *", Duration: "1h"}}
	run := e.start(t, drift.Config{}, target)
	rep := run.reports.waitFor(t, 0, 30*time.Second, "of the unchanged release", func(r status.LiveReport) bool {
		return r.Ready == 1 && !r.Drifted()
	})
	assert.Equal(t, why, rep.Error)
	settle()

	from := run.reports.mark()
	e.update(t, monConfigMaps, ns, "first", "kubectl-edit", setKey("by-hand"))
	rep = run.reports.waitFor(t, from, correctWithin, "after the correction", func(r status.LiveReport) bool {
		return r.Corrections == 1 && !r.Drifted()
	})
	assert.Equal(t, why, rep.Error)
	assert.Equal(t, "from-git", e.dataKey(t, ns, "first"))
}
