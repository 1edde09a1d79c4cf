package workflows

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	corev1 "k8s.io/api/core/v1"

	"github.com/flotilla-gitops/flotilla/activities"
	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/notify"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/temporalx"
)

// agentRig runs a ClusterWorkflow with mocked NotifyGitRepos and
// EnsureAgent, recording the activity calls and the FlotillaState search
// attribute.
type agentRig struct {
	t   *testing.T
	env *testsuite.TestWorkflowEnvironment
	// ensure answers EnsureAgent; ensures are its inputs, in order.
	ensure   func(n int, in activities.EnsureAgentInput) (activities.EnsureAgentResult, error)
	ensures  []activities.EnsureAgentInput
	notified int
	// states are the FlotillaState values upserted, in order.
	states []string
	// events are the notify.Events emitted.
	events *[]notify.Event
}

// newAgentRig builds the rig; ensureTakes, when given, is how long each
// EnsureAgent call takes in workflow time.
func newAgentRig(t *testing.T, ensureTakes ...time.Duration) *agentRig {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	r := &agentRig{t: t, env: suite.NewTestWorkflowEnvironment()}
	r.events = acceptEvents(r.env)
	var a *activities.Activities
	r.env.OnActivity(a.NotifyGitRepos, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.NotifyInput) error { r.notified++; return nil })
	var aa *activities.AgentActivities
	call := r.env.OnActivity(aa.EnsureAgent, mock.Anything, mock.Anything)
	for _, d := range ensureTakes {
		call = call.After(d)
	}
	call.Return(
		func(_ context.Context, in activities.EnsureAgentInput) (activities.EnsureAgentResult, error) {
			r.ensures = append(r.ensures, in)
			require.NotNil(t, r.ensure, "unexpected EnsureAgent")
			return r.ensure(len(r.ensures), in)
		})
	r.env.OnUpsertTypedSearchAttributes(mock.Anything).Return().Run(func(args mock.Arguments) {
		sa := args.Get(0).(temporal.SearchAttributes)
		if state, ok := sa.GetKeyword(temporalx.KeyState); ok {
			r.states = append(r.states, state)
		}
	})
	return r
}

// at runs f at d of workflow time.
func (r *agentRig) at(d time.Duration, f func()) { r.env.RegisterDelayedCallback(f, d) }

// record queries the cluster's record.
func (r *agentRig) record() protocol.ClusterRecord {
	r.t.Helper()
	v, err := r.env.QueryWorkflow(protocol.QueryStatus)
	require.NoError(r.t, err)
	var rec protocol.ClusterRecord
	require.NoError(r.t, v.Get(&rec))
	return rec
}

// state is the last FlotillaState upserted.
func (r *agentRig) state() string {
	if len(r.states) == 0 {
		return ""
	}
	return r.states[len(r.states)-1]
}

// apply sends the apply update; rejected receives the rejection.
func (r *agentRig) apply(a protocol.ClusterApply, rejected *error) {
	r.env.UpdateWorkflow(protocol.UpdateApply, "", &testsuite.TestUpdateCallback{
		OnReject: func(err error) {
			if rejected == nil {
				r.t.Errorf("apply rejected: %v", err)
				return
			}
			*rejected = err
		},
		OnComplete: func(_ any, err error) { require.NoError(r.t, err) },
	}, a)
}

func (r *agentRig) heartbeat(interval time.Duration) {
	r.env.SignalWorkflow(protocol.SignalHeartbeat, protocol.Heartbeat{Version: "v1.2.3", Interval: interval})
}

// run starts the workflow with rec, deletes the cluster at end, and
// requires a clean end.
func (r *agentRig) run(rec protocol.ClusterRecord, end time.Duration) {
	r.t.Helper()
	r.at(end, func() { r.env.SignalWorkflow(protocol.SignalDelete, nil) })
	r.env.ExecuteWorkflow(ClusterWorkflow, ClusterInput{ClusterStart: protocol.ClusterStart{Record: rec}})
	require.True(r.t, r.env.IsWorkflowCompleted())
	require.NoError(r.t, r.env.GetWorkflowError())
}

// registeredAgent is a cluster an agent registered with a token.
func registeredAgent() protocol.ClusterRecord {
	return protocol.ClusterRecord{Name: "c1", Labels: map[string]string{"env": "dev"}, Agent: &protocol.AgentRecord{TokenID: "tok1"}}
}

