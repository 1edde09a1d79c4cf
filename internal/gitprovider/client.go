package gitprovider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/flotilla-gitops/flotilla/internal/githubapp"
)

// Kind is a Git host's API flavour.
type Kind string

// The supported hosts.
const (
	GitHub Kind = "github"
	GitLab Kind = "gitlab"
	Gitea  Kind = "gitea"
)

// Valid reports whether k is a supported host.
func (k Kind) Valid() bool { return k == GitHub || k == GitLab || k == Gitea }

// maxBody bounds every response read: a page of comments with their bodies
// (GitHub allows 65,536 characters each, 100 a page) fits easily.
const maxBody = 16 << 20

// maxPages bounds the comment search: 100 pages of 100 comments.
const maxPages = 100

// defaultTimeout is the per-request timeout when the caller gives no
// client.
const defaultTimeout = 30 * time.Second

// Client talks to one repository's API on one host. It holds the token;
// it never prints it (String names the repository and the API only).
type Client struct {
	kind Kind
	api  string // API base without trailing slash
	repo string // escaped repository path in API URLs: "owner/name" or GitLab's "projects/<id>"
	// token is sent in the host's header only.
	token string
	hc    *http.Client
	now   func() time.Time
}

// For returns a client for the repository repoURL (https, http, ssh:// or
// scp-like) on a host of the given kind. apiURL "" derives the API base
// from repoURL: github.com → https://api.github.com, another GitHub host →
// https://HOST/api/v3, GitLab → https://HOST/api/v4, Gitea →
// https://HOST[/prefix]/api/v1 (http when repoURL is http). hc nil uses a
// client with a 30 s timeout. Redirects are never followed.
func For(kind Kind, repoURL, apiURL, token string, hc *http.Client) (*Client, error) {
	if !kind.Valid() {
		return nil, fmt.Errorf("%w: provider %q is not one of github, gitlab, gitea", ErrInvalid, kind)
	}
	if token == "" {
		return nil, fmt.Errorf("%w: %s: empty API token", ErrInvalid, kind)
	}
	loc, err := parseRepo(repoURL)
	if err != nil {
		return nil, err
	}
	if apiURL == "" {
		apiURL = deriveAPI(kind, loc)
	}
	if u, err := url.Parse(apiURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: %s: API URL %q is not an http(s) URL", ErrInvalid, kind, apiURL)
	}
	c := &Client{kind: kind, api: strings.TrimRight(apiURL, "/"), token: token, now: time.Now}
	if kind == GitLab {
		c.repo = "projects/" + url.PathEscape(strings.Join(loc.path, "/"))
	} else {
		n := len(loc.path)
		c.repo = "repos/" + url.PathEscape(loc.path[n-2]) + "/" + url.PathEscape(loc.path[n-1])
	}
	c.hc = noRedirects(hc)
	return c, nil
}

// String names the client's repository and API, never its token.
func (c *Client) String() string { return string(c.kind) + " " + c.api + "/" + c.repo }

// Kind returns the client's host kind.
func (c *Client) Kind() Kind { return c.kind }

func noRedirects(hc *http.Client) *http.Client {
	var cp http.Client
	if hc != nil {
		cp = *hc
	} else {
		cp.Timeout = defaultTimeout
	}
	cp.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &cp
}

// location is a repository URL taken apart.
type location struct {
	scheme string // http or https when the URL was; "" otherwise
	host   string // host[:port] for http(s), host otherwise
	path   []string
}

