package chartfetch

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"errors"
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

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestChecksum(t *testing.T) {
	assert.Equal(t, "ce648b1a536ac8c844ef58f2c3383e621a823acb2be15fa4b0d1cf053709a787",
		Checksum(Source{Chart: "https://github.com/rancher/fleet-examples/releases/download/example/guestbook-0.0.1.tgz"}))
	assert.True(t, strings.HasPrefix(
		Checksum(Source{Chart: "rancher-monitoring", Repo: "https://charts.rancher.io/", Version: "104.1.0+up57.0.3"}),
		"4989bb22"))
}

func TestIsRemote(t *testing.T) {
	for src, want := range map[Source]bool{
		{Chart: "./chart"}:    false,
		{Chart: "chart"}:      false,
		{Chart: "charts/sub"}: false,
		{Chart: "/abs/chart"}: false,
		{Chart: ""}:           false,
		{Chart: "mychart", Repo: "https://charts.example"}:   true,
		{Chart: "https://host/x.tgz"}:                        true,
		{Chart: "http://host/x.tgz?checksum=abc"}:            true,
		{Chart: "oci://ghcr.io/org/chart"}:                   true,
		{Chart: "git::https://github.com/u/r"}:               true,
		{Chart: "github.com/u/r//subdir"}:                    true,
		{Chart: "git@github.com:u/r.git"}:                    true,
		{Chart: "bucket.s3.amazonaws.com/charts/x.tgz"}:      true,
		{Chart: "s3::https://s3.amazonaws.com/bucket/x.tgz"}: true,
	} {
		assert.Equal(t, want, IsRemote(src), "%+v", src)
	}
}

func TestFetchFromRepository(t *testing.T) {
	srv := newFileServer(t, makeRepo(t, ""), "", "")
	f := &Fetcher{}
	ctx := context.Background()

	for _, tc := range []struct{ version, want string }{
		{"0.x", "0.2.0"},
		{"^0.1", "0.1.0"}, // caret on 0.x allows only patch updates, as in Helm
		{"", "1.0.0"},
		{"0.1.0", "0.1.0"},
		{"~1", "1.0.0"},
	} {
		ch, err := f.Fetch(ctx, Source{Chart: "mychart", Repo: srv.URL, Version: tc.version})
		require.NoError(t, err, tc.version)
		assert.Equal(t, "mychart", ch.Name)
		assert.Equal(t, tc.want, ch.Version, "version %q", tc.version)
		assert.Contains(t, fileNames(ch.Files), "mychart/Chart.yaml")
		assert.Contains(t, fileNames(ch.Files), "mychart/templates/configmap.yaml")
		readme, err := os.ReadFile("testdata/mychart/README.md")
		require.NoError(t, err)
		assert.Equal(t, readme, fileData(ch.Files, "mychart/README.md"), "files are kept byte for byte")
		assert.True(t, strings.HasPrefix(ch.Digest, "sha256:"))
		assert.IsNonDecreasing(t, fileNames(ch.Files))
	}

	_, err := f.Fetch(ctx, Source{Chart: "mychart", Repo: srv.URL, Version: "2.0.0"})
	require.ErrorIs(t, err, ErrNotFound)
	assert.Contains(t, err.Error(), "1.0.0, 0.2.0, 0.1.0")
	assert.Contains(t, err.Error(), srv.URL)

	_, err = f.Fetch(ctx, Source{Chart: "nochart", Repo: srv.URL})
	require.ErrorIs(t, err, ErrNotFound)
	assert.Contains(t, err.Error(), `"nochart"`)

	_, err = f.Fetch(ctx, Source{Chart: "mychart", Repo: srv.URL + "/nothing-here"})
	require.ErrorIs(t, err, ErrNotFound)
}

func TestFetchRepositoryBasicAuth(t *testing.T) {
	const user, password = "fleet", "s3cr3t-pa55word"
	srv := newFileServer(t, makeRepo(t, ""), user, password)
	ctx := context.Background()
	src := Source{Chart: "mychart", Repo: srv.URL + "/", Version: "0.2.0"}

	_, err := (&Fetcher{}).Fetch(ctx, src)
	require.ErrorIs(t, err, ErrAuth)
	assert.Contains(t, err.Error(), srv.URL)

	wrong := &Fetcher{Auth: func(string) *Auth { return &Auth{Username: user, Password: "wrong-" + password} }}
	_, err = wrong.Fetch(ctx, src)
	require.ErrorIs(t, err, ErrAuth)
	assert.NotContains(t, err.Error(), password)

	var asked []string
	right := &Fetcher{Auth: func(u string) *Auth {
		asked = append(asked, u)
		if strings.HasPrefix(u, srv.URL) {
			return &Auth{Username: user, Password: password}
		}
		return nil
	}}
	ch, err := right.Fetch(ctx, src)
	require.NoError(t, err)
	assert.Equal(t, "0.2.0", ch.Version)
	assert.Contains(t, asked, srv.URL+"/", "Auth is asked with the repository URL as written")

	// Credentials in the URL are never shown.
	withUserinfo := Source{Chart: "mychart", Repo: strings.Replace(srv.URL, "http://", "http://"+user+":wrong-"+password+"@", 1), Version: "0.2.0"}
	_, err = (&Fetcher{}).Fetch(ctx, withUserinfo)
	require.ErrorIs(t, err, ErrAuth)
	assert.NotContains(t, err.Error(), password)
}

