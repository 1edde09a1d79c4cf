package gitsource

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
)

// RateLimitedError is a request not sent, or refused, because the Git host
// asked to wait: it answered 429 (with Retry-After), or its rate-limit
// headers said no requests remain until a time. Every Remote of the host
// gets it until RetryAt.
type RateLimitedError struct {
	// Host is host[:port].
	Host string
	// RetryAt is the earliest time the host may be asked again.
	RetryAt time.Time
	// Reason is what the host said, e.g. "429 Too Many Requests,
	// Retry-After 30s".
	Reason string
}

// Error names the host, the time and the reason.
func (e *RateLimitedError) Error() string {
	return fmt.Sprintf("%s asked to wait until %s: %s", e.Host, e.RetryAt.UTC().Format(time.RFC3339), e.Reason)
}

// Backoff bounds of a HostLimiter.
const (
	// DefaultRateLimitWait is the wait after a 429 that names no time;
	// it doubles with each further such 429 from the host, up to
	// MaxDefaultRateLimitWait.
	DefaultRateLimitWait    = time.Minute
	MaxDefaultRateLimitWait = 10 * time.Minute
	// MaxRateLimitWait caps any wait, so a wrong header cannot stop a
	// host being asked for long.
	MaxRateLimitWait = time.Hour
)

// HostLimiter records which Git hosts asked to wait, and until when. Every
// HTTP(S) request go-git makes for this package (ls-remote, fetch) is
// checked against it first and refused with a *RateLimitedError, unsent,
// while its host is waited for; every response is read for 429,
// Retry-After and rate-limit headers. A host is waited for by all Remotes
// on it, whichever GitRepo asks.
//
// A process has one, DefaultHostLimiter, unless a context carries another
// (WithHostLimiter). A worker process is one controller, so the default
// is the controller's record. It is safe for concurrent use.
type HostLimiter struct {
	// Now is the clock; nil: time.Now.
	Now func() time.Time

	mu    sync.Mutex
	hosts map[string]hostWait
}

// hostWait is one host's record: until when to wait, why, and how many
// 429s without a time it sent in a row.
type hostWait struct {
	until   time.Time
	reason  string
	strikes int
}

// DefaultHostLimiter is the process's record of Git hosts that asked to
// wait, used when a context carries none.
var DefaultHostLimiter = &HostLimiter{}

type limiterKey struct{}

// WithHostLimiter returns a context whose Git requests are checked against
// and recorded in l instead of DefaultHostLimiter.
func WithHostLimiter(ctx context.Context, l *HostLimiter) context.Context {
	return context.WithValue(ctx, limiterKey{}, l)
}

func hostLimiter(ctx context.Context) *HostLimiter {
	if l, ok := ctx.Value(limiterKey{}).(*HostLimiter); ok && l != nil {
		return l
	}
	return DefaultHostLimiter
}

func (l *HostLimiter) now() time.Time {
	if l.Now != nil {
		return l.Now()
	}
	return time.Now()
}

// Check returns a *RateLimitedError while host (host[:port]) is waited
// for, else nil.
func (l *HostLimiter) Check(host string) error {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	w, ok := l.hosts[host]
	if !ok || !now.Before(w.until) {
		return nil
	}
	return &RateLimitedError{Host: host, RetryAt: w.until, Reason: w.reason}
}

// Observe records a response of host. It returns the *RateLimitedError
// the response means when it asks to wait (429; 403 or 429 with no
// requests remaining; 503 with Retry-After), and also records, without an
// error, a successful response saying no requests remain until a time. A
// recorded wait is never shortened by a later response.
func (l *HostLimiter) Observe(host string, status int, h http.Header) *RateLimitedError {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.hosts[host]
	d, ok := decideWait(status, h, now, w.strikes)
	if !ok {
		if status >= 200 && status < 300 && w.strikes > 0 {
			w.strikes = 0
			l.put(host, w, now)
		}
		return nil
	}
	if d.defaulted {
		w.strikes++
	}
	if until := now.Add(d.wait); until.After(w.until) {
		w.until, w.reason = until, d.reason
	}
	l.put(host, w, now)
	if status >= 200 && status < 300 {
		return nil
	}
	return &RateLimitedError{Host: host, RetryAt: w.until, Reason: w.reason}
}

// put stores w and forgets hosts whose wait ended long enough ago that
// their 429 count no longer matters, so the record stays as small as the
// set of hosts being waited for.
func (l *HostLimiter) put(host string, w hostWait, now time.Time) {
	if l.hosts == nil {
		l.hosts = map[string]hostWait{}
	}
	l.hosts[host] = w
	for h, old := range l.hosts {
		if now.Sub(old.until) > MaxDefaultRateLimitWait || (old.strikes == 0 && !now.Before(old.until)) {
			delete(l.hosts, h)
		}
	}
}

