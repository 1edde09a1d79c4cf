package tests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/status"
)

// TestRollout drives GitRepos through their life on one fleet: three
// registered clusters (cluster-1 and cluster-2 env=dev, cluster-3
// env=prod) and a spare cluster-4. The scenarios run in order; each cleans
// up the GitRepos it created, and the kill -9 scenario runs last because it
// replaces the worker.
func TestRollout(t *testing.T) {
	f := startFleet(t, 4, 3)
	t.Run("CommitUpgradeRetarget", func(t *testing.T) { testCommitUpgradeRetarget(t, f) })
	t.Run("DeleteGitRepo", func(t *testing.T) { testDeleteGitRepo(t, f) })
	t.Run("BundleRemovedFromGit", func(t *testing.T) { testBundleRemovedFromGit(t, f) })
	t.Run("InvalidLabelOnOneCluster", func(t *testing.T) { testInvalidLabelOnOneCluster(t, f) })
	t.Run("InvalidGitRepoRejected", func(t *testing.T) { testInvalidGitRepoRejected(t, f) })
	t.Run("ClusterAddInvalidLabel", func(t *testing.T) { testClusterAddInvalidLabel(t, f) })
	t.Run("RelabelRetargets", func(t *testing.T) { testRelabelRetargets(t, f) })
	t.Run("PerClusterCustomization", func(t *testing.T) { testPerClusterCustomization(t, f) })
	t.Run("PauseResumeWatch", func(t *testing.T) { testPauseResumeWatch(t, f) })
	t.Run("PrivateRepoSecretsStayOut", func(t *testing.T) { testPrivateRepoSecretsStayOut(t, f) })
	t.Run("UnreachableClusterConverges", func(t *testing.T) { testUnreachableClusterConverges(t, f) })
	t.Run("Kill9", func(t *testing.T) { testKill9(t, f) })
}

