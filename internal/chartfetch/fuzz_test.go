package chartfetch

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/Masterminds/semver/v3"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/repo"
	"sigs.k8s.io/yaml"
)

// maxFuzzInput bounds what one iteration parses, so each stays cheap.
const maxFuzzInput = 64 << 10

// fuzzRepo packages the charts under testdata (mychart at three versions)
// into a directory with its index.yaml, as a repository serves them, and
// returns the directory.
func fuzzRepo(f *testing.F) string {
	f.Helper()
	dir := f.TempDir()
	for _, c := range []struct{ name, version string }{
		{"mychart", "0.1.0"}, {"mychart", "0.2.0"}, {"mychart", "1.0.0-rc.1"}, {"parent", ""}, {"sibling", ""},
	} {
		ch, err := loader.LoadDir(filepath.Join("testdata", c.name))
		if err != nil {
			f.Fatal(err)
		}
		if c.version != "" {
			ch.Metadata.Version = c.version
		}
		if _, err := chartutil.Save(ch, dir); err != nil {
			f.Fatal(err)
		}
	}
	idx, err := repo.IndexDirectory(dir, "")
	if err != nil {
		f.Fatal(err)
	}
	if err := idx.WriteFile(filepath.Join(dir, "index.yaml"), 0o644); err != nil {
		f.Fatal(err)
	}
	return dir
}

// FuzzParseIndex: parseIndex accepts an index.yaml only with an
// apiVersion, keeps only usable versions, each chart's newest first; and
// what it keeps is found again: a listed version by findInIndex, the
// default pick among the chart's versions, errors classed ErrNotFound or
// ErrUnsupportedSource.
func FuzzParseIndex(f *testing.F) {
	data, err := os.ReadFile(filepath.Join(fuzzRepo(f), "index.yaml"))
	if err != nil {
		f.Fatal(err)
	}
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range [][]byte{data, js, data[:len(data)/2],
		bytes.ReplaceAll(data, []byte("version: 0.2.0"), []byte("version: not-semver")),
		bytes.ReplaceAll(data, []byte("apiVersion: v1\n"), nil),
		[]byte("apiVersion: v1\nentries:\n  a: [null, {}, {version: ''}, {name: a, version: '1.0'}, {name: a, version: '>=1'}]\n"),
		[]byte("apiVersion: v1\nentries: {a: [{name: a, version: 1.0.0-alpha}, {name: a, version: 0.9.0}, {name: a, version: 1.0.0}]}\n"),
		[]byte("apiVersion: v1\nentries: {a: {name: a}}\n"),
		[]byte("a: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: [*c,*c,*c,*c,*c,*c,*c,*c,*c]\napiVersion: v1\n"),
		nil} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > maxFuzzInput {
			t.Skip()
		}
		idx, err := parseIndex(data)
		if err != nil {
			return
		}
		if idx.APIVersion == "" {
			t.Fatal("accepted an index without apiVersion")
		}
		for name, vs := range idx.Entries {
			checkEntry(t, idx, name, vs)
		}
	})
}

// checkEntry holds one chart's versions of a parsed index to parseIndex's
// and findInIndex's contracts.
func checkEntry(t *testing.T, idx *repo.IndexFile, name string, vs repo.ChartVersions) {
	t.Helper()
	var parsed []*semver.Version
	for _, cv := range vs {
		if cv == nil || cv.Metadata == nil || cv.Version == "" {
			t.Fatalf("%s: kept an unusable version %+v", name, cv)
		}
		if v, err := semver.NewVersion(cv.Version); err == nil {
			parsed = append(parsed, v)
		}
	}
	if len(parsed) == len(vs) && !slices.IsSortedFunc(parsed, func(a, b *semver.Version) int { return b.Compare(a) }) {
		t.Fatalf("%s: versions not newest first: %v", name, parsed)
	}
	const repoURL = "https://charts.example"
	cv, err := findInIndex(idx, repoURL, name, "")
	switch {
	case err != nil && len(vs) > 0 && !errors.Is(err, ErrNotFound):
		t.Fatalf("%s: error %v is not ErrNotFound", name, err)
	case err == nil && !slices.Contains(vs, cv):
		t.Fatalf("%s: picked %s, which the index does not list", name, cv.Version)
	}
	for _, listed := range vs {
		cv, err := findInIndex(idx, repoURL, name, listed.Version)
		if _, cerr := semver.NewConstraint(listed.Version); cerr != nil {
			if !errors.Is(err, ErrUnsupportedSource) {
				t.Fatalf("%s %q: error %v, want ErrUnsupportedSource", name, listed.Version, err)
			}
			continue
		}
		if err != nil || cv.Version != listed.Version {
			t.Fatalf("%s: listed version %q not found: %v", name, listed.Version, err)
		}
	}
}

