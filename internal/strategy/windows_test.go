package strategy_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/fleetyaml"
	"github.com/flotilla-gitops/flotilla/internal/strategy"
)

// at is a UTC time on the given day of March 2026 (the 9th is a Monday;
// Europe/Berlin switches to summer time on Sunday the 29th).
func at(day, hour, minute int) time.Time {
	return time.Date(2026, time.March, day, hour, minute, 0, 0, time.UTC)
}

func iv(start, end time.Time) strategy.Interval { return strategy.Interval{Start: start, End: end} }

func TestWindows(t *testing.T) {
	nightly := fleetyaml.Window{Schedule: "0 2 * * *", Duration: "2h"}
	tests := []struct {
		name    string
		windows []fleetyaml.Window
		from    time.Time
		n       int
		want    []strategy.Interval
	}{
		{"inside a window", []fleetyaml.Window{nightly}, at(10, 3, 0), 2,
			[]strategy.Interval{iv(at(10, 2, 0), at(10, 4, 0)), iv(at(11, 2, 0), at(11, 4, 0))}},
		{"before a window", []fleetyaml.Window{nightly}, at(10, 1, 0), 2,
			[]strategy.Interval{iv(at(10, 2, 0), at(10, 4, 0)), iv(at(11, 2, 0), at(11, 4, 0))}},
		{"after the day's window", []fleetyaml.Window{nightly}, at(10, 5, 0), 1,
			[]strategy.Interval{iv(at(11, 2, 0), at(11, 4, 0))}},
		{"at the opening: inside", []fleetyaml.Window{nightly}, at(10, 2, 0), 1,
			[]strategy.Interval{iv(at(10, 2, 0), at(10, 4, 0))}},
		{"a second before closing: inside", []fleetyaml.Window{nightly}, at(10, 4, 0).Add(-time.Second), 1,
			[]strategy.Interval{iv(at(10, 2, 0), at(10, 4, 0))}},
		{"a nanosecond before closing: inside", []fleetyaml.Window{nightly}, at(10, 4, 0).Add(-1), 1,
			[]strategy.Interval{iv(at(10, 2, 0), at(10, 4, 0))}},
		{"at the closing: next one", []fleetyaml.Window{nightly}, at(10, 4, 0), 1,
			[]strategy.Interval{iv(at(11, 2, 0), at(11, 4, 0))}},
		{"n limits the count", []fleetyaml.Window{{Schedule: "@daily", Duration: "1h"}}, at(10, 12, 0), 3,
			[]strategy.Interval{iv(at(11, 0, 0), at(11, 1, 0)), iv(at(12, 0, 0), at(12, 1, 0)), iv(at(13, 0, 0), at(13, 1, 0))}},
		{"weekdays only", []fleetyaml.Window{{Schedule: "0 22 * * 1-5", Duration: "4h"}}, at(13, 23, 0), 2, // Friday night
			[]strategy.Interval{iv(at(13, 22, 0), at(14, 2, 0)), iv(at(16, 22, 0), at(17, 2, 0))}},
		{"window longer than a day, opened long before", []fleetyaml.Window{{Schedule: "@monthly", Duration: "240h"}}, at(5, 0, 0), 1,
			[]strategy.Interval{iv(at(1, 0, 0), at(11, 0, 0))}},
		{"explicit UTC", []fleetyaml.Window{{Schedule: "0 2 * * *", Duration: "2h", TimeZone: "UTC"}}, at(10, 3, 0), 1,
			[]strategy.Interval{iv(at(10, 2, 0), at(10, 4, 0))}},
		// Asia/Kolkata is UTC+05:30 all year: 02:00 there is 20:30 UTC the
		// day before.
		{"zone with an offset", []fleetyaml.Window{{Schedule: "0 2 * * *", Duration: "2h", TimeZone: "Asia/Kolkata"}}, at(10, 0, 0), 2,
			[]strategy.Interval{iv(at(10, 20, 30), at(10, 22, 30)), iv(at(11, 20, 30), at(11, 22, 30))}},
		{"zone with an offset, inside", []fleetyaml.Window{{Schedule: "0 2 * * *", Duration: "2h", TimeZone: "Asia/Kolkata"}}, at(10, 21, 0), 1,
			[]strategy.Interval{iv(at(10, 20, 30), at(10, 22, 30))}},
		// 09:00 in Berlin is 08:00 UTC in winter, 07:00 UTC from Sunday
		// the 29th on.
		{"daylight saving time", []fleetyaml.Window{{Schedule: "0 9 * * 1-5", Duration: "1h", TimeZone: "Europe/Berlin"}}, at(27, 0, 0), 2,
			[]strategy.Interval{iv(at(27, 8, 0), at(27, 9, 0)), iv(at(30, 7, 0), at(30, 8, 0))}},
		// The night of the switch has an hour less: a window opening at
		// 01:00 and lasting 3h ends at 05:00 local summer time.
		{"duration is elapsed time across the switch", []fleetyaml.Window{{Schedule: "0 1 * * *", Duration: "3h", TimeZone: "Europe/Berlin"}}, at(28, 12, 0), 1,
			[]strategy.Interval{iv(at(29, 0, 0), at(29, 3, 0))}},
		{"overlapping windows merged", []fleetyaml.Window{nightly, {Schedule: "0 3 * * *", Duration: "2h"}}, at(10, 0, 0), 2,
			[]strategy.Interval{iv(at(10, 2, 0), at(10, 5, 0)), iv(at(11, 2, 0), at(11, 5, 0))}},
		{"touching windows merged", []fleetyaml.Window{{Schedule: "0 3 * * *", Duration: "1h"}, {Schedule: "0 2 * * *", Duration: "1h"}}, at(10, 0, 0), 1,
			[]strategy.Interval{iv(at(10, 2, 0), at(10, 4, 0))}},
		{"window inside another", []fleetyaml.Window{nightly, {Schedule: "30 2 * * *", Duration: "30m"}}, at(10, 0, 0), 1,
			[]strategy.Interval{iv(at(10, 2, 0), at(10, 4, 0))}},
		{"separate windows interleaved", []fleetyaml.Window{nightly, {Schedule: "0 12 * * *", Duration: "1h", TimeZone: "Asia/Kolkata"}}, at(10, 3, 0), 4,
			[]strategy.Interval{
				iv(at(10, 2, 0), at(10, 4, 0)), iv(at(10, 6, 30), at(10, 7, 30)),
				iv(at(11, 2, 0), at(11, 4, 0)), iv(at(11, 6, 30), at(11, 7, 30)),
			}},
		// Open every two hours for three: never closed. The search stops
		// at the first opening that takes the span past MaxMergedSpan, the
		// one that closes at 31 days and an hour.
		{"one window overlapping itself", []fleetyaml.Window{{Schedule: "0 */2 * * *", Duration: "3h"}}, at(10, 1, 0), 1,
			[]strategy.Interval{iv(at(10, 0, 0), at(10, 0, 0).Add(strategy.MaxMergedSpan+time.Hour))}},
		{"overlap merged into an interval opened before from", []fleetyaml.Window{nightly, {Schedule: "0 3 * * *", Duration: "2h"}}, at(10, 4, 30), 1,
			[]strategy.Interval{iv(at(10, 3, 0), at(10, 5, 0))}},
		{"schedule that never fires", []fleetyaml.Window{{Schedule: "0 0 30 2 *", Duration: "1h"}}, at(10, 0, 0), 3, nil},
		{"n of 0", []fleetyaml.Window{nightly}, at(10, 0, 0), 0, nil},
		{"no windows", nil, at(10, 0, 0), 3, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := strategy.Windows(tt.windows, tt.from, tt.n)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			for _, g := range got {
				assert.Equal(t, time.UTC, g.Start.Location())
				assert.Equal(t, time.UTC, g.End.Location())
			}
		})
	}
}

