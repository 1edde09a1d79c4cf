package codec

import (
	"crypto/subtle"
	"net"
	"net/http"
	"slices"
	"strings"

	"go.temporal.io/sdk/converter"
)

// MaxRequestBytes bounds the body of one encode or decode request (the
// Temporal UI sends the payloads of one event or query at a time).
const MaxRequestBytes = 32 << 20

// corsAllowHeaders are the request headers the Temporal UI sends to a codec
// endpoint.
const corsAllowHeaders = "Authorization, Authorization-Extras, Content-Type, X-Namespace"

// HandlerOptions configures Handler.
type HandlerOptions struct {
	// Token is the bearer token every request but a CORS preflight must
	// carry ("Authorization: Bearer <token>"). Optional: default none, and
	// then only TokenlessOrigin's requests are served.
	Token string
	// AllowedOrigins are the browser origins ("https://temporal.example.com",
	// scheme://host[:port], no path) that may call the endpoint from their
	// pages, such as the Temporal UI's; "*" allows any. A request carrying
	// an Origin header not listed gets 403. Optional: default none, which
	// serves only clients that send no Origin (CLIs, scripts).
	AllowedOrigins []string
	// AllowCredentials answers allowed origins with
	// Access-Control-Allow-Credentials, for a UI whose codec setting
	// includeCredentials sends cookies. Optional: default false.
	AllowCredentials bool
	// TokenlessOrigin serves, without a token, the requests that come from
	// a loopback address with exactly this Origin header, and allows that
	// origin. It exists for a UI on the same host that cannot send a token
	// (the embedded dev UI has no login). A local process can forge the
	// header, so set it only where every local user may read the payloads.
	// Optional: default none.
	TokenlessOrigin string
}

// Handler serves c, with Compression inside it, at ".../encode" and
// ".../decode" under any prefix, as
// converter.NewPayloadCodecHTTPHandler does (POST of a JSON
// {"payloads": [...]} in protojson, answered in kind), behind CORS and
// bearer-token authentication. A CORS preflight needs no token; a request
// without a valid token gets 401 unless TokenlessOrigin admits it.
func Handler(c converter.PayloadCodec, opts HandlerOptions) http.Handler {
	h := &handler{opts: opts, next: converter.NewPayloadCodecHTTPHandler(c, Compression)}
	if opts.TokenlessOrigin != "" {
		h.opts.AllowedOrigins = append(slices.Clone(opts.AllowedOrigins), opts.TokenlessOrigin)
	}
	return h
}

type handler struct {
	opts HandlerOptions
	next http.Handler
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	origin := r.Header.Get("Origin")
	if origin != "" {
		w.Header().Add("Vary", "Origin")
		if !h.allowed(origin) {
			http.Error(w, "origin not allowed", http.StatusForbidden)
			return
		}
		w.Header().Set("Access-Control-Allow-Origin", origin)
		if h.opts.AllowCredentials {
			w.Header().Set("Access-Control-Allow-Credentials", "true")
		}
	}
	if r.Method == http.MethodOptions {
		// A preflight carries no credentials by design; answer what the
		// real request may use.
		w.Header().Set("Access-Control-Allow-Methods", "POST, OPTIONS")
		w.Header().Set("Access-Control-Allow-Headers", corsAllowHeaders)
		w.Header().Set("Access-Control-Max-Age", "600")
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if !h.authorized(r, origin) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="flotilla-codec"`)
		http.Error(w, "missing or invalid bearer token", http.StatusUnauthorized)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, MaxRequestBytes)
	h.next.ServeHTTP(w, r)
}

func (h *handler) allowed(origin string) bool {
	return slices.Contains(h.opts.AllowedOrigins, "*") || slices.Contains(h.opts.AllowedOrigins, origin)
}

func (h *handler) authorized(r *http.Request, origin string) bool {
	if h.opts.Token != "" {
		auth := r.Header.Get("Authorization")
		const scheme = "bearer "
		if len(auth) > len(scheme) && strings.EqualFold(auth[:len(scheme)], scheme) &&
			subtle.ConstantTimeCompare([]byte(auth[len(scheme):]), []byte(h.opts.Token)) == 1 {
			return true
		}
	}
	return h.opts.TokenlessOrigin != "" && origin == h.opts.TokenlessOrigin && fromLoopback(r)
}

// fromLoopback reports whether r's peer is a loopback address.
func fromLoopback(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
