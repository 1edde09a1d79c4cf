package chartfetch

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/repo"
)

// packageChart packages the chart sources in testdata/<name> with the given
// version into dir, as `helm package --version` would, and returns the
// archive's path.
func packageChart(t *testing.T, name, version, dir string) string {
	t.Helper()
	ch, err := loader.LoadDir(filepath.Join("testdata", name))
	require.NoError(t, err)
	ch.Metadata.Version = version
	p, err := chartutil.Save(ch, dir)
	require.NoError(t, err)
	return p
}

// makeRepo packages mychart 0.1.0, 0.2.0 and 1.0.0 into a new directory
// and writes its index.yaml with chart URLs under baseURL ("" for URLs
// relative to the repository).
func makeRepo(t *testing.T, baseURL string) string {
	t.Helper()
	dir := t.TempDir()
	for _, v := range []string{"0.1.0", "0.2.0", "1.0.0"} {
		packageChart(t, "mychart", v, dir)
	}
	idx, err := repo.IndexDirectory(dir, baseURL)
	require.NoError(t, err)
	idx.SortEntries()
	require.NoError(t, idx.WriteFile(filepath.Join(dir, "index.yaml"), 0o644))
	return dir
}

// fileServer is an HTTP server of a directory that counts the requests for
// each path and may require basic auth.
type fileServer struct {
	*httptest.Server
	user, password string

	mu   sync.Mutex
	hits map[string]int
}

func newFileServer(t *testing.T, dir, user, password string) *fileServer {
	t.Helper()
	s := &fileServer{user: user, password: password, hits: map[string]int{}}
	files := http.FileServer(http.Dir(dir))
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.hits[r.URL.Path]++
		s.mu.Unlock()
		if s.user != "" {
			u, p, ok := r.BasicAuth()
			if !ok || u != s.user || p != s.password {
				w.Header().Set("WWW-Authenticate", `Basic realm="charts"`)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
		}
		files.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// count returns the number of requests for paths ending in suffix.
func (s *fileServer) count(suffix string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for p, c := range s.hits {
		if strings.HasSuffix(p, suffix) {
			n += c
		}
	}
	return n
}

// total returns the number of requests so far.
func (s *fileServer) total() int { return s.count("") }

// readChartDir returns the files of a directory with slash names relative
// to it.
func readChartDir(dir string) ([]File, error) {
	var files []File
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		files = append(files, File{Name: filepath.ToSlash(rel), Data: data})
		return nil
	})
	return files, err
}

// fileNames lists the names of files.
func fileNames(files []File) []string {
	names := make([]string, len(files))
	for i, f := range files {
		names[i] = f.Name
	}
	return names
}

// fileData returns the content of the named file, or nil.
func fileData(files []File, name string) []byte {
	for _, f := range files {
		if f.Name == name {
			return f.Data
		}
	}
	return nil
}
