package workflows

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/flotilla-gitops/flotilla/activities"
	"github.com/flotilla-gitops/flotilla/internal/notify"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

// The drift watch (issue 15): a ClusterWorkflow runs one Watch over the
// watch sets its GitRepos send (watch.go); a GitRepo sends a cluster its
// set when it changes and folds the watch's live reports into its status
// (live.go).

// watchEpoch is when the watch tests' workflows start.
var watchEpoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// watchStart is one Watch activity the ClusterWorkflow started.
type watchStart struct {
	At    time.Duration // workflow time since watchEpoch
	Queue string
	In    activities.WatchInput
}

// watchRig runs a ClusterWorkflow whose Watch runs its full WatchRun
// unless cancelled, recording every start and cancellation.
type watchRig struct {
	t   *testing.T
	env *testsuite.TestWorkflowEnvironment
	// starts and cancels are recorded on the test environment's main
	// loop (its listeners), so they need no lock.
	starts  []watchStart
	cancels []time.Duration
	// events are the notify.Events emitted.
	events *[]notify.Event
}

// newWatchRig builds the rig; first, when set, is what the first Watch
// returns at once (later ones run WatchRun and return nil).
func newWatchRig(t *testing.T, first error) *watchRig {
	t.Helper()
	return newWatchRigAfter(t, first, 0)
}

// newWatchRigAfter is newWatchRig whose first Watch returns first after
// running for d.
func newWatchRigAfter(t *testing.T, first error, d time.Duration) *watchRig {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	r := &watchRig{t: t, env: suite.NewTestWorkflowEnvironment()}
	r.env.SetStartTime(watchEpoch)
	r.events = acceptEvents(r.env)
	var a *activities.Activities
	r.env.OnActivity(a.NotifyGitRepos, mock.Anything, mock.Anything).Return(nil)
	var ca *activities.ClusterActivities
	if first != nil {
		// The first matching mock wins until Once is used up.
		r.env.OnActivity(ca.Watch, mock.Anything, mock.Anything).After(d).Return(first).Once()
	}
	r.env.OnActivity(ca.Watch, mock.Anything, mock.Anything).After(activities.WatchRun).Return(nil)
	r.env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, args converter.EncodedValues) {
		if info.ActivityType.Name != "Watch" {
			return
		}
		var in activities.WatchInput
		require.NoError(t, args.Get(&in))
		r.starts = append(r.starts, watchStart{At: r.env.Now().Sub(watchEpoch), Queue: info.TaskQueue, In: in})
	})
	r.env.SetOnActivityCanceledListener(func(info *activity.Info) {
		if info.ActivityType.Name == "Watch" {
			r.cancels = append(r.cancels, r.env.Now().Sub(watchEpoch))
		}
	})
	return r
}

func (r *watchRig) at(d time.Duration, f func()) { r.env.RegisterDelayedCallback(f, d) }

func (r *watchRig) watch(s protocol.WatchSet) { r.env.SignalWorkflow(protocol.SignalWatch, s) }

// run runs the cluster's workflow from in and removes the cluster at end;
// the workflow must end cleanly.
func (r *watchRig) run(in ClusterInput, end time.Duration) {
	r.t.Helper()
	r.at(end, func() { r.env.SignalWorkflow(protocol.SignalDelete, nil) })
	r.env.ExecuteWorkflow(ClusterWorkflow, in)
	require.True(r.t, r.env.IsWorkflowCompleted())
	require.NoError(r.t, r.env.GetWorkflowError())
}

// pushCluster is a cluster the controller reaches with its kubeconfig.
func pushCluster() ClusterInput {
	return ClusterInput{ClusterStart: protocol.ClusterStart{Record: protocol.ClusterRecord{Name: "c1", KubeconfigHash: "h"}}}
}

