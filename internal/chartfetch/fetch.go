package chartfetch

import (
	"context"
	"crypto/md5"  // go-getter checksums may be md5; used for verification only
	"crypto/sha1" // go-getter checksums may be sha1; used for verification only
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/Masterminds/semver/v3"
	"helm.sh/helm/v3/pkg/repo"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/sizelimit"
	"github.com/flotilla-gitops/flotilla/internal/tlsroots"
)

// DefaultIndexTTL is how long a repository's index.yaml is reused unless
// Fetcher.IndexTTL says otherwise.
const DefaultIndexTTL = time.Minute

const userAgent = "flotilla-chartfetch"

// Auth holds credentials and TLS settings for one repository. Its contents
// are never logged and never appear in error messages.
type Auth struct {
	// Username and Password are sent as HTTP basic auth (Helm repositories)
	// or as registry credentials (OCI).
	Username, Password string
	// CABundle is PEM-encoded certificates trusted in addition to the
	// system's roots.
	CABundle []byte
	// InsecureSkipTLSVerify turns off verification of the server's
	// certificate.
	InsecureSkipTLSVerify bool
	// PlainHTTP talks to an OCI registry over plain HTTP instead of HTTPS.
	PlainHTTP bool
}

// Fetcher downloads remote charts. Its zero value is usable; set its fields
// before the first call and do not change them afterwards. A Fetcher is safe
// for concurrent use and must not be copied after first use.
type Fetcher struct {
	// CacheDir holds downloaded archives by sha256 digest
	// (<CacheDir>/sha256/<hex>.tgz) plus a small index mapping a resolved
	// chart URL, or a repository or OCI reference with an exact version, to
	// the digest (<CacheDir>/refs/), so a chart version is downloaded once
	// and later Fetches of the same exact version do not touch the network.
	// Repository index.yaml files are kept for IndexTTL (<CacheDir>/index/).
	// Several processes may share a CacheDir. Empty CacheDir keeps the cache
	// in memory for the Fetcher's lifetime.
	CacheDir string
	// IndexTTL is how long a repository's index.yaml is reused before it is
	// downloaded again, since a version constraint can resolve to a newer
	// version. Zero means DefaultIndexTTL; negative turns index caching off.
	IndexTTL time.Duration
	// Mirrors rewrite URL prefixes before any request (air-gapped mirrors,
	// and tests): key = original prefix such as "https://charts.rancher.io",
	// value = replacement such as "http://127.0.0.1:4567/charts.rancher.io".
	// They apply to chart URLs, repository URLs, URLs found in index.yaml and
	// oci:// references ("oci://ghcr.io" → "oci://127.0.0.1:5000"; an
	// "http://host" replacement of an oci:// prefix means a plain-HTTP
	// registry). A prefix matches only up to a "/", "?" or "#" boundary; the
	// longest matching prefix wins. Checksum always uses the original source.
	Mirrors map[string]string
	// Auth returns credentials for an original (un-mirrored) URL, or nil. It
	// is called with a repository's URL, a chart archive's URL, or an
	// oci:// reference without tag. An archive listed in a repository index
	// on the repository's host gets the repository's credentials when Auth
	// has none for the archive's own URL.
	Auth func(url string) *Auth
	// HTTPClient overrides the default client (optional). With an Auth that
	// sets CABundle or InsecureSkipTLSVerify, its Transport must be nil or
	// an *http.Transport.
	HTTPClient *http.Client
	// MaxArchiveSize bounds a compressed chart archive; zero means
	// DefaultMaxArchiveSize.
	MaxArchiveSize int64
	// MaxUnpackedSize bounds the total size of a chart's files; zero means
	// DefaultMaxUnpackedSize.
	MaxUnpackedSize int64
	// MaxIndexSize bounds a repository's index.yaml; zero means
	// DefaultMaxIndexSize.
	MaxIndexSize int64

	mu            sync.Mutex
	mem           memCache
	defaultClient *http.Client
	tlsClients    map[string]*http.Client
}

