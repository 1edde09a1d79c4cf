package githubapp

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	testAppID   = 4242
	testInstall = 777
)

var (
	keyOnce sync.Once
	testKey *rsa.PrivateKey
)

func rsaKey(t *testing.T) *rsa.PrivateKey {
	t.Helper()
	keyOnce.Do(func() {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		testKey = k
	})
	return testKey
}

func pkcs1PEM(k *rsa.PrivateKey) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})
}

func pkcs8PEM(t *testing.T, k *rsa.PrivateKey) []byte {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

// fakeGitHub stands in for GitHub's token endpoint: it verifies the JWT
// against the App's public key and its claims, and answers a new token
// valid for an hour of the test's clock, or status when set.
type fakeGitHub struct {
	pub    *rsa.PublicKey
	now    func() time.Time
	status int           // answer this instead of a token when not 0
	header http.Header   // with these headers
	block  chan struct{} // when set, wait for it before answering
	mints  atomic.Int32
	jwts   []string
	mu     sync.Mutex
	errs   []error
}

func (f *fakeGitHub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f.block != nil {
		<-f.block
	}
	signed := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	f.mu.Lock()
	f.jwts = append(f.jwts, signed)
	f.mu.Unlock()
	if err := f.check(r, signed); err != nil {
		f.mu.Lock()
		f.errs = append(f.errs, err)
		f.mu.Unlock()
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	if f.status != 0 {
		for k, v := range f.header {
			w.Header()[k] = v
		}
		w.WriteHeader(f.status)
		_ = json.NewEncoder(w).Encode(map[string]string{"message": "refused " + signed})
		return
	}
	n := f.mints.Add(1)
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"token":      fmt.Sprintf("ghs_token%d", n),
		"expires_at": f.now().Add(time.Hour).UTC().Format(time.RFC3339),
	})
}

func (f *fakeGitHub) check(r *http.Request, signed string) error {
	if r.Method != http.MethodPost || r.URL.Path != fmt.Sprintf("/api/v3/app/installations/%d/access_tokens", testInstall) {
		return fmt.Errorf("unexpected %s %s", r.Method, r.URL.Path)
	}
	if r.Header.Get("Accept") != "application/vnd.github+json" || r.Header.Get("X-GitHub-Api-Version") != "2022-11-28" {
		return fmt.Errorf("headers %v", r.Header)
	}
	var claims jwt.RegisteredClaims
	_, err := jwt.ParseWithClaims(signed, &claims, func(*jwt.Token) (any, error) { return f.pub, nil },
		jwt.WithValidMethods([]string{"RS256"}), jwt.WithTimeFunc(f.now), jwt.WithIssuer(fmt.Sprint(testAppID)))
	if err != nil {
		return err
	}
	now := f.now()
	if !claims.IssuedAt.Equal(now.Add(-time.Minute).Truncate(time.Second)) ||
		!claims.ExpiresAt.Equal(now.Add(9*time.Minute).Truncate(time.Second)) {
		return fmt.Errorf("iat %v exp %v, now %v", claims.IssuedAt, claims.ExpiresAt, now)
	}
	return nil
}

// clock is a settable test clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// setup starts the fake over TLS and returns Tokens on the same clock and
// an App trusting the server's certificate.
func setup(t *testing.T) (*fakeGitHub, *clock, *Tokens, App) {
	t.Helper()
	key := rsaKey(t)
	clk := &clock{now: time.Now().Truncate(time.Second)}
	fake := &fakeGitHub{pub: &key.PublicKey, now: clk.Now}
	srv := httptest.NewTLSServer(fake)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { assert.Empty(t, fake.errs, "requests the fake GitHub refused") })
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	app := App{ID: testAppID, InstallationID: testInstall, PrivateKey: pkcs1PEM(key), APIURL: srv.URL + "/api/v3", CABundle: ca}
	return fake, clk, NewTokens(Options{Now: clk.Now, Timeout: 5 * time.Second}), app
}

func TestToken_MintsWithSignedJWT(t *testing.T) {
	tests := []struct {
		name string
		key  func(t *testing.T) []byte
	}{
		{"PKCS#1", func(t *testing.T) []byte { return pkcs1PEM(rsaKey(t)) }},
		{"PKCS#8", func(t *testing.T) []byte { return pkcs8PEM(t, rsaKey(t)) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake, _, tokens, app := setup(t)
			app.PrivateKey = tt.key(t)
			tok, err := tokens.Token(context.Background(), app)
			require.NoError(t, err)
			assert.Equal(t, "ghs_token1", tok)
			assert.Equal(t, int32(1), fake.mints.Load())
		})
	}
}

