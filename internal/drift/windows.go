package drift

import (
	"fmt"
	"time"

	"github.com/flotilla-gitops/flotilla/internal/status"
	"github.com/flotilla-gitops/flotilla/internal/strategy"
)

// inWindow reports whether w's drift may be corrected at now: inside one
// of its bundle's deployment windows, or it has none (or none that
// parses). Outside, it says in rep what the correction waits for and has
// the release judged again when that window opens; the drift is reported
// as usual.
func (m *Monitor) inWindow(w *watched, now time.Time, rep *status.LiveReport) bool {
	if len(w.t.Windows) == 0 || w.windowErr != "" {
		return true
	}
	st, err := strategy.WindowAt(w.t.Windows, now)
	if err != nil { // not reached: windowsError parsed them
		return true
	}
	if st.Open {
		return true
	}
	rep.Error = joinErrors(rep.Error, windowWait(w.t, st))
	if !st.Next.IsZero() && !st.Next.Equal(w.windowWake) {
		w.windowWake = st.Next
		m.later(w.t.Key(), st.Next.Sub(now))
	}
	return false
}

// windowWait says why t's drift is not corrected at a moment st outside
// its deployment windows, as the rollout says why a unit does not start:
// `bundle web is outside its deployment window; drift correction waits
// until window "0 22 * * 1-5" (6h, Europe/Berlin) opens
// 2026-03-09T21:00:00Z`.
func windowWait(t Target, st strategy.WindowState) string {
	msg := "bundle " + t.Bundle + " is outside its deployment window"
	if st.Next.IsZero() || st.Window < 0 {
		return msg + ", and none opens again: drift is not corrected"
	}
	return fmt.Sprintf("%s; drift correction waits until window %s opens %s", msg, t.Windows[st.Window],
		st.Next.UTC().Format(time.RFC3339))
}

// windowsError says, when t's deployment windows do not parse, that they
// gate no correction, and why ("" when they parse or there are none).
func windowsError(t Target) string {
	for i, w := range t.Windows {
		if _, err := w.Parse(); err != nil {
			return fmt.Sprintf("drift is corrected at any time: deployment windows[%d] does not parse: %v", i, err)
		}
	}
	return ""
}

func joinErrors(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}