// watchSet is gitRepo's set of one release at deployment ID id.
func watchSet(gitRepo, id string) protocol.WatchSet {
	name := gitRepo[strings.LastIndex(gitRepo, "/")+1:]
	return protocol.WatchSet{GitRepo: gitRepo, Releases: []protocol.WatchedRelease{{Bundle: name, Release: name,
		Namespace: "apps", DeploymentID: id, OptionsKey: "opts-" + name}}}
}

// sets are the GitRepos each start watched, in order.
func (r *watchRig) sets() [][]protocol.WatchSet {
	var out [][]protocol.WatchSet
	for _, s := range r.starts {
		out = append(out, s.In.Sets)
	}
	return out
}

// The watch follows its GitRepos' sets: one Watch at a time over all of
// them, sorted by GitRepo, restarted (the running one cancelled) on every
// change; an empty set removes its GitRepo, and with no sets left nothing
// runs, however long, until a set arrives again.
func TestClusterWorkflow_WatchFollowsSets(t *testing.T) {
	r := newWatchRig(t, nil)
	zeta, alpha := watchSet("fleet/zeta", "s-z:1"), watchSet("fleet/alpha", "s-a:1")
	alpha2 := watchSet("fleet/alpha", "s-a:2")
	r.at(time.Minute, func() {
		assert.Empty(t, r.starts, "nothing to watch: no Watch")
		r.watch(zeta)
	})
	r.at(2*time.Minute, func() {
		require.Len(t, r.starts, 1)
		assert.Equal(t, activities.WatchInput{Cluster: "c1", Sets: []protocol.WatchSet{zeta}, Token: "default-test-run-id/1"}, r.starts[0].In,
			"each watch is named, for its contact reports")
		assert.Empty(t, r.cancels)
		r.watch(alpha)
	})
	r.at(3*time.Minute, func() {
		require.Len(t, r.starts, 2, "a second GitRepo restarts the watch")
		assert.Equal(t, []protocol.WatchSet{alpha, zeta}, r.starts[1].In.Sets, "both sets, sorted by GitRepo")
		assert.Equal(t, []time.Duration{2 * time.Minute}, r.cancels, "the first Watch was cancelled")
		r.watch(alpha2)
	})
	r.at(4*time.Minute, func() {
		require.Len(t, r.starts, 3)
		assert.Equal(t, []protocol.WatchSet{alpha2, zeta}, r.starts[2].In.Sets, "a GitRepo's new set replaces its old one")
		r.watch(protocol.WatchSet{GitRepo: "fleet/zeta"})
	})
	r.at(5*time.Minute, func() {
		require.Len(t, r.starts, 4)
		assert.Equal(t, []protocol.WatchSet{alpha2}, r.starts[3].In.Sets, "an empty set removes its GitRepo")
		// A GitRepo the watch never followed leaves: nothing changes.
		r.watch(protocol.WatchSet{GitRepo: "fleet/never"})
	})
	r.at(6*time.Minute, func() {
		assert.Len(t, r.starts, 4, "an empty set of an unknown GitRepo does not restart the watch")
		assert.Len(t, r.cancels, 3)
		r.watch(protocol.WatchSet{GitRepo: "fleet/alpha"})
	})
	r.at(7*time.Minute, func() {
		assert.Len(t, r.starts, 4, "no sets left: no Watch")
		assert.Len(t, r.cancels, 4, "the last Watch was cancelled")
	})
	r.at(3*time.Hour, func() {
		assert.Len(t, r.starts, 4, "still none, long after a WatchRun")
		r.watch(zeta)
	})
	r.run(pushCluster(), 3*time.Hour+time.Minute)

	assert.Equal(t, [][]protocol.WatchSet{{zeta}, {alpha, zeta}, {alpha2, zeta}, {alpha2}, {zeta}}, r.sets())
	var at []time.Duration
	for _, s := range r.starts {
		at = append(at, s.At)
		assert.Equal(t, "c1", s.In.Cluster)
	}
	assert.Equal(t, []time.Duration{time.Minute, 2 * time.Minute, 3 * time.Minute, 4 * time.Minute, 3 * time.Hour}, at,
		"each change starts the next Watch at once")
	assert.Equal(t, []time.Duration{2 * time.Minute, 3 * time.Minute, 4 * time.Minute, 6 * time.Minute}, r.cancels)
}

