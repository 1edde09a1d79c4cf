package tests

import (
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/registry"
	"helm.sh/helm/v3/pkg/repo"
)

// chartRepo is a Helm chart repository served over HTTP from a directory
// (index.yaml plus archives), optionally behind basic auth, to which a
// test publishes versions of one chart.
type chartRepo struct {
	*httptest.Server
	dir, name string
	mu        sync.Mutex
	indexHits int
}

// newChartRepo serves an empty repository of chart name; with user set it
// requires those credentials.
func newChartRepo(t testing.TB, name, user, password string) *chartRepo {
	t.Helper()
	r := &chartRepo{dir: t.TempDir(), name: name}
	files := http.FileServer(http.Dir(r.dir))
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if user != "" {
			u, p, ok := req.BasicAuth()
			if !ok || u != user || p != password {
				w.Header().Set("WWW-Authenticate", `Basic realm="charts"`)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
		}
		if strings.HasSuffix(req.URL.Path, "/index.yaml") {
			r.mu.Lock()
			r.indexHits++
			r.mu.Unlock()
		}
		files.ServeHTTP(w, req)
	}))
	t.Cleanup(r.Close)
	r.publish(t) // an empty index
	return r
}

// publish packages the given versions of the chart into the repository
// and rewrites its index.yaml.
func (r *chartRepo) publish(t testing.TB, versions ...string) {
	t.Helper()
	for _, v := range versions {
		_, err := chartutil.Save(testChart(r.name, v), r.dir)
		require.NoError(t, err)
	}
	idx, err := repo.IndexDirectory(r.dir, "")
	require.NoError(t, err)
	idx.SortEntries()
	require.NoError(t, idx.WriteFile(filepath.Join(r.dir, "index.yaml"), 0o644))
}

// testChart is a chart whose one ConfigMap, named after the chart, holds
// the chart's version and the value "greeting".
func testChart(name, version string) *chart.Chart {
	return &chart.Chart{
		Metadata: &chart.Metadata{APIVersion: chart.APIVersionV2, Name: name, Version: version, AppVersion: version},
		Values:   map[string]any{"greeting": "hello"},
		Raw:      []*chart.File{{Name: chartutil.ValuesfileName, Data: []byte("greeting: hello\n")}},
		Templates: []*chart.File{{Name: "templates/configmap.yaml", Data: []byte(`apiVersion: v1
kind: ConfigMap
metadata:
  name: ` + name + `
data:
  version: {{ .Chart.Version | quote }}
  greeting: {{ .Values.greeting | quote }}
`)}},
	}
}

// ociRegistry is an in-process OCI registry over plain HTTP.
type ociRegistry struct {
	*httptest.Server
	host string
}

func newOCIRegistry(t testing.TB) *ociRegistry {
	t.Helper()
	srv := httptest.NewServer(ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	return &ociRegistry{Server: srv, host: strings.TrimPrefix(srv.URL, "http://")}
}

// push publishes versions of chart name under <host>/charts/<name>.
func (o *ociRegistry) push(t testing.TB, name string, versions ...string) {
	t.Helper()
	client, err := registry.NewClient(registry.ClientOptPlainHTTP(), registry.ClientOptCredentialsFile(os.DevNull))
	require.NoError(t, err)
	dir := t.TempDir()
	for _, v := range versions {
		p, err := chartutil.Save(testChart(name, v), dir)
		require.NoError(t, err)
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		_, err = client.Push(data, o.host+"/charts/"+name+":"+v)
		require.NoError(t, err)
	}
}

// mirrorFlag makes the worker reach the registry over plain HTTP.
func (o *ociRegistry) mirrorFlag() []string {
	return []string{"--chart-mirror", "oci://" + o.host + "=http://" + o.host}
}

// helmOpDoc is a HelmOp of chart from repoURL ("" for an oci:// chart)
// at version into namespace ns on every cluster, polled every 2 s.
func helmOpDoc(name, repoURL, chartRef, version, ns, extra string) string {
	repoLine := ""
	if repoURL != "" {
		repoLine = "\n    repo: " + repoURL
	}
	return `apiVersion: fleet.cattle.io/v1alpha1
kind: HelmOp
metadata:
  name: ` + name + `
spec:
  pollingInterval: 2s
  defaultNamespace: ` + ns + `
  helm:
    chart: ` + chartRef + repoLine + `
    version: "` + version + `"
  targets:
  - clusterSelector: {}
` + extra
}

// basicAuthSecret is a v1 Secret with Helm repository credentials.
func basicAuthSecret(name, user, password string) string {
	return `apiVersion: v1
kind: Secret
metadata:
  name: ` + name + `
type: kubernetes.io/basic-auth
stringData:
  username: ` + user + `
  password: ` + password + `
`
}