// fuzzTars returns the tar streams (uncompressed) of the chart archives
// of testdata.
func fuzzTars(f *testing.F) [][]byte {
	f.Helper()
	dir := fuzzRepo(f)
	archives, err := filepath.Glob(filepath.Join(dir, "*.tgz"))
	if err != nil || len(archives) == 0 {
		f.Fatalf("no archives in %s: %v", dir, err)
	}
	var tars [][]byte
	for _, a := range archives {
		data, err := os.ReadFile(a)
		if err != nil {
			f.Fatal(err)
		}
		gz, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			f.Fatal(err)
		}
		raw, err := io.ReadAll(gz)
		if err != nil {
			f.Fatal(err)
		}
		tars = append(tars, raw)
	}
	return tars
}

// fuzzMaxUnpacked is the unpacked-size limit of FuzzLoadChart, small so
// that inputs reach it.
const fuzzMaxUnpacked = 16 << 10

// FuzzLoadChart: loadChart refuses an archive with ErrInvalidArchive or
// returns its files sorted, unique, with clean relative names and no more
// than the size limit in all, with the archive's digest; packed again,
// the files load to the same chart. The input is a tar stream, compressed
// here (gzip's checksum would refuse almost every mutation of a
// compressed one), or the raw bytes when raw is set.
func FuzzLoadChart(f *testing.F) {
	for _, tr := range fuzzTars(f) {
		f.Add(tr, false)
		f.Add(tr[:len(tr)/2], false)
		f.Add(gzipBytes(tr), true)
	}
	f.Add(tarOf(f, map[string]string{"c/Chart.yaml": "apiVersion: v2\nname: c\nversion: 1.0.0\n", "c/../x": ""}), false)
	f.Add(tarOf(f, map[string]string{"c/Chart.yaml": "apiVersion: v2\nname: c\nversion: 1.0.0\n", "c/big": strings.Repeat("x", fuzzMaxUnpacked)}), false)
	f.Add(tarOf(f, map[string]string{"/c/Chart.yaml": "name: c\n"}), false)
	f.Add([]byte{}, false)
	f.Fuzz(func(t *testing.T, in []byte, raw bool) {
		if len(in) > maxFuzzInput {
			t.Skip()
		}
		data := in
		if !raw {
			data = gzipBytes(in)
		}
		ch, err := loadChart(data, fuzzMaxUnpacked)
		if err != nil {
			if !errors.Is(err, ErrInvalidArchive) {
				t.Fatalf("error %v is not ErrInvalidArchive", err)
			}
			return
		}
		checkChart(t, ch, data)
		top, files, ok := underOneDir(ch.Files)
		if !ok {
			return
		}
		packed, err := packChart(top, files)
		if err != nil {
			t.Fatalf("packing the loaded files: %v", err)
		}
		again, err := loadChart(packed, fuzzMaxUnpacked)
		if err != nil {
			t.Fatalf("the loaded files, packed again, do not load: %v", err)
		}
		if again.Name != ch.Name || again.Version != ch.Version || !slices.EqualFunc(again.Files, ch.Files, sameFile) {
			t.Fatalf("packed again, %s %s became %s %s with files %q", ch.Name, ch.Version, again.Name, again.Version, fileNames(again.Files))
		}
	})
}