// A Watch that returns (its WatchRun passed) is started again with the
// same sets at once; one that fails for good is started again after a
// pause.
func TestClusterWorkflow_WatchRestartsWhenItEnds(t *testing.T) {
	run := activities.WatchRun
	tests := []struct {
		name  string
		first error
		want  []time.Duration
	}{
		{name: "run passed", want: []time.Duration{time.Minute, time.Minute + run, time.Minute + 2*run}},
		{name: "failed",
			first: temporal.NewNonRetryableApplicationError("cluster c1: this worker cannot report drift", "Watch", nil),
			want: []time.Duration{time.Minute, time.Minute + 10*time.Second, time.Minute + 10*time.Second + run,
				time.Minute + 10*time.Second + 2*run}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newWatchRig(t, tt.first)
			set := watchSet("fleet/app", "s-a:1")
			r.at(time.Minute, func() { r.watch(set) })
			r.run(pushCluster(), time.Minute+2*run+time.Minute)
			var at []time.Duration
			for _, s := range r.starts {
				at = append(at, s.At)
				assert.Equal(t, []protocol.WatchSet{set}, s.In.Sets)
			}
			assert.Equal(t, tt.want, at)
			assert.Empty(t, r.cancels, "nothing changed: nothing cancelled")
		})
	}
}

// The watch runs on the agent's queue in pull mode, and otherwise on the
// controller's watch queue, never its own: a thousand long-running
// watches there would hold every slot deploys and Git checks need.
func TestClusterWorkflow_WatchQueue(t *testing.T) {
	for _, tt := range []struct {
		name    string
		rec     protocol.ClusterRecord
		onAgent bool
	}{
		{name: "push mode", rec: protocol.ClusterRecord{Name: "c1", KubeconfigHash: "h"}},
		{name: "agent", rec: protocol.ClusterRecord{Name: "c1", Agent: &protocol.AgentRecord{TokenID: "tok1"}}, onAgent: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := newWatchRig(t, nil)
			r.at(time.Minute, func() { r.watch(watchSet("fleet/app", "s-a:1")) })
			r.run(ClusterInput{ClusterStart: protocol.ClusterStart{Record: tt.rec}}, 2*time.Minute)
			require.Len(t, r.starts, 1)
			if tt.onAgent {
				assert.Equal(t, protocol.ClusterQueue("c1"), r.starts[0].Queue)
			} else {
				// The test environment runs workflows on "default-test-taskqueue".
				assert.Equal(t, protocol.WatchQueue("default-test-taskqueue"), r.starts[0].Queue)
			}
		})
	}
}

// The sets survive continue-as-new: the run ends its Watch first, hands
// the sets on, and the next run watches them without waiting for a
// signal.
func TestClusterWorkflow_WatchSetsSurviveContinueAsNew(t *testing.T) {
	r := newWatchRig(t, nil)
	alpha, zeta := watchSet("fleet/alpha", "s-a:1"), watchSet("fleet/zeta", "s-z:1")
	in := pushCluster()
	in.Notified, in.Watch = true, []protocol.WatchSet{alpha}
	r.at(time.Minute, func() { r.watch(zeta) })
	r.at(2*time.Minute, func() { r.env.SetCurrentHistoryLength(historyLimit + 1) })
	r.env.ExecuteWorkflow(ClusterWorkflow, in)

	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(r.env.GetWorkflowError(), &can), "got %v", r.env.GetWorkflowError())
	var next ClusterInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	assert.Equal(t, []protocol.WatchSet{alpha, zeta}, next.Watch)
	assert.Equal(t, [][]protocol.WatchSet{{alpha}, {alpha, zeta}}, r.sets(), "the carried set is watched at once")
	require.Len(t, r.starts, 2)
	assert.Equal(t, time.Duration(0), r.starts[0].At)
	assert.Equal(t, []time.Duration{time.Minute, 2 * time.Minute}, r.cancels,
		"the run ends its Watch before continuing as new")
}

