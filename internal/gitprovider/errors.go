package gitprovider

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// The classes of failure; a *StatusError matches one of them with
// errors.Is.
var (
	// ErrInvalid: the client or the request is wrong (unknown provider,
	// a repository URL without owner and name, an unknown state). Trying
	// again does not help.
	ErrInvalid = errors.New("invalid Git host request")
	// ErrUnauthorized: the host refused the token (401, or 403 without a
	// rate limit).
	ErrUnauthorized = errors.New("the Git host refused the API token")
	// ErrNotFound: the repository, pull request, commit or comment does
	// not exist, or the token may not see it (404).
	ErrNotFound = errors.New("not found on the Git host")
	// ErrRateLimited: the host asked to wait (429, or 403 with no rate
	// limit left); StatusError.RetryAfter says how long when it said so.
	ErrRateLimited = errors.New("rate limited by the Git host")
	// ErrTransient: the host did not answer or answered 5xx; worth
	// trying again.
	ErrTransient = errors.New("the Git host is unavailable")
	// ErrRejected: the host answered another 4xx (a validation error,
	// a redirect, a conflict).
	ErrRejected = errors.New("the Git host rejected the request")
)

// StatusError is a non-2xx answer of the host's API.
type StatusError struct {
	// Provider is the host's kind.
	Provider Kind
	// Op names the request ("set status", "list comments", …).
	Op string
	// StatusCode is the HTTP status.
	StatusCode int
	// RetryAfter is how long the host asked to wait (Retry-After, or
	// GitHub's X-RateLimit-Reset), zero when it did not say.
	RetryAfter time.Duration
	// Message is the host's explanation, if its body had one (bounded).
	Message string
	class   error
}

// Error reads "github: set status: HTTP 401: Bad credentials".
func (e *StatusError) Error() string {
	msg := fmt.Sprintf("%s: %s: HTTP %d", e.Provider, e.Op, e.StatusCode)
	if e.Message != "" {
		msg += ": " + e.Message
	}
	if e.RetryAfter > 0 {
		msg += fmt.Sprintf(" (retry after %s)", e.RetryAfter)
	}
	return msg
}

// Unwrap returns the class sentinel (ErrUnauthorized, ErrNotFound, …).
func (e *StatusError) Unwrap() error { return e.class }

// classify builds the error for a non-2xx answer.
func classify(kind Kind, op string, resp *http.Response, msg string, now time.Time) *StatusError {
	e := &StatusError{Provider: kind, Op: op, StatusCode: resp.StatusCode, Message: msg}
	e.RetryAfter = retryAfter(resp.Header, now)
	noneLeft := resp.Header.Get("X-RateLimit-Remaining") == "0" || resp.Header.Get("RateLimit-Remaining") == "0"
	switch code := resp.StatusCode; {
	case code == http.StatusTooManyRequests, code == http.StatusForbidden && (noneLeft || e.RetryAfter > 0):
		e.class = ErrRateLimited
	case code == http.StatusUnauthorized, code == http.StatusForbidden:
		e.class = ErrUnauthorized
	case code == http.StatusNotFound:
		e.class = ErrNotFound
	case code >= 500:
		e.class = ErrTransient
	default:
		e.class = ErrRejected
	}
	return e
}

// retryAfter reads Retry-After (seconds or an HTTP date), else a rate
// limit reset time (GitHub's X-RateLimit-Reset, GitLab's RateLimit-Reset:
// Unix seconds) when no requests are left.
func retryAfter(h http.Header, now time.Time) time.Duration {
	if v := h.Get("Retry-After"); v != "" {
		if s, err := strconv.Atoi(v); err == nil && s >= 0 {
			return time.Duration(s) * time.Second
		}
		if t, err := http.ParseTime(v); err == nil && t.After(now) {
			return t.Sub(now)
		}
	}
	for _, k := range []string{"X-RateLimit-Reset", "RateLimit-Reset"} {
		if h.Get(k) == "" || (h.Get("X-RateLimit-Remaining") != "0" && h.Get("RateLimit-Remaining") != "0") {
			continue
		}
		if s, err := strconv.ParseInt(h.Get(k), 10, 64); err == nil {
			if t := time.Unix(s, 0); t.After(now) {
				return t.Sub(now).Round(time.Second)
			}
		}
	}
	return 0
}