// An agent is Offline once offlineAfterBeats of its intervals pass
// without a heartbeat, and online again with the next one. Heartbeats
// are not spec changes.
func TestClusterWorkflow_AgentOfflineAndBackOnline(t *testing.T) {
	r := newAgentRig(t)
	const interval = 10 * time.Second
	var start time.Time
	r.at(0, func() { start = r.env.Now() })
	r.at(time.Minute, func() { r.heartbeat(interval) })
	r.at(time.Minute+interval, func() { r.heartbeat(interval) })
	r.at(time.Minute+interval+29*time.Second, func() {
		rec := r.record()
		require.NotNil(t, rec.Agent)
		assert.False(t, rec.Agent.Offline, "two missed heartbeats are not Offline yet")
		require.NotNil(t, rec.Agent.LastSeen)
		assert.Equal(t, time.Minute+interval, rec.Agent.LastSeen.Sub(start))
		assert.Equal(t, interval, rec.Agent.HeartbeatInterval)
		assert.Equal(t, "v1.2.3", rec.Agent.Version)
		assert.Equal(t, "tok1", rec.Agent.TokenID, "a heartbeat keeps the registration")
		assert.Equal(t, "Active", r.state())
	})
	r.at(time.Minute+interval+31*time.Second, func() {
		rec := r.record()
		require.NotNil(t, rec.Agent)
		assert.True(t, rec.Agent.Offline, "three missed heartbeats are Offline")
		assert.Equal(t, "Offline", r.state())
		assert.Equal(t, int64(0), rec.Generation)
	})
	r.at(5*time.Minute, func() {
		assert.True(t, r.record().Agent.Offline, "stays Offline without heartbeats")
		r.heartbeat(interval)
	})
	r.at(5*time.Minute+time.Second, func() {
		rec := r.record()
		assert.False(t, rec.Agent.Offline, "back online with a heartbeat")
		assert.Equal(t, 5*time.Minute, rec.Agent.LastSeen.Sub(start))
		assert.Equal(t, "Active", r.state())
		assert.Equal(t, int64(0), rec.Generation, "heartbeats do not bump the generation")
	})
	r.at(5*time.Minute+3*interval-time.Second, func() { assert.False(t, r.record().Agent.Offline) })
	r.at(5*time.Minute+3*interval+time.Second, func() {
		assert.True(t, r.record().Agent.Offline, "and Offline again: liveness keeps watching")
	})

	r.run(registeredAgent(), 10*time.Minute)

	assert.Equal(t, []string{"Active", "Offline", "Active", "Offline"}, r.states)
	var events []string
	for _, ev := range *r.events {
		events = append(events, string(ev.Type)+" "+string(ev.Severity)+" "+strings.Join(ev.Clusters, ","))
		assert.Equal(t, api.DefaultNamespace, ev.Namespace)
	}
	assert.Equal(t, []string{"ClusterOffline warning c1", "ClusterOnline info c1", "ClusterOffline warning c1"}, events,
		"one event per transition, none for the heartbeats between")
	assert.Contains(t, (*r.events)[0].Message, "its agent sent no heartbeat")
	assert.Equal(t, 3, r.notified, "registration, the return online (its GitRepos deploy what it missed) and removal: heartbeats and going offline notify no GitRepo")
	assert.Empty(t, r.ensures)
}

// An agent that reports no interval gets the default one.
func TestClusterWorkflow_AgentDefaultHeartbeatInterval(t *testing.T) {
	r := newAgentRig(t)
	r.at(time.Minute, func() { r.heartbeat(0) })
	r.at(time.Minute+3*defaultHeartbeatInterval-time.Second, func() { assert.False(t, r.record().Agent.Offline) })
	r.at(time.Minute+3*defaultHeartbeatInterval+time.Second, func() { assert.True(t, r.record().Agent.Offline) })
	r.run(registeredAgent(), 10*time.Minute)
	assert.Equal(t, []string{"Active", "Offline"}, r.states)
}

// A push-mode cluster (kubeconfig, no agent) ignores stray heartbeats.
func TestClusterWorkflow_PushModeIgnoresHeartbeats(t *testing.T) {
	r := newAgentRig(t)
	r.at(time.Minute, func() { r.heartbeat(time.Second) })
	r.at(2*time.Minute, func() {
		rec := r.record()
		assert.Nil(t, rec.Agent)
		assert.Equal(t, int64(0), rec.Generation)
	})
	r.run(protocol.ClusterRecord{Name: "c1", KubeconfigHash: "h"}, 5*time.Minute)
	assert.Equal(t, []string{"Active"}, r.states)
}

