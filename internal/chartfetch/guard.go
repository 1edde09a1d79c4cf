package chartfetch

import (
	"errors"
	"io"
	"net/http"
	"sync"

	"github.com/flotilla-gitops/flotilla/internal/sizelimit"
)

// sizeGuard bounds every HTTP response a client reads, for clients that
// read whole responses themselves (Helm's and oras' registry clients):
// a Content-Length over the limit is refused before the body is read,
// and a body stops at the limit while it is read. Those clients wrap
// errors as they see fit, so the guard also keeps the first *sizelimit.Error
// it returned: explain finds it without reading any message.
type sizeGuard struct {
	limit sizelimit.Limit

	mu  sync.Mutex
	err *sizelimit.Error
}

// transport returns base with g's bound on every response; a nil g
// returns base.
func (g *sizeGuard) transport(base http.RoundTripper) http.RoundTripper {
	if g == nil {
		return base
	}
	return guardTransport{g: g, base: base}
}

// explain returns the guard's error, wrapped as ErrInvalidArchive, if it
// stopped a response; else err.
func (g *sizeGuard) explain(err error) error {
	if g == nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.err != nil {
		return tooLarge(g.err)
	}
	return err
}

func (g *sizeGuard) record(err error) error {
	var se *sizelimit.Error
	if errors.As(err, &se) {
		g.mu.Lock()
		if g.err == nil {
			g.err = se
		}
		g.mu.Unlock()
	}
	return err
}

type guardTransport struct {
	g    *sizeGuard
	base http.RoundTripper
}

// RoundTrip sends req and bounds the response's body.
func (t guardTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	what := redactURL(req.URL.Redacted())
	if err := t.g.limit.Check(what, resp.ContentLength); err != nil {
		_ = resp.Body.Close() // refused unread
		return nil, t.g.record(err)
	}
	resp.Body = guardBody{ReadCloser: resp.Body, r: t.g.limit.Reader(resp.Body, what), g: t.g}
	return resp, nil
}

type guardBody struct {
	io.ReadCloser
	r io.Reader
	g *sizeGuard
}

func (b guardBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	return n, b.g.record(err)
}
