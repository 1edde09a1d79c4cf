package workflows

import (
	"cmp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/status"
	"github.com/flotilla-gitops/flotilla/internal/temporalx"
)

// toldContact is one contact signal a cluster sent a GitRepo.
type toldContact struct {
	At      time.Duration
	GitRepo string
	Lost    bool
}

// recordContacts records the contact signals the cluster's workflow
// sends, and the FlotillaState values it upserts. The test environment
// delivers the signals of one workflow task on goroutines of their own.
func recordContacts(r *watchRig) (told *[]toldContact, states *[]string) {
	told, states = &[]toldContact{}, &[]string{}
	var mu sync.Mutex
	r.env.OnSignalExternalWorkflow(mock.Anything, mock.Anything, "", protocol.SignalLive, mock.Anything).Return(
		func(_, id, _, _ string, arg any) error {
			sig := arg.(status.LiveSignal)
			require.NotNil(r.t, sig.Contact)
			assert.Equal(r.t, "c1", sig.Cluster)
			mu.Lock()
			*told = append(*told, toldContact{At: r.env.Now().Sub(watchEpoch), GitRepo: id, Lost: sig.Contact.Lost})
			mu.Unlock()
			if sig.Contact.Lost {
				assert.Contains(r.t, sig.Contact.Reason, "connection refused")
			}
			return nil
		})
	r.env.OnUpsertTypedSearchAttributes(mock.Anything).Return().Run(func(args mock.Arguments) {
		if s, ok := args.Get(0).(temporal.SearchAttributes).GetKeyword(temporalx.KeyState); ok {
			*states = append(*states, s)
		}
	})
	return told, states
}

// A push-mode cluster whose watch cannot reach the API server is Offline,
// and every GitRepo that runs releases there is told, once; a GitRepo
// that comes to run one meanwhile is told too; when contact returns they
// are all told, and the cluster is Active again.
func TestClusterWorkflow_ContactToldToGitRepos(t *testing.T) {
	r := newWatchRig(t, nil)
	told, states := recordContacts(r)
	lastContact := watchEpoch.Add(50 * time.Second)
	lost := protocol.Contact{LastContact: lastContact, Reason: "API server https://10.0.0.1:6443 unreachable: connection refused"}
	r.at(time.Second, func() {
		r.watch(watchSet("fleet/zeta", "s-z:1"))
		r.watch(watchSet("fleet/alpha", "s-a:1"))
	})
	r.at(time.Minute, func() { r.env.SignalWorkflow(protocol.SignalContact, lost) })
	r.at(time.Minute+time.Second, func() {
		rec := queryRecord(t, r)
		require.NotNil(t, rec.Unreachable)
		assert.Equal(t, lastContact, rec.Unreachable.LastContact)
		assert.Equal(t, int64(0), rec.Generation, "contact is not a spec change")
		r.env.SignalWorkflow(protocol.SignalContact, lost) // the same again: nobody is told twice
	})
	r.at(2*time.Minute, func() { r.watch(watchSet("fleet/beta", "s-b:1")) })
	r.at(3*time.Minute, func() { r.env.SignalWorkflow(protocol.SignalContact, protocol.Contact{Reachable: true}) })
	r.at(3*time.Minute+time.Second, func() { assert.Nil(t, queryRecord(t, r).Unreachable) })
	r.run(pushCluster(), 4*time.Minute)

	// The test environment runs the signals of one workflow task in no
	// set order.
	slices.SortFunc(*told, func(a, b toldContact) int {
		return cmp.Or(cmp.Compare(a.At, b.At), strings.Compare(a.GitRepo, b.GitRepo))
	})
	assert.Equal(t, []toldContact{
		{time.Minute, protocol.GitRepoID("fleet", "alpha"), true},
		{time.Minute, protocol.GitRepoID("fleet", "zeta"), true},
		{2 * time.Minute, protocol.GitRepoID("fleet", "beta"), true},
		{3 * time.Minute, protocol.GitRepoID("fleet", "alpha"), false},
		{3 * time.Minute, protocol.GitRepoID("fleet", "beta"), false},
		{3 * time.Minute, protocol.GitRepoID("fleet", "zeta"), false},
	}, *told)
	assert.Equal(t, []string{"Active", "Offline", "Active"}, *states)
	assert.Equal(t, []string{"ClusterOffline", "ClusterOnline"}, eventTypes(*r.events), "one event per transition")
	assert.Contains(t, (*r.events)[0].Message, "connection refused (last seen 2025-01-01T00:00:50Z)")
	for _, s := range r.starts {
		assert.False(t, s.In.Unreachable && s.At < time.Minute, "watches start from the workflow's view of contact")
	}
}