func TestFetchURLChecksum(t *testing.T) {
	dir := t.TempDir()
	archive := packageChart(t, "mychart", "0.1.0", dir)
	data, err := os.ReadFile(archive)
	require.NoError(t, err)
	sum := sha256.Sum256(data)
	good := hex.EncodeToString(sum[:])
	bad := strings.Repeat("0", 64)
	srv := newFileServer(t, dir, "", "")
	chartURL := srv.URL + "/" + filepath.Base(archive)
	ctx := context.Background()
	f := &Fetcher{}

	ch, err := f.Fetch(ctx, Source{Chart: chartURL})
	require.NoError(t, err)
	assert.Equal(t, "sha256:"+good, ch.Digest)
	assert.Equal(t, "mychart", ch.Name)

	for _, q := range []string{"?checksum=" + good, "?checksum=sha256:" + good, "?archive=tgz&checksum=" + good} {
		ch, err = (&Fetcher{}).Fetch(ctx, Source{Chart: chartURL + q})
		require.NoError(t, err, q)
		assert.Equal(t, "0.1.0", ch.Version)
	}

	_, err = (&Fetcher{}).Fetch(ctx, Source{Chart: chartURL + "?checksum=" + bad})
	require.ErrorIs(t, err, ErrChecksum)
	assert.Contains(t, err.Error(), chartURL)
	assert.Contains(t, err.Error(), good)
	assert.Contains(t, err.Error(), bad)

	_, err = (&Fetcher{}).Fetch(ctx, Source{Chart: chartURL + "?checksum=nothex"})
	require.ErrorIs(t, err, ErrUnsupportedSource)

	_, err = f.Fetch(ctx, Source{Chart: srv.URL + "/missing-0.1.0.tgz"})
	require.ErrorIs(t, err, ErrNotFound)
}

func TestFetchCaching(t *testing.T) {
	srv := newFileServer(t, makeRepo(t, ""), "", "")
	ctx := context.Background()
	cache := t.TempDir()
	src := Source{Chart: "mychart", Repo: srv.URL, Version: "0.1.0"}

	first, err := (&Fetcher{CacheDir: cache}).Fetch(ctx, src)
	require.NoError(t, err)
	assert.Equal(t, 1, srv.count(".tgz"))
	_, err = os.Stat(filepath.Join(cache, "sha256", hexOf(first.Digest)+".tgz"))
	require.NoError(t, err, "archive is cached by digest")

	// Same Fetcher, and a new one sharing the cache (another process):
	// the exact version is served without any request.
	f := &Fetcher{CacheDir: cache}
	before := srv.total()
	for i := 0; i < 2; i++ {
		ch, err := f.Fetch(ctx, src)
		require.NoError(t, err)
		assert.Equal(t, first.Digest, ch.Digest)
		assert.Equal(t, first.Files, ch.Files)
	}
	assert.Equal(t, before, srv.total(), "no request for a cached exact version")

	// A constraint needs the index (cached for IndexTTL) but not the archive.
	ch, err := f.Fetch(ctx, Source{Chart: "mychart", Repo: srv.URL, Version: "<0.2"})
	require.NoError(t, err)
	assert.Equal(t, "0.1.0", ch.Version)
	_, err = f.Fetch(ctx, Source{Chart: "mychart", Repo: srv.URL, Version: "<0.2"})
	require.NoError(t, err)
	assert.Equal(t, 1, srv.count(".tgz"))
	assert.Equal(t, 1, srv.count("/index.yaml"), "the index is shared through the cache for IndexTTL")

	// Concurrent fetches, with and without a disk cache.
	for _, f := range []*Fetcher{{CacheDir: t.TempDir()}, {}} {
		var wg sync.WaitGroup
		digests := make([]string, 8)
		errs := make([]error, 8)
		for i := range digests {
			wg.Go(func() {
				ch, err := f.Fetch(ctx, Source{Chart: "mychart", Repo: srv.URL, Version: "0.x"})
				errs[i] = err
				if err == nil {
					digests[i] = ch.Digest
				}
			})
		}
		wg.Wait()
		for i := range digests {
			require.NoError(t, errs[i])
			assert.Equal(t, digests[0], digests[i])
		}
		n := srv.count(".tgz")
		_, err := f.Fetch(ctx, Source{Chart: "mychart", Repo: srv.URL, Version: "0.2.0"})
		require.NoError(t, err)
		assert.Equal(t, n, srv.count(".tgz"))
	}
}