// Derive returns a new Fetcher with f's settings (cache, mirrors, HTTP
// client, limits, index TTL) and no Auth, for one GitRepo's fetches.
func (f *Fetcher) Derive() *Fetcher {
	return &Fetcher{CacheDir: f.CacheDir, IndexTTL: f.IndexTTL, Mirrors: f.Mirrors, HTTPClient: f.HTTPClient,
		MaxArchiveSize: f.MaxArchiveSize, MaxUnpackedSize: f.MaxUnpackedSize, MaxIndexSize: f.MaxIndexSize}
}

// archiveLimit bounds a downloaded chart archive, OCI manifest or layer.
func (f *Fetcher) archiveLimit() sizelimit.Limit {
	return sizelimit.Limit{Max: f.maxArchive(), Flag: sizelimit.ChartFlag}
}

func (f *Fetcher) indexLimit() sizelimit.Limit {
	l := sizelimit.Limit{Max: f.MaxIndexSize, Flag: sizelimit.IndexFlag}
	if l.Max <= 0 {
		l.Max = DefaultMaxIndexSize
	}
	return l
}

func (f *Fetcher) maxArchive() int64 {
	if f.MaxArchiveSize > 0 {
		return f.MaxArchiveSize
	}
	return DefaultMaxArchiveSize
}

func (f *Fetcher) maxUnpacked() int64 {
	if f.MaxUnpackedSize > 0 {
		return f.MaxUnpackedSize
	}
	return DefaultMaxUnpackedSize
}

// Fetch downloads (or takes from the cache) the chart of src.
//
// Chart URLs are downloaded as they are; a repository source is resolved
// through the repository's index.yaml (Version may be an exact version or a
// semver constraint; empty means the latest stable version); an OCI source
// is pulled with Helm's registry client (a constraint is resolved against
// the registry's tags). Errors name the source and wrap ErrNotFound,
// ErrChecksum, ErrAuth, ErrUnsupportedSource or ErrInvalidArchive where that
// is the cause.
func (f *Fetcher) Fetch(ctx context.Context, src Source) (*Chart, error) {
	data, err := f.fetchArchive(ctx, src)
	if err != nil {
		return nil, fmt.Errorf("chartfetch: %s: %w", src, err)
	}
	ch, err := loadChart(data, f.maxUnpacked())
	if err != nil {
		return nil, fmt.Errorf("chartfetch: %s: %w", src, err)
	}
	return ch, nil
}

// fetchArchive returns the chart archive of src.
func (f *Fetcher) fetchArchive(ctx context.Context, src Source) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	chart := strings.TrimSpace(src.Chart)
	repoURL := strings.TrimSpace(src.Repo)
	version := strings.TrimSpace(src.Version)
	if chart == "" {
		return nil, fmt.Errorf("%w: no chart given", ErrUnsupportedSource)
	}
	if repoURL != "" {
		if strings.Contains(chart, "://") || strings.Contains(chart, "::") {
			return nil, fmt.Errorf("%w: with a repository, the chart must be a chart name", ErrUnsupportedSource)
		}
		switch schemeOf(repoURL) {
		case "oci":
			return f.fetchOCI(ctx, strings.TrimSuffix(repoURL, "/")+"/"+chart, version)
		case "http", "https":
			return f.fetchFromRepo(ctx, repoURL, chart, version)
		default:
			return nil, fmt.Errorf("%w: repository must be an http://, https:// or oci:// URL", ErrUnsupportedSource)
		}
	}
	switch scheme := schemeOf(chart); {
	case scheme == "oci":
		return f.fetchOCI(ctx, chart, version)
	case (scheme == "http" || scheme == "https") && !isGetterHTTPForm(chart):
		return f.fetchURL(ctx, chart)
	case scheme != "" || strings.Contains(chart, "::") || isGetterShorthand(chart) || isGetterHTTPForm(chart):
		return nil, fmt.Errorf("%w: go-getter sources (git, subdirectories, buckets) are not supported yet; "+
			"use an http(s) URL of a chart archive, a Helm repository or an OCI registry", ErrUnsupportedSource)
	default:
		return nil, fmt.Errorf("%w: a local chart path is not a remote source", ErrUnsupportedSource)
	}
}