// Runs recorded before the drift watch existed never start one.
func TestClusterWorkflow_WatchVersionGate(t *testing.T) {
	r := newWatchRig(t, nil)
	r.env.OnGetVersion(versionDriftWatch, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	r.at(time.Minute, func() { r.watch(watchSet("fleet/app", "s-a:1")) })
	r.run(pushCluster(), 2*time.Hour)
	assert.Empty(t, r.starts)
}

// sentWatch is one SignalWatch a GitRepo sent.
type sentWatch struct {
	ID  string
	Set protocol.WatchSet
}

// watchLog records the SignalWatch signals a GitRepo sends (from the
// test environment's goroutines).
type watchLog struct {
	mu   sync.Mutex
	sent []sentWatch
}

// since returns the signals after the first n, sorted by workflow ID
// (signals sent together are recorded in any order).
func (l *watchLog) since(n int) []sentWatch {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := slices.Clone(l.sent[min(n, len(l.sent)):])
	slices.SortStableFunc(out, func(a, b sentWatch) int { return strings.Compare(a.ID, b.ID) })
	return out
}

func (l *watchLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.sent)
}

// driftRepoEnv is gitRepoEnv whose bundles carry options (so deployed
// releases are watched), recording the SignalWatch signals sent.
func driftRepoEnv() (*testsuite.TestWorkflowEnvironment, *fakeFleet, *watchLog) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	f := newFakeFleet()
	var a *activities.Activities
	env.OnActivity(a.Render, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.RenderInput) (activities.RenderResult, error) {
			res := appBundles(in.Commit)
			res.Bundles[0].OptionsHash = optionsOf(in.Commit)
			return res, nil
		})
	l := &watchLog{}
	env.OnActivity(a.SendWatchSets, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.WatchSetsInput) (activities.WatchSetsResult, error) {
			l.mu.Lock()
			defer l.mu.Unlock()
			var res activities.WatchSetsResult
			for _, s := range in.Sets {
				l.sent = append(l.sent, sentWatch{ID: protocol.ClusterID(s.Cluster), Set: s.Set})
				res.Told = append(res.Told, s.Cluster)
			}
			return res, nil
		})
	f.register(env) // after the Render mock: the first matching mock wins
	// Runs recorded before versionWatchSetsActivity signal each cluster.
	env.OnSignalExternalWorkflow(mock.Anything, mock.Anything, mock.Anything, protocol.SignalWatch, mock.Anything).Return(
		func(_, id, _, _ string, arg any) error {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.sent = append(l.sent, sentWatch{ID: id, Set: arg.(protocol.WatchSet)})
			return nil
		})
	return env, f, l
}

// optionsOf is the options key of the app bundle at commit.
func optionsOf(commit string) string { return "opts-" + commit[:6] }

// appWatch is the app GitRepo's watch set on a cluster at commit.
func appWatch(commit string) protocol.WatchSet {
	return protocol.WatchSet{GitRepo: "fleet-default/app", Releases: []protocol.WatchedRelease{{Bundle: "app", Release: "app",
		Namespace: "default", DeploymentID: appBundles(commit).Bundles[0].DeploymentID, OptionsKey: optionsOf(commit)}}}
}

