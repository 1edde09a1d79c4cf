package tests

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/flotilla-gitops/flotilla/internal/status"
)

// TestFleetFields checks the last GitRepo fields of Fleet that Flotilla
// used to ignore (issue 30, items 5 and 6), on one push-mode cluster:
// bundles (the user-driven scan), helmSecretNameForPaths, and raw YAML
// Lists deployed as their items.
func TestFleetFields(t *testing.T) {
	start := time.Now()
	f := &failureFleet{fleet: startFleet(t, 1, 1)}
	t.Run("Bundles", func(t *testing.T) { t.Parallel(); testDrivenBundles(t, f) })
	t.Run("HelmSecretNameForPaths", func(t *testing.T) { t.Parallel(); testHelmSecretNameForPaths(t, f) })
	t.Run("List", func(t *testing.T) { t.Parallel(); testRawList(t, f) })
	t.Cleanup(func() { t.Logf("TestFleetFields ran in %s", time.Since(start).Round(time.Second)) })
}

// testDrivenBundles: a GitRepo with bundles deploys exactly the listed
// bases, each with its options file (two bundles of one base here), and
// neither its paths nor nested fleet.yaml directories.
func testDrivenBundles(t *testing.T, f *failureFleet) {
	const name = "ffdriven"
	repo := f.git.CreateRepo(t, name, map[string]string{
		"apps/web/cm.yaml":           configMapDoc("ff-web", "v1"),
		"apps/web/nested/fleet.yaml": "namespace: ff-nested\n",
		"apps/web/nested/cm.yaml":    configMapDoc("ff-nested", "v1"),
		"envs/dev.yaml":              "namespace: ff-dev\nlabels:\n  env: dev\n",
		"envs/prod.yaml":             "namespace: ff-prod\n",
		"apps/skip/fleet.yaml":       "namespace: ff-skip\n",
		"apps/skip/cm.yaml":          configMapDoc("ff-skip", "v1"),
	})
	f.apply(t, gitRepoDoc(name, repo.URL(), "  paths: [apps/skip]\n  bundles:\n"+
		"  - base: apps/web\n    options: ../../envs/dev.yaml\n  - base: apps/web\n    options: ../../envs/prod.yaml\n"+
		clusterTarget("cluster-1")))
	head := repo.Head(t)
	st := f.waitFor(t, name, "both listed bundles Ready", func(st status.GitRepo) bool {
		return st.Commit == head && is(st, name+"-envs-dev", "cluster-1", status.Ready) && is(st, name+"-envs-prod", "cluster-1", status.Ready)
	})
	var bundles []string
	for _, b := range st.Bundles {
		bundles = append(bundles, b.Name)
	}
	assert.ElementsMatch(t, []string{name + "-envs-dev", name + "-envs-prod"}, bundles, "exactly the listed bundles")
	for _, ns := range []string{"ff-dev", "ff-prod"} {
		_, ok := f.configMap(t, "cluster-1", ns, "ff-web")
		assert.True(t, ok, "the base deployed with the options of %s", ns)
		_, ok = f.configMap(t, "cluster-1", ns, "ff-nested")
		assert.False(t, ok, "a nested fleet.yaml directory is not deployed")
	}
	_, ok := f.configMap(t, "cluster-1", "ff-skip", "ff-skip")
	assert.False(t, ok, "paths are not scanned when bundles are listed")
}

