package gitsource

import (
	"fmt"
	"time"
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
