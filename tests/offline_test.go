package tests

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/status"
	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

// offlinePickup is the controller's --cluster-pickup-timeout in
// TestOfflineAgent: short enough to wait out twice, long enough that a
// removal which did not wait for it is told apart.
const offlinePickup = 20 * time.Second

// offlineRig is TestOfflineAgent's GitRepo: one ConfigMap bundle on three
// pull-mode clusters, of which lost loses its agent.
type offlineRig struct {
	f      *agentFleet
	repo   *testenv.GitRepo
	name   string
	ns, cm string
	online []string
	lost   string
}

// TestOfflineAgent (issue "Offline clusters block nothing"), pull mode:
// an agent stopped for good holds nothing. A new commit is Ready on the
// other clusters within 10 s of the pickup timeout, and status shows the
// offline cluster's deployment WaitApplied naming it (cluster list shows
// it Offline with its last-seen time); restarting the agent deploys the
// newest commit there once; `flotilla cluster remove` of the cluster,
// offline again with a commit queued for it, returns within seconds, and
// the rollout stops waiting for it at once.
func TestOfflineAgent(t *testing.T) {
	began := time.Now()
	f := startAgentFleetArgs(t, 3, "--cluster-pickup-timeout", offlinePickup.String())
	r := &offlineRig{f: f, name: "offline", ns: "offline-ns", cm: "offline-config",
		online: []string{"cluster-1", "cluster-2"}, lost: "cluster-3"}
	for _, c := range append(r.online, r.lost) {
		f.startAgent(t, c, f.newToken(t, "1h"), "--label", "env=pull")
	}
	for _, c := range append(r.online, r.lost) {
		f.waitCluster(t, c, "agent online", 30*time.Second, func(rec protocol.ClusterRecord) bool {
			return rec.Agent != nil && rec.Agent.LastSeen != nil
		})
	}
	repo := f.git.CreateRepo(t, r.name, map[string]string{"fleet.yaml": fleetYAML(r.ns), "cm.yaml": configMapDoc(r.cm, "v1")})
	r.repo = repo
	f.cli(t, "apply", "-f", writeTemp(t, r.name+".yaml", gitRepoDoc(r.name, repo.URL(), allClusters)))
	f.waitGitRepo(t, r.name, "v1 Ready on 3 clusters", 2*time.Minute, settledAt(repo.Head(t), 3))
	require.Equal(t, 1, helmRevisions(t, f.cluster(r.lost), r.ns, r.name))
	t.Logf("fleet up and v1 Ready everywhere after %s", time.Since(began).Round(time.Millisecond))

	// Step 1: the agent of cluster-3 stops for good.
	r.stopAgent(t)
	list := f.cli(t, "cluster", "list")
	assert.Regexp(t, `cluster-3\s+agent\s+Offline\s+\S+ ago`, list, "cluster list shows cluster-3 Offline with its last-seen time")

	// Step 2: two commits reach the other clusters, each within the
	// pickup timeout + 10 s; cluster-3 waits.
	var lostIDs []string
	for _, v := range []string{"v2", "v3"} {
		commit := repo.Commit(t, map[string]string{"cm.yaml": configMapDoc(r.cm, v)}, v)
		st := r.rollOutWithoutLost(t, commit, v)
		d, _ := deploymentOn(st, r.name, r.lost)
		lostIDs = append(lostIDs, d.DeploymentID)
	}
	// A retry rollout queued for cluster-3 may run now; it gives the
	// cluster up again after the pickup timeout.
	var text string
	waitUntil(t, offlinePickup+10*time.Second, "flotilla status shows "+r.lost+" WaitApplied", func() bool {
		text = f.cli(t, "status", r.name)
		return strings.Contains(text, string(status.WaitApplied))
	})
	assert.Contains(t, text, r.lost, "flotilla status names the offline cluster")
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, r.lost) {
			t.Logf("flotilla status: %s", strings.TrimSpace(l))
		}
	}
	for _, l := range strings.Split(list, "\n") {
		if strings.Contains(l, r.lost) {
			t.Logf("flotilla cluster list: %s", strings.Join(strings.Fields(l), " "))
		}
	}

	// Step 3: the agent is back: cluster-3 gets v3, the newest, once; v2
	// never runs there.
	back := time.Now()
	f.startAgent(t, r.lost, "")
	newest := repo.Head(t)
	f.waitGitRepo(t, r.name, "v3 Ready on every cluster after the agent is back", 2*time.Minute, settledAt(newest, 3))
	t.Logf("agent back: v3 Ready on %s after %s", r.lost, time.Since(back).Round(time.Millisecond))
	deployed := countBundleLines(t, "Deployed bundle", f.logs, r.name, "")
	assert.Equal(t, 2, deployed[r.lost], "Deployed bundle lines on %s: v1 and v3", r.lost)
	assert.Zero(t, countBundleLines(t, "Deployed bundle", f.logs, r.name, lostIDs[0])[r.lost], "v2 is never deployed on %s", r.lost)
	assert.Equal(t, 1, countBundleLines(t, "Deployed bundle", f.logs, r.name, lostIDs[1])[r.lost], "v3 is deployed once on %s", r.lost)
	assert.Equal(t, 2, helmRevisions(t, f.cluster(r.lost), r.ns, r.name), "Helm revisions on %s: v1 and v3", r.lost)

	// Step 4: offline again, with a commit queued for it: removing the
	// cluster returns at once and the rollout stops waiting for it.
	r.removeWhileQueued(t, lostIDs[1])
	t.Logf("TestOfflineAgent took %s", time.Since(began).Round(time.Millisecond))
}

