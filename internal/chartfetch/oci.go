package chartfetch

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/Masterminds/semver/v3"
	"github.com/flotilla-gitops/flotilla/internal/sizelimit"
	"helm.sh/helm/v3/pkg/registry"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/errcode"
)

// fetchOCI pulls a chart from an OCI registry. ref is
// oci://host[:port]/path/name, optionally with ":tag" or "@digest".
func (f *Fetcher) fetchOCI(ctx context.Context, ref, version string) ([]byte, error) {
	base, tag, digest, err := splitOCIRef(ref)
	if err != nil {
		return nil, err
	}
	if tag != "" {
		if version != "" && version != tag {
			return nil, fmt.Errorf("%w: reference tag %q and version %q differ", ErrUnsupportedSource, tag, version)
		}
		version = tag
	}
	a := f.auth(base)
	fp := authFingerprint(a)
	repoRef, plainHTTP, err := f.ociRepository(base, a)
	if err != nil {
		return nil, err
	}

	// A digest or an exact version names the archive: look in the cache
	// before asking the registry anything. suffix completes the pull
	// reference.
	var key, suffix string
	switch {
	case digest != "":
		key, suffix = cacheKey("oci", base+"@"+digest, fp), "@"+digest
	case isExactVersion(version):
		key, suffix = cacheKey("oci", base, version, fp), ":"+version
	}
	if key != "" {
		if data, ok := f.cachedBlobForKey(key); ok {
			return data, nil
		}
	}

	host, _, _ := strings.Cut(repoRef, "/")
	guard := &sizeGuard{limit: f.archiveLimit()}
	client, err := f.registryClient(ctx, host, a, plainHTTP, guard)
	if err != nil {
		return nil, err
	}
	repo := ociRepo{base: base, ref: repoRef, client: client, maxArchive: f.maxArchive(), guard: guard}
	if key == "" {
		tag, err := repo.resolveTag(ctx, version)
		if err != nil {
			return nil, err
		}
		key, suffix = cacheKey("oci", base, tag, fp), ":"+tag
		if data, ok := f.cachedBlobForKey(key); ok {
			return data, nil
		}
	}

	data, err := repo.pull(ctx, suffix)
	if err != nil {
		return nil, err
	}
	if err := f.store(key, redactURL(base)+" "+version, data); err != nil {
		return nil, err
	}
	return data, nil
}

// ociRepository returns where to pull base from: the repository reference
// (host/path/name) of its mirror, if any, and whether to use plain HTTP
// (a's setting, or an http:// mirror).
func (f *Fetcher) ociRepository(base string, a *Auth) (repoRef string, plainHTTP bool, err error) {
	target := f.mirror(base)
	plainHTTP = a != nil && a.PlainHTTP
	switch schemeOf(target) {
	case "oci", "https":
	case "http":
		plainHTTP = true
	default:
		return "", false, fmt.Errorf("%w: mirror of %s is not an oci:// or http(s):// URL", ErrUnsupportedSource, base)
	}
	_, repoRef, _ = strings.Cut(target, "://")
	return repoRef, plainHTTP, nil
}

// ociRepo is the OCI repository of one fetch. Errors name base, not the
// mirror pulled from.
type ociRepo struct {
	base       string // oci://host/path/name, as the bundle names it
	ref        string // host/path/name to pull from: base's or its mirror's
	client     *registry.Client
	maxArchive int64 // the largest archive pull accepts, in bytes
	// guard bounds every response the client reads; nil: none.
	guard *sizeGuard
}

// resolveTag lists the repository's tags and picks the newest one matching
// version, as pickTag does.
func (r ociRepo) resolveTag(ctx context.Context, version string) (string, error) {
	tags, err := r.client.Tags(r.ref)
	if err != nil {
		return "", r.guard.explain(ociError(ctx, fmt.Sprintf("listing tags of %s", r.base), err))
	}
	tag, err := pickTag(tags, version)
	if err != nil {
		return "", fmt.Errorf("%s: %w", r.base, err)
	}
	return tag, nil
}

// pull pulls the chart archive at suffix (":tag" or "@digest"), and
// rejects one larger than maxArchive while it is read: Helm's client
// reads the manifest and layers whole, so the guard's transport stops
// every response at the limit. When a tag is not found, the error lists
// the versions the repository holds, as far as the registry tells.
func (r ociRepo) pull(ctx context.Context, suffix string) ([]byte, error) {
	res, err := r.client.Pull(r.ref + suffix)
	if err == nil {
		if int64(len(res.Chart.Data)) > r.maxArchive {
			return nil, tooLarge(sizelimit.Limit{Max: r.maxArchive, Flag: sizelimit.ChartFlag}.Error(r.base + suffix))
		}
		return res.Chart.Data, nil
	}
	if tooBig := r.guard.explain(nil); tooBig != nil {
		return nil, fmt.Errorf("pulling %s: %w", r.base+suffix, tooBig)
	}
	err = ociError(ctx, "pulling "+r.base+suffix, err)
	if errors.Is(err, ErrNotFound) && strings.HasPrefix(suffix, ":") {
		if tags, terr := r.client.Tags(r.ref); terr == nil {
			err = fmt.Errorf("%w (available: %s)", err, listVersions(tags))
		}
	}
	return nil, err
}