// checkChart holds a loaded chart to loadChart's contract.
func checkChart(t *testing.T, ch *Chart, data []byte) {
	t.Helper()
	if ch.Digest != digestOf(data) {
		t.Fatalf("digest %s is not the archive's", ch.Digest)
	}
	if ch.Name == "" {
		t.Fatal("loaded a chart without a name")
	}
	var total int
	for i, file := range ch.Files {
		n := file.Name
		if n == "" || path.IsAbs(n) || path.Clean(n) != n || slices.Contains(strings.Split(n, "/"), "..") {
			t.Fatalf("unsafe file name %q", n)
		}
		if i > 0 && ch.Files[i-1].Name >= n {
			t.Fatalf("files not sorted and unique: %q then %q", ch.Files[i-1].Name, n)
		}
		total += len(file.Data)
	}
	if total > fuzzMaxUnpacked {
		t.Fatalf("unpacked %d bytes, over the limit of %d", total, fuzzMaxUnpacked)
	}
}

// underOneDir returns the files' common top directory and the files named
// below it, or false when they have none.
func underOneDir(files []File) (string, []File, bool) {
	top, _, _ := strings.Cut(files[0].Name, "/")
	out := make([]File, 0, len(files))
	for _, file := range files {
		dir, rest, ok := strings.Cut(file.Name, "/")
		if !ok || dir != top {
			return "", nil, false
		}
		out = append(out, File{Name: rest, Data: file.Data})
	}
	return top, out, true
}

func sameFile(a, b File) bool { return a.Name == b.Name && bytes.Equal(a.Data, b.Data) }

func gzipBytes(data []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write(data)
	_ = zw.Close()
	return buf.Bytes()
}

// tarOf writes files (name to content) as a tar stream, without checking
// the names.
func tarOf(f *testing.F, files map[string]string) []byte {
	f.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(files[name]))}); err != nil {
			f.Fatal(err)
		}
		if _, err := tw.Write([]byte(files[name])); err != nil {
			f.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		f.Fatal(err)
	}
	return buf.Bytes()
}

// ociManifestSeed is an OCI manifest of a Helm chart as `helm push` writes
// it, with placeholders FuzzFetchOCI fills in: the digest and size of the
// config and of the layer it serves.
const ociManifestSeed = `{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",` +
	`"config":{"mediaType":"application/vnd.cncf.helm.config.v1+json","digest":"CONFIGDIGEST","size":CONFIGSIZE},` +
	`"layers":[{"mediaType":"application/vnd.cncf.helm.chart.content.v1.tar+gzip","digest":"LAYERDIGEST","size":LAYERSIZE}]}`

// fuzzRegistry is an OCI registry of one repository, charts/mychart,
// whose tag 1.0.0 is a manifest set per iteration, with the blobs it may
// name.
type fuzzRegistry struct {
	manifest, config, layer []byte
}

func (r *fuzzRegistry) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	const prefix = "/v2/charts/mychart/"
	p := req.URL.Path
	switch {
	case p == "/v2/" || p == "/v2":
		w.WriteHeader(http.StatusOK)
	case p == prefix+"tags/list":
		_, _ = w.Write([]byte(`{"name":"charts/mychart","tags":["1.0.0"]}`))
	case p == prefix+"manifests/1.0.0" || p == prefix+"manifests/"+digestOf(r.manifest):
		var mt struct {
			MediaType string `json:"mediaType"`
		}
		_ = json.Unmarshal(r.manifest, &mt)
		if mt.MediaType == "" {
			mt.MediaType = "application/vnd.oci.image.manifest.v1+json"
		}
		r.serve(w, req, mt.MediaType, r.manifest)
	case strings.HasPrefix(p, prefix+"blobs/"):
		for _, b := range [][]byte{r.config, r.layer} {
			if p == prefix+"blobs/"+digestOf(b) {
				r.serve(w, req, "application/octet-stream", b)
				return
			}
		}
		http.NotFound(w, req)
	default:
		http.NotFound(w, req)
	}
}

