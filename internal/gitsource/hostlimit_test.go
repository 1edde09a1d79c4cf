package gitsource

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDecideWait(t *testing.T) {
	now := time.Date(2026, 11, 30, 2, 0, 0, 0, time.UTC)
	epoch := func(d time.Duration) string { return strconv.FormatInt(now.Add(d).Unix(), 10) }
	hdr := func(kv ...string) http.Header {
		h := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return h
	}
	tests := []struct {
		name      string
		status    int
		header    http.Header
		strikes   int
		wantWait  time.Duration // 0: no wait
		wantInMsg string
	}{
		{name: "429 Retry-After seconds", status: 429, header: hdr("Retry-After", "20"), wantWait: 20 * time.Second,
			wantInMsg: "429 Too Many Requests, Retry-After 20s"},
		{name: "429 Retry-After HTTP date", status: 429, header: hdr("Retry-After", now.Add(90*time.Second).Format(http.TimeFormat)),
			wantWait: 90 * time.Second},
		{name: "503 Retry-After", status: 503, header: hdr("Retry-After", "5"), wantWait: 5 * time.Second,
			wantInMsg: "503 Service Unavailable, Retry-After 5s"},
		{name: "503 without Retry-After is transient", status: 503, header: hdr()},
		{name: "429 without headers: default", status: 429, header: hdr(), wantWait: DefaultRateLimitWait,
			wantInMsg: "without Retry-After"},
		{name: "429 default doubles per strike", status: 429, header: hdr(), strikes: 2, wantWait: 4 * DefaultRateLimitWait},
		{name: "429 default is capped", status: 429, header: hdr(), strikes: 30, wantWait: MaxDefaultRateLimitWait},
		{name: "429 Retry-After in the past: default", status: 429, header: hdr("Retry-After", now.Add(-time.Minute).Format(http.TimeFormat)),
			wantWait: DefaultRateLimitWait},
		{name: "429 unparsable Retry-After: default", status: 429, header: hdr("Retry-After", "soon"), wantWait: DefaultRateLimitWait},
		{name: "Retry-After capped", status: 429, header: hdr("Retry-After", "999999999999"), wantWait: MaxRateLimitWait,
			wantInMsg: "capped at 1h0m0s"},
		{name: "GitHub 403 with X-RateLimit", status: 403,
			header: hdr("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", epoch(5*time.Minute)), wantWait: 5 * time.Minute,
			wantInMsg: "403 Forbidden, X-RateLimit-Remaining 0, reset in 5m0s"},
		{name: "GitHub 429 with X-RateLimit", status: 429,
			header: hdr("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", epoch(2*time.Minute)), wantWait: 2 * time.Minute},
		{name: "GitHub 200 with nothing remaining", status: 200,
			header: hdr("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", epoch(time.Minute)), wantWait: time.Minute},
		{name: "requests remaining", status: 200,
			header: hdr("X-RateLimit-Remaining", "10", "X-RateLimit-Reset", epoch(time.Minute))},
		{name: "403 without rate-limit headers is auth", status: 403, header: hdr()},
		{name: "403 with a reset in the past is auth", status: 403,
			header: hdr("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", epoch(-time.Minute))},
		{name: "GitLab epoch reset", status: 429,
			header: hdr("RateLimit-Remaining", "0", "RateLimit-Reset", epoch(3*time.Minute)), wantWait: 3 * time.Minute,
			wantInMsg: "RateLimit-Remaining 0"},
		{name: "IETF draft delta reset", status: 403, header: hdr("RateLimit-Remaining", "0", "RateLimit-Reset", "42"),
			wantWait: 42 * time.Second},
		{name: "epoch reset capped", status: 403,
			header: hdr("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", epoch(48*time.Hour)), wantWait: MaxRateLimitWait},
		{name: "Retry-After wins over reset", status: 429,
			header: hdr("Retry-After", "7", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", epoch(time.Hour)), wantWait: 7 * time.Second},
		{name: "plain 200", status: 200, header: hdr()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, ok := decideWait(tt.status, tt.header, now, tt.strikes)
			if tt.wantWait == 0 {
				assert.False(t, ok, "wait %s (%s)", d.wait, d.reason)
				return
			}
			require.True(t, ok)
			assert.Equal(t, tt.wantWait, d.wait)
			assert.Contains(t, d.reason, tt.wantInMsg)
		})
	}
}

func TestHostLimiter(t *testing.T) {
	now := time.Date(2026, 11, 30, 2, 0, 0, 0, time.UTC)
	l := &HostLimiter{Now: func() time.Time { return now }}
	retry := func(s string) http.Header { return http.Header{"Retry-After": {s}} }

	require.NoError(t, l.Check("git.example"))
	rl := l.Observe("git.example", 429, retry("30"))
	require.NotNil(t, rl)
	assert.Equal(t, now.Add(30*time.Second), rl.RetryAt)
	assert.Equal(t, "git.example", rl.Host)

	var err *RateLimitedError
	require.ErrorAs(t, l.Check("git.example"), &err, "every request to the host waits")
	assert.Equal(t, now.Add(30*time.Second), err.RetryAt)
	assert.NoError(t, l.Check("other.example"), "other hosts do not")

	assert.Nil(t, l.Observe("git.example", 200, http.Header{}), "a success in flight clears nothing early")
	assert.Error(t, l.Check("git.example"))
	_ = l.Observe("git.example", 429, retry("5"))
	require.ErrorAs(t, l.Check("git.example"), &err)
	assert.Equal(t, now.Add(30*time.Second), err.RetryAt, "a shorter wait does not shorten the recorded one")

	now = now.Add(30 * time.Second)
	assert.NoError(t, l.Check("git.example"), "asked again at RetryAt")

	// 429s without a time double the wait; a success resets it.
	assert.Equal(t, now.Add(time.Minute), l.Observe("git.example", 429, http.Header{}).RetryAt)
	now = now.Add(time.Minute)
	assert.Equal(t, now.Add(2*time.Minute), l.Observe("git.example", 429, http.Header{}).RetryAt)
	now = now.Add(2 * time.Minute)
	_ = l.Observe("git.example", 200, http.Header{})
	assert.Equal(t, now.Add(time.Minute), l.Observe("git.example", 429, http.Header{}).RetryAt)

	// A success saying nothing remains is served but stops the next request.
	reset := now.Add(time.Hour).Add(-time.Minute)
	h := http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {strconv.FormatInt(reset.Unix(), 10)}}
	assert.Nil(t, l.Observe("api.example", 200, h))
	require.ErrorAs(t, l.Check("api.example"), &err)
	assert.Equal(t, reset, err.RetryAt)
}