// parseRepo splits a repository URL into host and path segments (without
// ".git"); it needs at least owner and name.
func parseRepo(repoURL string) (location, error) {
	var loc location
	var p string
	if !strings.Contains(repoURL, "://") {
		hostPart, rest, ok := strings.Cut(repoURL, ":")
		if !ok {
			return loc, fmt.Errorf("%w: repository URL %q has no host", ErrInvalid, repoURL)
		}
		if i := strings.LastIndex(hostPart, "@"); i >= 0 {
			hostPart = hostPart[i+1:]
		}
		loc.host, p = hostPart, rest
	} else {
		u, err := url.Parse(repoURL)
		if err != nil {
			return loc, fmt.Errorf("%w: repository URL %q does not parse", ErrInvalid, repoURL)
		}
		loc.host, p = u.Hostname(), u.Path
		if u.Scheme == "http" || u.Scheme == "https" {
			loc.scheme, loc.host = u.Scheme, u.Host
		}
	}
	p = strings.TrimSuffix(strings.Trim(p, "/"), ".git")
	for _, s := range strings.Split(p, "/") {
		if s != "" {
			loc.path = append(loc.path, s)
		}
	}
	if loc.host == "" || len(loc.path) < 2 {
		return loc, fmt.Errorf("%w: repository URL %q does not name a host, an owner and a repository", ErrInvalid, repoURL)
	}
	return loc, nil
}

func deriveAPI(kind Kind, loc location) string {
	scheme := loc.scheme
	if scheme == "" {
		scheme = "https"
	}
	switch kind {
	case GitLab:
		return scheme + "://" + loc.host + "/api/v4"
	case Gitea:
		prefix := strings.Join(loc.path[:len(loc.path)-2], "/")
		if prefix != "" {
			prefix = "/" + prefix
		}
		return scheme + "://" + loc.host + prefix + "/api/v1"
	}
	if loc.scheme == "" {
		// An SSH port is not the API's.
		return githubapp.APIURL("https://" + hostOnly(loc.host) + "/x/y")
	}
	return githubapp.APIURL(scheme + "://" + loc.host + "/x/y")
}

func hostOnly(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		return host
	}
	return h
}

// do sends one request (body marshalled as JSON when not nil) and decodes
// a 2xx answer into out when not nil. It returns the response headers.
func (c *Client) do(ctx context.Context, op, method, path string, body, out any) (http.Header, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", c.kind, op, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.api+"/"+path, rd)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %s: %w", ErrInvalid, c.kind, op, err)
	}
	c.authorize(req)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s: %s: %w", c.kind, op, ctx.Err())
		}
		return nil, fmt.Errorf("%w: %s: %s: %s", ErrTransient, c.kind, op, describe(err))
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %s: reading the answer: %s", ErrTransient, c.kind, op, describe(err))
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, classify(c.kind, op, resp, message(data), c.now())
	}
	if len(data) > maxBody {
		return nil, fmt.Errorf("%w: %s: %s: answer larger than %d bytes", ErrRejected, c.kind, op, maxBody)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return nil, fmt.Errorf("%w: %s: %s: answer is not the expected JSON: %w", ErrRejected, c.kind, op, err)
		}
	}
	return resp.Header, nil
}

func (c *Client) authorize(req *http.Request) {
	req.Header.Set("User-Agent", "flotilla")
	req.Header.Set("Accept", "application/json")
	switch c.kind {
	case GitHub:
		req.Header.Set("Authorization", "Bearer "+c.token)
		req.Header.Set("Accept", "application/vnd.github+json")
		req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	case GitLab:
		req.Header.Set("PRIVATE-TOKEN", c.token)
	case Gitea:
		req.Header.Set("Authorization", "token "+c.token)
	}
}

// describe keeps a transport error's cause without its URL (which names
// no token, but the cause is what matters).
func describe(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return err.Error()
}

// message extracts the host's explanation from an error body, bounded.
func message(data []byte) string {
	var m struct {
		Message any `json:"message"`
		Error   any `json:"error"`
	}
	if json.Unmarshal(data, &m) != nil {
		return ""
	}
	s := ""
	switch {
	case m.Message != nil:
		s = fmt.Sprint(m.Message)
	case m.Error != nil:
		s = fmt.Sprint(m.Error)
	}
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