// A GitRepo tells each cluster its set after a rollout, once: a rollout
// that changes nothing sends nothing; a cluster it leaves gets an empty
// set, a new commit the new deployment ID, and deleting the GitRepo
// empties every set.
func TestGitRepoWorkflow_SendsWatchSetsOnChange(t *testing.T) {
	env, f, l := driftRepoEnv()
	const next = "beef000000000000000000000000000000000002"
	first := f.commit
	env.RegisterDelayedCallback(func() { applyUpdate(t, env, testGitRepo(false)) }, 0)
	env.RegisterDelayedCallback(func() {
		assert.Equal(t, []sentWatch{{"cluster/c1", appWatch(first)}, {"cluster/c2", appWatch(first)}}, l.since(0),
			"one set to each cluster")
		env.SignalWorkflow(protocol.SignalClustersChanged, nil)
	}, 5*time.Second)
	env.RegisterDelayedCallback(func() {
		f.mu.Lock()
		assert.Equal(t, 2, f.deploys["c1"], "the second rollout ran")
		f.mu.Unlock()
		assert.Empty(t, l.since(2), "a rollout that changes nothing tells no cluster")
		f.mu.Lock()
		f.matched = []string{"c1"}
		f.mu.Unlock()
		env.SignalWorkflow(protocol.SignalClustersChanged, nil)
	}, 10*time.Second)
	env.RegisterDelayedCallback(func() {
		assert.Equal(t, []sentWatch{{"cluster/c2", protocol.WatchSet{GitRepo: "fleet-default/app"}}}, l.since(2),
			"the cluster the GitRepo left gets an empty set, the other nothing")
		f.mu.Lock()
		f.commit = next
		f.mu.Unlock()
		env.SignalWorkflow(protocol.SignalSync, nil)
	}, 20*time.Second)
	env.RegisterDelayedCallback(func() {
		assert.Equal(t, next, queryStatus(t, env).Commit)
		assert.Equal(t, []sentWatch{{"cluster/c1", appWatch(next)}}, l.since(3), "a new deployment ID is a new set")
		env.RegisterDelayedCallback(func() {
			assert.Empty(t, l.since(4), "nor does a poll that finds nothing new")
			env.SignalWorkflow(protocol.SignalDelete, nil)
		}, time.Minute)
	}, 30*time.Second)
	runGitRepo(t, env)
	assert.Equal(t, []sentWatch{{"cluster/c1", protocol.WatchSet{GitRepo: "fleet-default/app"}}}, l.since(4),
		"a deleted GitRepo empties its clusters' sets")
	assert.Equal(t, 5, l.len())
}