func TestFetchMemoryCacheForURL(t *testing.T) {
	dir := t.TempDir()
	archive := packageChart(t, "mychart", "0.2.0", dir)
	srv := newFileServer(t, dir, "", "")
	f := &Fetcher{}
	src := Source{Chart: srv.URL + "/" + filepath.Base(archive)}
	for i := 0; i < 3; i++ {
		_, err := f.Fetch(context.Background(), src)
		require.NoError(t, err)
	}
	assert.Equal(t, 1, srv.total())
}

func TestFetchIndexTTL(t *testing.T) {
	srv := newFileServer(t, makeRepo(t, ""), "", "")
	f := &Fetcher{IndexTTL: -1}
	for i := 0; i < 2; i++ {
		_, err := f.Fetch(context.Background(), Source{Chart: "mychart", Repo: srv.URL})
		require.NoError(t, err)
	}
	assert.Equal(t, 2, srv.count("/index.yaml"), "negative IndexTTL turns index caching off")
	assert.Equal(t, 1, srv.count(".tgz"))
}

func TestFetchMirror(t *testing.T) {
	// The index lists absolute URLs on the original host; both the
	// repository and those URLs go through the mirror.
	srv := newFileServer(t, makeRepo(t, "https://charts.example.com/stable"), "", "")
	var asked []string
	f := &Fetcher{
		Mirrors: map[string]string{"https://charts.example.com/stable": srv.URL},
		Auth: func(u string) *Auth {
			asked = append(asked, u)
			return nil
		},
	}
	src := Source{Chart: "mychart", Repo: "https://charts.example.com/stable", Version: "0.x"}
	ch, err := f.Fetch(context.Background(), src)
	require.NoError(t, err)
	assert.Equal(t, "0.2.0", ch.Version)
	assert.Equal(t, 1, srv.count("/index.yaml"))
	assert.Equal(t, 1, srv.count("/mychart-0.2.0.tgz"))
	assert.Contains(t, asked, "https://charts.example.com/stable/mychart-0.2.0.tgz", "Auth gets original URLs")

	sum := sha256.Sum256([]byte("mychart:https://charts.example.com/stable:0.x"))
	assert.Equal(t, hex.EncodeToString(sum[:]), Checksum(src), "Checksum uses the original source")

	// A prefix matches only at a boundary.
	assert.Equal(t, "https://charts.example.com/stablex/index.yaml", f.mirror("https://charts.example.com/stablex/index.yaml"))
	f.Mirrors["https://charts.example.com"] = "http://elsewhere"
	assert.Equal(t, srv.URL+"/index.yaml", f.mirror("https://charts.example.com/stable/index.yaml"), "longest prefix wins")
	assert.Equal(t, "http://elsewhere/other", f.mirror("https://charts.example.com/other"))
}

func TestFetchUnsupported(t *testing.T) {
	f := &Fetcher{}
	for _, src := range []Source{
		{Chart: "git::https://github.com/rancher/fleet-examples//single-cluster/helm"},
		{Chart: "github.com/rancher/fleet-examples//single-cluster/helm"},
		{Chart: "git@github.com:rancher/fleet-examples.git"},
		{Chart: "https://github.com/rancher/fleet-examples.git//charts/x"},
		{Chart: "s3::https://s3.amazonaws.com/bucket/chart.tgz"},
		{Chart: "ftp://host/chart.tgz"},
		{Chart: "./local/chart"},
		{Chart: "mychart", Repo: "ftp://host/charts"},
		{Chart: ""},
	} {
		_, err := f.Fetch(context.Background(), src)
		require.ErrorIs(t, err, ErrUnsupportedSource, "%+v", src)
		if src.Chart != "" {
			assert.Contains(t, err.Error(), src.Chart)
		}
	}
}

func TestFetchContextCanceled(t *testing.T) {
	block := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-block:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(block)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := (&Fetcher{}).Fetch(ctx, Source{Chart: "mychart", Repo: srv.URL})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	for _, sentinel := range []error{ErrNotFound, ErrAuth, ErrChecksum, ErrUnsupportedSource, ErrInvalidArchive} {
		assert.False(t, errors.Is(err, sentinel), "a network error wraps no sentinel")
	}
}