func TestWindowsMergesAcrossTheSearchLimit(t *testing.T) {
	// Open every minute for two minutes: never closed. The search stops
	// once the merged interval exceeds MaxMergedSpan.
	got, err := strategy.Windows([]fleetyaml.Window{{Schedule: "* * * * *", Duration: "2m"}}, at(10, 0, 0), 5)
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, at(9, 23, 59), got[0].Start, "opened a minute before from")
	span := got[0].End.Sub(got[0].Start)
	assert.Greater(t, span, strategy.MaxMergedSpan)
	assert.LessOrEqual(t, span, strategy.MaxMergedSpan+2*time.Minute)
}

func TestWindowsIndependentOfFromsZone(t *testing.T) {
	ws := []fleetyaml.Window{{Schedule: "0 9 * * *", Duration: "1h", TimeZone: "America/New_York"}}
	ny, err := time.LoadLocation("America/New_York")
	require.NoError(t, err)
	from := at(10, 12, 0)
	want, err := strategy.Windows(ws, from, 3)
	require.NoError(t, err)
	got, err := strategy.Windows(ws, from.In(ny), 3)
	require.NoError(t, err)
	assert.Equal(t, want, got)
	// 09:00 EDT (UTC-4; New York switched on March 8th) is 13:00 UTC.
	assert.Equal(t, iv(at(10, 13, 0), at(10, 14, 0)), want[0])
}

func TestWindowsContain(t *testing.T) {
	ws := []fleetyaml.Window{{Schedule: "0 2 * * *", Duration: "2h"}}
	for _, tt := range []struct {
		from   time.Time
		inside bool
	}{
		{at(10, 1, 59), false},
		{at(10, 2, 0), true},
		{at(10, 3, 59), true},
		{at(10, 4, 0), false},
	} {
		got, err := strategy.Windows(ws, tt.from, 1)
		require.NoError(t, err)
		require.Len(t, got, 1)
		assert.Equal(t, tt.inside, got[0].Contains(tt.from), tt.from)
	}
}

func TestWindowsErrors(t *testing.T) {
	ok := fleetyaml.Window{Schedule: "@daily", Duration: "1h"}
	tests := []struct {
		name string
		w    fleetyaml.Window
		want string
	}{
		{"bad cron", fleetyaml.Window{Schedule: "61 * * * *", Duration: "1h"}, "windows[1]: schedule:"},
		{"@every", fleetyaml.Window{Schedule: "@every 2h", Duration: "1h"}, "windows[1]: schedule:"},
		{"TZ prefix", fleetyaml.Window{Schedule: "TZ=UTC 0 2 * * *", Duration: "1h"}, "windows[1]: schedule:"},
		{"bad duration", fleetyaml.Window{Schedule: "@daily", Duration: "1 hour"}, "windows[1]: duration:"},
		{"zero duration", fleetyaml.Window{Schedule: "@daily", Duration: "0"}, "windows[1]: duration:"},
		{"unknown zone", fleetyaml.Window{Schedule: "@daily", Duration: "1h", TimeZone: "Europe/Atlantis"}, "windows[1]: timeZone:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := strategy.Windows([]fleetyaml.Window{ok, tt.w}, at(10, 0, 0), 1)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestIntervalJSON(t *testing.T) {
	js, err := json.Marshal(iv(at(10, 2, 0), at(10, 4, 0)))
	require.NoError(t, err)
	assert.JSONEq(t, `{"start":"2026-03-10T02:00:00Z","end":"2026-03-10T04:00:00Z"}`, string(js))
}