// schemeOf returns the lower-cased scheme of a URL-like string, or "".
func schemeOf(s string) string {
	scheme, _, ok := strings.Cut(s, "://")
	if !ok || scheme == "" || strings.ContainsAny(scheme, "/:@?#") {
		return ""
	}
	return strings.ToLower(scheme)
}

// isGetterHTTPForm reports whether an http(s) URL uses go-getter features
// this package does not implement: a git repository (".git") or a
// subdirectory ("//dir" after the host).
func isGetterHTTPForm(s string) bool {
	u, err := url.Parse(s)
	if err != nil {
		return false
	}
	p := u.Path
	return strings.Contains(p, "//") || strings.HasSuffix(p, ".git") || strings.Contains(p, ".git/")
}

// fetchURL downloads a chart archive URL, verifying a ?checksum= query.
func (f *Fetcher) fetchURL(ctx context.Context, raw string) ([]byte, error) {
	clean, checksum := stripChecksum(raw)
	var (
		algo, want string
		err        error
	)
	if checksum != "" {
		if algo, want, err = parseChecksum(checksum); err != nil {
			return nil, err
		}
	}
	a := f.auth(clean)
	if algo == "sha256" {
		if data, ok := f.loadBlob("sha256:" + want); ok {
			return data, nil
		}
	}
	key := cacheKey("url", clean, authFingerprint(a))
	data, cached := f.cachedBlobForKey(key)
	if !cached {
		if data, err = f.get(ctx, clean, a, f.archiveLimit()); err != nil {
			return nil, err
		}
	}
	if want != "" {
		if got := hashHex(algo, data); got != want {
			return nil, fmt.Errorf("archive %s: expected %s:%s, got %s:%s: %w",
				redactURL(clean), algo, want, algo, got, ErrChecksum)
		}
	}
	if !cached {
		if err := f.store(key, redactURL(clean), data); err != nil {
			return nil, err
		}
	}
	return data, nil
}

// stripChecksum removes the checksum query parameter from a URL, keeping
// any other query parameter as written, and returns it separately.
func stripChecksum(raw string) (clean, checksum string) {
	base, query, ok := strings.Cut(raw, "?")
	if !ok {
		return raw, ""
	}
	query, frag, hasFrag := strings.Cut(query, "#")
	var kept []string
	for _, part := range strings.Split(query, "&") {
		k, v, _ := strings.Cut(part, "=")
		if uk, err := url.QueryUnescape(k); err == nil && uk == "checksum" {
			if uv, err := url.QueryUnescape(v); err == nil {
				checksum = uv
			} else {
				checksum = v
			}
			continue
		}
		if part != "" {
			kept = append(kept, part)
		}
	}
	clean = base
	if len(kept) > 0 {
		clean += "?" + strings.Join(kept, "&")
	}
	if hasFrag {
		clean += "#" + frag
	}
	return clean, checksum
}

// checksumAlgos maps go-getter checksum types to their hex digest length.
var checksumAlgos = map[string]int{"md5": 32, "sha1": 40, "sha256": 64, "sha512": 128}

// parseChecksum reads a go-getter checksum: "<type>:<hex>" or a bare hex
// digest whose type is told by its length.
func parseChecksum(s string) (algo, digest string, err error) {
	algo, digest, ok := strings.Cut(s, ":")
	if !ok {
		digest = s
		algo = ""
		for name, n := range checksumAlgos {
			if len(digest) == n {
				algo = name
			}
		}
	}
	algo = strings.ToLower(algo)
	digest = strings.ToLower(digest)
	n, known := checksumAlgos[algo]
	if _, herr := hex.DecodeString(digest); !known || herr != nil || len(digest) != n {
		return "", "", fmt.Errorf("%w: checksum %q is not an md5, sha1, sha256 or sha512 hex digest", ErrUnsupportedSource, s)
	}
	return algo, digest, nil
}

func hashHex(algo string, data []byte) string {
	var h hash.Hash
	switch algo {
	case "md5":
		h = md5.New() // verification of a user-given checksum
	case "sha1":
		h = sha1.New() // verification of a user-given checksum
	case "sha512":
		h = sha512.New()
	default:
		h = sha256.New()
	}
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil))
}