// Scenarios 1–3: a commit is deployed only to matching clusters, a new
// commit upgrades each release exactly once, and a target change
// uninstalls from clusters no longer targeted.
func testCommitUpgradeRetarget(t *testing.T, f *fleet) {
	const ns, cm = "app-ns", "app-config"
	dev := []string{"cluster-1", "cluster-2"}
	repo := f.git.CreateRepo(t, "app", map[string]string{"fleet.yaml": fleetYAML(ns), "cm.yaml": configMapDoc(cm, "v1")})
	out := f.apply(t, gitRepoDoc("app", repo.URL(), selectorTarget("env", "dev")))
	require.Contains(t, out, "gitrepo/fleet-default/app created")

	first := repo.Head(t)
	st := f.waitFor(t, "app", "first commit Ready on the 2 dev clusters", settledAt(first, 2))
	assert.ElementsMatch(t, dev, clustersOf(st))
	for _, c := range dev {
		got, ok := f.configMap(t, c, ns, cm)
		require.True(t, ok, "ConfigMap on %s", c)
		assert.Equal(t, "v1", got.Data["value"])
		assert.Equal(t, "app", got.Labels["flotilla.dev/bundle"])
		assert.Equal(t, 1, f.releaseRevisions(t, c, ns, "app"), "helm revisions on %s", c)
		d, _ := deploymentOn(st, "app", c)
		assert.Equal(t, status.Ready, d.State)
		assert.Equal(t, d.DeploymentID, d.AppliedDeploymentID)
		assert.Equal(t, "app", d.Release)
		assert.Equal(t, ns, d.Namespace)
	}
	_, ok := f.configMap(t, "cluster-3", ns, cm)
	assert.False(t, ok, "cluster-3 (env=prod) must not get the bundle")
	assert.Zero(t, f.releaseRevisions(t, "cluster-3", ns, "app"))
	assert.Equal(t, map[string]int{"cluster-1": 1, "cluster-2": 1}, f.countDeployed(t, "app", ""))
	if t.Failed() {
		return
	}

	// Scenario 2: a new commit, then sync --wait: each release is upgraded
	// once, with one "Deployed bundle" line per cluster.
	before := f.countDeployed(t, "app", "")
	firstID := st.Deployments[0].DeploymentID
	second := repo.Commit(t, map[string]string{"cm.yaml": configMapDoc(cm, "v2")}, "v2")
	f.sync(t, "app")
	st = f.status(t, "app")
	require.True(t, settledAt(second, 2)(st), "after sync --wait the second commit must be rolled out: %+v", st)
	newID := ""
	for _, c := range dev {
		got, ok := f.configMap(t, c, ns, cm)
		require.True(t, ok)
		assert.Equal(t, "v2", got.Data["value"], "data on %s", c)
		assert.Equal(t, 2, f.releaseRevisions(t, c, ns, "app"), "helm revisions on %s", c)
		d, _ := deploymentOn(st, "app", c)
		newID = d.DeploymentID
		assert.NotEqual(t, firstID, newID, "a new commit must give a new deploymentID")
		assert.Equal(t, newID, d.AppliedDeploymentID)
	}
	after := f.countDeployed(t, "app", "")
	for _, c := range dev {
		assert.Equal(t, before[c]+1, after[c], "one new Deployed bundle line on %s", c)
	}
	assert.Equal(t, map[string]int{"cluster-1": 1, "cluster-2": 1}, f.countDeployed(t, "app", newID),
		"the new lines carry the new deploymentID %s", newID)
	// A sync with nothing new changes nothing.
	f.sync(t, "app")
	assert.Equal(t, after, f.countDeployed(t, "app", ""), "a sync without changes must not deploy")
	for _, c := range dev {
		assert.Equal(t, 2, f.releaseRevisions(t, c, ns, "app"))
	}
	if t.Failed() {
		return
	}

	// Scenario 3: retarget to env=prod.
	out = f.apply(t, gitRepoDoc("app", repo.URL(), selectorTarget("env", "prod")))
	require.Contains(t, out, "gitrepo/fleet-default/app configured")
	st = f.waitFor(t, "app", "retargeted to cluster-3", func(st status.GitRepo) bool {
		return settledAt(second, 1)(st) && slices.Equal(clustersOf(st), []string{"cluster-3"})
	})
	got, ok := f.configMap(t, "cluster-3", ns, cm)
	require.True(t, ok, "cluster-3 must get the bundle")
	assert.Equal(t, "v2", got.Data["value"])
	assert.Equal(t, 1, f.releaseRevisions(t, "cluster-3", ns, "app"))
	for _, c := range dev {
		_, ok := f.configMap(t, c, ns, cm)
		assert.False(t, ok, "ConfigMap must be uninstalled from %s", c)
		assert.Zero(t, f.releaseRevisions(t, c, ns, "app"), "release must be uninstalled from %s", c)
	}
	// Re-applying the same document changes nothing.
	out = f.apply(t, gitRepoDoc("app", repo.URL(), selectorTarget("env", "prod")))
	assert.Contains(t, out, "gitrepo/fleet-default/app unchanged")
	assert.Equal(t, st.Generation, f.status(t, "app").Generation)
}

