package content

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/flotilla-gitops/flotilla/internal/tlsroots"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	orascontent "oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/errcode"
	"oras.land/oras-go/v2/registry/remote/retry"
)

// ErrAuth is returned when the registry refuses the credentials, or asks
// for credentials and none are configured (HTTP 401 or 403).
var ErrAuth = errors.New("registry denied access")

// Kind is the kind of item a Registry holds.
type Kind string

const (
	// KindManifest is a bundle manifest: the gzip-compressed JSON that
	// Store keeps under manifests/, named by bundle.Manifest.ID.
	KindManifest Kind = "manifest"
	// KindOptions is deployment options: the JSON that Store keeps under
	// options/, named by bundle.Options.Key.
	KindOptions Kind = "options"
)

// Media types of the OCI artifacts a Registry writes.
const (
	ManifestArtifactType = "application/vnd.flotilla.manifest.v1+json"
	ManifestLayerType    = "application/vnd.flotilla.manifest.content.v1.json+gzip"
	OptionsArtifactType  = "application/vnd.flotilla.options.v1+json"
	OptionsLayerType     = "application/vnd.flotilla.options.content.v1+json"
)

const (
	defaultRegistryTimeout = time.Minute
	defaultMaxSize         = 64 << 20
	// maxImageManifestBytes bounds the OCI manifest read for a tag; ours are
	// a few hundred bytes. 4 MiB is the limit registries commonly enforce.
	maxImageManifestBytes = 4 << 20
)

// RegistryOptions configures NewRegistry.
type RegistryOptions struct {
	// URL names the repository: "oci://host[:port]/repository", or the
	// same without "oci://". It must not carry credentials, a tag or a
	// digest. Required.
	URL string
	// PlainHTTP talks to the registry over HTTP instead of HTTPS. It
	// excludes CAFile, CAPEM and InsecureSkipVerify. Optional: default false.
	PlainHTTP bool
	// CAFile is a PEM file of CA certificates trusted for the registry, in
	// addition to the system pool. Optional.
	CAFile string
	// CAPEM is PEM-encoded CA certificates, as CAFile. Optional.
	CAPEM []byte
	// Username and Password are sent to the registry host, and only to it,
	// for basic auth or to obtain a bearer token. Optional: default
	// anonymous access.
	Username, Password string
	// InsecureSkipVerify accepts any certificate from the registry.
	// Optional: default false.
	InsecureSkipVerify bool
	// Timeout bounds one Push or Pull, retries included.
	// Optional: default 1m.
	Timeout time.Duration
	// MaxSize bounds the size of one item, compressed and (for manifests)
	// decompressed; larger items are neither pushed nor pulled.
	// Optional: default 64 MiB.
	MaxSize int64
}

// Registry stores manifests and options as OCI artifacts in one
// repository of an OCI registry, so that processes that do not share a
// disk can exchange them. Each item is an image manifest with the item's
// artifact type and one layer holding the item's bytes, tagged
// "<kind>-<hex of the ID>". Tags are written once and never changed.
//
// A Registry moves bytes only: it does not check that they match their ID.
// Store does that for everything it pulls. A Registry is safe for
// concurrent use.
type Registry struct {
	repo    *remote.Repository
	name    string
	timeout time.Duration
	maxSize int64
}

// NewRegistry returns a Registry for opts. It does not contact the
// registry.
func NewRegistry(opts RegistryOptions) (*Registry, error) {
	name, err := parseRegistryURL(opts.URL)
	if err != nil {
		return nil, err
	}
	if opts.PlainHTTP && (opts.CAFile != "" || len(opts.CAPEM) > 0 || opts.InsecureSkipVerify) {
		return nil, fmt.Errorf("content registry %s: plain HTTP excludes a CA and skipping TLS verification", name)
	}
	if opts.Password != "" && opts.Username == "" {
		return nil, fmt.Errorf("content registry %s: password without username", name)
	}
	client, err := registryHTTPClient(opts)
	if err != nil {
		return nil, fmt.Errorf("content registry %s: %w", name, err)
	}
	repo, err := remote.NewRepository(name)
	if err != nil {
		return nil, fmt.Errorf("content registry %s: %w", name, err)
	}
	repo.PlainHTTP = opts.PlainHTTP
	ac := &auth.Client{Client: client, Cache: auth.NewCache()}
	if opts.Username != "" {
		ac.Credential = auth.StaticCredential(repo.Reference.Registry, auth.Credential{Username: opts.Username, Password: opts.Password})
	}
	repo.Client = ac
	r := &Registry{repo: repo, name: name, timeout: opts.Timeout, maxSize: opts.MaxSize}
	if r.timeout <= 0 {
		r.timeout = defaultRegistryTimeout
	}
	if r.maxSize <= 0 {
		r.maxSize = defaultMaxSize
	}
	return r, nil
}

// String returns the registry's host and repository, without credentials.
func (r *Registry) String() string { return r.name }