// fetchFromRepo resolves name and version in a Helm repository's index and
// downloads the archive.
func (f *Fetcher) fetchFromRepo(ctx context.Context, repoURL, name, version string) ([]byte, error) {
	a := f.auth(repoURL)
	fp := authFingerprint(a)
	if isExactVersion(version) {
		if data, ok := f.cachedBlobForKey(cacheKey("repo", repoURL, name, version, fp)); ok {
			return data, nil
		}
	}
	cv, err := f.findChart(ctx, repoURL, name, version, a)
	if err != nil {
		return nil, err
	}
	if len(cv.URLs) == 0 {
		return nil, fmt.Errorf("%w: index of %s lists no URL for %s %s", ErrNotFound, redactURL(repoURL), name, cv.Version)
	}
	chartURL, err := repo.ResolveReferenceURL(repoURL, cv.URLs[0])
	if err != nil {
		return nil, fmt.Errorf("%w: index of %s: %w", ErrUnsupportedSource, redactURL(repoURL), err)
	}
	chartAuth := f.auth(chartURL)
	if chartAuth == nil && sameHost(chartURL, repoURL) {
		chartAuth = a
	}
	urlKey := cacheKey("url", chartURL, authFingerprint(chartAuth))
	data, ok := f.cachedBlobForKey(urlKey)
	if !ok && cv.Digest != "" && fp == authFingerprint(chartAuth) {
		data, ok = f.loadBlob("sha256:" + strings.ToLower(cv.Digest))
	}
	if !ok {
		if data, err = f.get(ctx, chartURL, chartAuth, f.archiveLimit()); err != nil {
			return nil, err
		}
	}
	digest, err := f.storeBlob(data)
	if err != nil {
		return nil, err
	}
	refs := map[string]string{
		urlKey: redactURL(chartURL),
		cacheKey("repo", repoURL, name, cv.Version, fp): redactURL(repoURL) + " " + name + " " + cv.Version,
	}
	if isExactVersion(version) {
		refs[cacheKey("repo", repoURL, name, version, fp)] = redactURL(repoURL) + " " + name + " " + version
	}
	for key, desc := range refs {
		if err := f.storeRef(key, desc, digest); err != nil {
			return nil, err
		}
	}
	return data, nil
}

// findChart picks the chart version in the repository's index. An exact
// version published since the index was cached (a HelmOp resolves its
// constraint against a fresh index, then renders that exact version) is
// looked up in a fresh index once more.
func (f *Fetcher) findChart(ctx context.Context, repoURL, name, version string, a *Auth) (*repo.ChartVersion, error) {
	idx, cached, err := f.repoIndexCached(ctx, repoURL, a, false)
	if err != nil {
		return nil, err
	}
	cv, err := findInIndex(idx, repoURL, name, version)
	if errors.Is(err, ErrNotFound) && cached && isExactVersion(version) {
		if idx, _, err = f.repoIndexCached(ctx, repoURL, a, true); err != nil {
			return nil, err
		}
		cv, err = findInIndex(idx, repoURL, name, version)
	}
	return cv, err
}

// findInIndex picks the version of a chart that Helm would install.
func findInIndex(idx *repo.IndexFile, repoURL, name, version string) (*repo.ChartVersion, error) {
	vs, ok := idx.Entries[name]
	if !ok || len(vs) == 0 {
		return nil, fmt.Errorf("no chart named %q in the index of %s: %w", name, redactURL(repoURL), ErrNotFound)
	}
	if version != "" {
		if _, err := semver.NewConstraint(version); err != nil {
			return nil, fmt.Errorf("%w: version %q is neither a version nor a constraint: %w", ErrUnsupportedSource, version, err)
		}
	}
	cv, err := idx.Get(name, version)
	if err != nil {
		versions := make([]string, 0, len(vs))
		for _, v := range vs {
			versions = append(versions, v.Version)
		}
		return nil, fmt.Errorf("no version of chart %q matches %q in the index of %s (available: %s): %w",
			name, version, redactURL(repoURL), listVersions(versions), ErrNotFound)
	}
	return cv, nil
}

