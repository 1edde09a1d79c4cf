package tests

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/status"
)

// TestDeletionGuards checks that absence is never a reason to remove
// (fleet#5406), on one fleet (cluster-1 and cluster-2 env=dev, cluster-3
// env=prod):
//   - MissingGroupHoldsUninstalls: a GitRepo targets clusterGroup dev;
//     the group is deleted and a commit lands: nothing is uninstalled,
//     status names the missing group (DeletionHeld), the commit deploys
//     nowhere new; the group applied again, the commit deploys. The same
//     with the target edited to name a group that was never created.
//   - GuardHoldsMassUninstall: a commit removes 3 of a GitRepo's 4
//     bundles from the 3 clusters: the deletion guard (default 25 %, at
//     least 5) holds the 9 uninstalls, DeletionHeld names them, the
//     bundle kept deploys; `flotilla approve --deletions` removes them.
//   - ReleaseOwnership: a second GitRepo whose bundle uses the first's
//     releaseName and namespace is ErrApplied naming the first and
//     touches nothing; deleting it leaves the first's objects.
func TestDeletionGuards(t *testing.T) {
	f := startFleet(t, 3, 3)
	t.Run("MissingGroupHoldsUninstalls", func(t *testing.T) { testMissingGroupHoldsUninstalls(t, f) })
	t.Run("GuardHoldsMassUninstall", func(t *testing.T) { testGuardHoldsMassUninstall(t, f) })
	t.Run("ReleaseOwnership", func(t *testing.T) { testReleaseOwnership(t, f) })
}

func clusterGroupDoc(name, key, value string) string {
	return fmt.Sprintf("apiVersion: flotilla.dev/v1alpha1\nkind: ClusterGroup\nmetadata:\n  name: %s\nspec:\n  selector:\n    matchLabels:\n      %s: %s\n",
		name, key, value)
}

func groupTarget(group string) string { return "  targets:\n  - clusterGroup: " + group + "\n" }

// heldFor returns a status condition check: DeletionHeld names what is
// missing.
func heldFor(missing string) func(status.GitRepo) bool {
	return func(st status.GitRepo) bool {
		c, ok := st.Condition(status.ConditionDeletionHeld)
		return st.Settled && ok && c.Status == status.ConditionTrue && strings.Contains(c.Message, missing)
	}
}

func testMissingGroupHoldsUninstalls(t *testing.T, f *fleet) {
	const name, ns = "guarded", "guarded-ns"
	const release = name + "-app"
	dev := []string{"cluster-1", "cluster-2"}
	f.apply(t, clusterGroupDoc("dev", "env", "dev"))
	repo := f.git.CreateRepo(t, name, map[string]string{
		"app/fleet.yaml": fleetYAML(ns),
		"app/cm.yaml":    configMapDoc("app-config", "v1"),
	})
	f.apply(t, gitRepoDoc(name, repo.URL(), groupTarget("dev")))
	defer f.remove(t, name)
	f.waitFor(t, name, "app Ready on both dev clusters", settledAt(repo.Head(t), 2))

	stillThere := func(why, value string) {
		t.Helper()
		for _, cl := range dev {
			cm, ok := f.configMap(t, cl, ns, "app-config")
			if assert.True(t, ok, "%s: app stays on %s", why, cl) {
				assert.Equal(t, value, cm.Data["value"], "%s: %s", why, cl)
			}
			assert.Equal(t, 1, f.releaseRevisions(t, cl, ns, release), "%s: nothing happened to the release on %s", why, cl)
		}
	}

	// The group goes (deleted by mistake), then a commit lands.
	assert.Contains(t, f.cli(t, "delete", "clustergroup/dev"), "clustergroup/dev deleted")
	second := repo.Commit(t, map[string]string{"app/cm.yaml": configMapDoc("app-config", "v2")}, "v2")
	f.cli(t, "sync", name)
	st := f.waitForWithin(t, name, "the uninstalls held, naming the missing group", 90*time.Second, func(st status.GitRepo) bool {
		return st.Commit == second && heldFor(`clusterGroup "dev" not found`)(st)
	})
	c, _ := st.Condition(status.ConditionDeletionHeld)
	t.Logf("held: %s", c.Message)
	assert.Contains(t, c.Message, "2 uninstall(s) held on cluster-1, cluster-2")
	assert.Contains(t, st.Progress, "uninstalls held")
	stillThere("group deleted", "v1")

	// The group is back: the commit deploys there.
	f.apply(t, clusterGroupDoc("dev", "env", "dev"))
	f.waitForWithin(t, name, "commit 2 Ready on both dev clusters", 90*time.Second, func(st status.GitRepo) bool {
		c, _ := st.Condition(status.ConditionDeletionHeld)
		return settledAt(second, 2)(st) && c.Status == status.ConditionFalse
	})
	for _, cl := range dev {
		cm, ok := f.configMap(t, cl, ns, "app-config")
		require.True(t, ok, cl)
		assert.Equal(t, "v2", cm.Data["value"], cl)
	}

	// A typo in the target: a group that was never created.
	f.apply(t, gitRepoDoc(name, repo.URL(), groupTarget("dve")))
	f.waitForWithin(t, name, "the typo holds the uninstalls", 90*time.Second, heldFor(`clusterGroup "dve" not found`))
	for _, cl := range dev {
		_, ok := f.configMap(t, cl, ns, "app-config")
		assert.True(t, ok, "a typo uninstalls nothing from %s", cl)
		assert.Equal(t, 2, f.releaseRevisions(t, cl, ns, release), cl)
	}
}