func TestFetchServerErrorIsPlain(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "try later", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	_, err := (&Fetcher{}).Fetch(context.Background(), Source{Chart: srv.URL + "/x.tgz"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "503")
	for _, sentinel := range []error{ErrNotFound, ErrAuth, ErrChecksum, ErrUnsupportedSource, ErrInvalidArchive} {
		assert.False(t, errors.Is(err, sentinel))
	}
}

// tgz builds a gzip-compressed tar archive of the given entries.
func tgz(t *testing.T, entries ...*tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, h := range entries {
		body := []byte(strings.Repeat("x", int(h.Size)))
		if h.Typeflag == tar.TypeReg && h.Name == "c/Chart.yaml" {
			body = []byte("apiVersion: v2\nname: c\nversion: 1.0.0\n")
			h.Size = int64(len(body))
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		require.NoError(t, tw.WriteHeader(h))
		if h.Typeflag == tar.TypeReg {
			_, err := tw.Write(body)
			require.NoError(t, err)
		}
	}
	require.NoError(t, tw.Close())
	require.NoError(t, gz.Close())
	return buf.Bytes()
}

func TestFetchRejectsBadArchives(t *testing.T) {
	chartYAML := &tar.Header{Typeflag: tar.TypeReg, Name: "c/Chart.yaml"}
	archives := map[string][]byte{
		"traversal.tgz": tgz(t, chartYAML, &tar.Header{Typeflag: tar.TypeReg, Name: "c/../../evil", Size: 1}),
		"absolute.tgz":  tgz(t, chartYAML, &tar.Header{Typeflag: tar.TypeReg, Name: "/etc/evil", Size: 1}),
		"symlink.tgz":   tgz(t, chartYAML, &tar.Header{Typeflag: tar.TypeSymlink, Name: "c/link", Linkname: "/etc/passwd"}),
		"big.tgz":       tgz(t, chartYAML, &tar.Header{Typeflag: tar.TypeReg, Name: "c/big", Size: 4096}),
		"notgzip.tgz":   []byte("<html>not a chart</html>"),
		"good.tgz":      tgz(t, &tar.Header{Typeflag: tar.TypeDir, Name: "c/"}, chartYAML, &tar.Header{Typeflag: tar.TypeReg, Name: "c/small", Size: 10}),
	}
	dir := t.TempDir()
	for name, data := range archives {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), data, 0o644))
	}
	srv := newFileServer(t, dir, "", "")
	f := &Fetcher{MaxUnpackedSize: 1024}
	for name := range archives {
		ch, err := f.Fetch(context.Background(), Source{Chart: srv.URL + "/" + name})
		if name == "good.tgz" {
			require.NoError(t, err)
			assert.Equal(t, []string{"c/Chart.yaml", "c/small"}, fileNames(ch.Files))
			continue
		}
		require.ErrorIs(t, err, ErrInvalidArchive, name)
	}

	small := &Fetcher{MaxArchiveSize: 10}
	_, err := small.Fetch(context.Background(), Source{Chart: srv.URL + "/good.tgz"})
	require.ErrorIs(t, err, ErrInvalidArchive)
}

func TestStripChecksum(t *testing.T) {
	for in, want := range map[string][2]string{
		"https://h/x.tgz":                       {"https://h/x.tgz", ""},
		"https://h/x.tgz?checksum=abc":          {"https://h/x.tgz", "abc"},
		"https://h/x.tgz?a=1&checksum=abc&b=2":  {"https://h/x.tgz?a=1&b=2", "abc"},
		"https://h/x.tgz?checksum=sha256%3Aabc": {"https://h/x.tgz", "sha256:abc"},
		"https://h/x.tgz?archive=tgz":           {"https://h/x.tgz?archive=tgz", ""},
	} {
		clean, sum := stripChecksum(in)
		assert.Equal(t, want, [2]string{clean, sum}, in)
	}
}

func TestFetchTLS(t *testing.T) {
	repoDir := makeRepo(t, "")
	srv := httptest.NewUnstartedServer(http.FileServer(http.Dir(repoDir)))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // expected handshake failures
	srv.StartTLS()
	defer srv.Close()
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	src := Source{Chart: "mychart", Repo: srv.URL, Version: "1.0.0"}
	ctx := context.Background()

	_, err := (&Fetcher{}).Fetch(ctx, src)
	require.Error(t, err, "the test server's certificate is not trusted by default")

	for _, a := range []*Auth{{CABundle: caPEM}, {InsecureSkipTLSVerify: true}} {
		f := &Fetcher{Auth: func(string) *Auth { return a }}
		ch, err := f.Fetch(ctx, src)
		require.NoError(t, err)
		assert.Equal(t, "1.0.0", ch.Version)
	}

	_, err = (&Fetcher{Auth: func(string) *Auth { return &Auth{CABundle: []byte("junk")} }}).Fetch(ctx, src)
	require.Error(t, err)
}
