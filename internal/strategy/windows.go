package strategy

import (
	"fmt"
	"time"

	"github.com/flotilla-gitops/flotilla/internal/fleetyaml"
)

// Interval is a period in which a window is open: from Start, inclusive,
// to End, exclusive. Both are in UTC.
type Interval struct {
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
}

// Contains reports whether t falls in the interval.
func (iv Interval) Contains(t time.Time) bool {
	return !t.Before(iv.Start) && t.Before(iv.End)
}

// MaxMergedSpan bounds the search for where merged windows close: windows
// that stay open without a break (say every minute for two minutes) would
// otherwise never close. Once merging makes an interval longer than this,
// Windows returns it, ending where the search stopped, as its last
// interval.
const MaxMergedSpan = 31 * 24 * time.Hour

// Windows returns up to n of the intervals in which any of the windows ws
// is open, in order: the first n that end after from, so the first
// contains from when a window is open at from. A window opens at each
// activation of its schedule, read in its time zone (default UTC), and
// stays open for its duration; an interval ends exactly when the duration
// has elapsed, whatever daylight saving time does meanwhile.
// Overlapping or touching intervals, of one window or of several, are
// merged into one. The first interval starts when the earliest window
// still open at from opened.
//
// Windows returns nil for no windows or n < 1, and fewer than n intervals
// when the schedules stop firing (cron's Next looks five years ahead, so
// a schedule such as "0 0 30 2 *" never fires) or when merging yields an
// interval longer than MaxMergedSpan. A window that does not parse (see
// fleetyaml.Window.Parse) is an error naming it, e.g. "windows[1]: schedule:
// ...".
//
// Windows is deterministic: the same arguments give the same intervals.
func Windows(ws []fleetyaml.Window, from time.Time, n int) ([]Interval, error) {
	if len(ws) == 0 || n < 1 {
		return nil, nil
	}
	// Each window's next opening; zero once its schedule no longer fires.
	type source struct {
		w    fleetyaml.ParsedWindow
		next time.Time
	}
	srcs := make([]source, len(ws))
	for i, w := range ws {
		pw, err := w.Parse()
		if err != nil {
			return nil, fmt.Errorf("windows[%d]: %w", i, err)
		}
		// A window that opened at s is open at from when
		// from-Duration < s <= from. Next returns the first activation
		// strictly after its argument, so starting from from-Duration
		// yields exactly the openings of the intervals that end after from,
		// leaving out the one that ends at from.
		srcs[i] = source{w: pw, next: pw.Schedule.Next(from.Add(-pw.Duration).In(pw.Location))}
	}

	var (
		out  []Interval
		cur  Interval
		open bool
	)
	for {
		// The window that opens first; on a tie, the one listed first.
		k := -1
		for i, s := range srcs {
			if !s.next.IsZero() && (k < 0 || s.next.Before(srcs[k].next)) {
				k = i
			}
		}
		if k < 0 {
			break
		}
		start := srcs[k].next
		end := start.Add(srcs[k].w.Duration)
		srcs[k].next = srcs[k].w.Schedule.Next(start)

		switch {
		case !open:
			cur, open = Interval{Start: start, End: end}, true
		case start.After(cur.End):
			out = append(out, utc(cur))
			if len(out) == n {
				return out, nil
			}
			cur = Interval{Start: start, End: end}
		default:
			if end.After(cur.End) {
				cur.End = end
			}
			if cur.End.Sub(cur.Start) > MaxMergedSpan {
				return append(out, utc(cur)), nil
			}
		}
	}
	if open {
		out = append(out, utc(cur))
	}
	return out, nil
}

func utc(iv Interval) Interval {
	return Interval{Start: iv.Start.UTC(), End: iv.End.UTC()}
}

// WindowState is where a moment stands in a set of deployment windows
// (see WindowAt).
type WindowState struct {
	// Open is set when some window is open at the moment, or when there
	// are no windows: nothing is held back.
	Open bool
	// Next is, when none is open, when the next one opens; zero when no
	// window opens again.
	Next time.Time
	// Window is the index, among the windows given, of the one that opens
	// at Next (the first listed on a tie); -1 when Open or Next is zero.
	Window int
}

// WindowAt reports whether any of the windows ws is open at now and, when
// none is, which one opens next and when, as Windows computes them; a
// window that does not parse is Windows' error. No windows: Open.
// WindowAt is for code that asks "may it act now?" at any moment, such
// as drift correction; a rollout, which must decide the same way on
// replay, records Windows' intervals instead.
func WindowAt(ws []fleetyaml.Window, now time.Time) (WindowState, error) {
	st := WindowState{Open: true, Window: -1}
	if len(ws) == 0 {
		return st, nil
	}
	ivs, err := Windows(ws, now, 1)
	if err != nil {
		return WindowState{Window: -1}, err
	}
	if len(ivs) > 0 && ivs[0].Contains(now) {
		return st, nil
	}
	st.Open = false
	if len(ivs) == 0 {
		return st, nil
	}
	st.Next = ivs[0].Start
	for i := range ws {
		// Each parses: Windows parsed them all above.
		if own, _ := Windows(ws[i:i+1], now, 1); len(own) > 0 && own[0].Start.Equal(st.Next) {
			st.Window = i
			break
		}
	}
	return st, nil
}