func testGuardHoldsMassUninstall(t *testing.T, f *fleet) {
	const name, ns = "mass", "mass-ns"
	all := []string{"cluster-1", "cluster-2", "cluster-3"}
	files := map[string]string{}
	for _, b := range []string{"a", "b", "c", "d"} {
		files[b+"/fleet.yaml"] = fleetYAML(ns)
		files[b+"/cm.yaml"] = configMapDoc("cm-"+b, "v1")
	}
	repo := f.git.CreateRepo(t, name, files)
	f.apply(t, gitRepoDoc(name, repo.URL(), allClusters))
	defer f.remove(t, name)
	f.waitFor(t, name, "4 bundles Ready on 3 clusters", settledAt(repo.Head(t), 12))

	// One commit drops b, c and d and changes a.
	files = map[string]string{"a/cm.yaml": configMapDoc("cm-a", "v2")}
	repo.Commit(t, files, "a v2")
	second := repo.Delete(t, "drop b, c, d", "b/fleet.yaml", "b/cm.yaml", "c/fleet.yaml", "c/cm.yaml", "d/fleet.yaml", "d/cm.yaml")
	f.cli(t, "sync", name)
	st := f.waitForWithin(t, name, "9 uninstalls held by the deletion guard", 90*time.Second, func(st status.GitRepo) bool {
		c, ok := st.Condition(status.ConditionDeletionHeld)
		return st.Settled && st.Commit == second && ok && c.Status == status.ConditionTrue && c.Reason == status.ReasonDeletionGuard
	})
	c, _ := st.Condition(status.ConditionDeletionHeld)
	t.Logf("held: %s", c.Message)
	assert.Contains(t, c.Message, "9 of 12 release(s) would be uninstalled (more than 25%) on cluster-1, cluster-2, cluster-3 (bundle removed)")
	assert.Contains(t, c.Message, "flotilla approve "+name+" --deletions")
	assert.Contains(t, st.Progress, "uninstalls held by the deletion guard")
	assert.Contains(t, uiCurrentDetails(t, f.w.client(t), "gitrepo/fleet-default/"+name),
		"9 uninstall(s) held by the deletion guard until `flotilla approve "+name+" --deletions`", "the Temporal UI's line of the GitRepo")
	for _, cl := range all {
		cm, ok := f.configMap(t, cl, ns, "cm-a")
		if assert.True(t, ok, cl) {
			assert.Equal(t, "v2", cm.Data["value"], "the bundle kept deploys on %s", cl)
		}
		for _, b := range []string{"b", "c", "d"} {
			_, ok := f.configMap(t, cl, ns, "cm-"+b)
			assert.True(t, ok, "bundle %s stays on %s until approved", b, cl)
		}
	}

	out := f.cli(t, "approve", name, "--deletions")
	assert.Contains(t, out, "approved 9 uninstall(s)")
	f.waitForWithin(t, name, "the approved uninstalls done", 90*time.Second, func(st status.GitRepo) bool {
		c, _ := st.Condition(status.ConditionDeletionHeld)
		return settledAt(second, 3)(st) && c.Status == status.ConditionFalse
	})
	for _, cl := range all {
		for _, b := range []string{"b", "c", "d"} {
			_, ok := f.configMap(t, cl, ns, "cm-"+b)
			assert.False(t, ok, "bundle %s removed from %s once approved", b, cl)
		}
	}
	_, stderr, err := f.cliErr(t, "approve", name, "--deletions")
	require.Error(t, err, "nothing is held any more")
	assert.Contains(t, stderr, "the deletion guard holds no uninstall")
}