// splitOCIRef splits an oci:// reference into the repository part and an
// optional tag or digest.
func splitOCIRef(ref string) (base, tag, digest string, err error) {
	if schemeOf(ref) != "oci" {
		return "", "", "", fmt.Errorf("%w: %s is not an oci:// reference", ErrUnsupportedSource, redactURL(ref))
	}
	base = ref
	if i := strings.LastIndex(base, "@"); i > strings.LastIndex(base, "/") {
		base, digest = base[:i], base[i+1:]
	}
	slash := strings.LastIndex(base, "/")
	if i := strings.LastIndex(base, ":"); i > slash {
		base, tag = base[:i], base[i+1:]
	}
	rest := strings.TrimPrefix(base[len("oci://"):], "/")
	if !strings.Contains(rest, "/") || strings.HasSuffix(rest, "/") {
		return "", "", "", fmt.Errorf("%w: %s is not an oci://host/path/name reference", ErrUnsupportedSource, redactURL(ref))
	}
	return base, tag, digest, nil
}

// pickTag chooses, from tags sorted newest first, the newest one matching
// version: any stable version when version is empty (or the newest tag when
// there is no stable one), else the semver constraint.
func pickTag(tags []string, version string) (string, error) {
	if version == "" {
		for _, t := range tags {
			if v, err := semver.NewVersion(t); err == nil && v.Prerelease() == "" {
				return t, nil
			}
		}
		if len(tags) > 0 {
			return tags[0], nil
		}
		return "", fmt.Errorf("no version tags: %w", ErrNotFound)
	}
	c, err := semver.NewConstraint(version)
	if err != nil {
		return "", fmt.Errorf("%w: version %q is neither a version nor a constraint: %w", ErrUnsupportedSource, version, err)
	}
	for _, t := range tags {
		if v, err := semver.NewVersion(t); err == nil && c.Check(v) {
			return t, nil
		}
	}
	return "", fmt.Errorf("no tag matches %q (available: %s): %w", version, listVersions(tags), ErrNotFound)
}

// registryClient makes a Helm registry client that uses only the given
// credentials (no docker or helm config files), stops with ctx and reads
// no response larger than guard's limit.
func (f *Fetcher) registryClient(ctx context.Context, host string, a *Auth, plainHTTP bool, guard *sizeGuard) (*registry.Client, error) {
	hc, err := f.client(a)
	if err != nil {
		return nil, err
	}
	rt := hc.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	// Helm's registry client does not take a context; this transport
	// puts ours on every request it makes.
	ctxClient := &http.Client{
		Transport:     ctxTransport{ctx: ctx, base: guard.transport(rt)},
		CheckRedirect: hc.CheckRedirect,
		Jar:           hc.Jar,
		Timeout:       hc.Timeout,
	}
	authorizer := auth.Client{Client: ctxClient, Cache: auth.NewCache()}
	authorizer.SetUserAgent(userAgent)
	if a != nil && (a.Username != "" || a.Password != "") {
		authorizer.Credential = auth.StaticCredential(host, auth.Credential{Username: a.Username, Password: a.Password})
	}
	opts := []registry.ClientOption{
		registry.ClientOptHTTPClient(ctxClient),
		registry.ClientOptAuthorizer(authorizer),
		// Never read or write the user's registry credentials.
		registry.ClientOptCredentialsFile(os.DevNull),
	}
	if plainHTTP {
		opts = append(opts, registry.ClientOptPlainHTTP())
	}
	c, err := registry.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("registry client: %w", err)
	}
	return c, nil
}

// ctxTransport makes every request it carries use ctx.
type ctxTransport struct {
	ctx  context.Context
	base http.RoundTripper
}

// RoundTrip sends req with the transport's context.
func (t ctxTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return t.base.RoundTrip(req.WithContext(t.ctx))
}

// ociError maps registry errors to this package's sentinels.
func ociError(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", what, ctx.Err())
	}
	var resp *errcode.ErrorResponse
	if errors.As(err, &resp) {
		switch resp.StatusCode {
		case http.StatusUnauthorized, http.StatusForbidden:
			return fmt.Errorf("%s: %w: %w", what, ErrAuth, err)
		case http.StatusNotFound:
			return fmt.Errorf("%s: %w: %w", what, ErrNotFound, err)
		}
	}
	if errors.Is(err, errdef.ErrNotFound) {
		return fmt.Errorf("%s: %w: %w", what, ErrNotFound, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}
