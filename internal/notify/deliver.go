package notify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/flotilla-gitops/flotilla/internal/gitprovider"
)

// The classes of delivery failure; a *DeliveryError matches one with
// errors.Is.
var (
	// ErrTransient: the receiver did not answer, or answered 408, 429 or
	// 5xx; trying again may help.
	ErrTransient = errors.New("the receiver is unavailable")
	// ErrRejected: the receiver answered another non-2xx status (a 4xx,
	// or a redirect, which is never followed); trying again does not help.
	ErrRejected = errors.New("the receiver rejected the event")
	// ErrInvalid: the Notification cannot deliver (no address, no token,
	// a repository URL the provider cannot read).
	ErrInvalid = errors.New("the notification cannot deliver")
)

// DeliveryError is a failed delivery. Its message never holds the
// address or a credential.
type DeliveryError struct {
	Provider Provider
	// StatusCode is the receiver's HTTP status; 0 when it did not answer.
	StatusCode int
	// RetryAfter is how long the receiver asked to wait, if it said.
	RetryAfter time.Duration
	// Reason says what went wrong.
	Reason string
	class  error
}

func (e *DeliveryError) Error() string {
	msg := string(e.Provider) + ": " + e.Reason
	if e.StatusCode != 0 {
		msg = fmt.Sprintf("%s: HTTP %d", e.Provider, e.StatusCode)
		if e.Reason != "" {
			msg += ": " + e.Reason
		}
	}
	return msg
}

// Unwrap returns the class (ErrTransient, ErrRejected, ErrInvalid).
func (e *DeliveryError) Unwrap() error { return e.class }

// Credentials are what a Notification's Secret holds: Token (the
// webhook's HMAC key; the Git host's API token) and Address (the Slack or
// Teams webhook URL, when not in the spec).
type Credentials struct {
	Token   string
	Address string
}

// maxResponse bounds what is read of a receiver's answer.
const maxResponse = 64 << 10

// DefaultTimeout bounds one delivery's request.
const DefaultTimeout = 15 * time.Second

// NewHTTPClient returns the client deliveries use: TLS verified against
// the system's roots, the given timeout (0: DefaultTimeout), redirects
// never followed (an event goes to its address and nowhere else).
func NewHTTPClient(timeout time.Duration) *http.Client {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return &http.Client{
		Timeout:       timeout,
		Transport:     http.DefaultTransport.(*http.Transport).Clone(),
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Send delivers ev as spec's provider does, with cred, through hc (which
// must not follow redirects: NewHTTPClient). It sends one request to the
// spec's address (or, for slack and msteams, the Secret's; for commit
// statuses, the API the repository URL names) and nowhere else; it does
// not retry. Failures are *DeliveryError.
func Send(ctx context.Context, hc *http.Client, spec Spec, cred Credentials, ev Event) error {
	switch spec.Provider {
	case Webhook:
		body, err := CloudEventJSON(ev)
		if err != nil {
			return err
		}
		return post(ctx, hc, spec, spec.Address, body, webhookHeaders(ev, cred.Token, body))
	case Slack, MSTeams:
		addr := spec.Address
		if addr == "" {
			addr = cred.Address
		}
		if addr == "" {
			return &DeliveryError{Provider: spec.Provider, Reason: "no address in the spec or its Secret", class: ErrInvalid}
		}
		body, err := chatJSON(spec.Provider, ev)
		if err != nil {
			return err
		}
		return post(ctx, hc, spec, addr, body, http.Header{"Content-Type": {"application/json"}})
	case GitHub, GitLab, Gitea:
		return setStatus(ctx, hc, spec, cred, ev)
	}
	return &DeliveryError{Provider: spec.Provider, Reason: "unknown provider", class: ErrInvalid}
}

// post sends body to addr and classifies the answer.
func post(ctx context.Context, hc *http.Client, spec Spec, addr string, body []byte, h http.Header) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, addr, bytes.NewReader(body))
	if err != nil || req.URL.Host == "" || (req.URL.Scheme != "http" && req.URL.Scheme != "https") {
		return &DeliveryError{Provider: spec.Provider, Reason: "the address is not an http(s) URL", class: ErrInvalid}
	}
	req.Header = h
	req.Header.Set("User-Agent", "flotilla")
	resp, err := hc.Do(req)
	if err != nil {
		return &DeliveryError{Provider: spec.Provider, Reason: transportReason(err), class: ErrTransient}
	}
	defer func() { _ = resp.Body.Close() }()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, maxResponse)) // the status decides; the body only explains
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		return nil
	}
	e := &DeliveryError{Provider: spec.Provider, StatusCode: resp.StatusCode, Reason: printable(data, 200), class: ErrRejected}
	switch c := resp.StatusCode; {
	case c == http.StatusRequestTimeout, c == http.StatusTooManyRequests, c >= 500:
		e.class = ErrTransient
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
			e.RetryAfter = time.Duration(s) * time.Second
		}
	}
	return e
}

// transportReason keeps a transport error's cause without its URL (a
// Slack or Teams URL is a credential).
func transportReason(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
		if ue.Timeout() {
			return "timed out"
		}
	}
	return err.Error()
}

// printable returns the first n runes of data that print, on one line.
func printable(data []byte, n int) string {
	s := strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) {
			return r
		}
		return ' '
	}, string(data))
	s = strings.TrimSpace(s)
	if r := []rune(s); len(r) > n {
		s = string(r[:n]) + "…"
	}
	return s
}

// StatusState is the commit state a rollout event sets; "" for events
// that set none.
func StatusState(t Type) string {
	switch t {
	case RolloutStarted:
		return gitprovider.StatePending
	case RolloutSucceeded:
		return gitprovider.StateSuccess
	case RolloutFailed, RolloutHalted:
		return gitprovider.StateFailure
	}
	return ""
}

// StatusContext is the commit status context of a GitRepo's rollouts.
func StatusContext(gitRepo string) string { return "flotilla/" + gitRepo }

// setStatus sets the commit status ev maps to on ev.Commit of ev.RepoURL.
func setStatus(ctx context.Context, hc *http.Client, spec Spec, cred Credentials, ev Event) error {
	state := StatusState(ev.Type)
	if state == "" || ev.Commit == "" {
		return &DeliveryError{Provider: spec.Provider, Reason: "event " + string(ev.Type) + " sets no commit status", class: ErrInvalid}
	}
	c, err := gitprovider.For(gitprovider.Kind(spec.Provider), ev.RepoURL, spec.Address, cred.Token, hc)
	if err != nil {
		return &DeliveryError{Provider: spec.Provider, Reason: err.Error(), class: ErrInvalid}
	}
	err = c.SetStatus(ctx, gitprovider.Status{Commit: ev.Commit, State: state, Context: StatusContext(ev.GitRepo),
		Description: ev.Message})
	var se *gitprovider.StatusError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &se):
		e := &DeliveryError{Provider: spec.Provider, StatusCode: se.StatusCode, RetryAfter: se.RetryAfter, Reason: se.Message, class: ErrRejected}
		if errors.Is(err, gitprovider.ErrTransient) || errors.Is(err, gitprovider.ErrRateLimited) || se.StatusCode == http.StatusRequestTimeout {
			e.class = ErrTransient
		}
		return e
	case errors.Is(err, gitprovider.ErrInvalid):
		return &DeliveryError{Provider: spec.Provider, Reason: err.Error(), class: ErrInvalid}
	}
	return &DeliveryError{Provider: spec.Provider, Reason: err.Error(), class: ErrTransient}
}