// listVersions names up to five versions (the first ones given).
func listVersions(vs []string) string {
	if len(vs) == 0 {
		return "none"
	}
	if len(vs) > 5 {
		return strings.Join(vs[:5], ", ") + fmt.Sprintf(", and %d more", len(vs)-5)
	}
	return strings.Join(vs, ", ")
}

// isExactVersion reports whether v names one version rather than a range
// (the definition HelmOps poll by).
func isExactVersion(v string) bool { return !api.IsConstraint(v) }

// sameHost reports whether two URLs have the same scheme and host.
func sameHost(a, b string) bool {
	ua, err1 := url.Parse(a)
	ub, err2 := url.Parse(b)
	return err1 == nil && err2 == nil && strings.EqualFold(ua.Scheme, ub.Scheme) && strings.EqualFold(ua.Host, ub.Host)
}

// repoIndex returns a repository's parsed index.yaml, from the cache while
// it is fresh.
func (f *Fetcher) repoIndex(ctx context.Context, repoURL string, a *Auth) (*repo.IndexFile, error) {
	idx, _, err := f.repoIndexCached(ctx, repoURL, a, false)
	return idx, err
}

// repoIndexCached is repoIndex; refresh skips the cache, and cached tells
// whether the index came from it.
func (f *Fetcher) repoIndexCached(ctx context.Context, repoURL string, a *Auth, refresh bool) (idx *repo.IndexFile, cached bool, err error) {
	key := cacheKey("index", repoURL, authFingerprint(a))
	if !refresh {
		if idx, ok := f.loadIndex(key); ok {
			return idx, true, nil
		}
	}
	idx, err = f.downloadIndex(ctx, repoURL, key, a)
	return idx, false, err
}

// downloadIndex downloads, parses and caches a repository's index.yaml.
func (f *Fetcher) downloadIndex(ctx context.Context, repoURL, key string, a *Auth) (*repo.IndexFile, error) {
	u, err := url.Parse(repoURL)
	if err != nil {
		return nil, fmt.Errorf("%w: repository URL: %w", ErrUnsupportedSource, err)
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/index.yaml"
	u.RawPath = ""
	indexURL := u.String()
	raw, err := f.get(ctx, indexURL, a, f.indexLimit())
	if err != nil {
		return nil, err
	}
	idx, err := parseIndex(raw)
	if err != nil {
		return nil, fmt.Errorf("repository index %s: %w", redactURL(indexURL), err)
	}
	if err := f.storeIndex(key, raw, idx); err != nil {
		return nil, err
	}
	return idx, nil
}

// parseIndex reads an index.yaml (YAML or JSON), dropping unusable entries
// and sorting each chart's versions newest first, as Helm does.
func parseIndex(data []byte) (*repo.IndexFile, error) {
	if len(data) == 0 {
		return nil, errors.New("empty index")
	}
	var idx repo.IndexFile
	if err := yaml.Unmarshal(data, &idx); err != nil {
		return nil, fmt.Errorf("parsing index: %w", err)
	}
	if idx.APIVersion == "" {
		return nil, errors.New("index has no apiVersion")
	}
	for name, cvs := range idx.Entries {
		kept := cvs[:0]
		for _, cv := range cvs {
			if cv == nil || cv.Metadata == nil || cv.Version == "" {
				continue
			}
			kept = append(kept, cv)
		}
		idx.Entries[name] = kept
	}
	idx.SortEntries()
	return &idx, nil
}

// auth returns the credentials for an original URL.
func (f *Fetcher) auth(u string) *Auth {
	if f.Auth == nil {
		return nil
	}
	return f.Auth(u)
}

// mirror rewrites s by the longest matching Mirrors prefix.
func (f *Fetcher) mirror(s string) string {
	best := ""
	for from := range f.Mirrors {
		if from == "" || len(from) <= len(best) || len(s) < len(from) || !strings.EqualFold(s[:len(from)], from) {
			continue
		}
		rest := s[len(from):]
		if rest == "" || strings.HasSuffix(from, "/") || strings.ContainsRune("/?#", rune(rest[0])) {
			best = from
		}
	}
	if best == "" {
		return s
	}
	return f.Mirrors[best] + s[len(best):]
}

// get downloads an original URL (after mirroring) with a size limit,
// checked against the Content-Length before reading and while reading.
// Over the limit is a *sizelimit.Error naming the URL, wrapped as
// ErrInvalidArchive.
func (f *Fetcher) get(ctx context.Context, origURL string, a *Auth, limit sizelimit.Limit) ([]byte, error) {
	target := f.mirror(origURL)
	desc := redactURL(target)
	if s := schemeOf(target); s != "http" && s != "https" {
		return nil, fmt.Errorf("%w: %s is not an http(s) URL", ErrUnsupportedSource, desc)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: invalid URL", ErrUnsupportedSource, desc)
	}
	req.Header.Set("User-Agent", userAgent)
	if a != nil && (a.Username != "" || a.Password != "") {
		req.SetBasicAuth(a.Username, a.Password)
	}
	client, err := f.client(a)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		// net/http strips any password from the URL in its errors.
		return nil, err
	}
	defer resp.Body.Close()
	switch code := resp.StatusCode; {
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return nil, fmt.Errorf("GET %s: %s: %w", desc, resp.Status, ErrAuth)
	case code == http.StatusNotFound || code == http.StatusGone:
		return nil, fmt.Errorf("GET %s: %s: %w", desc, resp.Status, ErrNotFound)
	case code < 200 || code > 299:
		return nil, fmt.Errorf("GET %s: %s", desc, resp.Status)
	}
	if err := limit.Check(desc, resp.ContentLength); err != nil {
		return nil, tooLarge(err)
	}
	data, err := limit.ReadAll(resp.Body, desc)
	var tooBig *sizelimit.Error
	if errors.As(err, &tooBig) {
		return nil, tooLarge(err)
	}
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", desc, err)
	}
	return data, nil
}