// What the GitRepos were told survives continue-as-new: contact regained
// in the next run is told to those told of the loss.
func TestClusterWorkflow_ContactSurvivesContinueAsNew(t *testing.T) {
	r := newWatchRig(t, nil)
	told, _ := recordContacts(r)
	in := pushCluster()
	in.Record.Unreachable = &protocol.Unreachable{Reason: "connection refused"}
	in.ContactTold = []string{"fleet/alpha"}
	in.OfflineTold = true
	in.Watch = []protocol.WatchSet{watchSet("fleet/alpha", "s-a:1")}
	r.at(time.Minute, func() { r.env.SignalWorkflow(protocol.SignalContact, protocol.Contact{Reachable: true}) })
	r.run(in, 2*time.Minute)
	assert.Equal(t, []toldContact{{time.Minute, protocol.GitRepoID("fleet", "alpha"), false}}, *told)
	assert.Equal(t, []string{"ClusterOnline"}, eventTypes(*r.events), "ClusterOffline was emitted by the last run")
	require.NotEmpty(t, r.starts)
	assert.True(t, r.starts[0].In.Unreachable, "the first watch starts from the carried state")
}

// A pull-mode cluster's watch runs on its agent: when it stops
// heartbeating and no agent heartbeat came since, the agent is Offline at
// once, not after three missed heartbeat intervals; one that heartbeated
// meanwhile (it restarted) stays online.
func TestClusterWorkflow_SilentAgentWatchIsOffline(t *testing.T) {
	for _, tc := range []struct {
		name        string
		lastBeat    time.Duration
		wantOffline bool
	}{
		{"agent gone", 0, true},
		{"agent restarted", 20 * time.Second, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The agent's watch stops heartbeating 25 s after it started.
			r := newWatchRigAfter(t, temporal.NewHeartbeatTimeoutError(), 25*time.Second)
			r.env.OnSignalExternalWorkflow(mock.Anything, mock.Anything, "", protocol.SignalLive, mock.Anything).Return(nil)
			beat := func() {
				r.env.SignalWorkflow(protocol.SignalHeartbeat, protocol.Heartbeat{Interval: 30 * time.Second})
			}
			r.at(0, beat)
			if tc.lastBeat > 0 {
				r.at(tc.lastBeat, beat)
			}
			r.at(time.Second, func() { r.watch(watchSet("fleet/app", "s-a:1")) })
			r.at(27*time.Second, func() {
				rec := queryRecord(t, r)
				assert.Equal(t, tc.wantOffline, rec.Agent.Offline)
				if tc.wantOffline {
					out, _, reason := rec.OutOfContact()
					assert.True(t, out)
					assert.Equal(t, "its agent sent no heartbeat", reason)
				}
			})
			in := ClusterInput{ClusterStart: protocol.ClusterStart{Record: registeredAgent()}}
			r.run(in, time.Minute)
			require.GreaterOrEqual(t, len(r.starts), 2, "the watch is started again at once, waiting for the agent")
			assert.Equal(t, 26*time.Second, r.starts[1].At)
		})
	}
}

func queryRecord(t *testing.T, r *watchRig) protocol.ClusterRecord {
	t.Helper()
	v, err := r.env.QueryWorkflow(protocol.QueryStatus)
	require.NoError(t, err)
	var rec protocol.ClusterRecord
	require.NoError(t, v.Get(&rec))
	return rec
}