func TestToken_OneMintForManyCallers(t *testing.T) {
	fake, _, tokens, app := setup(t)
	fake.block = make(chan struct{})
	var wg sync.WaitGroup
	got := make([]string, 20)
	errs := make([]error, 20)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = tokens.Token(context.Background(), app)
		}()
	}
	close(fake.block)
	wg.Wait()
	for i := range got {
		require.NoError(t, errs[i])
		assert.Equal(t, "ghs_token1", got[i])
	}
	tok, err := tokens.Token(context.Background(), app)
	require.NoError(t, err)
	assert.Equal(t, "ghs_token1", tok)
	assert.Equal(t, int32(1), fake.mints.Load())
}

func TestToken_RefreshedBeforeExpiry(t *testing.T) {
	fake, clk, tokens, app := setup(t)
	steps := []struct {
		advance time.Duration
		want    string
	}{
		{0, "ghs_token1"},
		{54 * time.Minute, "ghs_token1"}, // 6 minutes left: cached
		{2 * time.Minute, "ghs_token2"},  // 4 minutes left: minted again
		{time.Minute, "ghs_token2"},
	}
	for _, s := range steps {
		clk.Add(s.advance)
		tok, err := tokens.Token(context.Background(), app)
		require.NoError(t, err)
		assert.Equal(t, s.want, tok)
	}
	assert.Equal(t, int32(2), fake.mints.Load())
}

func TestToken_NewKeyMintsAgain(t *testing.T) {
	fake, _, tokens, app := setup(t)
	_, err := tokens.Token(context.Background(), app)
	require.NoError(t, err)
	app.PrivateKey = pkcs8PEM(t, rsaKey(t)) // same key, other bytes: another Secret
	tok, err := tokens.Token(context.Background(), app)
	require.NoError(t, err)
	assert.Equal(t, "ghs_token2", tok)
	assert.Equal(t, int32(2), fake.mints.Load())
}

func TestToken_Refused(t *testing.T) {
	tests := []struct {
		name    string
		status  int
		header  http.Header
		wantErr error // nil: a retryable *StatusError
	}{
		{"401", http.StatusUnauthorized, nil, ErrUnauthorized},
		{"403", http.StatusForbidden, nil, ErrUnauthorized},
		{"404", http.StatusNotFound, nil, ErrUnauthorized},
		{"500", http.StatusInternalServerError, nil, nil},
		{"429", http.StatusTooManyRequests, http.Header{"Retry-After": {"30"}}, nil},
		{"403 rate limit", http.StatusForbidden, http.Header{"X-Ratelimit-Remaining": {"0"}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake, _, tokens, app := setup(t)
			fake.status, fake.header = tt.status, tt.header
			_, err := tokens.Token(context.Background(), app)
			require.Error(t, err)
			var se *StatusError
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				assert.False(t, errors.As(err, &se))
			} else {
				require.ErrorAs(t, err, &se)
				assert.Equal(t, tt.status, se.StatusCode)
				assert.NotErrorIs(t, err, ErrUnauthorized)
			}
			msg := err.Error()
			assert.Contains(t, msg, fmt.Sprintf("GitHub App %d installation %d", testAppID, testInstall))
			assert.Contains(t, msg, fmt.Sprint(tt.status))
			assert.Contains(t, msg, "refused [redacted]", "GitHub's message is quoted, the echoed JWT blanked")
			require.Len(t, fake.jwts, 1)
			assert.NotContains(t, msg, fake.jwts[0][:20])
			assert.NotContains(t, msg, "PRIVATE KEY")
			assert.NotContains(t, fmt.Sprintf("%v %+v %#v", app, app, app), "PRIVATE KEY")
		})
	}
}

func TestToken_TLS(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(*App)
		wantErr bool
	}{
		{"caBundle trusted", func(*App) {}, false},
		{"no caBundle", func(a *App) { a.CABundle = nil }, true},
		{"insecureSkipTLSVerify", func(a *App) { a.CABundle, a.InsecureSkipTLSVerify = nil, true }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, tokens, app := setup(t)
			tt.edit(&app)
			_, err := tokens.Token(context.Background(), app)
			if !tt.wantErr {
				require.NoError(t, err)
				return
			}
			var unknown x509.UnknownAuthorityError
			require.ErrorAs(t, err, &unknown)
		})
	}
}