// Scenario 5: deleting a GitRepo uninstalls its releases everywhere; with
// keepResources the objects stay and only Helm's records go.
func testDeleteGitRepo(t *testing.T, f *fleet) {
	// "app" from the previous scenario (or a new one), spread to all three
	// clusters first so that the deletion has something everywhere.
	repoURL := ""
	if st, err := f.statusErr(t, "app"); err == nil && !st.Deleting {
		repoURL = st.Repo
	} else {
		repoURL = f.git.CreateRepo(t, "app2", map[string]string{"fleet.yaml": fleetYAML("app-ns"), "cm.yaml": configMapDoc("app-config", "v1")}).URL()
	}
	f.apply(t, gitRepoDoc("app", repoURL, allClusters))
	f.waitFor(t, "app", "deployed to all clusters", func(st status.GitRepo) bool {
		return st.Settled && st.Generation == st.ObservedGeneration && st.Summary.State == status.Ready && st.Summary.Ready == 3
	})
	for _, c := range []string{"cluster-1", "cluster-2", "cluster-3"} {
		_, ok := f.configMap(t, c, "app-ns", "app-config")
		require.True(t, ok, "ConfigMap on %s before the deletion", c)
	}
	f.remove(t, "app")
	for _, c := range []string{"cluster-1", "cluster-2", "cluster-3"} {
		_, ok := f.configMap(t, c, "app-ns", "app-config")
		assert.False(t, ok, "ConfigMap left on %s", c)
		assert.Zero(t, f.releaseRevisions(t, c, "app-ns", "app"), "release left on %s", c)
	}
	// A deleted GitRepo is either gone or reports that it was deleted and
	// has nothing deployed.
	if st, err := f.statusErr(t, "app"); err == nil {
		assert.True(t, st.Deleting, "status of a deleted GitRepo must say so: %+v", st)
		assert.Empty(t, st.Deployments, "a deleted GitRepo has no deployments")
	} else {
		assert.ErrorContains(t, err, "not found")
	}
	assert.Eventually(t, func() bool { return !slices.Contains(f.gitRepoNames(t), "app") },
		10*time.Second, 250*time.Millisecond, "get gitrepos still lists app")

	const ns, cm = "keep-ns", "keep-config"
	repo := f.git.CreateRepo(t, "keep", map[string]string{"fleet.yaml": fleetYAML(ns), "cm.yaml": configMapDoc(cm, "kept")})
	f.apply(t, gitRepoDoc("keep", repo.URL(), selectorTarget("env", "dev")+"  keepResources: true\n"))
	f.waitFor(t, "keep", "deployed", settledAt(repo.Head(t), 2))
	for _, c := range []string{"cluster-1", "cluster-2"} {
		require.Equal(t, 1, f.releaseRevisions(t, c, ns, "keep"))
	}
	f.remove(t, "keep")
	for _, c := range []string{"cluster-1", "cluster-2"} {
		got, ok := f.configMap(t, c, ns, cm)
		if assert.True(t, ok, "keepResources: ConfigMap must stay on %s", c) {
			assert.Equal(t, "kept", got.Data["value"])
		}
		assert.Zero(t, f.releaseRevisions(t, c, ns, "keep"), "keepResources: Helm records must go on %s", c)
	}
}

// Scenario 4: a bundle deleted from Git is uninstalled; its sibling is
// left alone.
func testBundleRemovedFromGit(t *testing.T, f *fleet) {
	const ns = "multi-ns"
	repo := f.git.CreateRepo(t, "multi", map[string]string{
		"a/fleet.yaml": fleetYAML(ns), "a/cm.yaml": configMapDoc("a-config", "a"),
		"b/fleet.yaml": fleetYAML(ns), "b/cm.yaml": configMapDoc("b-config", "b"),
	})
	f.apply(t, gitRepoDoc("multi", repo.URL(), selectorTarget("env", "dev")))
	st := f.waitFor(t, "multi", "both bundles on both dev clusters", settledAt(repo.Head(t), 4))
	dev := []string{"cluster-1", "cluster-2"}
	aVersions := map[string]string{}
	for _, c := range dev {
		_, ok := deploymentOn(st, "multi-b", c)
		require.True(t, ok, "bundle multi-b on %s: %+v", c, st.Deployments)
		a, ok := f.configMap(t, c, ns, "a-config")
		require.True(t, ok)
		aVersions[c] = a.ResourceVersion
		_, ok = f.configMap(t, c, ns, "b-config")
		require.True(t, ok)
		require.Equal(t, 1, f.releaseRevisions(t, c, ns, "multi-b"))
	}
	aDeployed := f.countDeployed(t, "multi-a", "")

	head := repo.Delete(t, "drop b", "b/fleet.yaml", "b/cm.yaml")
	f.sync(t, "multi")
	st = f.status(t, "multi")
	require.True(t, settledAt(head, 2)(st), "after sync --wait only multi-a remains: %+v", st)
	for _, c := range dev {
		_, ok := deploymentOn(st, "multi-b", c)
		assert.False(t, ok, "multi-b must leave the status on %s", c)
		_, ok = f.configMap(t, c, ns, "b-config")
		assert.False(t, ok, "b's ConfigMap must be uninstalled from %s", c)
		assert.Zero(t, f.releaseRevisions(t, c, ns, "multi-b"), "b's release must be uninstalled from %s", c)
		a, ok := f.configMap(t, c, ns, "a-config")
		if assert.True(t, ok, "a must stay on %s", c) {
			assert.Equal(t, aVersions[c], a.ResourceVersion, "a's ConfigMap must be untouched on %s", c)
		}
		assert.Equal(t, 1, f.releaseRevisions(t, c, ns, "multi-a"), "a's revision must not change on %s", c)
	}
	assert.Equal(t, aDeployed, f.countDeployed(t, "multi-a", ""), "a must not be redeployed")
	f.remove(t, "multi")
}