// waitDecision is how long a response asks a host to be left alone, and
// why; defaulted means it gave no time.
type waitDecision struct {
	wait      time.Duration
	reason    string
	defaulted bool
}

// decideWait reads a response's status and headers (strikes: earlier 429s
// without a time, in a row):
//
//   - 429 or 503 with Retry-After (seconds or an HTTP date): that long.
//   - any status with X-RateLimit-Remaining: 0 and X-RateLimit-Reset
//     (GitHub: epoch seconds), or RateLimit-Remaining: 0 and
//     RateLimit-Reset (GitLab: epoch seconds; IETF draft: seconds): until
//     the reset. A 2xx is still served; a 403 means the limit, not
//     credentials.
//   - 429 without either: DefaultRateLimitWait, doubled per strike up to
//     MaxDefaultRateLimitWait.
//
// A wait is capped at MaxRateLimitWait. A time in the past counts as none.
func decideWait(status int, h http.Header, now time.Time, strikes int) (waitDecision, bool) {
	prefix := fmt.Sprintf("%d %s", status, http.StatusText(status))
	if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
		if d, ok := retryAfter(h.Get("Retry-After"), now); ok {
			return capped(d, prefix+", Retry-After "+d.String()), true
		}
	}
	for _, name := range []string{"X-RateLimit", "RateLimit"} {
		if d, ok := resetIn(h, name, now); ok {
			return capped(d, fmt.Sprintf("%s, %s-Remaining 0, reset in %s", prefix, name, d)), true
		}
	}
	if status != http.StatusTooManyRequests {
		return waitDecision{}, false
	}
	d := DefaultRateLimitWait
	for i := 0; i < strikes && d < MaxDefaultRateLimitWait; i++ {
		d *= 2
	}
	d = min(d, MaxDefaultRateLimitWait)
	return waitDecision{wait: d, reason: fmt.Sprintf("%s without Retry-After, waiting %s", prefix, d), defaulted: true}, true
}

func capped(d time.Duration, reason string) waitDecision {
	if d > MaxRateLimitWait {
		d, reason = MaxRateLimitWait, reason+fmt.Sprintf(" (capped at %s)", MaxRateLimitWait)
	}
	return waitDecision{wait: d, reason: reason}
}

// retryAfter parses Retry-After: delay seconds or an HTTP date.
func retryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		return positive(secondsDuration(s))
	}
	if t, err := http.ParseTime(v); err == nil {
		return positive(t.Sub(now))
	}
	return 0, false
}

// resetIn reads <name>-Remaining and <name>-Reset: the time until the
// reset when nothing remains. A reset over a billion is epoch seconds,
// else seconds from now.
func resetIn(h http.Header, name string, now time.Time) (time.Duration, bool) {
	if strings.TrimSpace(h.Get(name+"-Remaining")) != "0" {
		return 0, false
	}
	s, err := strconv.ParseInt(strings.TrimSpace(h.Get(name+"-Reset")), 10, 64)
	if err != nil {
		return 0, false
	}
	if s > 1e9 {
		return positive(time.Unix(s, 0).Sub(now))
	}
	return positive(secondsDuration(s))
}

// secondsDuration is s seconds, saturating instead of overflowing.
func secondsDuration(s int64) time.Duration {
	if s > int64(2*MaxRateLimitWait/time.Second) {
		return 2 * MaxRateLimitWait
	}
	return time.Duration(s) * time.Second
}

// positive is d rounded to whole seconds (at least one), or false when d
// is not after now.
func positive(d time.Duration) (time.Duration, bool) {
	if d <= 0 {
		return 0, false
	}
	return max(d.Round(time.Second), time.Second), true
}

// asRateLimited finds a *RateLimitedError in err's chain, also through
// go-git's plumbing.UnexpectedError and PermanentError, which do not
// unwrap.
func asRateLimited(err error) (*RateLimitedError, bool) {
	for err != nil {
		var rl *RateLimitedError
		if errors.As(err, &rl) {
			return rl, true
		}
		var unexpected *plumbing.UnexpectedError
		var permanent *plumbing.PermanentError
		switch {
		case errors.As(err, &unexpected):
			err = unexpected.Err
		case errors.As(err, &permanent):
			err = permanent.Err
		default:
			return nil, false
		}
	}
	return nil, false
}

// isRateLimited reports whether err is, or carries, a *RateLimitedError.
func isRateLimited(err error) bool {
	_, ok := asRateLimited(err)
	return ok
}
