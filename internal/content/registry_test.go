package content_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/registry/remote"

	"github.com/flotilla-gitops/flotilla/internal/bundle"
	"github.com/flotilla-gitops/flotilla/internal/content"
)

// recorder serves a registry and records the requests it gets.
type recorder struct {
	next http.Handler
	mu   sync.Mutex
	reqs []string // "METHOD /path"
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec.mu.Lock()
	rec.reqs = append(rec.reqs, r.Method+" "+r.URL.Path)
	rec.mu.Unlock()
	rec.next.ServeHTTP(w, r)
}

// requests returns the recorded requests and forgets them.
func (rec *recorder) requests() []string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	reqs := rec.reqs
	rec.reqs = nil
	return reqs
}

// count returns how many of reqs have the method and contain part.
func count(reqs []string, method, part string) int {
	n := 0
	for _, r := range reqs {
		if strings.HasPrefix(r, method+" ") && strings.Contains(r, part) {
			n++
		}
	}
	return n
}

// newRegistryServer starts an in-memory OCI registry on 127.0.0.1 behind
// wrap (which may be nil) and returns its request recorder and address.
func newRegistryServer(t *testing.T, tls bool, wrap func(http.Handler) http.Handler) (*recorder, *httptest.Server) {
	t.Helper()
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	if wrap != nil {
		h = wrap(h)
	}
	rec := &recorder{next: h}
	srv := httptest.NewUnstartedServer(rec)
	// Handshake failures are expected in the TLS tests.
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	if tls {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return rec, srv
}

func repoURL(srv *httptest.Server) string {
	return "oci://" + srv.Listener.Addr().String() + "/flotilla/content"
}

func newRegistry(t *testing.T, opts content.RegistryOptions) *content.Registry {
	t.Helper()
	r, err := content.NewRegistry(opts)
	require.NoError(t, err)
	return r
}

// plainRegistry starts a plain-HTTP registry and returns its recorder and
// a factory of clients for it.
func plainRegistry(t *testing.T) (*recorder, func() *content.Registry) {
	t.Helper()
	rec, srv := newRegistryServer(t, false, nil)
	return rec, func() *content.Registry {
		return newRegistry(t, content.RegistryOptions{URL: repoURL(srv), PlainHTTP: true})
	}
}

// gzipJSON returns v as the store keeps manifests: gzip-compressed JSON.
func gzipJSON(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	require.NoError(t, err)
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, err = zw.Write(data)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

func dirEntries(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestRegistryRoundTrip(t *testing.T) {
	ctx := t.Context()
	rec, connect := plainRegistry(t)
	local, _ := newStore(t)
	controller := local.WithRemote(connect())

	m, o := manifest(1), options()
	id, err := controller.PutManifestContext(ctx, m)
	require.NoError(t, err)
	hash, err := controller.PutOptionsContext(ctx, o)
	require.NoError(t, err)
	assert.Positive(t, count(rec.requests(), http.MethodPut, "/manifests/"))

	// An agent on another host: its own empty directory, its own client.
	empty, agentDir := newStore(t)
	agent := empty.WithRemote(connect())
	assertHolds(t, agent, id, m, hash, o)
	assert.NotEmpty(t, rec.requests())
	// The layer holds the bytes the store keeps on disk.
	layer, err := connect().Pull(ctx, content.KindManifest, id)
	require.NoError(t, err)
	onDisk, err := os.ReadFile(filepath.Join(agentDir, "manifests", id+".json.gz"))
	require.NoError(t, err)
	assert.Equal(t, onDisk, layer)
	rec.requests()

	// Cached: the agent's store now reads locally, with or without the
	// remote, and the registry sees no request.
	assert.FileExists(t, filepath.Join(agentDir, "manifests", id+".json.gz"))
	assert.FileExists(t, filepath.Join(agentDir, "options", hash+".json"))
	assertHolds(t, agent, id, m, hash, o)
	assert.Empty(t, rec.requests())
	gotM, err := empty.GetManifest(id)
	require.NoError(t, err)
	assert.Equal(t, m, gotM)
}

// assertHolds checks that s returns manifest m under id and options o
// under hash.
func assertHolds(t *testing.T, s *content.Store, id string, m bundle.Manifest, hash string, o bundle.Options) {
	t.Helper()
	gotM, err := s.GetManifestContext(t.Context(), id)
	require.NoError(t, err)
	assert.Equal(t, m, gotM)
	gotO, err := s.GetOptionsContext(t.Context(), hash)
	require.NoError(t, err)
	assert.Equal(t, o, gotO)
}

func TestRegistryPushIsIdempotent(t *testing.T) {
	ctx := t.Context()
	rec, connect := plainRegistry(t)
	s, _ := newStore(t)
	s = s.WithRemote(connect())

	id, err := s.PutManifestContext(ctx, manifest(1))
	require.NoError(t, err)
	first := rec.requests()
	assert.Equal(t, 1, count(first, http.MethodPut, "/manifests/manifest-"+id[2:]), first)

	// Again, from this store and from a fresh one: one HEAD, no upload.
	_, err = s.PutManifestContext(ctx, manifest(1))
	require.NoError(t, err)
	other, _ := newStore(t)
	_, err = other.WithRemote(connect()).PutManifestContext(ctx, manifest(1))
	require.NoError(t, err)
	again := rec.requests()
	assert.Equal(t, []string{
		"HEAD /v2/flotilla/content/manifests/manifest-" + id[2:],
		"HEAD /v2/flotilla/content/manifests/manifest-" + id[2:],
	}, again)

	// The ctx-less methods push too.
	hash, err := s.PutOptions(options())
	require.NoError(t, err)
	assert.Equal(t, 1, count(rec.requests(), http.MethodPut, "/manifests/options-"+hash))
}

// An OptionsBatch stores locally at once and pushes on Push, each
// distinct options once.
func TestOptionsBatch(t *testing.T) {
	ctx := t.Context()
	rec, connect := plainRegistry(t)
	s, _ := newStore(t)
	b := s.WithRemote(connect()).NewOptionsBatch()
	var hashes []string
	for i := range 40 {
		o := options()
		o.DefaultNamespace = fmt.Sprintf("ns-%d", i%20) // 20 distinct
		hash, err := b.Put(o)
		require.NoError(t, err)
		hashes = append(hashes, hash)
	}
	assert.Empty(t, rec.requests(), "nothing pushed before Push")
	got, err := s.GetOptions(hashes[0])
	require.NoError(t, err, "stored locally at once")
	assert.Equal(t, "ns-0", got.DefaultNamespace)
	assert.Equal(t, 20, b.Len())

	require.NoError(t, b.Push(ctx))
	reqs := rec.requests()
	assert.Equal(t, 20, count(reqs, http.MethodPut, "/manifests/options-"), reqs)
	assert.Equal(t, 0, b.Len())
	other, _ := newStore(t)
	got, err = other.WithRemote(connect()).GetOptionsContext(ctx, hashes[39])
	require.NoError(t, err, "another host pulls it")
	assert.Equal(t, "ns-19", got.DefaultNamespace)

	t.Run("without a registry nothing waits", func(t *testing.T) {
		s, _ := newStore(t)
		b := s.NewOptionsBatch()
		_, err := b.Put(options())
		require.NoError(t, err)
		assert.Equal(t, 0, b.Len())
		require.NoError(t, b.Push(ctx))
	})
}

func TestRegistryNotFound(t *testing.T) {
	ctx := t.Context()
	_, connect := plainRegistry(t)
	r := connect()
	s, dir := newStore(t)
	s = s.WithRemote(r)

	id := manifest(1).ID()
	_, err := s.GetManifestContext(ctx, id)
	require.ErrorIs(t, err, content.ErrNotFound)
	assert.ErrorContains(t, err, r.String())
	assert.ErrorContains(t, err, id)
	_, err = s.GetOptionsContext(ctx, options().Key())
	require.ErrorIs(t, err, content.ErrNotFound)
	_, err = r.Pull(ctx, content.KindManifest, id)
	require.ErrorIs(t, err, content.ErrNotFound)
	assert.Empty(t, dirEntries(t, filepath.Join(dir, "manifests")))

	// Invalid IDs never reach the registry.
	_, err = s.GetManifestContext(ctx, "s-nothex")
	require.ErrorIs(t, err, content.ErrInvalidID)
	_, err = r.Pull(ctx, content.KindManifest, options().Key())
	require.ErrorIs(t, err, content.ErrInvalidID)
	require.ErrorIs(t, r.Push(ctx, content.KindOptions, id, []byte("{}")), content.ErrInvalidID)
	require.Error(t, r.Push(ctx, content.Kind("bundle"), id, nil))
}

func TestRegistryCorrupt(t *testing.T) {
	ctx := t.Context()
	_, srv := newRegistryServer(t, false, nil)
	r := newRegistry(t, content.RegistryOptions{URL: repoURL(srv), PlainHTTP: true})
	s, dir := newStore(t)
	s = s.WithRemote(r)

	tests := []struct {
		name string
		kind content.Kind
		id   string
		data []byte // pushed under id
		get  func(context.Context, string) error
	}{
		{"other manifest", content.KindManifest, manifest(1).ID(), gzipJSON(t, manifest(2)), getManifest(s)},
		{"manifest not gzip", content.KindManifest, manifest(3).ID(), []byte(`{"resources":[]}`), getManifest(s)},
		{"other options", content.KindOptions, options().Key(), []byte(`{"namespace":"tampered"}`), getOptions(s)},
		{"options not JSON", content.KindOptions, bundle.Options{}.Key(), []byte("{"), getOptions(s)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.NoError(t, r.Push(ctx, tt.kind, tt.id, tt.data))
			err := tt.get(ctx, tt.id)
			require.ErrorIs(t, err, content.ErrCorrupt)
			assert.ErrorContains(t, err, r.String())
			assert.ErrorContains(t, err, tt.id)
		})
	}
	// A tag holding an artifact of another kind.
	id := manifest(4).ID()
	repo, err := remote.NewRepository(strings.TrimPrefix(repoURL(srv), "oci://"))
	require.NoError(t, err)
	repo.PlainHTTP = true
	desc, err := oras.PackManifest(ctx, repo, oras.PackManifestVersion1_1, content.OptionsArtifactType, oras.PackManifestOptions{})
	require.NoError(t, err)
	require.NoError(t, repo.Tag(ctx, desc, "manifest-"+id[2:]))
	_, err = r.Pull(ctx, content.KindManifest, id)
	require.ErrorIs(t, err, content.ErrCorrupt)
	assert.ErrorContains(t, err, content.OptionsArtifactType)

	// Nothing unverified was cached.
	assert.Empty(t, dirEntries(t, filepath.Join(dir, "manifests")))
	assert.Empty(t, dirEntries(t, filepath.Join(dir, "options")))
}

// TestRegistryRepairsLocalCopy: an agent's cached copy that no longer
// verifies (damaged on disk) is replaced from the registry instead of
// failing every deploy that needs it; without a remote it stays an error.
func TestRegistryRepairsLocalCopy(t *testing.T) {
	ctx := t.Context()
	_, connect := plainRegistry(t)
	controller, _ := newStore(t)
	controller = controller.WithRemote(connect())
	m, o := manifest(1), options()
	id, err := controller.PutManifestContext(ctx, m)
	require.NoError(t, err)
	hash, err := controller.PutOptionsContext(ctx, o)
	require.NoError(t, err)

	local, dir := newStore(t)
	agent := local.WithRemote(connect())
	_, err = agent.GetManifestContext(ctx, id)
	require.NoError(t, err)
	_, err = agent.GetOptionsContext(ctx, hash)
	require.NoError(t, err)
	files := []string{filepath.Join(dir, "manifests", id+".json.gz"), filepath.Join(dir, "options", hash+".json")}
	for _, f := range files {
		require.NoError(t, os.WriteFile(f, []byte("damaged"), 0o600))
	}

	_, err = local.GetManifest(id)
	require.ErrorIs(t, err, content.ErrCorrupt, "without a remote a damaged copy is an error")
	assertHolds(t, agent, id, m, hash, o)
	// Repaired on disk: the store alone reads them again.
	assertHolds(t, local, id, m, hash, o)

	// Readers racing on a damaged copy all get the manifest: the repair
	// never removes a copy another reader's pull just stored.
	for round := range 20 {
		require.NoError(t, os.WriteFile(files[0], []byte("damaged"), 0o600))
		errs := make(chan error, 8)
		for range 8 {
			go func() {
				got, err := agent.GetManifestContext(ctx, id)
				if err == nil && got.ID() != id {
					err = fmt.Errorf("got manifest %s", got.ID())
				}
				errs <- err
			}()
		}
		for range 8 {
			require.NoError(t, <-errs, "round %d", round)
		}
	}
}

func getManifest(s *content.Store) func(context.Context, string) error {
	return func(ctx context.Context, id string) error {
		_, err := s.GetManifestContext(ctx, id)
		return err
	}
}

func getOptions(s *content.Store) func(context.Context, string) error {
	return func(ctx context.Context, hash string) error {
		_, err := s.GetOptionsContext(ctx, hash)
		return err
	}
}

func TestRegistryConcurrentPullsShareOne(t *testing.T) {
	ctx := t.Context()
	rec, connect := plainRegistry(t)
	src, _ := newStore(t)
	id, err := src.WithRemote(connect()).PutManifestContext(ctx, manifest(1))
	require.NoError(t, err)
	rec.requests()

	s, _ := newStore(t)
	s = s.WithRemote(connect())
	const workers = 8
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			m, err := s.GetManifestContext(ctx, id)
			if err == nil && m.ID() != id {
				t.Errorf("got manifest %s", m.ID())
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	reqs := rec.requests()
	assert.Equal(t, 1, count(reqs, http.MethodGet, "/manifests/"), reqs)
	assert.Equal(t, 1, count(reqs, http.MethodGet, "/blobs/"), reqs)
}

func TestRegistryTimeout(t *testing.T) {
	_, srv := newRegistryServer(t, false, func(http.Handler) http.Handler {
		return http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	})
	r := newRegistry(t, content.RegistryOptions{URL: repoURL(srv), PlainHTTP: true, Timeout: 100 * time.Millisecond})
	_, err := r.Pull(t.Context(), content.KindOptions, options().Key())
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestRegistryTLS(t *testing.T) {
	ctx := t.Context()
	_, srv := newRegistryServer(t, true, nil)
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(caFile, caPEM, 0o600))
	hash := options().Key()

	pusher := newRegistry(t, content.RegistryOptions{URL: repoURL(srv), CAPEM: caPEM})
	require.NoError(t, pusher.Push(ctx, content.KindOptions, hash, []byte("{}")))
	for name, opts := range map[string]content.RegistryOptions{
		"CA file":      {URL: repoURL(srv), CAFile: caFile},
		"skip verify":  {URL: repoURL(srv), InsecureSkipVerify: true},
		"CA PEM again": {URL: repoURL(srv), CAPEM: caPEM},
	} {
		data, err := newRegistry(t, opts).Pull(ctx, content.KindOptions, hash)
		require.NoError(t, err, name)
		assert.Equal(t, "{}", string(data), name)
	}

	// Without the CA the server is not trusted.
	_, err := newRegistry(t, content.RegistryOptions{URL: repoURL(srv)}).Pull(ctx, content.KindOptions, hash)
	var unknownCA x509.UnknownAuthorityError
	require.ErrorAs(t, err, &unknownCA)
	// Plain HTTP to a TLS server fails.
	_, err = newRegistry(t, content.RegistryOptions{URL: repoURL(srv), PlainHTTP: true}).Pull(ctx, content.KindOptions, hash)
	require.Error(t, err)
}

func TestRegistryBasicAuth(t *testing.T) {
	ctx := t.Context()
	const user, password = "flotilla", "s3cret-pa55"
	_, srv := newRegistryServer(t, false, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if u, p, ok := r.BasicAuth(); !ok || u != user || p != password {
				w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnauthorized)
				_, _ = io.WriteString(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`)
				return
			}
			next.ServeHTTP(w, r)
		})
	})
	opts := content.RegistryOptions{URL: repoURL(srv), PlainHTTP: true, Username: user, Password: password}
	src, _ := newStore(t)
	id, err := src.WithRemote(newRegistry(t, opts)).PutManifestContext(ctx, manifest(1))
	require.NoError(t, err)
	dst, _ := newStore(t)
	got, err := dst.WithRemote(newRegistry(t, opts)).GetManifestContext(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, manifest(1), got)

	wrong := opts
	wrong.Password = "wr0ng-pa55"
	_, err = newRegistry(t, wrong).Pull(ctx, content.KindManifest, id)
	require.ErrorIs(t, err, content.ErrAuth)
	assert.NotContains(t, err.Error(), wrong.Password)
	assert.NotContains(t, err.Error(), password)

	anonymous := opts
	anonymous.Username, anonymous.Password = "", ""
	err = newRegistry(t, anonymous).Push(ctx, content.KindManifest, id, []byte("x"))
	require.ErrorIs(t, err, content.ErrAuth)
}

func TestNewRegistryOptions(t *testing.T) {
	tests := []struct {
		name    string
		opts    content.RegistryOptions
		want    string // String() of the registry; "" for an error
		wantErr string // part of the error
	}{
		{"oci URL", content.RegistryOptions{URL: "oci://127.0.0.1:5000/a/b"}, "127.0.0.1:5000/a/b", ""},
		{"no scheme", content.RegistryOptions{URL: "ghcr.io/org/repo"}, "ghcr.io/org/repo", ""},
		{"trailing slash", content.RegistryOptions{URL: "oci://ghcr.io/org/repo/"}, "ghcr.io/org/repo", ""},
		{"empty", content.RegistryOptions{}, "", "want oci://"},
		{"https scheme", content.RegistryOptions{URL: "https://ghcr.io/org/repo"}, "", "scheme https"},
		{"no repository", content.RegistryOptions{URL: "oci://ghcr.io"}, "", "no repository"},
		{"upper case", content.RegistryOptions{URL: "oci://ghcr.io/Org"}, "", `"oci://ghcr.io/Org"`},
		{"tag", content.RegistryOptions{URL: "oci://ghcr.io/org/repo:v1"}, "", "tag or digest"},
		{"digest", content.RegistryOptions{URL: "oci://ghcr.io/org/repo@sha256:" + strings.Repeat("a", 64)}, "", "tag or digest"},
		{"credentials", content.RegistryOptions{URL: "oci://me:hunter2@ghcr.io/org/repo"}, "", `"oci://<redacted>@ghcr.io/org/repo"`},
		{"plain HTTP and CA", content.RegistryOptions{URL: "h/r", PlainHTTP: true, CAPEM: []byte("x")}, "", "plain HTTP"},
		{"plain HTTP and skip verify", content.RegistryOptions{URL: "h/r", PlainHTTP: true, InsecureSkipVerify: true}, "", "plain HTTP"},
		{"password alone", content.RegistryOptions{URL: "h/r", Password: "hunter2"}, "", "password without username"},
		{"bad CA", content.RegistryOptions{URL: "h/r", CAPEM: []byte("not PEM")}, "", "no PEM certificate"},
		{"missing CA file", content.RegistryOptions{URL: "h/r", CAFile: "/nonexistent/ca.pem"}, "", "/nonexistent/ca.pem"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := content.NewRegistry(tt.opts)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				assert.NotContains(t, err.Error(), "hunter2")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, r.String())
		})
	}
}

func TestRegistryMaxSize(t *testing.T) {
	_, srv := newRegistryServer(t, false, nil)
	r := newRegistry(t, content.RegistryOptions{URL: repoURL(srv), PlainHTTP: true, MaxSize: 8})
	err := r.Push(t.Context(), content.KindOptions, options().Key(), []byte("123456789"))
	require.ErrorContains(t, err, "exceed the limit of 8")
}