func testReleaseOwnership(t *testing.T, f *fleet) {
	const ns, release = "shared-ns", "shared"
	const target = "  targets:\n  - clusterName: cluster-1\n"
	bundleFiles := func(value string) map[string]string {
		return map[string]string{
			"app/fleet.yaml": fleetYAML(ns) + "helm:\n  releaseName: " + release + "\n",
			"app/cm.yaml":    configMapDoc("shared-config", value),
		}
	}
	first := f.git.CreateRepo(t, "owner-a", bundleFiles("first"))
	f.apply(t, gitRepoDoc("owner-a", first.URL(), target))
	defer f.remove(t, "owner-a")
	f.waitFor(t, "owner-a", "the first GitRepo's release Ready", settledAt(first.Head(t), 1))

	second := f.git.CreateRepo(t, "owner-b", bundleFiles("second"))
	f.apply(t, gitRepoDoc("owner-b", second.URL(), target))
	st := f.waitForWithin(t, "owner-b", "the second GitRepo refused", 90*time.Second, func(st status.GitRepo) bool {
		return st.Settled && len(st.Deployments) == 1 && st.Deployments[0].State == status.ErrApplied
	})
	d := st.Deployments[0]
	t.Logf("refused: %s", d.Message)
	assert.Contains(t, d.Message, "release shared-ns/shared belongs to GitRepo fleet-default/owner-a", "names the owner")
	assert.Contains(t, d.Message, "cluster-1", "names the cluster")
	unchanged := func(why string) {
		t.Helper()
		cm, ok := f.configMap(t, "cluster-1", ns, "shared-config")
		if assert.True(t, ok, why) {
			assert.Equal(t, "first", cm.Data["value"], why)
		}
		assert.Equal(t, 1, f.releaseRevisions(t, "cluster-1", ns, release), "%s: the first's release untouched", why)
	}
	unchanged("while refused")
	// Untargeted from cluster-1: nothing of the first's is touched.
	f.apply(t, gitRepoDoc("owner-b", second.URL(), "  targets:\n  - clusterName: cluster-2\n"))
	f.waitForWithin(t, "owner-b", "deployed on cluster-2 only", 90*time.Second, settledAt(second.Head(t), 1))
	unchanged("the second GitRepo untargeted")
	f.remove(t, "owner-b")
	unchanged("the second GitRepo deleted")

	// A third GitRepo's own release in the same namespace, with
	// deleteNamespace: untargeted, its release goes and the namespace,
	// which holds the first's objects, stays; its status says so.
	third := f.git.CreateRepo(t, "owner-c", map[string]string{
		"app/fleet.yaml": fleetYAML(ns) + "deleteNamespace: true\n",
		"app/cm.yaml":    configMapDoc("third-config", "third"),
	})
	f.apply(t, gitRepoDoc("owner-c", third.URL(), target))
	defer f.remove(t, "owner-c")
	f.waitFor(t, "owner-c", "the third GitRepo's release Ready", settledAt(third.Head(t), 1))
	f.apply(t, gitRepoDoc("owner-c", third.URL(), "  targets:\n  - clusterName: cluster-2\n"))
	st = f.waitForWithin(t, "owner-c", "the namespace kept, and said", 90*time.Second, func(st status.GitRepo) bool {
		return st.Settled && slices.ContainsFunc(st.Warnings, func(w string) bool { return strings.Contains(w, "namespace "+ns+" kept") })
	})
	t.Logf("warnings: %q", st.Warnings)
	assert.True(t, slices.ContainsFunc(st.Warnings, func(w string) bool { return strings.HasPrefix(w, "cluster cluster-1: bundle owner-c-app: ") }),
		"the warning names the cluster and the bundle: %q", st.Warnings)
	_, ok := f.configMap(t, "cluster-1", ns, "third-config")
	assert.False(t, ok, "the third's own release is removed")
	unchanged("the namespace kept")
	assert.Equal(t, status.Ready, f.status(t, "owner-a").Summary.State, "the first GitRepo is still Ready")
}