// stopAgent kills the lost cluster's agent and waits until it is Offline.
func (r *offlineRig) stopAgent(t *testing.T) {
	t.Helper()
	kill9(t, r.f.agents[r.lost].proc)
	killed := time.Now()
	r.f.waitCluster(t, r.lost, "Offline", 30*time.Second, func(rec protocol.ClusterRecord) bool { return rec.Agent.Offline })
	t.Logf("%s Offline %s after its agent was killed", r.lost, time.Since(killed).Round(time.Millisecond))
}

// rollOutWithoutLost syncs commit (ConfigMap value v) and checks that the
// online clusters run it, Ready, within the pickup timeout + 10 s, and
// that the rollout then ends with the lost cluster's deployment
// WaitApplied, naming the cluster. It returns the GitRepo's status then.
func (r *offlineRig) rollOutWithoutLost(t *testing.T, commit, v string) status.GitRepo {
	t.Helper()
	pushed := time.Now()
	r.f.sync(t, r.name)
	bound := offlinePickup + 10*time.Second
	var ready time.Duration
	waitUntil(t, bound, v+" Ready on "+strings.Join(r.online, ", "), func() bool {
		ready = time.Since(pushed)
		st := r.status(t)
		return st.LatestCommit == commit && readyOnAll(st, r.name, r.online) && r.runs(t, v)
	})
	// The rollout gives cluster-3 up after the pickup timeout (a retry
	// rollout waiting for it when the commit came makes that two). The
	// GitRepo's own status is the last finished rollout's; retries of
	// cluster-3 may run meanwhile.
	st := r.f.waitGitRepo(t, r.name, v+" rolled out, "+r.lost+" WaitApplied", 2*offlinePickup+15*time.Second, func(st status.GitRepo) bool {
		d, ok := deploymentOn(st, r.name, r.lost)
		return st.Commit == commit && ok && d.State == status.WaitApplied
	})
	ended := time.Since(pushed)
	for _, c := range r.online {
		d, _ := deploymentOn(st, r.name, c)
		assert.Equal(t, status.Ready, d.State, "%s on %s", v, c)
	}
	d, _ := deploymentOn(st, r.name, r.lost)
	assert.Contains(t, d.Message, r.lost, "the WaitApplied message names the cluster")
	t.Logf("%s: Ready on %s %s after the push (bound %s); rollout ended after %s; %s: %s: %s",
		v, strings.Join(r.online, ", "), ready.Round(time.Millisecond), bound, ended.Round(time.Millisecond), r.lost, d.State, d.Message)
	return st
}

// removeWhileQueued stops the lost cluster's agent again, queues a commit
// for it (whose deployment there is not prevID) and removes the cluster.
func (r *offlineRig) removeWhileQueued(t *testing.T, prevID string) {
	t.Helper()
	f := r.f
	r.stopAgent(t)
	commit := r.repo.Commit(t, map[string]string{"cm.yaml": configMapDoc(r.cm, "v4")}, "v4")
	pushed := time.Now()
	f.sync(t, r.name)
	waitUntil(t, offlinePickup/2, "v4 deployed on the online clusters, queued for "+r.lost, func() bool {
		st := r.status(t)
		d, ok := deploymentOn(st, r.name, r.lost)
		return st.Rollout != "" && st.LatestCommit == commit && ok && d.State == status.WaitApplied && d.DeploymentID != prevID &&
			readyOnAll(st, r.name, r.online) && r.runs(t, "v4")
	})
	queued := time.Since(pushed)

	removing := time.Now()
	out := f.cli(t, "cluster", "remove", r.lost)
	took := time.Since(removing)
	assert.Contains(t, out, "cluster/"+r.lost+" removed")
	assert.Less(t, took, 10*time.Second, "cluster remove returns within seconds")
	assert.NotContains(t, f.cli(t, "cluster", "list"), r.lost)

	st := f.waitGitRepo(t, r.name, "v4 settled on the clusters that remain", offlinePickup, settledAt(commit, len(r.online)))
	settled := time.Since(pushed)
	assert.ElementsMatch(t, r.online, clustersOf(st), "the removed cluster is no longer targeted")
	assert.Less(t, settled, offlinePickup, "the rollout did not wait for the pickup timeout")
	assert.NotEmpty(t, logLines(t, "Canceled the work of removed clusters", f.ctrlLogs), "the removed cluster's queued deploy was canceled")
	t.Logf("remove: v4 on the online clusters %s after the push; cluster remove took %s; v4 settled without %s %s after the push (pickup timeout %s)",
		queued.Round(time.Millisecond), took.Round(time.Millisecond), r.lost, settled.Round(time.Millisecond), offlinePickup)
}

// runs reports whether the online clusters' ConfigMap holds value.
func (r *offlineRig) runs(t *testing.T, value string) bool {
	for _, c := range r.online {
		cm, err := r.f.cluster(c).Clientset(t).CoreV1().ConfigMaps(r.ns).Get(t.Context(), r.cm, metav1.GetOptions{})
		if err != nil || cm.Data["value"] != value {
			return false
		}
	}
	return true
}

// status is `flotilla status NAME -o json`: the GitRepo's status with the
// running rollout's progress folded in.
func (r *offlineRig) status(t *testing.T) status.GitRepo {
	t.Helper()
	var st status.GitRepo
	out := r.f.cli(t, "status", r.name, "-o", "json")
	require.NoError(t, json.Unmarshal([]byte(out), &st), out)
	return st
}

// readyOnAll reports whether bundle is Ready on every cluster, at the
// deployment ID it should run.
func readyOnAll(st status.GitRepo, bundle string, clusters []string) bool {
	for _, c := range clusters {
		d, ok := deploymentOn(st, bundle, c)
		if !ok || d.State != status.Ready || d.DeploymentID != d.AppliedDeploymentID {
			return false
		}
	}
	return true
}