// testHelmSecretNameForPaths: each bundle's chart is fetched with its
// path's entry (repository A needs credentials A, B needs B, matched by a
// glob); a bundle with no entry sends none, not even helmSecretName's.
func testHelmSecretNameForPaths(t *testing.T, f *failureFleet) {
	const name = "ffpaths"
	a := newChartRepo(t, "ff-chart-a", "robot-a", "pass-a")
	a.publish(t, "1.0.0")
	b := newChartRepo(t, "ff-chart-b", "robot-b", "pass-b")
	b.publish(t, "1.0.0")
	c := newAuthRecorder(t)
	f.apply(t, basicAuthSecret("ff-wrong", "robot-x", "pass-x"))
	f.apply(t, "apiVersion: v1\nkind: Secret\nmetadata:\n  name: ff-by-path\nstringData:\n  secrets-path.yaml: |\n"+
		"    a:\n      username: robot-a\n      password: pass-a\n    'b*':\n      username: robot-b\n      password: pass-b\n")
	repo := f.git.CreateRepo(t, name, map[string]string{
		"a/fleet.yaml":      "namespace: ff-a\nhelm:\n  repo: " + a.URL + "\n  chart: ff-chart-a\n  version: 1.0.0\n",
		"bundle/fleet.yaml": "namespace: ff-b\nhelm:\n  repo: " + b.URL + "\n  chart: ff-chart-b\n  version: 1.0.0\n",
		"c/fleet.yaml":      "namespace: ff-c\nhelm:\n  chart: " + c.URL + "/evil-0.1.0.tgz\n",
	})
	f.apply(t, gitRepoDoc(name, repo.URL(), "  helmSecretNameForPaths: ff-by-path\n  helmSecretName: ff-wrong\n"+
		"  helmRepoURLRegex: '"+regexp.QuoteMeta("http://127.0.0.1:")+".*'\n"+clusterTarget("cluster-1")))
	head := repo.Head(t)
	f.waitFor(t, name, "the three charts Ready", func(st status.GitRepo) bool {
		return st.Commit == head && is(st, name+"-a", "cluster-1", status.Ready) &&
			is(st, name+"-bundle", "cluster-1", status.Ready) && is(st, name+"-c", "cluster-1", status.Ready)
	})
	for ns, cm := range map[string]string{"ff-a": "ff-chart-a", "ff-b": "ff-chart-b", "ff-c": "evil"} {
		_, ok := f.configMap(t, "cluster-1", ns, cm)
		assert.True(t, ok, "%s/%s deployed", ns, cm)
	}
	requests, auth := c.seen()
	assert.NotZero(t, requests, "c's chart was fetched")
	assert.Empty(t, auth, "a path without an entry gets no credentials, helmSecretName's neither")
	out := f.cli(t, "status", name)
	assert.NotContains(t, out, "pass-")
}

// testRawList: a v1 List in a raw YAML bundle is deployed as its items,
// and the deployment counts the items.
func testRawList(t *testing.T, f *failureFleet) {
	const name = "fflist"
	items := []string{"ff-item-1", "ff-item-2", "ff-item-3"}
	var list strings.Builder
	list.WriteString("apiVersion: v1\nkind: List\nitems:\n")
	for _, it := range items {
		list.WriteString("- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: " + it + "\n  data:\n    value: x\n")
	}
	repo := f.git.CreateRepo(t, name, map[string]string{
		"list/fleet.yaml": "namespace: ff-list\n",
		"list/list.yaml":  list.String(),
	})
	f.apply(t, gitRepoDoc(name, repo.URL(), clusterTarget("cluster-1")))
	st := f.readyOn(t, name, name+"-list", repo.Head(t))
	d := dep(t, st, name+"-list", "cluster-1")
	assert.Equal(t, len(items), d.Resources, "the items are the release's objects")
	assert.Equal(t, len(items), d.ReadyResources)
	for _, it := range items {
		_, ok := f.configMap(t, "cluster-1", "ff-list", it)
		assert.True(t, ok, "%s deployed", it)
	}
	manifest := releaseManifest(t, f, "ff-list", name+"-list")
	assert.NotContains(t, manifest, "kind: List", "the release holds the items, as Fleet's does")
	assert.Equal(t, len(items), strings.Count(manifest, "kind: ConfigMap"))
}

// releaseManifest returns the manifest of the newest Helm release record
// of release in namespace ns on cluster-1.
func releaseManifest(t *testing.T, f *failureFleet, ns, release string) string {
	t.Helper()
	cs, ctx := f.kube(t, "cluster-1")
	l, err := cs.CoreV1().Secrets(ns).List(ctx, listByRelease(release))
	require.NoError(t, err)
	require.NotEmpty(t, l.Items, "no release records of %s/%s", ns, release)
	newest := slices.MaxFunc(l.Items, func(a, b corev1.Secret) int { return cmp.Compare(a.Labels["version"], b.Labels["version"]) })
	data, err := base64.StdEncoding.DecodeString(string(newest.Data["release"]))
	require.NoError(t, err)
	zr, err := gzip.NewReader(bytes.NewReader(data))
	require.NoError(t, err)
	var rel struct {
		Manifest string `json:"manifest"`
	}
	require.NoError(t, json.NewDecoder(zr).Decode(&rel))
	return rel.Manifest
}
