package chartfetch

import (
	"context"
	"encoding/pem"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/registry"
)

// newOCIRegistry starts an in-process OCI registry holding mychart 0.1.0,
// 0.2.0 and 1.0.0 under charts/mychart, pushed with Helm's registry client,
// and returns its host:port.
func newOCIRegistry(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")

	client, err := registry.NewClient(registry.ClientOptPlainHTTP(), registry.ClientOptCredentialsFile(os.DevNull))
	require.NoError(t, err)
	dir := t.TempDir()
	for _, v := range []string{"0.1.0", "0.2.0", "1.0.0"} {
		data, err := os.ReadFile(packageChart(t, "mychart", v, dir))
		require.NoError(t, err)
		_, err = client.Push(data, host+"/charts/mychart:"+v)
		require.NoError(t, err)
	}
	return host
}

func TestFetchOCI(t *testing.T) {
	host := newOCIRegistry(t)
	plain := func(string) *Auth { return &Auth{PlainHTTP: true} }
	ctx := context.Background()
	f := &Fetcher{Auth: plain, CacheDir: t.TempDir()}

	for _, tc := range []struct {
		src  Source
		want string
	}{
		{Source{Chart: "oci://" + host + "/charts/mychart", Version: "0.1.0"}, "0.1.0"},
		{Source{Chart: "oci://" + host + "/charts/mychart", Version: "0.x"}, "0.2.0"},
		{Source{Chart: "oci://" + host + "/charts/mychart", Version: "^0.1"}, "0.1.0"},
		{Source{Chart: "oci://" + host + "/charts/mychart"}, "1.0.0"},
		{Source{Chart: "oci://" + host + "/charts/mychart:0.2.0"}, "0.2.0"},
		{Source{Chart: "mychart", Repo: "oci://" + host + "/charts", Version: "~1.0"}, "1.0.0"},
		{Source{Chart: "mychart", Repo: "oci://" + host + "/charts/", Version: "0.1.0"}, "0.1.0"},
	} {
		ch, err := f.Fetch(ctx, tc.src)
		require.NoError(t, err, "%+v", tc.src)
		assert.Equal(t, "mychart", ch.Name)
		assert.Equal(t, tc.want, ch.Version, "%+v", tc.src)
		assert.Contains(t, fileNames(ch.Files), "mychart/Chart.yaml")
		assert.Contains(t, fileNames(ch.Files), "mychart/README.md")
	}

	_, err := f.Fetch(ctx, Source{Chart: "oci://" + host + "/charts/mychart", Version: "9.9.9"})
	require.ErrorIs(t, err, ErrNotFound)
	assert.Contains(t, err.Error(), "1.0.0, 0.2.0, 0.1.0")
	_, err = f.Fetch(ctx, Source{Chart: "oci://" + host + "/charts/mychart", Version: ">=2"})
	require.ErrorIs(t, err, ErrNotFound)
	assert.Contains(t, err.Error(), "1.0.0, 0.2.0, 0.1.0")
	_, err = f.Fetch(ctx, Source{Chart: "oci://" + host + "/charts/nochart", Version: "^1"})
	require.ErrorIs(t, err, ErrNotFound)
	_, err = f.Fetch(ctx, Source{Chart: "oci://" + host + "/charts/mychart:0.2.0", Version: "0.1.0"})
	require.ErrorIs(t, err, ErrUnsupportedSource)
}

func TestFetchOCIMirrorAndCache(t *testing.T) {
	host := newOCIRegistry(t)
	ctx := context.Background()
	cache := t.TempDir()
	src := Source{Chart: "oci://ghcr.io/example/charts/mychart", Version: "0.2.0"}
	f := &Fetcher{CacheDir: cache, Mirrors: map[string]string{"oci://ghcr.io/example": "http://" + host}}
	ch, err := f.Fetch(ctx, src)
	require.NoError(t, err)
	assert.Equal(t, "0.2.0", ch.Version)
	assert.Equal(t, Checksum(Source{Chart: "oci://ghcr.io/example/charts/mychart", Version: "0.2.0"}), Checksum(src))

	// The exact version is now cached: a Fetcher whose mirror leads
	// nowhere still gets it.
	offline := &Fetcher{CacheDir: cache, Mirrors: map[string]string{"oci://ghcr.io/example": "http://127.0.0.1:1"}}
	again, err := offline.Fetch(ctx, src)
	require.NoError(t, err)
	assert.Equal(t, ch.Digest, again.Digest)

	// An oci:// mirror with PlainHTTP from Auth works too.
	f2 := &Fetcher{
		Mirrors: map[string]string{"oci://ghcr.io/example": "oci://" + host},
		Auth:    func(string) *Auth { return &Auth{PlainHTTP: true} },
	}
	ch, err = f2.Fetch(ctx, Source{Chart: "mychart", Repo: "oci://ghcr.io/example/charts", Version: "<1"})
	require.NoError(t, err)
	assert.Equal(t, "0.2.0", ch.Version)
}

func TestFetchOCIOverTLSWithCABundle(t *testing.T) {
	srv := httptest.NewTLSServer(ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "https://")
	client, err := registry.NewClient(registry.ClientOptHTTPClient(srv.Client()), registry.ClientOptCredentialsFile(os.DevNull))
	require.NoError(t, err)
	data, err := os.ReadFile(packageChart(t, "mychart", "1.0.0", t.TempDir()))
	require.NoError(t, err)
	_, err = client.Push(data, host+"/charts/mychart:1.0.0")
	require.NoError(t, err)

	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	f := &Fetcher{Auth: func(u string) *Auth {
		assert.Equal(t, "oci://"+host+"/charts/mychart", u)
		return &Auth{CABundle: caPEM, Username: "ignored", Password: "by-this-registry"}
	}}
	ch, err := f.Fetch(context.Background(), Source{Chart: "oci://" + host + "/charts/mychart", Version: ">=1"})
	require.NoError(t, err)
	assert.Equal(t, "1.0.0", ch.Version)
}