// Runs recorded before the drift watch existed tell no cluster.
func TestGitRepoWorkflow_SendWatchVersionGate(t *testing.T) {
	env, _, l := driftRepoEnv()
	env.OnGetVersion(versionDriftWatch, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	env.RegisterDelayedCallback(func() { applyUpdate(t, env, testGitRepo(false)) }, 0)
	env.RegisterDelayedCallback(func() {
		assert.Equal(t, 2, queryStatus(t, env).Summary.Ready, "deployed")
		env.SignalWorkflow(protocol.SignalDelete, nil)
	}, 5*time.Second)
	runGitRepo(t, env)
	assert.Zero(t, l.len())
}

// deployment returns the status of bundle app on cluster.
func deployment(t *testing.T, st status.GitRepo, cluster string) status.Deployment {
	t.Helper()
	for _, d := range st.Deployments {
		if d.Bundle == "app" && d.Cluster == cluster {
			return d
		}
	}
	t.Fatalf("no deployment of app on %s in %+v", cluster, st.Deployments)
	return status.Deployment{}
}

// A cluster's live reports show in the GitRepo's status: drift at the
// deployment ID a release runs makes it Modified, with the drifted
// objects and counts, until a report without drift makes it Ready again.
// Reports about another deployment ID or release are ignored, and the
// last report stays shown across a rollout that keeps the deployment ID.
// A sync deploys no cluster whose watch vouches for it (at its
// deployment ID, everything Ready, no drift); a drifted one, or one the
// watch has not reported on, is deployed.
func TestGitRepoWorkflow_SyncSkipsVouchedClusters(t *testing.T) {
	env, f, _ := driftRepoEnv()
	id := appBundles(f.commit).Bundles[0].DeploymentID
	clean := status.LiveReport{Bundle: "app", Release: "app", Namespace: "default", DeploymentID: id, Resources: 1, Ready: 1}
	drifted := clean
	drifted.Modified, drifted.ModifiedStatus = 1, []status.ModifiedStatus{{APIVersion: "v1", Kind: "ConfigMap", Namespace: "default", Name: "cfg"}}
	env.RegisterDelayedCallback(func() { applyUpdate(t, env, testGitRepo(false)) }, 0)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(protocol.SignalLive, status.LiveSignal{Cluster: "c1", Reports: []status.LiveReport{clean}})
	}, 5*time.Second)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(protocol.SignalSync, nil) }, 6*time.Second)
	env.RegisterDelayedCallback(func() {
		f.set(func() {
			assert.Equal(t, 1, f.deploys["c1"], "vouched for by its watch: not deployed again")
			assert.Equal(t, 2, f.deploys["c2"], "no report from its watch: deployed")
		})
		st := queryStatus(t, env)
		assert.Equal(t, int64(1), st.Syncs)
		assert.True(t, st.Settled)
		assert.Equal(t, 2, st.Summary.Ready)
		env.SignalWorkflow(protocol.SignalLive, status.LiveSignal{Cluster: "c1", Reports: []status.LiveReport{drifted}})
	}, 20*time.Second)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(protocol.SignalSync, nil) }, 21*time.Second)
	env.RegisterDelayedCallback(func() {
		f.set(func() { assert.Equal(t, 2, f.deploys["c1"], "drifted: deployed (repaired)") })
		st := queryStatus(t, env)
		assert.True(t, st.Settled, "what sync --wait waits for")
		d := deployment(t, st, "c1")
		assert.Equal(t, status.Ready, d.State, "the settled status does not show the drift the sync repaired")
		assert.Zero(t, d.Modified)
		env.SignalWorkflow(protocol.SignalLive, status.LiveSignal{Cluster: "c1", Reports: []status.LiveReport{drifted}})
	}, 40*time.Second)
	env.RegisterDelayedCallback(func() {
		assert.Equal(t, status.Modified, deployment(t, queryStatus(t, env), "c1").State, "drift reported after the sync shows")
		env.SignalWorkflow(protocol.SignalDelete, nil)
	}, 41*time.Second)
	runGitRepo(t, env)
}

