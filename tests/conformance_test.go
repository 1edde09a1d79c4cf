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
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

// chartMirror serves the shared fleet-examples-charts, laid out by URL
// path, and returns the --chart-mirror flags that send the examples' remote
// chart URLs there instead of to the internet.
func chartMirror(tb testing.TB) []string {
	tb.Helper()
	srv := httptest.NewServer(http.FileServer(http.Dir(testenv.SharedDir(tb, "fleet-examples-charts"))))
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
//
// The figure it logs counts distinct comparisons: one per object of each
// distinct render case. An expected-output file whose render arguments and
// expected output equal an earlier file's is the same comparison, so it is
// neither rendered nor counted again: the single-cluster examples take no
// cluster labels, so their dev, test and prod files are one case each.
func TestFleetExamplesConformance(t *testing.T) {
	examples := testenv.SharedDir(t, "fleet-examples")
	expected := testenv.SharedDir(t, "fleet-examples", "tests", "expected")
	mirror := chartMirror(t)
	cache := t.TempDir()
	var (
		files, cases, emptyCases int
		objects, identical       int
		firstOf                  = map[string]string{} // render arguments and expected output → first file's name
	)
	for _, scope := range []string{"single-cluster", "multi-cluster"} {
		dirs, err := os.ReadDir(filepath.Join(expected, scope))
		require.NoError(t, err)
		for _, c := range dirs {
			for _, env := range []string{"dev", "test", "prod"} {
				name := scope + "/" + c.Name() + "/" + env
				files++
				want, err := os.ReadFile(filepath.Join(expected, scope, c.Name(), env+"-output.yaml"))
				require.NoError(t, err)
				args := append([]string{"render", filepath.Join(examples, scope, c.Name()), "--name", "test", "--kube-version", "v1.25.0", "--chart-cache", cache}, mirror...)
				if scope == "multi-cluster" {
					args = append(args, "--cluster-label", "env="+env)
				}
				key := strings.Join(args, "\x00") + "\x00" + string(want)
				if first, ok := firstOf[key]; ok {
					t.Logf("%s: same render and expected output as %s; not compared again", name, first)
					continue
				}
				firstOf[key] = name
				cases++
				t.Run(name, func(t *testing.T) {
					if len(bytes.TrimSpace(want)) == 0 {
						// `fleet test` renders only the bundle rooted where it
						// runs; helm-multi-chart's root holds no bundle, so
						// Fleet printed nothing. Like with like: PATH's own
						// directory is not a bundle for us either (render
						// --bundles lists only the three sub-bundles), and
						// those render (remote charts from the Helm repo).
						// No object is compared.
						emptyCases++
						out := runCLI(t, append(args, "--bundles", "-o", "json")...)
						var views []struct{ Path string }
						require.NoError(t, json.Unmarshal(out, &views))
						for _, v := range views {
							assert.NotEqual(t, ".", v.Path, "the root of %s is not a bundle", name)
						}
						assert.Len(t, views, 3)
						runCLI(t, args...)
						return
					}
					got := parseObjects(t, runCLI(t, args...))
					exp := parseObjects(t, want)
					keys := sortedKeys(exp, got)
					objects += len(keys)
					if reason, ok := fleetDifferences[name]; ok {
						t.Skipf("known difference from Fleet: %s", reason)
					}
					assert.Equal(t, sortedKeys(exp), sortedKeys(got), "objects")
					for _, k := range keys {
						if assert.Equal(t, exp[k], got[k], "object %s", k) {
							identical++
						}
					}
				})
			}
		}
	}
	t.Logf("fleet-examples conformance: %d/%d distinct object comparisons identical, in %d distinct render cases "+
		"(%d expected-output files; %d case(s) where Fleet renders nothing, checked but with no object to compare)",
		identical, objects, cases, files, emptyCases)
	assert.Equal(t, 30, files, "expected-output files")
	assert.Positive(t, objects, "objects compared")
}

// sortedKeys returns the keys of the maps, sorted, each once.
func sortedKeys(ms ...map[string]map[string]any) []string {
	var keys []string
	for _, m := range ms {
		for k := range m {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return slices.Compact(keys)
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
