package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/flotilla-gitops/flotilla/internal/api"
)

// Defaults of Config.
const (
	DefaultMaxBody      = 10 << 20
	DefaultDedupeWindow = time.Hour
	// DefaultMaxInFlight bounds deliveries read and handled at once (so
	// at most this many bodies are in memory); more are answered 429
	// before their body is read, so a flood cannot exhaust the
	// controller.
	DefaultMaxInFlight = 64
	// maxSeen bounds the deduplication memory; the oldest entries go first.
	maxSeen = 50_000
)

// Target is a GitRepo a delivery may concern.
type Target struct {
	Namespace, Name  string
	Branch, Revision string
	// WebhookSecret names a Secret in Namespace whose key for the
	// provider authenticates deliveries for this GitRepo instead of the
	// global secret.
	WebhookSecret string
}

func (t Target) String() string { return t.Namespace + "/" + t.Name }

// Config wires a Receiver to the GitRepos it serves.
type Config struct {
	// Targets returns the GitRepos whose FlotillaRepoURL search
	// attribute is one of keys: the payload's repository keys (RepoKey)
	// and its URLs as sent.
	Targets func(ctx context.Context, keys []string) ([]Target, error)
	// Signal durably tells t that change was pushed; authenticated says
	// whether a secret vouched for the delivery.
	Signal func(ctx context.Context, t Target, ev *Event, change Change, authenticated bool) error
	// Preview durably tells t's preview of a pull request about ev (a
	// Kind PR event whose base branch t follows); skip says why t does
	// not preview it (previews not enabled). Optional: without it pull
	// request events are ignored like unknown events.
	Preview func(ctx context.Context, t Target, ev *Event, authenticated bool) (skip string, err error)
	// GlobalSecrets returns the global secret of each provider that has
	// one. Once any is configured, a provider without one (and without a
	// GitRepo webhookSecret) is refused: a sender cannot dodge the secret
	// by claiming another provider.
	GlobalSecrets func() (map[Provider]Secret, error)
	// RepoSecret returns the provider's key of the Secret namespace/name.
	RepoSecret func(namespace, name string, p Provider) (Secret, error)
	// RequireSignature rejects deliveries no secret applies to.
	RequireSignature bool
	// MaxBody caps a delivery's body (DefaultMaxBody when 0).
	MaxBody int64
	// DedupeWindow is how long a delivery ID is remembered
	// (DefaultDedupeWindow when 0).
	DedupeWindow time.Duration
	// MaxInFlight bounds deliveries read and handled at once, bodies
	// included (DefaultMaxInFlight when 0).
	MaxInFlight int
	Logger      *zap.Logger
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Receiver is the http.Handler of Git webhooks: at "/" and "/webhooks"
// the provider is detected from the headers, at "/webhooks/<provider>" it
// is named.
type Receiver struct {
	cfg      Config
	inFlight chan struct{}

	mu      sync.Mutex
	seen    map[string]time.Time // provider/delivery → when it was handled
	order   []string             // seen's keys, oldest first
	unknown map[string]bool      // provider/event names already logged
}

// NewReceiver returns a Receiver; Targets and Signal are required.
func NewReceiver(cfg Config) *Receiver {
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.DedupeWindow <= 0 {
		cfg.DedupeWindow = DefaultDedupeWindow
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = DefaultMaxInFlight
	}
	if cfg.GlobalSecrets == nil {
		cfg.GlobalSecrets = func() (map[Provider]Secret, error) { return nil, nil }
	}
	if cfg.RepoSecret == nil {
		cfg.RepoSecret = func(ns, name string, _ Provider) (Secret, error) {
			return Secret{}, fmt.Errorf("secret %s/%s: no secret store", ns, name)
		}
	}
	return &Receiver{cfg: cfg, inFlight: make(chan struct{}, cfg.MaxInFlight), seen: map[string]time.Time{}, unknown: map[string]bool{}}
}

// Response is the JSON body of a handled delivery, so the host's delivery
// log shows what the push did.
type Response struct {
	Provider  Provider   `json:"provider"`
	Event     string     `json:"event"`
	Delivery  string     `json:"delivery,omitempty"`
	Duplicate bool       `json:"duplicate,omitempty"`
	Signalled []Signaled `json:"signalled"`
	Skipped   []Skip     `json:"skipped,omitempty"`
	Message   string     `json:"message,omitempty"`
}

// Signaled is a GitRepo told about a push.
type Signaled struct {
	GitRepo string `json:"gitRepo"`
	Ref     string `json:"ref"`
	Commit  string `json:"commit"`
}

// Skip is a GitRepo of the repository the push did not concern.
type Skip struct {
	GitRepo string `json:"gitRepo"`
	Reason  string `json:"reason"`
}

func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	start := time.Now()
	p, ok := providerOf(req)
	if !ok {
		http.NotFound(w, req)
		return
	}
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "webhooks are POSTed", http.StatusMethodNotAllowed)
		return
	}
	// The slot is taken before any of the body is read, so at most
	// MaxInFlight bodies (of MaxBody each) are in memory at once; a slow
	// sender holds its slot until the server's read timeout.
	select {
	case r.inFlight <- struct{}{}:
		defer func() { <-r.inFlight }()
	default:
		w.Header().Set("Retry-After", "1")
		http.Error(w, "too many deliveries at once", http.StatusTooManyRequests)
		return
	}
	if p == "" {
		if p = Detect(req.Header); p == "" {
			http.Error(w, "no Git provider's event header (X-GitHub-Event, X-Gitlab-Event, X-Gitea-Event, X-Gogs-Event, X-Event-Key, X-Vss-Activityid); or POST to /webhooks/<provider>", http.StatusBadRequest)
			return
		}
	}
	body, ok := r.readBody(w, req)
	if !ok {
		return
	}
	ev, err := Parse(p, req.Header, body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	log := r.cfg.Logger.With(zap.String("provider", string(p)), zap.String("event", ev.Name), zap.String("delivery", ev.Delivery))
	if ev.Kind == Unknown || (ev.Kind == PR && r.cfg.Preview == nil) {
		if r.firstUnknown(p, ev.Name) {
			log.Info("Ignoring webhook event (logged once per provider and event)")
		}
		w.WriteHeader(http.StatusNoContent)
		return
	}
	status, resp := r.handle(req.Context(), log, req.Header, body, &ev)
	if status == http.StatusUnauthorized {
		http.Error(w, http.StatusText(status), status)
		return
	}
	log.Info("Webhook delivery", zap.Int("status", status), zap.Strings("repo", ev.RepoURLs),
		zap.Int("signalled", len(resp.Signalled)), zap.Duration("took", time.Since(start)))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(resp) // the sender hung up: nothing to do
}