func TestGitRepoWorkflow_LiveReportsShowDrift(t *testing.T) {
	env, f, _ := driftRepoEnv()
	const next = "beef000000000000000000000000000000000002"
	first := f.commit
	id := appBundles(first).Bundles[0].DeploymentID
	cm := status.ModifiedStatus{APIVersion: "v1", Kind: "ConfigMap", Namespace: "default", Name: "cfg", Patch: `{"data":{"k":"v"}}`}
	drifted := status.LiveReport{Bundle: "app", Release: "app", Namespace: "default", DeploymentID: id,
		Resources: 2, Ready: 1, Modified: 1, ModifiedStatus: []status.ModifiedStatus{cm}}
	clean := status.LiveReport{Bundle: "app", Release: "app", Namespace: "default", DeploymentID: id, Resources: 2, Ready: 2}
	live := func(cluster string, reports ...status.LiveReport) {
		env.SignalWorkflow(protocol.SignalLive, status.LiveSignal{Cluster: cluster, Reports: reports})
	}
	assertModified := func(st status.GitRepo, why string) {
		t.Helper()
		d := deployment(t, st, "c1")
		assert.Equal(t, status.Modified, d.State, why)
		assert.Equal(t, 1, d.Modified, why)
		assert.Equal(t, []status.ModifiedStatus{cm}, d.ModifiedStatus, why)
		assert.Equal(t, 2, d.Resources, why)
		assert.Equal(t, 1, d.ReadyResources, why)
		assert.Equal(t, `cluster c1: ConfigMap default/cfg: modified {"data":{"k":"v"}}`, d.Message, why)
	}

	env.RegisterDelayedCallback(func() { applyUpdate(t, env, testGitRepo(false)) }, 0)
	env.RegisterDelayedCallback(func() {
		st := queryStatus(t, env)
		require.Equal(t, status.Ready, deployment(t, st, "c1").State)
		require.Equal(t, id, deployment(t, st, "c1").AppliedDeploymentID)
		// A controller batches its watches' reports: c1's comes with c2's.
		env.SignalWorkflow(protocol.SignalLive, status.LiveSignal{Cluster: "c2", Reports: []status.LiveReport{clean},
			More: []status.LiveSignal{{Cluster: "c1", Reports: []status.LiveReport{drifted}}}})
	}, 5*time.Second)
	env.RegisterDelayedCallback(func() {
		st := queryStatus(t, env)
		assertModified(st, "drift at the running deployment ID")
		assert.Equal(t, status.Ready, deployment(t, st, "c2").State, "c2's deployment is another")
		assert.Equal(t, status.Modified, st.Summary.State)
		// Reports the GitRepo must ignore: drift at a deployment ID the
		// clusters do not run (a watch that has not caught up), and a
		// clean report about a release (or namespace) the GitRepo does not
		// run on c1.
		stale := drifted
		stale.DeploymentID = "s-0ld000:h"
		otherRelease, otherNamespace := clean, clean
		otherRelease.Release, otherNamespace.Namespace = "app-old", "elsewhere"
		live("c2", stale)
		live("c1", stale, otherRelease, otherNamespace)
	}, 6*time.Second)
	env.RegisterDelayedCallback(func() {
		st := queryStatus(t, env)
		assert.Equal(t, status.Ready, deployment(t, st, "c2").State, "a report about another deployment ID is ignored")
		assert.Zero(t, deployment(t, st, "c2").Modified)
		assertModified(st, "reports about another release or deployment ID are ignored")
		env.SignalWorkflow(protocol.SignalClustersChanged, nil)
	}, 7*time.Second)
	env.RegisterDelayedCallback(func() {
		f.mu.Lock()
		assert.Equal(t, 2, f.deploys["c1"], "the second rollout ran (and its deploy reported Ready)")
		f.mu.Unlock()
		st := queryStatus(t, env)
		assertModified(st, "a rollout that keeps the deployment ID keeps the last report at it shown")
		assert.Equal(t, status.Ready, deployment(t, st, "c2").State)
		live("c1", clean)
	}, 12*time.Second)
	env.RegisterDelayedCallback(func() {
		st := queryStatus(t, env)
		d := deployment(t, st, "c1")
		assert.Equal(t, status.Ready, d.State, "no drift: Ready again")
		assert.Zero(t, d.Modified)
		assert.Empty(t, d.ModifiedStatus)
		assert.Empty(t, d.Message)
		assert.Equal(t, 2, d.ReadyResources)
		assert.Equal(t, status.Ready, st.Summary.State)
		live("c1", drifted)
		f.mu.Lock()
		f.commit = next
		f.mu.Unlock()
		env.SignalWorkflow(protocol.SignalSync, nil)
	}, 13*time.Second)
	env.RegisterDelayedCallback(func() {
		st := queryStatus(t, env)
		require.Equal(t, next, st.Commit)
		d := deployment(t, st, "c1")
		assert.Equal(t, status.Ready, d.State, "the drift was at the old deployment ID")
		assert.Empty(t, d.ModifiedStatus)
		live("c1", drifted) // late, from a watch of the old deployment ID
	}, 30*time.Second)
	env.RegisterDelayedCallback(func() {
		d := deployment(t, queryStatus(t, env), "c1")
		assert.Equal(t, status.Ready, d.State, "a report about a deployment ID the GitRepo no longer runs is ignored")
		assert.Equal(t, appBundles(next).Bundles[0].DeploymentID, d.DeploymentID)
		env.SignalWorkflow(protocol.SignalDelete, nil)
	}, 31*time.Second)
	runGitRepo(t, env)
}