// A managed agent is deployed once on apply. The controller's defaults
// signal with the hash it was deployed from does nothing (a controller
// restart never redeploys agents); a new hash re-checks the agent, and
// Deploys counts only real deployments.
func TestClusterWorkflow_ManagedAgentDefaults(t *testing.T) {
	r := newAgentRig(t)
	cfg := &protocol.AgentConfig{Namespace: "agents", TemporalAddress: "temporal:7233"}
	results := map[int]activities.EnsureAgentResult{
		1: {DeploymentID: "agent:a", DefaultsHash: "d1", Deployed: true, Revision: 1},
		// New defaults, same effective configuration: nothing deployed.
		2: {DeploymentID: "agent:a", DefaultsHash: "d2"},
		// Newer defaults that change the agent.
		3: {DeploymentID: "agent:b", DefaultsHash: "d3", Deployed: true, Revision: 2},
	}
	r.ensure = func(n int, _ activities.EnsureAgentInput) (activities.EnsureAgentResult, error) {
		require.Contains(t, results, n, "EnsureAgent call %d", n)
		return results[n], nil
	}
	r.at(time.Minute, func() {
		r.apply(protocol.ClusterApply{KubeconfigHash: "h", Agent: &protocol.AgentApply{Managed: true, Config: cfg}}, nil)
	})
	r.at(2*time.Minute, func() {
		require.Len(t, r.ensures, 1)
		assert.Equal(t, activities.EnsureAgentInput{Cluster: "c1", KubeconfigHash: "h", Config: cfg}, r.ensures[0])
		rec := r.record()
		require.NotNil(t, rec.Agent)
		assert.True(t, rec.Agent.Managed)
		assert.Equal(t, cfg, rec.Agent.Config)
		assert.Equal(t, "agent:a", rec.Agent.DeploymentID)
		assert.Equal(t, "d1", rec.Agent.DefaultsHash)
		assert.Equal(t, 1, rec.Agent.Deploys)
		assert.Empty(t, rec.Agent.Error)
		assert.Equal(t, int64(1), rec.Generation)
		// The controller restarts with the same defaults.
		r.env.SignalWorkflow(protocol.SignalAgentDefaults, protocol.AgentDefaults{Hash: "d1"})
	})
	r.at(3*time.Minute, func() {
		assert.Len(t, r.ensures, 1, "same defaults: no second EnsureAgent")
		r.env.SignalWorkflow(protocol.SignalAgentDefaults, protocol.AgentDefaults{Hash: "d2"})
	})
	r.at(4*time.Minute, func() {
		assert.Len(t, r.ensures, 2, "new defaults: the agent is checked")
		rec := r.record()
		assert.Equal(t, "d2", rec.Agent.DefaultsHash)
		assert.Equal(t, "agent:a", rec.Agent.DeploymentID)
		assert.Equal(t, 1, rec.Agent.Deploys, "checked, not deployed")
		r.env.SignalWorkflow(protocol.SignalAgentDefaults, protocol.AgentDefaults{Hash: "d2"})
	})
	r.at(5*time.Minute, func() {
		assert.Len(t, r.ensures, 2)
		r.env.SignalWorkflow(protocol.SignalAgentDefaults, protocol.AgentDefaults{Hash: "d3"})
	})
	r.at(6*time.Minute, func() {
		require.Len(t, r.ensures, 3)
		rec := r.record()
		assert.Equal(t, "agent:b", rec.Agent.DeploymentID)
		assert.Equal(t, "d3", rec.Agent.DefaultsHash)
		assert.Equal(t, 2, rec.Agent.Deploys)
		assert.Equal(t, int64(1), rec.Generation, "agent deployments are not spec changes")
		// The managed agent heartbeats like any other.
		r.heartbeat(time.Minute)
	})
	r.at(7*time.Minute, func() {
		rec := r.record()
		assert.NotNil(t, rec.Agent.LastSeen)
		assert.Equal(t, "agent:b", rec.Agent.DeploymentID, "a heartbeat keeps the deployment state")
		assert.Equal(t, 2, rec.Agent.Deploys)
		assert.Equal(t, int64(1), rec.Generation)
	})

	r.run(protocol.ClusterRecord{Name: "c1"}, 10*time.Minute)
	assert.Len(t, r.ensures, 3)
}