// readBody reads the request's body, of at most MaxBody bytes. When it
// cannot, it answers the request and returns false.
func (r *Receiver) readBody(w http.ResponseWriter, req *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, r.cfg.MaxBody))
	if err == nil {
		return body, true
	}
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		http.Error(w, fmt.Sprintf("body over %d bytes", r.cfg.MaxBody), http.StatusRequestEntityTooLarge)
	} else {
		http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
	}
	return nil, false
}

// providerOf reads the provider from the path: "" for detection from the
// headers, false for a path that is not the receiver's.
func providerOf(req *http.Request) (Provider, bool) {
	path := strings.TrimSuffix(req.URL.Path, "/")
	switch path {
	case "", "/webhooks":
		return "", true
	}
	name, ok := strings.CutPrefix(path, "/webhooks/")
	if !ok {
		return "", false
	}
	return Known(name)
}

// Known returns the provider named name, if it is one of Providers.
func Known(name string) (Provider, bool) {
	for _, p := range Providers {
		if string(p) == name {
			return p, true
		}
	}
	return "", false
}

func (r *Receiver) handle(ctx context.Context, log *zap.Logger, h http.Header, body []byte, ev *Event) (int, Response) {
	resp := Response{Provider: ev.Provider, Event: ev.Name, Delivery: ev.Delivery, Signalled: []Signaled{}}
	gate, err := r.admit(h, body, ev)
	if err != nil {
		log.Error("Cannot read the global webhook secrets", zap.Error(err))
		resp.Message = "cannot read the webhook secrets; retry"
		return http.StatusServiceUnavailable, resp
	}
	if gate.refused {
		log.Warn("Refused webhook delivery before any lookup: no well-formed signature, or the global secret refused it",
			zap.Bool("signed", Signed(ev.Provider, h)))
		return http.StatusUnauthorized, resp
	}
	targets, err := r.targets(ctx, ev)
	if err != nil {
		log.Error("Cannot list the GitRepos of a webhook's repository", zap.Error(err))
		resp.Message = "cannot list GitRepos; retry"
		return http.StatusServiceUnavailable, resp
	}
	authed, authenticated := r.authenticate(log, h, body, ev, targets, gate)
	if authed == nil {
		return http.StatusUnauthorized, resp
	}
	if ev.Kind == Ping {
		resp.Message = "pong"
		return http.StatusOK, resp
	}
	if len(authed) > 0 && !r.reserve(ev) {
		resp.Duplicate, resp.Message = true, "delivery already handled"
		return http.StatusOK, resp
	}
	if ev.Kind == PR {
		return r.previews(ctx, log, ev, authed, authenticated, resp)
	}
	for _, t := range authed {
		change, reason := match(t, ev)
		if reason != "" {
			resp.Skipped = append(resp.Skipped, Skip{GitRepo: t.String(), Reason: reason})
			continue
		}
		if err := r.cfg.Signal(ctx, t, ev, change, authenticated[t.String()]); err != nil {
			r.release(ev)
			log.Error("Cannot signal GitRepo", zap.Stringer("gitrepo", t), zap.Error(err))
			resp.Message = "cannot signal GitRepo " + t.String() + "; retry"
			return http.StatusServiceUnavailable, resp
		}
		resp.Signalled = append(resp.Signalled, Signaled{GitRepo: t.String(), Ref: change.Ref, Commit: change.Commit})
	}
	if len(targets) == 0 {
		resp.Message = "no GitRepo watches " + strings.Join(ev.RepoURLs, ", ")
	}
	return http.StatusAccepted, resp
}