// A live report that arrives while a rollout runs is not lost when the
// rollout hands back its inventory (taken before the report): the rollout
// keeps the deployment ID, so the drift stays shown though its deploy
// reported Ready.
func TestGitRepoWorkflow_LiveReportDuringRollout(t *testing.T) {
	var slow atomic.Bool
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	var ca *activities.ClusterActivities
	// Deploys take 10 s once slow is set; registered before the fake
	// fleet's, so it answers every deploy.
	env.OnActivity(ca.Deploy, mock.Anything, mock.Anything).AfterFn(func() time.Duration {
		if slow.Load() {
			return 10 * time.Second
		}
		return 0
	}).Return(func(_ context.Context, in activities.DeployInput) (activities.DeployResult, error) {
		var res activities.DeployResult
		for _, b := range in.Bundles {
			res.Deployments = append(res.Deployments, status.Deployment{Bundle: b.Name, Cluster: in.Cluster,
				Release: b.Release, Namespace: b.Namespace, DeploymentID: b.DeploymentID,
				AppliedDeploymentID: b.DeploymentID, State: status.Ready, Resources: 2, ReadyResources: 2})
		}
		return res, nil
	})
	f := newFakeFleet()
	f.register(env)
	id := appBundles(f.commit).Bundles[0].DeploymentID
	cm := status.ModifiedStatus{Kind: "ConfigMap", Namespace: "default", Name: "cfg", Missing: true}
	drifted := status.LiveReport{Bundle: "app", Release: "app", Namespace: "default", DeploymentID: id,
		Resources: 2, Ready: 1, Missing: 1, ModifiedStatus: []status.ModifiedStatus{cm}}

	env.RegisterDelayedCallback(func() { applyUpdate(t, env, testGitRepo(false)) }, 0)
	env.RegisterDelayedCallback(func() {
		require.Equal(t, status.Ready, deployment(t, queryStatus(t, env), "c1").State)
		slow.Store(true)
		env.SignalWorkflow(protocol.SignalClustersChanged, nil)
	}, 5*time.Second)
	env.RegisterDelayedCallback(func() {
		st := queryStatus(t, env)
		require.NotEmpty(t, st.Rollout, "the rollout is still deploying")
		env.SignalWorkflow(protocol.SignalLive, status.LiveSignal{Cluster: "c1", Reports: []status.LiveReport{drifted}})
	}, 6*time.Second)
	env.RegisterDelayedCallback(func() {
		st := queryStatus(t, env)
		require.Empty(t, st.Rollout, "the rollout finished")
		d := deployment(t, st, "c1")
		assert.Equal(t, status.Modified, d.State, "the report taken during the rollout is still shown")
		assert.Equal(t, 1, d.Missing)
		assert.Equal(t, []status.ModifiedStatus{cm}, d.ModifiedStatus)
		assert.Equal(t, "cluster c1: ConfigMap default/cfg: missing", d.Message)
		assert.Equal(t, status.Ready, deployment(t, st, "c2").State)
		env.SignalWorkflow(protocol.SignalDelete, nil)
	}, 30*time.Second)
	runGitRepo(t, env)
}

// A push-mode cluster that gets an agent is watched from the agent's
// queue at once, not when its Watch's run ends (up to WatchRun later).
func TestClusterWorkflow_WatchMovesToTheAgent(t *testing.T) {
	r := newWatchRig(t, nil)
	r.at(time.Minute, func() { r.watch(watchSet("fleet/app", "s-a:1")) })
	r.at(2*time.Minute, func() {
		r.env.UpdateWorkflow(protocol.UpdateApply, "agent", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { t.Errorf("apply rejected: %v", err) },
			OnAccept: func() {}, OnComplete: func(any, error) {},
		}, protocol.ClusterApply{Agent: &protocol.AgentApply{TokenID: "tok1"}})
	})
	r.run(pushCluster(), 3*time.Minute)
	require.Len(t, r.starts, 2, "%+v", r.starts)
	assert.NotEqual(t, protocol.ClusterQueue("c1"), r.starts[0].Queue, "first on the controller's queue")
	assert.Equal(t, 2*time.Minute, r.starts[1].At)
	assert.Equal(t, protocol.ClusterQueue("c1"), r.starts[1].Queue, "then on the agent's")
}