func TestToken_InvalidApp(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(*App)
		wantErr error
	}{
		{"not a key", func(a *App) {
			a.PrivateKey = []byte("-----BEGIN RSA PRIVATE KEY-----\nbm90IGEga2V5\n-----END RSA PRIVATE KEY-----\n")
		}, ErrInvalidKey},
		{"no app ID", func(a *App) { a.ID = 0 }, ErrInvalidApp},
		{"no installation", func(a *App) { a.InstallationID = -1 }, ErrInvalidApp},
		{"no API URL", func(a *App) { a.APIURL = "" }, ErrInvalidApp},
		{"caBundle without certificates", func(a *App) { a.CABundle = []byte("junk") }, ErrInvalidApp},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake, _, tokens, app := setup(t)
			tt.edit(&app)
			_, err := tokens.Token(context.Background(), app)
			require.ErrorIs(t, err, tt.wantErr)
			assert.NotContains(t, err.Error(), "bm90IGEga2V5")
			assert.Empty(t, fake.jwts, "no request")
		})
	}
}

func TestToken_Timeout(t *testing.T) {
	fake, clk, _, app := setup(t)
	fake.block = make(chan struct{})
	defer close(fake.block)
	tokens := NewTokens(Options{Now: clk.Now, Timeout: 200 * time.Millisecond})
	_, err := tokens.Token(context.Background(), app)
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestStore_Bounded(t *testing.T) {
	clk := &clock{now: time.Now()}
	tokens := NewTokens(Options{Now: clk.Now, MaxEntries: 2})
	key := func(i int64) cacheKey { return cacheKey{apiURL: "https://api.github.com", id: 1, install: i} }
	tokens.store(key(1), token{value: "t1", expiresAt: clk.now.Add(30 * time.Minute)})
	tokens.store(key(2), token{value: "t2", expiresAt: clk.now.Add(time.Hour)})
	tokens.store(key(3), token{value: "t3", expiresAt: clk.now.Add(time.Hour)})
	assert.Len(t, tokens.cache, 2)
	assert.NotContains(t, tokens.cache, key(1), "the one expiring soonest goes")
	tokens.store(key(3), token{value: "t3b", expiresAt: clk.now.Add(time.Hour)})
	assert.Contains(t, tokens.cache, key(2), "replacing a key evicts nothing else")

	clk.Add(2 * time.Hour)
	tokens.store(key(4), token{value: "t4", expiresAt: clk.Now().Add(time.Hour)})
	assert.Equal(t, map[cacheKey]token{key(4): {value: "t4", expiresAt: clk.Now().Add(time.Hour)}}, tokens.cache, "expired tokens dropped")
}

func TestAPIURL(t *testing.T) {
	tests := []struct{ repo, want string }{
		{"https://github.com/org/repo", "https://api.github.com"},
		{"https://GitHub.com/org/repo.git", "https://api.github.com"},
		{"https://user:tok@github.com/org/repo", "https://api.github.com"},
		{"ssh://git@github.com/org/repo.git", "https://api.github.com"},
		{"git@github.com:org/repo.git", "https://api.github.com"},
		{"https://octo.ghe.com/org/repo", "https://api.octo.ghe.com"},
		{"https://ghe.example.com/org/repo", "https://ghe.example.com/api/v3"},
		{"https://127.0.0.1:8443/org/repo", "https://127.0.0.1:8443/api/v3"},
		{"http://ghe.example.com:8080/org/repo", "https://ghe.example.com:8080/api/v3"},
		{"ssh://git@ghe.example.com:2222/org/repo", "https://ghe.example.com/api/v3"},
		{"git@ghe.example.com:org/repo", "https://ghe.example.com/api/v3"},
		{"https://[::1]:8443/org/repo", "https://[::1]:8443/api/v3"},
		{"not a url", ""},
	}
	for _, tt := range tests {
		t.Run(tt.repo, func(t *testing.T) {
			assert.Equal(t, tt.want, APIURL(tt.repo))
		})
	}
}

// holdLimiter holds every host back once hold is set, and records the
// statuses observed.
type holdLimiter struct {
	hold     bool
	observed []int
}

var errHeld = errors.New("held back")

func (l *holdLimiter) Check(string) error {
	if l.hold {
		return errHeld
	}
	return nil
}

func (l *holdLimiter) Observe(_ string, status int, _ http.Header) error {
	l.observed = append(l.observed, status)
	if status == http.StatusTooManyRequests {
		return errHeld
	}
	return nil
}

func TestToken_Limiter(t *testing.T) {
	fake, clk, _, app := setup(t)
	lim := &holdLimiter{}
	tokens := NewTokens(Options{Now: clk.Now, Limiter: lim})
	fake.status = http.StatusTooManyRequests
	_, err := tokens.Token(context.Background(), app)
	require.ErrorIs(t, err, errHeld, "a 429 is reported and its verdict returned")
	assert.Equal(t, []int{http.StatusTooManyRequests}, lim.observed)

	lim.hold = true
	_, err = tokens.Token(context.Background(), app)
	require.ErrorIs(t, err, errHeld)
	assert.Len(t, fake.jwts, 1, "no request while the host is held back")
}