// A GitRepo shows the deployments on a cluster out of contact as not
// known to be Ready (WaitApplied, naming the cluster and when it was last
// seen), the others as they are, and recovers on its own when contact
// returns.
func TestGitRepoWorkflow_OutOfContactClusterNotReady(t *testing.T) {
	env, _, _ := driftRepoEnv()
	seen := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	contact := func(lost bool) {
		env.SignalWorkflow(protocol.SignalLive, status.LiveSignal{Cluster: "c1",
			Contact: &status.ClusterContact{Lost: lost, LastSeen: seen, Reason: "its agent sent no heartbeat"}})
	}
	env.RegisterDelayedCallback(func() { applyUpdate(t, env, testGitRepo(false)) }, 0)
	env.RegisterDelayedCallback(func() {
		st := queryStatus(t, env)
		require.Equal(t, status.Ready, deployment(t, st, "c1").State)
		contact(true)
	}, 5*time.Second)
	env.RegisterDelayedCallback(func() {
		st := queryStatus(t, env)
		d := deployment(t, st, "c1")
		assert.Equal(t, status.WaitApplied, d.State)
		assert.Equal(t, "cluster c1 is out of contact (last seen 2026-11-29T10:00:00Z): its agent sent no heartbeat; last known Ready", d.Message)
		assert.Equal(t, status.Ready, deployment(t, st, "c2").State, "other clusters are as they were")
		assert.NotEqual(t, status.Ready, st.Summary.State)
		contact(false)
	}, 6*time.Second)
	env.RegisterDelayedCallback(func() {
		st := queryStatus(t, env)
		d := deployment(t, st, "c1")
		assert.Equal(t, status.Ready, d.State, "contact regained")
		assert.Empty(t, d.Message)
		assert.Equal(t, status.Ready, st.Summary.State)
		env.SignalWorkflow(protocol.SignalDelete, nil)
	}, 7*time.Second)
	runGitRepo(t, env)
}

// A GitRepo told a cluster is lost is told it is back when it stops
// running releases there, and when the cluster is removed, so that a
// cluster added again under the name starts afresh; with nothing left to
// watch (and so nothing probing it) the cluster forgets it was
// unreachable; a report of a watch canceled since is ignored.
func TestClusterWorkflow_ContactForgottenWhenGone(t *testing.T) {
	r := newWatchRig(t, nil)
	told, _ := recordContacts(r)
	lost := protocol.Contact{Reason: "API server https://10.0.0.1:6443 unreachable: connection refused"}
	r.at(time.Second, func() {
		r.watch(watchSet("fleet/alpha", "s-a:1"))
		r.watch(watchSet("fleet/beta", "s-b:1"))
	})
	r.at(time.Minute, func() { r.env.SignalWorkflow(protocol.SignalContact, lost) })
	r.at(2*time.Minute, func() { r.watch(protocol.WatchSet{GitRepo: "fleet/beta"}) }) // beta leaves
	r.at(3*time.Minute, func() { r.watch(protocol.WatchSet{GitRepo: "fleet/alpha"}) })
	r.at(3*time.Minute+time.Second, func() {
		assert.Nil(t, queryRecord(t, r).Unreachable, "nothing probes a cluster that runs nothing: its state is forgotten")
		r.watch(watchSet("fleet/alpha", "s-a:2"))
	})
	r.at(4*time.Minute, func() {
		stale := lost
		stale.Watch = "an-old-run/1"
		r.env.SignalWorkflow(protocol.SignalContact, stale)
	})
	r.at(4*time.Minute+time.Second, func() {
		assert.Nil(t, queryRecord(t, r).Unreachable, "a canceled watch's report is stale")
		r.env.SignalWorkflow(protocol.SignalContact, lost)
	})
	r.run(pushCluster(), 5*time.Minute) // removed at 5m

	slices.SortFunc(*told, func(a, b toldContact) int {
		return cmp.Or(cmp.Compare(a.At, b.At), strings.Compare(a.GitRepo, b.GitRepo))
	})
	assert.Equal(t, []toldContact{
		{time.Minute, protocol.GitRepoID("fleet", "alpha"), true},
		{time.Minute, protocol.GitRepoID("fleet", "beta"), true},
		{2 * time.Minute, protocol.GitRepoID("fleet", "beta"), false},
		{3 * time.Minute, protocol.GitRepoID("fleet", "alpha"), false},
		{4*time.Minute + time.Second, protocol.GitRepoID("fleet", "alpha"), true},
		{5 * time.Minute, protocol.GitRepoID("fleet", "alpha"), false},
	}, *told)
}