// gate is what a delivery proved before anything was looked up for it.
type gate struct {
	// required: a secret applies to every delivery (one is configured or
	// --webhook-require-signature).
	required bool
	// global is the provider's global secret, if it has one; byGlobal
	// says whether it verified the delivery.
	global   Secret
	byGlobal bool
	// refused: the delivery is refused before any lookup.
	refused bool
}

// admit checks a delivery against what needs no lookup, before any
// GitRepo or Secret is read for it: once a secret applies, a delivery
// without a well-formed credential for its provider is refused; one the
// provider's global secret verifies needs nothing more; one it does not
// verify can only be for a GitRepo whose own webhookSecret replaces the
// global secret (checked by authenticate, after the lookup). Without any
// secret configured and without RequireSignature, deliveries are
// unauthenticated by configuration: they only make GitRepos check their
// remote.
func (r *Receiver) admit(h http.Header, body []byte, ev *Event) (gate, error) {
	globals, err := r.cfg.GlobalSecrets()
	if err != nil {
		return gate{}, err
	}
	g := gate{global: globals[ev.Provider], required: r.cfg.RequireSignature || len(globals) > 0}
	if !g.required {
		g.byGlobal = Verify(ev.Provider, h, body, g.global) // false: there is none
		return g, nil
	}
	if !WellFormed(ev.Provider, h) {
		g.refused = true
		return g, nil
	}
	g.byGlobal = Verify(ev.Provider, h, body, g.global)
	return g, nil
}

// targets returns the GitRepos of the event's repository, sorted, each
// once.
func (r *Receiver) targets(ctx context.Context, ev *Event) ([]Target, error) {
	var keys []string
	seen := map[string]bool{}
	add := func(k string) {
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	for _, u := range ev.RepoURLs {
		if k, err := RepoKey(u); err == nil {
			add(k)
		}
	}
	if len(keys) == 0 {
		return nil, nil
	}
	// GitRepo workflows started by older versions may carry the URL as
	// written.
	for _, u := range ev.RepoURLs {
		add(u)
	}
	ts, err := r.cfg.Targets(ctx, keys)
	if err != nil {
		return nil, err
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].String() < ts[j].String() })
	out := ts[:0]
	for i, t := range ts {
		if i == 0 || t.String() != ts[i-1].String() {
			out = append(out, t)
		}
	}
	return out, nil
}

// authenticate returns the targets the delivery is authenticated for, an
// empty non-nil slice when it is authenticated but names no GitRepo, and
// nil when it must be refused; and which targets a secret vouched for. A
// GitRepo's own webhookSecret replaces the global secret; with no secret
// at all the delivery is accepted unless one is required.
func (r *Receiver) authenticate(log *zap.Logger, h http.Header, body []byte, ev *Event, targets []Target,
	g gate) ([]Target, map[string]bool) {
	vouched := map[string]bool{}
	if len(targets) == 0 {
		if g.required && !g.byGlobal {
			log.Warn("Refused webhook delivery: bad or missing signature", zap.Bool("signed", Signed(ev.Provider, h)))
			return nil, nil
		}
		return []Target{}, vouched
	}
	var ok []Target
	for _, t := range targets {
		passed, withSecret := g.byGlobal, !g.global.IsZero()
		if t.WebhookSecret != "" {
			s, err := r.repoSecret(log, t, ev.Provider)
			if err != nil {
				continue
			}
			passed, withSecret = Verify(ev.Provider, h, body, s), true
		}
		if !withSecret {
			passed = !g.required
		}
		if !passed {
			log.Warn("Refused webhook delivery for GitRepo: bad or missing signature", zap.Stringer("gitrepo", t),
				zap.Bool("signed", Signed(ev.Provider, h)))
			continue
		}
		vouched[t.String()] = withSecret
		ok = append(ok, t)
	}
	return ok, vouched
}