// Scenario 7: a bundle with an invalid label value is ErrApplied on the
// cluster it targets and nothing of it is applied; another GitRepo is
// unaffected.
func testInvalidLabelOnOneCluster(t *testing.T, f *fleet) {
	const ns = "bad-ns"
	bad := configMapDoc("bad-ok", "fine") + "---\n" +
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bad-label\n  labels:\n    tier: \"not a valid value!\"\ndata:\n  value: x\n"
	badRepo := f.git.CreateRepo(t, "badlabel", map[string]string{"bad/fleet.yaml": fleetYAML(ns), "bad/cm.yaml": bad})
	goodRepo := f.git.CreateRepo(t, "good", map[string]string{"fleet.yaml": fleetYAML("good-ns"), "cm.yaml": configMapDoc("good-config", "ok")})
	f.apply(t, gitRepoDoc("badlabel", badRepo.URL(), "  targets:\n  - clusterName: cluster-2\n")+"---\n"+
		gitRepoDoc("good", goodRepo.URL(), allClusters))

	st := f.waitFor(t, "badlabel", "ErrApplied on cluster-2", func(st status.GitRepo) bool {
		return st.Settled && st.Commit == badRepo.Head(t) && len(st.Deployments) == 1 && st.Summary.State == status.ErrApplied
	})
	d := st.Deployments[0]
	assert.Equal(t, "cluster-2", d.Cluster)
	assert.Equal(t, "badlabel-bad", d.Bundle)
	assert.Equal(t, status.ErrApplied, d.State)
	assert.Contains(t, d.Message, "cluster-2", "the message must name the cluster")
	assert.Contains(t, d.Message, "tier", "the message must name the label")
	assert.Contains(t, st.Summary.Message, "cluster-2")
	for _, name := range []string{"bad-ok", "bad-label"} {
		_, ok := f.configMap(t, "cluster-2", ns, name)
		assert.False(t, ok, "nothing of the invalid bundle may be applied (%s)", name)
	}
	assert.Zero(t, f.releaseRevisions(t, "cluster-2", ns, "badlabel-bad"))
	assert.Empty(t, f.countDeployed(t, "badlabel-bad", ""))

	f.waitFor(t, "good", "Ready everywhere", settledAt(goodRepo.Head(t), 3))
	for _, c := range []string{"cluster-1", "cluster-2", "cluster-3"} {
		_, ok := f.configMap(t, c, "good-ns", "good-config")
		assert.True(t, ok, "good GitRepo on %s", c)
	}
	f.remove(t, "badlabel")
	f.remove(t, "good")
}

// Scenario 9: an invalid GitRepo is refused with the field named, and
// nothing of the file is applied.
func testInvalidGitRepoRejected(t *testing.T, f *fleet) {
	valid := gitRepoDoc("valid-sibling", f.git.URL()+"/none.git", allClusters)
	invalid := gitRepoDoc("badsel", f.git.URL()+"/none.git", "  targets:\n  - clusterSelector:\n      matchLabels:\n        \"bad key!\": x\n")
	stdout, stderr, err := f.cliErr(t, "apply", "-f", writeTemp(t, "bad.yaml", valid+"---\n"+invalid))
	require.Error(t, err, "apply must fail; stdout: %s", stdout)
	assert.Equal(t, 1, exitCode(err))
	assert.Contains(t, stderr, "spec.targets[0].clusterSelector")
	assert.Contains(t, stderr, "badsel")
	assert.NotContains(t, stdout, "created", "nothing may be applied")

	names := f.gitRepoNames(t)
	assert.NotContains(t, names, "badsel")
	assert.NotContains(t, names, "valid-sibling", "a valid document in a file with an invalid one must not be applied")
}