// client returns the HTTP client for a's TLS settings.
func (f *Fetcher) client(a *Auth) (*http.Client, error) {
	base := f.baseClient()
	if a == nil || (len(a.CABundle) == 0 && !a.InsecureSkipTLSVerify) {
		return base, nil
	}
	sum := sha256.Sum256(a.CABundle)
	key := fmt.Sprintf("%x/%t", sum, a.InsecureSkipTLSVerify)
	f.mu.Lock()
	c, ok := f.tlsClients[key]
	f.mu.Unlock()
	if ok {
		return c, nil
	}
	tr, err := tlsTransport(base, a)
	if err != nil {
		return nil, err
	}
	nc := &http.Client{Transport: tr, CheckRedirect: base.CheckRedirect, Jar: base.Jar, Timeout: base.Timeout}
	f.mu.Lock()
	if f.tlsClients == nil {
		f.tlsClients = map[string]*http.Client{}
	}
	f.tlsClients[key] = nc
	f.mu.Unlock()
	return nc, nil
}

// baseClient returns HTTPClient, or else the Fetcher's own default client
// (created on first use).
func (f *Fetcher) baseClient() *http.Client {
	if f.HTTPClient != nil {
		return f.HTTPClient
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.defaultClient == nil {
		f.defaultClient = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	return f.defaultClient
}

// tlsTransport returns a copy of base's transport that trusts a's CA bundle
// (besides the system roots) and skips verification if a says so. base's
// transport must be an *http.Transport.
func tlsTransport(base *http.Client, a *Auth) (*http.Transport, error) {
	rt := base.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	tr, ok := rt.(*http.Transport)
	if !ok {
		return nil, fmt.Errorf("chartfetch: custom CA bundle or InsecureSkipTLSVerify needs an *http.Transport, HTTPClient has %T", rt)
	}
	tr = tr.Clone()
	cfg := tr.TLSClientConfig
	if cfg == nil {
		cfg = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if len(a.CABundle) > 0 {
		pool, ok := tlsroots.Pool(a.CABundle)
		if !ok {
			return nil, errors.New("chartfetch: CA bundle holds no PEM certificate")
		}
		cfg.RootCAs = pool
	}
	cfg.InsecureSkipVerify = a.InsecureSkipTLSVerify // asked for by the repository's configuration
	tr.TLSClientConfig = cfg
	return tr, nil
}