// repoSecret returns the provider's key of t's webhookSecret; it logs why
// there is none.
func (r *Receiver) repoSecret(log *zap.Logger, t Target, p Provider) (Secret, error) {
	s, err := r.cfg.RepoSecret(t.Namespace, t.WebhookSecret, p)
	if err != nil {
		log.Error("Cannot read the GitRepo's webhookSecret", zap.Stringer("gitrepo", t),
			zap.String("secret", t.WebhookSecret), zap.Error(err))
		return Secret{}, err
	}
	if s.IsZero() {
		log.Error("The GitRepo's webhookSecret has no key for this provider", zap.Stringer("gitrepo", t),
			zap.String("secret", t.WebhookSecret), zap.String("key", string(p)))
		return Secret{}, errNoProviderKey
	}
	return s, nil
}

// errNoProviderKey means a GitRepo's webhookSecret has no key for the
// delivery's provider.
var errNoProviderKey = errors.New("webhookSecret has no key for the provider")

// match returns the change of the event that t follows, or why none is.
func match(t Target, ev *Event) (Change, string) {
	if t.Revision != "" {
		return Change{}, "pinned to revision " + t.Revision
	}
	branch := strings.TrimPrefix(t.Branch, "refs/heads/")
	if branch == "" {
		branch = ev.DefaultBranch
	}
	var refs []string
	for _, c := range ev.Changes {
		refs = append(refs, c.Ref)
		name, isBranch := strings.CutPrefix(c.Ref, "refs/heads/")
		if !isBranch || (branch != "" && name != branch) {
			continue
		}
		if c.Deleted {
			if branch == "" {
				continue // some other branch went away; HEAD's may be among the rest
			}
			return Change{}, "branch " + name + " was deleted"
		}
		// No branch and no default branch named: the GitRepo follows the
		// remote's HEAD, which its workflow resolves.
		return c, ""
	}
	follows := "the default branch"
	if branch != "" {
		follows = "branch " + branch
	}
	return Change{}, "follows " + follows + "; push changed " + strings.Join(refs, ", ")
}

// reserve records the delivery and reports whether it is new. Deliveries
// without an ID are always new.
func (r *Receiver) reserve(ev *Event) bool {
	if ev.Delivery == "" {
		return true
	}
	key := string(ev.Provider) + "/" + ev.Delivery
	now := r.cfg.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	for len(r.order) > 0 {
		oldest := r.order[0]
		if t, ok := r.seen[oldest]; ok && now.Sub(t) < r.cfg.DedupeWindow && len(r.order) < maxSeen {
			break
		}
		delete(r.seen, oldest)
		r.order = r.order[1:]
	}
	if t, ok := r.seen[key]; ok && now.Sub(t) < r.cfg.DedupeWindow {
		return false
	}
	r.seen[key] = now
	r.order = append(r.order, key)
	return true
}

// release forgets a delivery that failed, so its redelivery is handled.
func (r *Receiver) release(ev *Event) {
	if ev.Delivery == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.seen, string(ev.Provider)+"/"+ev.Delivery)
}

func (r *Receiver) firstUnknown(p Provider, name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	key := string(p) + "/" + name
	if r.unknown[key] || len(r.unknown) >= 1000 {
		return false
	}
	r.unknown[key] = true
	return true
}

// SecretFor picks provider p's secret out of a webhook Secret's keys
// (Fleet's names): github, gitlab, gitea (else gogs), gogs, bitbucket,
// bitbucket-server, azure-username and azure-password.
func SecretFor(p Provider, data map[string]string) Secret {
	switch p {
	case AzureDevOps:
		return Secret{Username: data["azure-username"], Password: data["azure-password"]}
	case Gitea:
		if s := data["gitea"]; s != "" {
			return Secret{Token: s}
		}
		return Secret{Token: data["gogs"]}
	}
	return Secret{Token: data[string(p)]}
}

// DirSecrets returns a GlobalSecrets reading dir/<key> files (a mounted
// Kubernetes Secret) on every call, so a rotated secret applies at once.
// A missing file is no secret; trailing newlines are trimmed.
func DirSecrets(dir string) func() (map[Provider]Secret, error) {
	return func() (map[Provider]Secret, error) {
		data := map[string]string{}
		for _, k := range api.WebhookSecretKeys {
			b, err := os.ReadFile(filepath.Join(dir, k))
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("webhook secret %s: %w", k, err)
			}
			data[k] = strings.TrimRight(string(b), "\r\n")
		}
		out := map[Provider]Secret{}
		for _, p := range Providers {
			if s := SecretFor(p, data); !s.IsZero() {
				out[p] = s
			}
		}
		return out, nil
	}
}