func (r *fuzzRegistry) serve(w http.ResponseWriter, req *http.Request, mediaType string, data []byte) {
	w.Header().Set("Content-Type", mediaType)
	w.Header().Set("Docker-Content-Digest", digestOf(data))
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	if req.Method != http.MethodHead {
		_, _ = w.Write(data)
	}
}

// FuzzFetchOCI: whatever manifest and layer a registry serves, a chart
// Fetch returns from it is the layer the manifest names, byte for byte,
// within the archive and unpacked size limits. The manifest's
// CONFIGDIGEST, CONFIGSIZE, LAYERDIGEST and LAYERSIZE are replaced by the
// digests and sizes of the blobs served, so mutations keep reaching them.
func FuzzFetchOCI(f *testing.F) {
	archives, err := filepath.Glob(filepath.Join(fuzzRepo(f), "mychart-*.tgz"))
	if err != nil || len(archives) == 0 {
		f.Fatalf("no archives: %v", err)
	}
	layer, err := os.ReadFile(archives[0])
	if err != nil {
		f.Fatal(err)
	}
	for _, m := range []string{
		ociManifestSeed,
		strings.Replace(ociManifestSeed, "LAYERSIZE", "1", 1),
		strings.Replace(ociManifestSeed, "LAYERDIGEST", "CONFIGDIGEST", 1),
		strings.Replace(ociManifestSeed, "helm.config", "oci.image.config", 1),
		strings.Replace(ociManifestSeed, `"layers":[`, `"layers":[{"mediaType":"application/vnd.cncf.helm.chart.content.v1.tar+gzip","digest":"LAYERDIGEST","size":LAYERSIZE},`, 1),
		strings.Replace(ociManifestSeed, `,"mediaType":"application/vnd.oci.image.manifest.v1+json"`, "", 1),
		`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[]}`,
		`{}`,
	} {
		f.Add([]byte(m), layer)
	}
	f.Add([]byte(ociManifestSeed), layer[:len(layer)/2])
	f.Add([]byte(ociManifestSeed), []byte{})
	reg := &fuzzRegistry{config: []byte(`{"apiVersion":"v2","name":"mychart","version":"1.0.0"}`)}
	srv := httptest.NewServer(reg)
	f.Cleanup(srv.Close)
	src := Source{Chart: "oci://" + strings.TrimPrefix(srv.URL, "http://") + "/charts/mychart", Version: "1.0.0"}
	f.Fuzz(func(t *testing.T, manifest, layer []byte) {
		if len(manifest) > maxFuzzInput || len(layer) > maxFuzzInput {
			t.Skip()
		}
		reg.layer = layer
		reg.manifest = []byte(strings.NewReplacer(
			"CONFIGDIGEST", digestOf(reg.config), "CONFIGSIZE", strconv.Itoa(len(reg.config)),
			"LAYERDIGEST", digestOf(layer), "LAYERSIZE", strconv.Itoa(len(layer)),
		).Replace(string(manifest)))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		// A Fetcher per iteration: one would serve the archive of an
		// earlier iteration from its memory cache.
		fetcher := &Fetcher{
			HTTPClient:      srv.Client(),
			Auth:            func(string) *Auth { return &Auth{PlainHTTP: true} },
			MaxArchiveSize:  fuzzMaxUnpacked,
			MaxUnpackedSize: fuzzMaxUnpacked,
		}
		ch, err := fetcher.Fetch(ctx, src)
		if err != nil {
			return
		}
		if ch.Digest != digestOf(layer) {
			t.Fatalf("fetched archive %s is not the layer served (%s)", ch.Digest, digestOf(layer))
		}
		if len(layer) > fuzzMaxUnpacked {
			t.Fatalf("accepted a %d-byte archive, over the limit of %d", len(layer), fuzzMaxUnpacked)
		}
		checkChart(t, ch, layer)
	})
}