// Defaults signals for a cluster without a managed agent do nothing.
func TestClusterWorkflow_AgentDefaultsIgnoredWithoutManagedAgent(t *testing.T) {
	r := newAgentRig(t)
	r.at(time.Minute, func() { r.env.SignalWorkflow(protocol.SignalAgentDefaults, protocol.AgentDefaults{Hash: "d1"}) })
	r.run(registeredAgent(), 5*time.Minute)
	assert.Empty(t, r.ensures)
}

// A failed deployment is reported on the record and tried again when
// the controller next announces its defaults, even unchanged ones.
func TestClusterWorkflow_ManagedAgentFailureIsRetriedOnDefaults(t *testing.T) {
	r := newAgentRig(t)
	r.ensure = func(n int, _ activities.EnsureAgentInput) (activities.EnsureAgentResult, error) {
		if n == 1 {
			return activities.EnsureAgentResult{}, temporal.NewNonRetryableApplicationError(
				"invalid agent configuration for cluster c1: no Temporal address", activities.ErrTypeInvalidAgentConfig, nil)
		}
		return activities.EnsureAgentResult{DeploymentID: "agent:a", DefaultsHash: "d1", Deployed: true}, nil
	}
	r.at(time.Minute, func() {
		r.apply(protocol.ClusterApply{KubeconfigHash: "h", Agent: &protocol.AgentApply{Managed: true}}, nil)
	})
	r.at(2*time.Minute, func() {
		require.Len(t, r.ensures, 1, "a non-retryable failure is not retried by the activity")
		rec := r.record()
		assert.Contains(t, rec.Agent.Error, "no Temporal address")
		assert.Equal(t, 0, rec.Agent.Deploys)
		assert.Empty(t, rec.Agent.DeploymentID)
		r.env.SignalWorkflow(protocol.SignalAgentDefaults, protocol.AgentDefaults{Hash: "d1"})
	})
	r.at(3*time.Minute, func() {
		require.Len(t, r.ensures, 2)
		rec := r.record()
		assert.Empty(t, rec.Agent.Error)
		assert.Equal(t, 1, rec.Agent.Deploys)
		assert.Equal(t, "d1", rec.Agent.DefaultsHash)
	})
	r.run(protocol.ClusterRecord{Name: "c1"}, 5*time.Minute)
}

// A new kubeconfig for a managed cluster re-checks its agent.
func TestClusterWorkflow_ManagedAgentKubeconfigChange(t *testing.T) {
	r := newAgentRig(t)
	r.ensure = func(n int, in activities.EnsureAgentInput) (activities.EnsureAgentResult, error) {
		return activities.EnsureAgentResult{DeploymentID: "agent:a", DefaultsHash: "d1", Deployed: n == 1}, nil
	}
	r.at(time.Minute, func() {
		r.apply(protocol.ClusterApply{KubeconfigHash: "h1", Agent: &protocol.AgentApply{Managed: true}}, nil)
	})
	r.at(2*time.Minute, func() { r.apply(protocol.ClusterApply{Labels: map[string]string{"env": "prod"}, SetLabels: true}, nil) })
	r.at(3*time.Minute, func() {
		assert.Len(t, r.ensures, 1, "a label change does not touch the agent")
		r.apply(protocol.ClusterApply{KubeconfigHash: "h2"}, nil)
	})
	r.run(protocol.ClusterRecord{Name: "c1"}, 5*time.Minute)
	require.Len(t, r.ensures, 2)
	assert.Equal(t, "h2", r.ensures[1].KubeconfigHash)
}

// A managed agent is installed through the cluster's kubeconfig: without
// one the apply is rejected and nothing runs.
func TestClusterWorkflow_ManagedAgentNeedsKubeconfig(t *testing.T) {
	r := newAgentRig(t)
	var rejected error
	r.at(time.Minute, func() {
		r.apply(protocol.ClusterApply{Agent: &protocol.AgentApply{Managed: true, Config: &protocol.AgentConfig{Namespace: "agents"}}}, &rejected)
	})
	r.at(2*time.Minute, func() {
		rec := r.record()
		assert.Nil(t, rec.Agent)
		assert.Equal(t, int64(0), rec.Generation)
	})
	r.run(protocol.ClusterRecord{Name: "c1"}, 5*time.Minute)
	require.Error(t, rejected)
	assert.Contains(t, rejected.Error(), "kubeconfig")
	assert.Contains(t, rejected.Error(), "c1")
	assert.Empty(t, r.ensures)
}

