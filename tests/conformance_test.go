package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// sharedDir returns ../shared beside the project root (FLOTILLA_SHARED
// overrides it).
func sharedDir(tb testing.TB) string {
	tb.Helper()
	dir := os.Getenv("FLOTILLA_SHARED")
	if dir == "" {
		dir = filepath.Join("..", "..", "shared")
	}
	abs, err := filepath.Abs(dir)
	require.NoError(tb, err)
	if _, err := os.Stat(filepath.Join(abs, "fleet-examples", "tests", "expected")); err != nil {
		tb.Skipf("fleet-examples not found at %s (set FLOTILLA_SHARED): %v", abs, err)
	}
	return abs
}

// chartMirror serves ../shared/fleet-examples-charts, laid out by URL path,
// and returns the --chart-mirror flags that send the examples' remote
// chart URLs there instead of to the internet.
func chartMirror(tb testing.TB, shared string) []string {
	tb.Helper()
	srv := httptest.NewServer(http.FileServer(http.Dir(filepath.Join(shared, "fleet-examples-charts"))))
	tb.Cleanup(srv.Close)
	return []string{
		"--chart-mirror", "https://github.com=" + srv.URL + "/github.com",
		"--chart-mirror", "https://charts.rancher.io=" + srv.URL + "/charts.rancher.io",
	}
}

// objectKey identifies an object as the conformance comparison does.
func objectKey(o map[string]any) string {
	md, _ := o["metadata"].(map[string]any)
	return fmt.Sprintf("%v/%v %v/%v", o["apiVersion"], o["kind"], md["namespace"], md["name"])
}

// bookkeeping reports labels and annotations that record who deployed an
// object rather than what it is: Fleet's objectset.rio.cattle.io/* and
// Flotilla's flotilla.dev/*.
func bookkeeping(key string) bool {
	return strings.HasPrefix(key, "objectset.rio.cattle.io/") || strings.HasPrefix(key, "flotilla.dev/")
}

// parseObjects splits a YAML stream into objects keyed by objectKey,
// without bookkeeping labels and annotations.
func parseObjects(tb testing.TB, stream []byte) map[string]map[string]any {
	tb.Helper()
	out := map[string]map[string]any{}
	for _, doc := range bytes.Split(stream, []byte("\n---")) {
		var o map[string]any
		require.NoError(tb, yaml.Unmarshal(doc, &o), "YAML document:\n%s", doc)
		if len(o) == 0 {
			continue
		}
		if md, ok := o["metadata"].(map[string]any); ok {
			for _, field := range []string{"labels", "annotations"} {
				m, _ := md[field].(map[string]any)
				for k := range m {
					if bookkeeping(k) {
						delete(m, k)
					}
				}
				if m != nil && len(m) == 0 {
					delete(md, field)
				}
			}
		}
		key := objectKey(o)
		require.NotContains(tb, out, key, "object %s twice", key)
		out[key] = o
	}
	return out
}

// fleetDifferences lists differences from Fleet's renders that are
// deliberate, each with its reason. Empty: Flotilla renders every fixture
// identically.
var fleetDifferences = map[string]string{}

// TestFleetExamplesConformance renders every case of
// ../shared/fleet-examples/tests/expected with `flotilla render`, for the
// cluster Fleet rendered it for, and compares the objects with Fleet's.
func TestFleetExamplesConformance(t *testing.T) {
	shared := sharedDir(t)
	mirror := chartMirror(t, shared)
	cache := t.TempDir()
	expected := filepath.Join(shared, "fleet-examples", "tests", "expected")
	identical, total := 0, 0
	for _, scope := range []string{"single-cluster", "multi-cluster"} {
		cases, err := os.ReadDir(filepath.Join(expected, scope))
		require.NoError(t, err)
		for _, c := range cases {
			for _, env := range []string{"dev", "test", "prod"} {
				name := scope + "/" + c.Name() + "/" + env
				total++
				t.Run(name, func(t *testing.T) {
					want, err := os.ReadFile(filepath.Join(expected, scope, c.Name(), env+"-output.yaml"))
					require.NoError(t, err)
					dir := filepath.Join(shared, "fleet-examples", scope, c.Name())
					args := append([]string{"render", dir, "--name", "test", "--kube-version", "v1.25.0", "--chart-cache", cache}, mirror...)
					if scope == "multi-cluster" {
						args = append(args, "--cluster-label", "env="+env)
					}
					if len(bytes.TrimSpace(want)) == 0 {
						// `fleet test` renders only the bundle rooted where it
						// runs; helm-multi-chart's root holds no bundle, so
						// Fleet printed nothing. Like with like: PATH's own
						// directory is not a bundle for us either (render
						// --bundles lists only the three sub-bundles), and
						// those render (remote charts from the Helm repo).
						out := runCLI(t, append(args, "--bundles", "-o", "json")...)
						var views []struct{ Path string }
						require.NoError(t, json.Unmarshal(out, &views))
						for _, v := range views {
							assert.NotEqual(t, ".", v.Path, "the root of %s is not a bundle", name)
						}
						assert.Len(t, views, 3)
						runCLI(t, args...)
						identical++
						return
					}
					got := parseObjects(t, runCLI(t, args...))
					exp := parseObjects(t, want)
					if reason, ok := fleetDifferences[name]; ok {
						t.Skipf("known difference from Fleet: %s", reason)
					}
					assert.Equal(t, sortedKeys(exp), sortedKeys(got), "objects")
					for k, o := range exp {
						assert.Equal(t, o, got[k], "object %s", k)
					}
					if !t.Failed() {
						identical++
					}
				})
			}
		}
	}
	t.Logf("fleet-examples conformance: %d/%d renders identical", identical, total)
	assert.Equal(t, 30, total, "fixtures")
}

func sortedKeys(m map[string]map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// runCLI runs the flotilla binary and returns its standard output,
// failing the test (with standard error) when it exits non-zero.
func runCLI(tb testing.TB, args ...string) []byte {
	tb.Helper()
	cmd := exec.Command(bins.cli, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(tb, err, "flotilla %s\n%s", strings.Join(args, " "), stderr.String())
	return out
}
