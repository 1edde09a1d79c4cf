package githubapp

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// Defaults of Options.
const (
	DefaultTimeout    = 30 * time.Second
	DefaultMaxEntries = 1024
	// RefreshBefore is how long before its expiry a cached token is
	// replaced by a new one (GitHub's tokens last an hour).
	RefreshBefore = 5 * time.Minute
)

// Options configure Tokens.
type Options struct {
	// Timeout bounds one token request. Optional: default DefaultTimeout.
	Timeout time.Duration
	// MaxEntries bounds the number of cached tokens; expired ones are
	// dropped first, then those expiring soonest. Optional: default
	// DefaultMaxEntries.
	MaxEntries int
	// Now is the clock. Optional: default time.Now.
	Now func() time.Time
	// Limiter is the controller's record of hosts that asked to wait:
	// a token request is not sent to an API host it holds back, and
	// every answer is reported to it. Optional: none.
	Limiter RateLimiter
}

// RateLimiter is what Tokens needs of a per-host backoff record
// (gitsource.HostLimiter, adapted by the caller).
type RateLimiter interface {
	// Check returns an error while host (host[:port]) is waited for.
	Check(host string) error
	// Observe records an answer of host and returns an error when it
	// asks to wait (429, a rate-limited 403, Retry-After).
	Observe(host string, status int, h http.Header) error
}

// Tokens mints and caches installation tokens. It is safe for concurrent
// use; the zero value is not usable, use NewTokens.
type Tokens struct {
	opts   Options
	flight singleflight.Group

	mu    sync.Mutex
	cache map[cacheKey]token
}

// cacheKey identifies an installation of an App and its key: a Secret
// with a new key mints a new token.
type cacheKey struct {
	apiURL         string
	id, install    int64
	privateKeyHash [sha256.Size]byte
}

func (k cacheKey) String() string {
	return fmt.Sprintf("%s|%d|%d|%x", k.apiURL, k.id, k.install, k.privateKeyHash)
}

type token struct {
	value     string
	expiresAt time.Time
}

// NewTokens returns an empty token cache.
func NewTokens(opts Options) *Tokens {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.MaxEntries <= 0 {
		opts.MaxEntries = DefaultMaxEntries
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Tokens{opts: opts, cache: map[cacheKey]token{}}
}

// Token returns a valid installation token for app, minting one when none
// is cached or the cached one expires within RefreshBefore. Concurrent
// calls for one installation share one request. Errors are ErrInvalidApp,
// ErrInvalidKey, ErrUnauthorized, a *StatusError or transport failures;
// they name the App and installation, never the key, the JWT or a token.
func (t *Tokens) Token(ctx context.Context, app App) (string, error) {
	if err := app.validate(); err != nil {
		return "", err
	}
	key := cacheKey{apiURL: app.APIURL, id: app.ID, install: app.InstallationID, privateKeyHash: sha256.Sum256(app.PrivateKey)}
	if tok, ok := t.cached(key); ok {
		return tok, nil
	}
	// The request outlives a caller that gives up, so the others waiting
	// for it still get a token; each caller waits only as long as its ctx.
	mintCtx := context.WithoutCancel(ctx)
	ch := t.flight.DoChan(key.String(), func() (any, error) {
		if tok, ok := t.cached(key); ok {
			return tok, nil
		}
		tok, err := t.mint(mintCtx, app)
		if err != nil {
			return "", err
		}
		t.store(key, tok)
		return tok.value, nil
	})
	select {
	case <-ctx.Done():
		return "", fmt.Errorf("%s: %w", app, ctx.Err())
	case res := <-ch:
		if res.Err != nil {
			return "", res.Err
		}
		return res.Val.(string), nil
	}
}

// cached returns the token of key unless it expires within RefreshBefore.
func (t *Tokens) cached(key cacheKey) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	tok, ok := t.cache[key]
	if !ok || !t.opts.Now().Add(RefreshBefore).Before(tok.expiresAt) {
		return "", false
	}
	return tok.value, true
}

// store caches tok, first dropping expired tokens and, at MaxEntries, the
// one expiring soonest.
func (t *Tokens) store(key cacheKey, tok token) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.opts.Now()
	delete(t.cache, key)
	for k, v := range t.cache {
		if !now.Before(v.expiresAt) {
			delete(t.cache, k)
		}
	}
	for len(t.cache) >= t.opts.MaxEntries {
		var oldest cacheKey
		first := true
		for k, v := range t.cache {
			if first || v.expiresAt.Before(t.cache[oldest].expiresAt) {
				oldest, first = k, false
			}
		}
		delete(t.cache, oldest)
	}
	t.cache[key] = tok
}

func appID(id int64) string { return strconv.FormatInt(id, 10) }