// Scenario 10: `cluster add` with an invalid label value stores nothing.
func testClusterAddInvalidLabel(t *testing.T, f *fleet) {
	stdout, stderr, err := f.cliErr(t, "cluster", "add", "bogus", "--kubeconfig", f.clusters[0].KubeconfigPath,
		"--label", "env=not valid!")
	require.Error(t, err, "cluster add must fail; stdout: %s", stdout)
	assert.Equal(t, 1, exitCode(err))
	assert.Contains(t, stderr, "metadata.labels")
	assert.Contains(t, stderr, "not valid!")

	var list []struct {
		Name string `json:"name"`
	}
	require.NoError(t, json.Unmarshal([]byte(f.cli(t, "cluster", "list", "-o", "json")), &list))
	var names []string
	for _, c := range list {
		names = append(names, c.Name)
	}
	assert.NotContains(t, names, "bogus")
	assert.Contains(t, names, "cluster-1")
	_, err = os.Stat(filepath.Join(f.stateDir, "clusters", "bogus.kubeconfig"))
	assert.True(t, os.IsNotExist(err), "no kubeconfig may be stored for the rejected cluster: %v", err)
}

// Scenario 11: relabelling a cluster re-evaluates targets without a sync.
func testRelabelRetargets(t *testing.T, f *fleet) {
	const ns, cm = "relabel-ns", "relabel-config"
	repo := f.git.CreateRepo(t, "relabel", map[string]string{"fleet.yaml": fleetYAML(ns), "cm.yaml": configMapDoc(cm, "r")})
	f.apply(t, gitRepoDoc("relabel", repo.URL(), selectorTarget("env", "dev")))
	head := repo.Head(t)
	f.waitFor(t, "relabel", "on the dev clusters", settledAt(head, 2))
	_, ok := f.configMap(t, "cluster-3", ns, cm)
	require.False(t, ok)

	start := time.Now()
	out := f.cli(t, "cluster", "label", "cluster-3", "env=dev")
	assert.Contains(t, out, "env=dev")
	st := f.waitFor(t, "relabel", "cluster-3 added by its new label", settledAt(head, 3))
	t.Logf("relabel rolled out in %s", time.Since(start).Round(time.Millisecond))
	assert.Contains(t, clustersOf(st), "cluster-3")
	assert.Zero(t, st.Syncs, "no sync was requested")
	_, ok = f.configMap(t, "cluster-3", ns, cm)
	assert.True(t, ok, "ConfigMap on cluster-3 after relabel")

	f.cli(t, "cluster", "label", "cluster-3", "env=prod")
	f.waitFor(t, "relabel", "cluster-3 dropped after relabel back", settledAt(head, 2))
	_, ok = f.configMap(t, "cluster-3", ns, cm)
	assert.False(t, ok, "ConfigMap must be uninstalled from cluster-3 after relabel back")
	assert.Zero(t, f.releaseRevisions(t, "cluster-3", ns, "relabel"))
	f.remove(t, "relabel")
}