// Push stores data as the item of the given kind and ID. When the tag
// already exists it does nothing, without comparing contents: IDs name
// content, so an existing tag already holds data (Store verifies on pull).
// It fails with ErrInvalidID for an ID that is not of kind, and ErrAuth
// when the registry refuses access.
func (r *Registry) Push(ctx context.Context, kind Kind, id string, data []byte) error {
	tag, spec, err := kind.tag(id)
	if err != nil {
		return fmt.Errorf("push %s %q to %s: %w", kind, id, r, err)
	}
	if int64(len(data)) > r.maxSize {
		return fmt.Errorf("push %s %s to %s: %d bytes exceed the limit of %d", kind, id, r, len(data), r.maxSize)
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	if err := r.push(ctx, spec, tag, data); err != nil {
		return fmt.Errorf("push %s %s to %s: %w", kind, id, r, classify(err))
	}
	return nil
}

func (r *Registry) push(ctx context.Context, spec kindSpec, tag string, data []byte) error {
	_, err := r.repo.Resolve(ctx, tag)
	if err == nil {
		return nil
	}
	if !errors.Is(err, errdef.ErrNotFound) {
		return err
	}
	layer := orascontent.NewDescriptorFromBytes(spec.layerType, data)
	if err := r.pushBlob(ctx, layer, data); err != nil {
		return err
	}
	config := ocispec.DescriptorEmptyJSON
	if err := r.pushBlob(ctx, config, config.Data); err != nil {
		return err
	}
	// No creation-time annotation: the same item always makes the same
	// image manifest, so concurrent pushers of one tag agree.
	manifest, err := json.Marshal(ocispec.Manifest{
		Versioned:    specs.Versioned{SchemaVersion: 2},
		MediaType:    ocispec.MediaTypeImageManifest,
		ArtifactType: spec.artifactType,
		Config:       config,
		Layers:       []ocispec.Descriptor{layer},
	})
	if err != nil {
		return err
	}
	desc := orascontent.NewDescriptorFromBytes(ocispec.MediaTypeImageManifest, manifest)
	return r.repo.PushReference(ctx, desc, bytes.NewReader(manifest), tag)
}

// pushBlob uploads a blob unless the repository has it.
func (r *Registry) pushBlob(ctx context.Context, desc ocispec.Descriptor, data []byte) error {
	ok, err := r.repo.Exists(ctx, desc)
	if err != nil || ok {
		return err
	}
	err = r.repo.Push(ctx, desc, bytes.NewReader(data))
	if errors.Is(err, errdef.ErrAlreadyExists) {
		return nil
	}
	return err
}

// Pull returns the bytes stored as the item of the given kind and ID. It
// fails with ErrInvalidID for an ID that is not of kind, ErrNotFound when
// the tag does not exist, ErrCorrupt when the tag holds something other
// than an item of kind (or its layer fails the digest check), and ErrAuth
// when the registry refuses access. The bytes are not checked against id.
func (r *Registry) Pull(ctx context.Context, kind Kind, id string) ([]byte, error) {
	tag, spec, err := kind.tag(id)
	if err != nil {
		return nil, fmt.Errorf("pull %s %q from %s: %w", kind, id, r, err)
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	data, err := r.pull(ctx, spec, tag)
	if err != nil {
		return nil, fmt.Errorf("pull %s %s from %s: %w", kind, id, r, classify(err))
	}
	return data, nil
}

func (r *Registry) pull(ctx context.Context, spec kindSpec, tag string) ([]byte, error) {
	desc, rc, err := r.repo.FetchReference(ctx, tag)
	if errors.Is(err, errdef.ErrNotFound) {
		return nil, fmt.Errorf("tag %s: %w", tag, ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	if desc.MediaType != ocispec.MediaTypeImageManifest || desc.Size > maxImageManifestBytes {
		return nil, fmt.Errorf("tag %s: %s of %d bytes, want an OCI image manifest: %w", tag, desc.MediaType, desc.Size, ErrCorrupt)
	}
	raw, err := orascontent.ReadAll(rc, desc)
	if err != nil {
		return nil, fmt.Errorf("tag %s: %w", tag, err)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("tag %s: decode image manifest: %w: %w", tag, ErrCorrupt, err)
	}
	if m.ArtifactType != spec.artifactType || len(m.Layers) != 1 || m.Layers[0].MediaType != spec.layerType {
		return nil, fmt.Errorf("tag %s: artifact %q with %d layers, want %q with one %s layer: %w",
			tag, m.ArtifactType, len(m.Layers), spec.artifactType, spec.layerType, ErrCorrupt)
	}
	layer := m.Layers[0]
	if layer.Size > r.maxSize {
		return nil, fmt.Errorf("tag %s: layer of %d bytes exceeds the limit of %d", tag, layer.Size, r.maxSize)
	}
	data, err := orascontent.FetchAll(ctx, r.repo.Blobs(), layer)
	if errors.Is(err, errdef.ErrNotFound) {
		// The tag exists but its layer does not: the artifact is broken,
		// and pushing again would not repair it (the tag exists).
		return nil, fmt.Errorf("tag %s: layer %s missing: %w: %w", tag, layer.Digest, ErrCorrupt, err)
	}
	if err != nil {
		return nil, fmt.Errorf("tag %s: layer %s: %w", tag, layer.Digest, err)
	}
	return data, nil
}

// classify adds this package's sentinels to registry errors. Errors from
// the registry carry request URLs but never credentials.
func classify(err error) error {
	var resp *errcode.ErrorResponse
	switch {
	case errors.As(err, &resp) && (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden),
		errors.Is(err, auth.ErrBasicCredentialNotFound):
		return fmt.Errorf("%w: %w", ErrAuth, err)
	case errors.Is(err, orascontent.ErrMismatchedDigest),
		errors.Is(err, orascontent.ErrTrailingData),
		errors.Is(err, orascontent.ErrInvalidDescriptorSize):
		if !errors.Is(err, ErrCorrupt) {
			return fmt.Errorf("%w: %w", ErrCorrupt, err)
		}
	}
	return err
}

// kindSpec describes how items of a kind are stored in a registry.
type kindSpec struct {
	artifactType string
	layerType    string
}

// tag returns the tag of the item of kind k with the given ID: the kind,
// "-" and the hex digits of the ID. Tags allow at most 128 characters of
// [a-zA-Z0-9._-]; both forms fit.
func (k Kind) tag(id string) (string, kindSpec, error) {
	switch k {
	case KindManifest:
		if !validManifestID(id) {
			return "", kindSpec{}, ErrInvalidID
		}
		return "manifest-" + id[2:], kindSpec{ManifestArtifactType, ManifestLayerType}, nil
	case KindOptions:
		if !validHash(id) {
			return "", kindSpec{}, ErrInvalidID
		}
		return "options-" + id, kindSpec{OptionsArtifactType, OptionsLayerType}, nil
	}
	return "", kindSpec{}, fmt.Errorf("unknown kind %q", string(k))
}

// parseRegistryURL returns "host[:port]/repository" for a URL of
// RegistryOptions.
func parseRegistryURL(raw string) (string, error) {
	bad := func(why string) error {
		return fmt.Errorf("content registry URL %q: %s", redactRegistryURL(raw), why)
	}
	const want = "want oci://host[:port]/repository"
	s := strings.TrimSuffix(strings.TrimPrefix(raw, "oci://"), "/")
	if s == "" {
		return "", bad("empty, " + want)
	}
	if scheme, _, ok := strings.Cut(s, "://"); ok {
		return "", bad(fmt.Sprintf("scheme %s, %s", scheme, want))
	}
	host, path, _ := strings.Cut(s, "/")
	if strings.Contains(host, "@") {
		return "", bad("credentials belong in the username and password options, not the URL")
	}
	if host == "" || path == "" {
		return "", bad("no repository, " + want)
	}
	ref, err := registry.ParseReference(s)
	if err != nil {
		return "", bad(err.Error())
	}
	if ref.Reference != "" {
		return "", bad("has a tag or digest, " + want)
	}
	return ref.Registry + "/" + ref.Repository, nil
}

// redactRegistryURL hides any userinfo in the host part of raw.
func redactRegistryURL(raw string) string {
	prefix, rest := "", raw
	if i := strings.Index(raw, "://"); i >= 0 {
		prefix, rest = raw[:i+3], raw[i+3:]
	}
	host, path, hasPath := strings.Cut(rest, "/")
	at := strings.LastIndex(host, "@")
	if at < 0 {
		return raw
	}
	out := prefix + "<redacted>" + host[at:]
	if hasPath {
		out += "/" + path
	}
	return out
}

// registryHTTPClient returns an HTTP client that retries transient
// failures and trusts the CAs of opts.
func registryHTTPClient(opts RegistryOptions) (*http.Client, error) {
	tr := &http.Transport{Proxy: http.ProxyFromEnvironment}
	if dt, ok := http.DefaultTransport.(*http.Transport); ok {
		tr = dt.Clone()
	}
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		// Asked for by the operator, for registries with self-signed
		// certificates in test setups.
		InsecureSkipVerify: opts.InsecureSkipVerify,
	}
	caPEM := opts.CAPEM
	if opts.CAFile != "" {
		data, err := os.ReadFile(opts.CAFile)
		if err != nil {
			return nil, fmt.Errorf("read CA file: %w", err)
		}
		caPEM = append(append(append([]byte(nil), caPEM...), '\n'), data...)
	}
	if len(caPEM) > 0 {
		pool, ok := tlsroots.Pool(caPEM)
		if !ok {
			return nil, errors.New("CA holds no PEM certificate")
		}
		cfg.RootCAs = pool
	}
	tr.TLSClientConfig = cfg
	return &http.Client{Transport: retry.NewTransport(tr)}, nil
}
