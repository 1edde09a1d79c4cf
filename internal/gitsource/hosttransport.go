package gitsource

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/flotilla-gitops/flotilla/internal/tlsroots"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/client"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
)

// go-git picks the transport of a URL from a process-wide table; this
// package's http and https entry sends every request through the host
// limiter of the request's context (hostLimiter). Without one in the
// context the limiter is DefaultHostLimiter, so other go-git users in the
// process share the record.
func init() {
	t := &limitedHTTP{clients: map[tlsOptions]transport.Transport{}}
	client.InstallProtocol("http", t)
	client.InstallProtocol("https", t)
}

// maxTLSClients bounds limitedHTTP's clients; past it they are dropped
// and rebuilt on use.
const maxTLSClients = 64

// limitedHTTP is go-git's smart-HTTP transport over a RoundTripper that
// consults the host limiter. go-git applies an endpoint's CA bundle,
// insecure-TLS and proxy options only to a bare *http.Transport, which
// would bypass the limiter, so limitedHTTP applies them itself: one
// client per set of options, the options cleared from the endpoint go-git
// sees.
type limitedHTTP struct {
	mu      sync.Mutex
	clients map[tlsOptions]transport.Transport
}

// tlsOptions are the endpoint options that need their own http.Transport.
type tlsOptions struct {
	caBundle, clientCert, clientKey string
	insecure                        bool
	proxy                           string
}

func (t *limitedHTTP) NewUploadPackSession(ep *transport.Endpoint, auth transport.AuthMethod) (transport.UploadPackSession, error) {
	c, plain, err := t.client(ep)
	if err != nil {
		return nil, err
	}
	return c.NewUploadPackSession(plain, auth)
}

func (t *limitedHTTP) NewReceivePackSession(ep *transport.Endpoint, auth transport.AuthMethod) (transport.ReceivePackSession, error) {
	c, plain, err := t.client(ep)
	if err != nil {
		return nil, err
	}
	return c.NewReceivePackSession(plain, auth)
}

// client returns the go-git client for ep's options and ep without them.
func (t *limitedHTTP) client(ep *transport.Endpoint) (transport.Transport, *transport.Endpoint, error) {
	opts := tlsOptions{
		caBundle: string(ep.CaBundle), clientCert: string(ep.ClientCert), clientKey: string(ep.ClientKey),
		insecure: ep.InsecureSkipTLS,
	}
	if ep.Proxy.URL != "" {
		u, err := ep.Proxy.FullURL()
		if err != nil {
			return nil, nil, err
		}
		opts.proxy = u.String()
	}
	plain := *ep
	plain.CaBundle, plain.ClientCert, plain.ClientKey, plain.InsecureSkipTLS = nil, nil, nil, false
	plain.Proxy = transport.ProxyOptions{}

	t.mu.Lock()
	defer t.mu.Unlock()
	if c, ok := t.clients[opts]; ok {
		return c, &plain, nil
	}
	base, err := opts.transport()
	if err != nil {
		return nil, nil, err
	}
	if len(t.clients) >= maxTLSClients {
		clear(t.clients)
	}
	c := githttp.NewClient(&http.Client{Transport: LimitTransport(base)})
	t.clients[opts] = c
	return c, &plain, nil
}

// transport is http.DefaultTransport with the options applied, as go-git
// applies them.
func (o tlsOptions) transport() (*http.Transport, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if o.caBundle == "" && o.clientCert == "" && !o.insecure && o.proxy == "" {
		return tr, nil
	}
	if tr.TLSClientConfig == nil {
		tr.TLSClientConfig = &tls.Config{}
	}
	tr.TLSClientConfig.InsecureSkipVerify = o.insecure //nolint:gosec // the GitRepo's insecureSkipTLSVerify
	if o.caBundle != "" {
		// spec.caBundle was validated as PEM certificates (api).
		tr.TLSClientConfig.RootCAs, _ = tlsroots.Pool([]byte(o.caBundle))
	}
	if o.clientCert != "" && o.clientKey != "" {
		cert, err := tls.X509KeyPair([]byte(o.clientCert), []byte(o.clientKey))
		if err != nil {
			return nil, fmt.Errorf("git client certificate: %w", err)
		}
		tr.TLSClientConfig.Certificates = []tls.Certificate{cert}
	}
	if o.proxy != "" {
		u, err := url.Parse(o.proxy)
		if err != nil {
			return nil, fmt.Errorf("git proxy URL: %w", err)
		}
		tr.Proxy = http.ProxyURL(u)
	}
	return tr, nil
}

// LimitTransport wraps base so that its requests are checked against and
// recorded in the host limiter of their context (DefaultHostLimiter
// without one), as this package's Git requests are: a request to a host
// that asked to wait fails unsent with a *RateLimitedError, as does a
// response asking to wait. For other HTTP clients of Git hosts, e.g. a
// GitHub App's token requests to the host's API.
func LimitTransport(base http.RoundTripper) http.RoundTripper {
	return &limitedRoundTripper{base: base}
}

// limitedRoundTripper refuses a request, unsent, while its host is waited
// for, and turns a response that asks to wait into a *RateLimitedError
// (which go-git returns, wrapped, from ls-remote and fetch).
type limitedRoundTripper struct {
	base http.RoundTripper
}

func (rt *limitedRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	l, host := hostLimiter(req.Context()), hostKey(req.URL)
	if err := l.Check(host); err != nil {
		return nil, err
	}
	res, err := rt.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if rl := l.Observe(host, res.StatusCode, res.Header); rl != nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 4096))
		_ = res.Body.Close()
		return nil, rl
	}
	return res, nil
}

// hostKey is u's host, lower-case, with the port unless it is the
// scheme's default.
func hostKey(u *url.URL) string {
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if port == "" || (u.Scheme == "https" && port == "443") || (u.Scheme == "http" && port == "80") {
		if strings.Contains(host, ":") {
			return "[" + host + "]"
		}
		return host
	}
	return net.JoinHostPort(host, port)
}
