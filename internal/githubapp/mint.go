package githubapp

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/flotilla-gitops/flotilla/internal/tlsroots"
	"github.com/golang-jwt/jwt/v5"
)

// GitHub's limits on the App JWT: issued at most 60 s in the past (clock
// drift), valid for at most 10 minutes.
const (
	jwtBackdate = 60 * time.Second
	jwtLifetime = 9 * time.Minute
	// maxBody bounds what is read of an answer.
	maxBody = 1 << 20
	// maxMessage bounds GitHub's explanation quoted in errors.
	maxMessage = 200
)

// accessToken is the token endpoint's answer (and its error body's
// message).
type accessToken struct {
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expires_at"`
	Message   string    `json:"message"`
}

// mint exchanges a fresh JWT for an installation token.
func (t *Tokens) mint(ctx context.Context, app App) (token, error) {
	signed, err := t.jwt(app)
	if err != nil {
		return token{}, err
	}
	client, err := httpClient(app, t.opts.Timeout)
	if err != nil {
		return token{}, err
	}
	defer client.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, t.opts.Timeout)
	defer cancel()
	endpoint := fmt.Sprintf("%s/app/installations/%d/access_tokens", strings.TrimSuffix(app.APIURL, "/"), app.InstallationID)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, http.NoBody)
	if err != nil {
		return token{}, fmt.Errorf("%w: %s: API URL: %w", ErrInvalidApp, app, err)
	}
	req.Header.Set("Authorization", "Bearer "+signed)
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	if lim := t.opts.Limiter; lim != nil {
		if err := lim.Check(req.URL.Host); err != nil {
			return token{}, fmt.Errorf("%s: %w", app, err)
		}
	}
	resp, err := client.Do(req)
	if err != nil {
		// A *url.Error names the endpoint; the JWT is in a header only.
		return token{}, fmt.Errorf("%s: request an installation token: %w", app, err)
	}
	defer func() { _ = resp.Body.Close() }() // read fully below; nothing to report
	if lim := t.opts.Limiter; lim != nil {
		if err := lim.Observe(req.URL.Host, resp.StatusCode, resp.Header); err != nil {
			return token{}, fmt.Errorf("%s: %w", app, err)
		}
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return token{}, fmt.Errorf("%s: read the token endpoint's answer: %w", app, err)
	}
	return parseAnswer(app, resp, body, signed)
}

// jwt signs the App's JWT: iss is the App ID, iat a minute back for clock
// drift, exp nine minutes ahead.
func (t *Tokens) jwt(app App) (string, error) {
	key, err := jwt.ParseRSAPrivateKeyFromPEM(app.PrivateKey)
	if err != nil {
		// jwt's parse errors describe the format, never the key's bytes.
		return "", fmt.Errorf("%s: %w", app, ErrInvalidKey)
	}
	now := t.opts.Now()
	claims := jwt.RegisteredClaims{
		Issuer:    appID(app.ID),
		IssuedAt:  jwt.NewNumericDate(now.Add(-jwtBackdate)),
		ExpiresAt: jwt.NewNumericDate(now.Add(jwtLifetime)),
	}
	signed, err := jwt.NewWithClaims(jwt.SigningMethodRS256, claims).SignedString(key)
	if err != nil {
		return "", fmt.Errorf("%s: sign the JWT: %w", app, err)
	}
	return signed, nil
}

// parseAnswer reads the token endpoint's answer. 401, 403 and 404 are
// ErrUnauthorized, unless the 403 is GitHub's rate limit (no requests
// remaining, or Retry-After); other failures are a *StatusError. GitHub's
// message is quoted, bounded and with the JWT blanked in case a server
// echoes it.
func parseAnswer(app App, resp *http.Response, body []byte, signed string) (token, error) {
	status := resp.StatusCode
	rateLimited := resp.Header.Get("X-RateLimit-Remaining") == "0" || resp.Header.Get("Retry-After") != ""
	var ans accessToken
	jsonErr := json.Unmarshal(body, &ans)
	msg := strings.ReplaceAll(ans.Message, signed, "[redacted]") // before bounding: no prefix of it left
	if len(msg) > maxMessage {
		msg = msg[:maxMessage] + "…"
	}
	switch {
	case status == http.StatusUnauthorized || status == http.StatusNotFound || status == http.StatusForbidden && !rateLimited:
		return token{}, fmt.Errorf("%s: %w: HTTP %d: %s", app, ErrUnauthorized, status, orDefault(msg, http.StatusText(status)))
	case status < 200 || status > 299:
		return token{}, &StatusError{App: app.String(), StatusCode: status, Message: msg}
	case jsonErr != nil || ans.Token == "" || ans.ExpiresAt.IsZero():
		return token{}, &StatusError{App: app.String(), StatusCode: status, Message: "the answer has no token and expires_at"}
	}
	return token{value: ans.Token, expiresAt: ans.ExpiresAt}, nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// httpClient returns a client trusting the system's roots and app's
// CABundle (or nothing, with InsecureSkipTLSVerify), through the
// environment's proxy.
func httpClient(app App, timeout time.Duration) (*http.Client, error) {
	tr, ok := http.DefaultTransport.(*http.Transport)
	if !ok {
		return nil, errors.New("http.DefaultTransport is not an *http.Transport")
	}
	tr = tr.Clone()
	// InsecureSkipVerify is the GitRepo's insecureSkipTLSVerify.
	tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: app.InsecureSkipTLSVerify}
	if len(app.CABundle) > 0 {
		pool, ok := tlsroots.Pool(bytes.TrimSpace(app.CABundle))
		if !ok {
			return nil, fmt.Errorf("%w: %s: caBundle holds no PEM certificate", ErrInvalidApp, app)
		}
		tr.TLSClientConfig.RootCAs = pool
	}
	return &http.Client{Transport: tr, Timeout: timeout}, nil
}