// The kubeconfig may come with the same apply, or be there already.
func TestClusterWorkflow_ManagedAgentWithStoredKubeconfig(t *testing.T) {
	r := newAgentRig(t)
	r.ensure = func(int, activities.EnsureAgentInput) (activities.EnsureAgentResult, error) {
		return activities.EnsureAgentResult{DeploymentID: "agent:a", DefaultsHash: "d1", Deployed: true}, nil
	}
	r.at(time.Minute, func() { r.apply(protocol.ClusterApply{Agent: &protocol.AgentApply{Managed: true}}, nil) })
	r.run(protocol.ClusterRecord{Name: "c1", KubeconfigHash: "h"}, 5*time.Minute)
	require.Len(t, r.ensures, 1)
	assert.Equal(t, "h", r.ensures[0].KubeconfigHash)
}

// A check that fails after the agent was deployed forgets the defaults
// hash, so the next controller start (same hash) tries again.
func TestClusterWorkflow_ManagedAgentFailureForgetsDefaultsHash(t *testing.T) {
	r := newAgentRig(t)
	r.ensure = func(n int, _ activities.EnsureAgentInput) (activities.EnsureAgentResult, error) {
		if n == 2 {
			return activities.EnsureAgentResult{}, temporal.NewNonRetryableApplicationError("cluster c1: unreachable", activities.ErrTypeInvalidAgentConfig, nil)
		}
		return activities.EnsureAgentResult{DeploymentID: "agent:a", DefaultsHash: "d1", Deployed: n == 1}, nil
	}
	r.at(time.Minute, func() {
		r.apply(protocol.ClusterApply{KubeconfigHash: "h", Agent: &protocol.AgentApply{Managed: true}}, nil)
	})
	r.at(2*time.Minute, func() { // a per-cluster change whose check fails
		r.apply(protocol.ClusterApply{Agent: &protocol.AgentApply{Managed: true, Config: &protocol.AgentConfig{Namespace: "agents"}}}, nil)
	})
	r.at(3*time.Minute, func() {
		require.Len(t, r.ensures, 2)
		assert.Empty(t, r.record().Agent.DefaultsHash)
		r.env.SignalWorkflow(protocol.SignalAgentDefaults, protocol.AgentDefaults{Hash: "d1"})
	})
	r.at(4*time.Minute, func() {
		require.Len(t, r.ensures, 3, "the same defaults hash re-checks an agent whose last check failed")
		assert.Empty(t, r.record().Agent.Error)
	})
	r.run(protocol.ClusterRecord{Name: "c1"}, 5*time.Minute)
}

// Defaults announced while a check runs are compared with its result: the
// same hash causes no second check.
func TestClusterWorkflow_DefaultsDuringCheck(t *testing.T) {
	r := newAgentRig(t, 30*time.Second)
	r.ensure = func(int, activities.EnsureAgentInput) (activities.EnsureAgentResult, error) {
		return activities.EnsureAgentResult{DeploymentID: "agent:a", DefaultsHash: "d1", Deployed: true}, nil
	}
	r.at(time.Minute, func() {
		r.apply(protocol.ClusterApply{KubeconfigHash: "h", Agent: &protocol.AgentApply{Managed: true}}, nil)
	})
	r.at(time.Minute+10*time.Second, func() {
		require.Empty(t, r.ensures, "the check is still running")
		r.env.SignalWorkflow(protocol.SignalAgentDefaults, protocol.AgentDefaults{Hash: "d1"})
	})
	r.at(4*time.Minute, func() {
		assert.Len(t, r.ensures, 1)
		assert.Equal(t, 1, r.record().Agent.Deploys)
	})
	r.run(protocol.ClusterRecord{Name: "c1"}, 5*time.Minute)
}

// A registration token cannot take over a cluster that already exists;
// the same token re-applied (a retried registration) is accepted.
func TestClusterWorkflow_TokenCannotTakeOverCluster(t *testing.T) {
	r := newAgentRig(t)
	var rejected error
	r.at(time.Minute, func() {
		r.apply(protocol.ClusterApply{Agent: &protocol.AgentApply{TokenID: "tok2"}}, &rejected)
	})
	r.at(2*time.Minute, func() {
		require.Error(t, rejected)
		assert.Contains(t, rejected.Error(), "already registered")
		r.apply(protocol.ClusterApply{Agent: &protocol.AgentApply{TokenID: "tok1"}}, nil)
	})
	rec := registeredAgent()
	rec.Generation = 1
	r.run(rec, 5*time.Minute)
}

