package tests

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/flotilla-gitops/flotilla/internal/outcome"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

// TestHostileRepository pushes what a person with push access to one
// repository could use to take a controller down (issue 28, item 5): a
// template bomb in fleet.yaml values and a file far over the size limit.
// Each is refused with a message naming the file (and the bundle and
// cluster where targeting runs per cluster); nothing of that bundle is
// applied; the worker stays up, its peak memory barely moves, and the
// GitRepo's other bundles deploy.
func TestHostileRepository(t *testing.T) {
	start := time.Now()
	f := &failureFleet{fleet: startFleet(t, 1, 1)}
	t.Run("TemplateBomb", func(t *testing.T) { testHostileTemplateBomb(t, f) })
	t.Run("OversizedFile", func(t *testing.T) { testHostileOversizedFile(t, f) })
	t.Logf("TestHostileRepository ran in %s", time.Since(start).Round(time.Second))
}

// peakMiB is the worker's peak resident memory so far (VmHWM), in MiB.
func (f *failureFleet) peakMiB(t testing.TB) float64 {
	t.Helper()
	hwm, _, err := procMemMB(f.w.proc.PID())
	if err != nil {
		t.Skipf("cannot read the worker's memory: %v", err)
	}
	return hwm
}

// requireUp fails when the worker process has exited.
func (f *failureFleet) requireUp(t testing.TB) {
	t.Helper()
	select {
	case <-f.w.proc.Done():
		t.Fatalf("the worker exited: %v\n%s", f.w.proc.ExitErr(), f.w.proc.LogTail(40))
	default:
	}
}

// maxPeakGrowthMiB bounds how much a refused input may raise the
// worker's peak memory: a tenth of what reading it whole cost before (a
// 50 MB manifest took the worker from 236 MiB to 1.1 GiB).
const maxPeakGrowthMiB = 96

func testHostileTemplateBomb(t *testing.T, f *failureFleet) {
	const name, ns = "bomb", "hostile-bomb"
	repo := f.git.CreateRepo(t, name, map[string]string{
		"bomb/fleet.yaml": "defaultNamespace: " + ns + "\nhelm:\n  values:\n    v: ${ repeat 2000000000 \"x\" }\n",
		"bomb/cm.yaml":    configMapDoc("bomb", "v1"),
		"good/fleet.yaml": fleetYAML(ns),
		"good/cm.yaml":    configMapDoc("good", "v1"),
	})
	before := f.peakMiB(t)
	f.apply(t, gitRepoDoc(name, repo.URL(), clusterTarget("cluster-1")))

	st := f.readyOn(t, name, name+"-good", repo.Head(t))
	d := dep(t, st, name+"-bomb", "cluster-1")
	assert.Equal(t, status.ErrApplied, d.State)
	assert.Equal(t, outcome.Invalid, d.Outcome)
	for _, want := range []string{"bundle bomb-bomb", "cluster cluster-1", "bomb/fleet.yaml", "helm.values: v", "template exceeds its memory budget"} {
		assert.Contains(t, d.Message, want)
	}
	_, applied := f.configMap(t, "cluster-1", ns, "bomb")
	assert.False(t, applied, "nothing of the bomb's bundle is applied")
	_, applied = f.configMap(t, "cluster-1", ns, "good")
	assert.True(t, applied, "the GitRepo's other bundle is deployed")

	// A new commit runs the targeting again: still refused, still up.
	head := repo.Commit(t, map[string]string{"good/cm.yaml": configMapDoc("good", "v2")}, "good v2")
	st = f.readyOn(t, name, name+"-good", head)
	assert.True(t, is(st, name+"-bomb", "cluster-1", status.ErrApplied))
	f.requireUp(t)
	grew := f.peakMiB(t) - before
	t.Logf("worker peak memory grew by %.0f MiB", grew)
	assert.Less(t, grew, float64(maxPeakGrowthMiB), "the bomb was refused before it allocated")
}

func testHostileOversizedFile(t *testing.T, f *failureFleet) {
	const name, ns = "oversized", "hostile-big"
	// 40 MiB of YAML comments ahead of a ConfigMap: a valid manifest that
	// the default --max-file-size (10Mi) refuses.
	big := strings.Repeat("# padding padding padding padding padding padding\n", 40<<20/50) + configMapDoc("big", "v1")
	repo := f.git.CreateRepo(t, name, map[string]string{
		"small/fleet.yaml": fleetYAML(ns),
		"small/cm.yaml":    configMapDoc("small", "v1"),
	})
	f.apply(t, gitRepoDoc(name, repo.URL(), clusterTarget("cluster-1")))
	f.readyOn(t, name, name+"-small", repo.Head(t))

	before := f.peakMiB(t)
	repo.Commit(t, map[string]string{"app/fleet.yaml": fleetYAML(ns), "app/cm.yaml": big}, "a huge manifest")
	f.sync(t, name)
	st := f.waitFor(t, name, "the oversized file refused", func(st status.GitRepo) bool { return st.Error != "" })
	for _, want := range []string{"bundle oversized-app", "app/cm.yaml", "over the limit of 10Mi", "flotilla-worker --max-file-size"} {
		assert.Contains(t, st.Error, want)
	}
	_, applied := f.configMap(t, "cluster-1", ns, "big")
	assert.False(t, applied, "nothing of the oversized bundle is applied")
	f.requireUp(t)
	grew := f.peakMiB(t) - before
	t.Logf("worker peak memory grew by %.0f MiB", grew)
	assert.Less(t, grew, float64(maxPeakGrowthMiB), "the file was refused before it was read whole")
}