// Scenario 8: an unreachable cluster delays only itself and converges by
// itself once it answers.
func testUnreachableClusterConverges(t *testing.T, f *fleet) {
	const ns, cm = "reach-ns", "reach-config"
	spare := f.cluster("cluster-4")
	f.cli(t, "cluster", "add", spare.Name, "--kubeconfig", unreachableKubeconfig(t, spare), "--label", "env=edge")
	repo := f.git.CreateRepo(t, "reach", map[string]string{"fleet.yaml": fleetYAML(ns), "cm.yaml": configMapDoc(cm, "r")})
	f.apply(t, gitRepoDoc("reach", repo.URL(), allClusters))

	reachable := []string{"cluster-1", "cluster-2", "cluster-3"}
	st := f.waitFor(t, "reach", "3 Ready, cluster-4 WaitApplied", func(st status.GitRepo) bool {
		if len(st.Deployments) != 4 {
			return false
		}
		for _, c := range reachable {
			if d, _ := deploymentOn(st, "reach", c); d.State != status.Ready {
				return false
			}
		}
		d, _ := deploymentOn(st, "reach", "cluster-4")
		return d.State == status.WaitApplied && d.Message != ""
	})
	d, _ := deploymentOn(st, "reach", "cluster-4")
	assert.Contains(t, d.Message, "cluster-4", "the message must name the unreachable cluster")
	assert.Equal(t, 3, st.Summary.Ready)
	for _, c := range reachable {
		_, ok := f.configMap(t, c, ns, cm)
		assert.True(t, ok, "reachable %s must be deployed while cluster-4 is down", c)
	}

	f.cli(t, "cluster", "add", spare.Name, "--kubeconfig", spare.KubeconfigPath)
	st = f.waitForWithin(t, "reach", "cluster-4 converges without a sync", 90*time.Second, settledAt(repo.Head(t), 4))
	assert.Zero(t, st.Syncs)
	_, ok := f.configMap(t, "cluster-4", ns, cm)
	assert.True(t, ok, "ConfigMap on cluster-4 once reachable")
	assert.Equal(t, 1, f.releaseRevisions(t, "cluster-4", ns, "reach"))
	f.remove(t, "reach")
}

