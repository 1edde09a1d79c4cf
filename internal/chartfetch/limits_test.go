package chartfetch

import (
	"archive/tar"
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/sizelimit"
)

// endlessServer serves an endless body on every path, with a Content-Length
// of declared when it is positive, and counts the bytes it managed to
// write.
func endlessServer(t *testing.T, declared int64) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var written atomic.Int64
	chunk := bytes.Repeat([]byte("apiVersion: v1\n"), 4096)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if declared > 0 {
			w.Header().Set("Content-Length", strconv.FormatInt(declared, 10))
		}
		for written.Load() < 1<<30 {
			n, err := w.Write(chunk)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &written
}

// TestFetchLimitsWhileReading serves an index.yaml and a chart archive of
// a GiB: each is refused once the limit is read (or at once, from the
// Content-Length), with a *sizelimit.Error naming the URL, the limit and
// the flag, and the server could write little more than the limit (what
// loopback buffers hold).
func TestFetchLimitsWhileReading(t *testing.T) {
	const limit = 1 << 20
	tests := []struct {
		name     string
		declared int64 // Content-Length; 0: chunked
		src      func(url string) Source
		flag     string
	}{
		{"index.yaml chunked", 0, func(u string) Source { return Source{Chart: "c", Repo: u} }, sizelimit.IndexFlag},
		{"index.yaml declared", 1 << 30, func(u string) Source { return Source{Chart: "c", Repo: u} }, sizelimit.IndexFlag},
		{"archive chunked", 0, func(u string) Source { return Source{Chart: u + "/c.tgz"} }, sizelimit.ChartFlag},
		{"archive declared", 1 << 30, func(u string) Source { return Source{Chart: u + "/c.tgz"} }, sizelimit.ChartFlag},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, written := endlessServer(t, tt.declared)
			f := &Fetcher{MaxIndexSize: limit, MaxArchiveSize: limit, IndexTTL: -1}
			_, err := f.Fetch(context.Background(), tt.src(srv.URL))
			var se *sizelimit.Error
			require.ErrorAs(t, err, &se)
			assert.ErrorIs(t, err, ErrInvalidArchive)
			assert.Equal(t, tt.flag, se.Flag)
			assert.Contains(t, err.Error(), srv.URL)
			assert.Contains(t, err.Error(), "over the limit of 1Mi (raise it with flotilla-worker --"+tt.flag+")")
			assert.Less(t, written.Load(), int64(limit+16<<20), "the server wrote far less than the GiB it offered")
		})
	}
}

// TestFetchOCILimit pulls from a real registry with a chart limit below
// the chart's size: refused with the chart flag, as ErrInvalidArchive.
func TestFetchOCILimit(t *testing.T) {
	host := newOCIRegistry(t)
	f := &Fetcher{Auth: func(string) *Auth { return &Auth{PlainHTTP: true} }, MaxArchiveSize: 300}
	for _, src := range []Source{
		{Chart: "oci://" + host + "/charts/mychart", Version: "0.1.0"}, // pulled by tag
		{Chart: "oci://" + host + "/charts/mychart", Version: "0.x"},   // tags listed first
	} {
		_, err := f.Fetch(context.Background(), src)
		var se *sizelimit.Error
		require.ErrorAs(t, err, &se, "%+v", src)
		assert.ErrorIs(t, err, ErrInvalidArchive)
		assert.Equal(t, sizelimit.ChartFlag, se.Flag)
	}
	ch, err := (&Fetcher{Auth: f.Auth}).Fetch(context.Background(), Source{Chart: "oci://" + host + "/charts/mychart", Version: "0.1.0"})
	require.NoError(t, err, "the default limit fits")
	assert.Equal(t, "mychart", ch.Name)
}

// TestUntarGzipBomb: archives that decompress to far more than they
// weigh are refused quickly, whether one file's header declares it or
// files that each fit add up to more.
func TestUntarGzipBomb(t *testing.T) {
	const maxUnpacked = 1 << 20
	chartYAML := &tar.Header{Typeflag: tar.TypeReg, Name: "c/Chart.yaml"}
	bombs := map[string][]byte{
		"one file": tgz(t, chartYAML, &tar.Header{Typeflag: tar.TypeReg, Name: "c/zeros", Size: 64 << 20}),
		"files together": tgz(t, chartYAML, &tar.Header{Typeflag: tar.TypeReg, Name: "c/a", Size: 600 << 10},
			&tar.Header{Typeflag: tar.TypeReg, Name: "c/b", Size: 600 << 10}),
	}
	for name, data := range bombs {
		require.Less(t, len(data), 1<<20, "the %s bomb is small", name)
		start := time.Now()
		_, err := loadChart(data, maxUnpacked)
		var se *sizelimit.Error
		require.ErrorAs(t, err, &se, name)
		assert.ErrorIs(t, err, ErrInvalidArchive, name)
		assert.Equal(t, sizelimit.ChartUnpackedFlag, se.Flag, name)
		assert.Less(t, time.Since(start), 2*time.Second, name)
	}
	_, err := loadChart(bombs["files together"], 2<<20)
	assert.NoError(t, err, "within a raised limit the archive loads")
}