// A Cluster resource's agent settings (Fleet's agentTolerations, …)
// replace the managed agent's own settings field by field and make it
// check its agent; without a managed agent they are rejected, naming the
// cluster and what to do.
func TestClusterWorkflow_AgentSettings(t *testing.T) {
	r := newAgentRig(t)
	r.ensure = func(n int, _ activities.EnsureAgentInput) (activities.EnsureAgentResult, error) {
		return activities.EnsureAgentResult{DeploymentID: "agent:a", DefaultsHash: "d1", Deployed: true}, nil
	}
	own := protocol.AgentConfig{Image: "worker:v1", Namespace: "agents",
		Tolerations: []corev1.Toleration{{Key: "old", Operator: corev1.TolerationOpExists}}}
	settings := protocol.AgentSettings{
		Tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "flotilla", Effect: corev1.TaintEffectNoSchedule}},
		Env:         []corev1.EnvVar{{Name: "HTTPS_PROXY", Value: "http://proxy:3128"}},
	}
	r.at(time.Minute, func() { r.apply(protocol.ClusterApply{AgentSettings: &settings}, nil) })
	r.run(protocol.ClusterRecord{Name: "c1", KubeconfigHash: "h", Agent: &protocol.AgentRecord{Managed: true, Config: &own}}, 5*time.Minute)
	require.Len(t, r.ensures, 1, "the agent is checked once")
	want := own
	want.Tolerations, want.Env = settings.Tolerations, settings.Env
	assert.Equal(t, &want, r.ensures[0].Config, "settings replace theirs, the rest is kept")

	r = newAgentRig(t)
	var rejected error
	r.at(time.Minute, func() { r.apply(protocol.ClusterApply{AgentSettings: &settings}, &rejected) })
	r.run(protocol.ClusterRecord{Name: "c1", KubeconfigHash: "h"}, 5*time.Minute)
	require.Error(t, rejected)
	assert.Contains(t, rejected.Error(), "cluster c1")
	assert.Contains(t, rejected.Error(), "--install-agent")
	assert.Empty(t, r.ensures)
}

// An upgrade of a managed agent waits for the cluster's
// agentUpgradeWindows and says so on the record; the first install does
// not wait; windows that do not parse are refused.
func TestClusterWorkflow_ManagedAgentUpgradeWaitsForWindow(t *testing.T) {
	r := newAgentRig(t)
	start := time.Date(2025, 1, 6, 12, 0, 0, 0, time.UTC)
	r.env.SetStartTime(start)
	cfg := &protocol.AgentConfig{Namespace: "agents", UpgradeWindows: []api.Window{{Schedule: "0 14 * * *", Duration: "1h"}}}
	r.ensure = func(n int, _ activities.EnsureAgentInput) (activities.EnsureAgentResult, error) {
		return activities.EnsureAgentResult{DeploymentID: fmt.Sprintf("agent:%d", n), DefaultsHash: fmt.Sprintf("d%d", n), Deployed: true}, nil
	}
	var refused error
	r.at(time.Minute, func() {
		r.apply(protocol.ClusterApply{KubeconfigHash: "h", Agent: &protocol.AgentApply{Managed: true, Config: cfg}}, nil)
		r.apply(protocol.ClusterApply{AgentSettings: &protocol.AgentSettings{UpgradeWindows: []api.Window{{Schedule: "0 25 * * *", Duration: "1h"}}}}, &refused)
	})
	r.at(2*time.Minute, func() {
		require.Len(t, r.ensures, 1, "the first install does not wait for a window")
		r.env.SignalWorkflow(protocol.SignalAgentDefaults, protocol.AgentDefaults{Hash: "new"})
	})
	r.at(time.Hour, func() {
		assert.Len(t, r.ensures, 1, "the upgrade waits: the window opens at 14:00")
		assert.Equal(t, `agent upgrade waits for window "0 14 * * *" (1h, UTC), which opens 2025-01-06T14:00:00Z`, r.record().Agent.UpgradeWaits)
	})
	r.at(2*time.Hour+time.Minute, func() {
		assert.Len(t, r.ensures, 2, "upgraded once the window opened")
		rec := r.record()
		assert.Empty(t, rec.Agent.UpgradeWaits)
		assert.Equal(t, "agent:2", rec.Agent.DeploymentID)
	})
	r.run(protocol.ClusterRecord{Name: "c1"}, 3*time.Hour)
	require.Error(t, refused)
	assert.Contains(t, refused.Error(), "agentUpgradeWindows[0]")
}