// Scenario 6: a kill -9 between rollouts changes nothing; a kill -9 during
// a rollout is survived and every release is upgraded exactly once.
func testKill9(t *testing.T, f *fleet) {
	const ns, cm = "durable-ns", "durable-config"
	dev := []string{"cluster-1", "cluster-2"}
	repo := f.git.CreateRepo(t, "durable", map[string]string{"fleet.yaml": fleetYAML(ns), "cm.yaml": configMapDoc(cm, "v1")})
	f.apply(t, gitRepoDoc("durable", repo.URL(), selectorTarget("env", "dev")))
	first := repo.Head(t)
	f.waitFor(t, "durable", "deployed", settledAt(first, 2))
	for _, c := range dev {
		require.Equal(t, 1, f.releaseRevisions(t, c, ns, "durable"))
	}
	deployed := f.countDeployed(t, "durable", "")
	require.Equal(t, map[string]int{"cluster-1": 1, "cluster-2": 1}, deployed)

	// Between rollouts.
	f.kill9(t)
	f.restart(t)
	f.sync(t, "durable")
	st := f.status(t, "durable")
	assert.True(t, settledAt(first, 2)(st), "after restart and sync: %+v", st)
	for _, c := range dev {
		assert.Equal(t, 1, f.releaseRevisions(t, c, ns, "durable"), "no new revision on %s after restart", c)
	}
	assert.Equal(t, deployed, f.countDeployed(t, "durable", ""), "no Deployed bundle line after restart")

	// During a rollout.
	second := repo.Commit(t, map[string]string{"cm.yaml": configMapDoc(cm, "v2")}, "v2")
	f.cli(t, "sync", "durable")
	ro := f.waitDeploying(t, "durable")
	t.Logf("killing during rollout %s (phase %s)", ro.ID, ro.Phase)
	f.kill9(t)
	t.Logf("at the kill: Deployed bundle lines %v, helm revisions cluster-1 %d, cluster-2 %d", f.countDeployed(t, "durable", ""),
		f.releaseRevisions(t, "cluster-1", ns, "durable"), f.releaseRevisions(t, "cluster-2", ns, "durable"))
	f.restart(t)
	// An activity that was running when the worker died is retried only
	// after its heartbeat timeout (1 min), so allow for that.
	st = f.waitForWithin(t, "durable", "second commit rolled out after the kill", 4*time.Minute, settledAt(second, 2))
	for _, c := range dev {
		got, ok := f.configMap(t, c, ns, cm)
		require.True(t, ok)
		assert.Equal(t, "v2", got.Data["value"])
		assert.Equal(t, 2, f.releaseRevisions(t, c, ns, "durable"), "exactly one more helm revision on %s", c)
		d, _ := deploymentOn(st, "durable", c)
		assertDeployRecorded(t, f.countDeployed(t, "durable", d.DeploymentID)[c], f.countConfirmed(t, "durable", d.DeploymentID)[c],
			"exactly one Deployed bundle line on %s for %s across both workers", c, d.DeploymentID)
	}
	if t.Failed() {
		return
	}

	// In the middle of a Helm upgrade: the worker dies right after Helm
	// wrote the pending record of revision 3 on cluster-1. The deployer
	// must recover the interrupted release (drop the pending record, redo
	// the upgrade as revision 3): the rollout completes, the data is
	// current, no record stays pending, and the crash adds no revision.
	// 150 more ConfigMaps make the upgrade take long enough to be caught.
	third := repo.Commit(t, map[string]string{"cm.yaml": configMapDoc(cm, "v3"), "many.yaml": manyConfigMaps("durable-extra", 150)}, "v3")
	state := f.killOnRevision(t, "cluster-1", ns, "durable", 3, func() { f.cli(t, "sync", "durable") })
	t.Logf("killed with revision 3 on cluster-1 in state %q", state)
	f.restart(t)
	st = f.waitForWithin(t, "durable", "third commit rolled out after a kill mid-upgrade", 4*time.Minute, settledAt(third, 2))
	for _, c := range dev {
		got, ok := f.configMap(t, c, ns, cm)
		require.True(t, ok)
		assert.Equal(t, "v3", got.Data["value"], "data on %s", c)
		records := f.helmRecords(t, c, ns, "durable")
		t.Logf("helm records on %s: %v", c, records)
		latest := 0
		for v, s := range records {
			assert.NotContains(t, s, "pending", "release record v%s on %s left %s", v, c, s)
			n, _ := strconv.Atoi(v)
			latest = max(latest, n)
		}
		assert.Equal(t, "deployed", records[strconv.Itoa(latest)], "latest record on %s", c)
		assert.Equal(t, 3, latest, "three commits, three revisions on %s (a crash adds none)", c)
		d, _ := deploymentOn(st, "durable", c)
		assert.Equal(t, d.DeploymentID, d.AppliedDeploymentID)
		assert.Equal(t, 151, d.Resources, "resources on %s", c)
		_, ok = f.configMap(t, c, ns, "durable-extra-149")
		assert.True(t, ok, "last extra ConfigMap on %s", c)
	}
	f.remove(t, "durable")
}

// pause holds a new commit back (deployments OutOfSync, nothing upgraded);
// resume rolls it out, and `status --watch` follows it until it settles.
func testPauseResumeWatch(t *testing.T, f *fleet) {
	const ns, cm = "paused-ns", "paused-config"
	repo := f.git.CreateRepo(t, "paused", map[string]string{"fleet.yaml": fleetYAML(ns), "cm.yaml": configMapDoc(cm, "v1")})
	f.apply(t, gitRepoDoc("paused", repo.URL(), selectorTarget("env", "dev")))
	first := f.waitFor(t, "paused", "first commit Ready", settledAt(repo.Head(t), 2)).Commit

	require.Contains(t, f.cli(t, "pause", "paused"), "gitrepo/fleet-default/paused paused")
	second := repo.Commit(t, map[string]string{"cm.yaml": configMapDoc(cm, "v2")}, "v2")
	f.cli(t, "sync", "paused")
	st := f.waitFor(t, "paused", "the new commit seen but held back", func(st status.GitRepo) bool {
		return st.Settled && st.LatestCommit == second
	})
	assert.Equal(t, first, st.Commit, "a paused GitRepo rolls nothing out")
	for _, d := range st.Deployments {
		assert.Equal(t, status.OutOfSync, d.State, d.Cluster)
	}
	got, _ := f.configMap(t, "cluster-1", ns, cm)
	assert.Equal(t, "v1", got.Data["value"])

	f.cli(t, "resume", "paused")
	f.waitFor(t, "paused", "the resume taken", func(st status.GitRepo) bool { return !st.Paused })
	out := f.cli(t, "status", "paused", "--watch", "--timeout", "2m")
	assert.Contains(t, out, "Commit:   "+second[:12])
	assert.Contains(t, out, "State:    Ready  2/2 bundle deployments ready")
	got, _ = f.configMap(t, "cluster-1", ns, cm)
	assert.Equal(t, "v2", got.Data["value"], "resume rolls out the held-back commit")
	f.remove(t, "paused")
}

// Issue 4: the rollout renders with fleet.yaml's per-cluster options: a
// Helm bundle with a targetCustomization and a value templated from a
// cluster label, a kustomize bundle, and raw YAML with an overlay for
// env=dev clusters. Each cluster gets its own deployment ID.
func testPerClusterCustomization(t *testing.T, f *fleet) {
	files := map[string]string{
		"helm/fleet.yaml": "namespace: custom-helm\nhelm:\n  values:\n    color: blue\n    env: ${ .ClusterLabels.env }\n" +
			"targetCustomizations:\n- name: prod\n  clusterSelector:\n    matchLabels:\n      env: prod\n  helm:\n    values:\n      color: red\n",
		"helm/Chart.yaml":         "apiVersion: v2\nname: custom\nversion: 0.1.0\n",
		"helm/templates/cm.yaml":  "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: custom-helm\ndata:\n  color: {{ .Values.color }}\n  env: {{ .Values.env }}\n",
		"kust/fleet.yaml":         "namespace: custom-kust\n",
		"kust/kustomization.yaml": "resources:\n- cm.yaml\nnamePrefix: k-\n",
		"kust/cm.yaml":            configMapDoc("custom", "kustomized"),
		"raw/fleet.yaml": "namespace: custom-raw\ntargetCustomizations:\n- name: dev\n  clusterSelector:\n    matchLabels:\n      env: dev\n" +
			"  yaml:\n    overlays:\n    - dev\n",
		"raw/cm.yaml":                    configMapDoc("custom-raw", "base"),
		"raw/overlays/dev/cm_patch.yaml": "data:\n  value: patched\n",
	}
	repo := f.git.CreateRepo(t, "custom", files)
	f.apply(t, gitRepoDoc("custom", repo.URL(), allClusters))
	head := repo.Head(t)
	st := f.waitFor(t, "custom", "three bundles on three clusters", settledAt(head, 9))

	dev, ok := f.configMap(t, "cluster-1", "custom-helm", "custom-helm")
	require.True(t, ok)
	assert.Equal(t, map[string]string{"color": "blue", "env": "dev"}, dev.Data)
	prod, ok := f.configMap(t, "cluster-3", "custom-helm", "custom-helm")
	require.True(t, ok)
	assert.Equal(t, map[string]string{"color": "red", "env": "prod"}, prod.Data)
	d1, _ := deploymentOn(st, "custom-helm", "cluster-1")
	d2, _ := deploymentOn(st, "custom-helm", "cluster-2")
	d3, _ := deploymentOn(st, "custom-helm", "cluster-3")
	assert.Equal(t, d1.DeploymentID, d2.DeploymentID, "same labels, same ID")
	assert.NotEqual(t, d1.DeploymentID, d3.DeploymentID, "customized cluster, own ID")

	k, ok := f.configMap(t, "cluster-3", "custom-kust", "k-custom")
	require.True(t, ok, "kustomize namePrefix applied")
	assert.Equal(t, "kustomized", k.Data["value"])
	rawDev, ok := f.configMap(t, "cluster-1", "custom-raw", "custom-raw")
	require.True(t, ok)
	assert.Equal(t, "patched", rawDev.Data["value"], "overlay on env=dev")
	rawProd, ok := f.configMap(t, "cluster-3", "custom-raw", "custom-raw")
	require.True(t, ok)
	assert.Equal(t, "base", rawProd.Data["value"])

	f.remove(t, "custom")
}
