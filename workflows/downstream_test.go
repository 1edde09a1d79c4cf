package workflows

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/flotilla-gitops/flotilla/activities"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/seal"
)

// mockNotifyNamespace records NotifyNamespace calls as "namespace: reason".
func mockNotifyNamespace(env *testsuite.TestWorkflowEnvironment) *[]string {
	var calls []string
	var a *activities.Activities
	env.OnActivity(a.NotifyNamespace, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.NotifyNamespaceInput) error {
			calls = append(calls, in.Namespace+": "+in.Reason)
			return nil
		})
	return &calls
}

// A re-seal (secrets rotate) changes the box, not the content: nobody is
// told.
func TestSecretWorkflow_ResealDoesNotNotify(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	notified := mockNotifyNamespace(env)
	rec := protocol.SecretRecord{Namespace: "ns", Name: "creds", Keys: []string{"k"}, Sealed: seal.Box{KeyID: "fk-1", Data: []byte("a")}}
	env.RegisterDelayedCallback(func() {
		require.NoError(t, sendUpdate(env, protocol.UpdateApply, rec).err)
	}, time.Second)
	env.RegisterDelayedCallback(func() {
		moved := rec
		moved.Sealed, moved.Resealed = seal.Box{KeyID: "fk-2", Data: []byte("b")}, true
		require.NoError(t, sendUpdate(env, protocol.UpdateApply, moved).err)
	}, 2*time.Second)
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(protocol.QueryStatus)
		require.NoError(t, err)
		var got protocol.SecretRecord
		require.NoError(t, v.Get(&got))
		assert.Equal(t, "fk-2", got.Sealed.KeyID)
		assert.False(t, got.Resealed, "the flag is not state")
		env.CancelWorkflow()
	}, 3*time.Second)
	env.ExecuteWorkflow(SecretWorkflow, protocol.SecretStart{Record: protocol.SecretRecord{Namespace: "ns", Name: "creds"}})
	assert.Equal(t, []string{"ns: changed secret ns/creds"}, *notified)
}

func TestConfigMapWorkflow_ApplyNotifyDelete(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	notified := mockNotifyNamespace(env)
	v1 := protocol.ConfigMapRecord{Namespace: "ns", Name: "settings", Data: map[string]string{"mode": "fast"}}
	var first, same, changed, other *updateResult
	env.RegisterDelayedCallback(func() {
		first = sendUpdate(env, protocol.UpdateApply, v1)
	}, time.Second)
	env.RegisterDelayedCallback(func() {
		same = sendUpdate(env, protocol.UpdateApply, v1)
		v2 := v1
		v2.BinaryData = map[string][]byte{"blob": {1}}
		changed = sendUpdate(env, protocol.UpdateApply, v2)
		other = sendUpdate(env, protocol.UpdateApply, protocol.ConfigMapRecord{Namespace: "ns", Name: "other"})
	}, 2*time.Second)
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(protocol.QueryStatus)
		require.NoError(t, err)
		var rec protocol.ConfigMapRecord
		require.NoError(t, v.Get(&rec))
		assert.Equal(t, int64(2), rec.Generation)
		assert.Equal(t, map[string]string{"mode": "fast"}, rec.Data)
		assert.Equal(t, map[string][]byte{"blob": {1}}, rec.BinaryData)
		env.SignalWorkflow(protocol.SignalDelete, nil)
	}, 3*time.Second)
	env.ExecuteWorkflow(ConfigMapWorkflow, protocol.ConfigMapStart{Record: protocol.ConfigMapRecord{Namespace: "ns", Name: "settings"}})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	require.NoError(t, first.err)
	require.NoError(t, same.err)
	require.NoError(t, changed.err)
	require.Error(t, other.err)
	assert.Equal(t, []string{"ns: changed configmap ns/settings", "ns: changed configmap ns/settings", "ns: deleted configmap ns/settings"},
		*notified, "creation and a change each tell the namespace; the same data again does not")
}

// A pull-mode cluster's agent gets its bundles' downstream resources
// sealed to the key it published with its heartbeats, and only to it.
func TestClusterWorkflow_Downstream(t *testing.T) {
	r := newAgentRig(t)
	var a *activities.Activities
	key := seal.PublicKey{ID: "fk-agent", Key: make([]byte, 32)}
	box := seal.Box{KeyID: "fk-agent", Data: []byte("sealed")}
	var sealed []activities.SealDownstreamInput
	var mu sync.Mutex // the test environment runs concurrent updates' activities in parallel
	r.env.OnActivity(a.SealDownstream, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.SealDownstreamInput) (seal.Box, error) {
			mu.Lock()
			sealed = append(sealed, in)
			mu.Unlock()
			if in.Request.Bundle == "missing" {
				return seal.Box{}, temporal.NewNonRetryableApplicationError("Secret x not found", activities.ErrTypeDownstreamMissing, nil)
			}
			return box, nil
		})
	req := protocol.DownstreamRequest{Cluster: "c1", GitRepo: "ns/app", Namespace: "ns", Bundle: "app", Digest: "fk-1:00", Key: key}
	var before, ok, missing, otherKey, otherCluster *updateResult
	r.at(time.Second, func() {
		before = sendUpdate(r.env, protocol.UpdateDownstream, req)
		r.env.SignalWorkflow(protocol.SignalHeartbeat, protocol.Heartbeat{Interval: time.Minute, SealKey: &key})
	})
	r.at(2*time.Second, func() {
		assert.Equal(t, &key, r.record().Agent.SealKey, "the heartbeat publishes the key")
		ok = sendUpdate(r.env, protocol.UpdateDownstream, req)
		m := req
		m.Bundle = "missing"
		missing = sendUpdate(r.env, protocol.UpdateDownstream, m)
		k := req
		k.Key = seal.PublicKey{ID: "fk-impostor", Key: make([]byte, 32)}
		otherKey = sendUpdate(r.env, protocol.UpdateDownstream, k)
		c := req
		c.Cluster = "c2"
		otherCluster = sendUpdate(r.env, protocol.UpdateDownstream, c)
	})
	r.at(3*time.Second, func() { r.env.CancelWorkflow() })
	r.env.ExecuteWorkflow(ClusterWorkflow, ClusterInput{ClusterStart: protocol.ClusterStart{Record: protocol.ClusterRecord{
		Name: "c1", Agent: &protocol.AgentRecord{TokenID: "t"}}}})

	require.Error(t, before.err, "no key published yet")
	assert.Contains(t, before.err.Error(), "has not published a key")
	require.NoError(t, ok.err)
	assert.Equal(t, box, ok.value)
	var ae *temporal.ApplicationError
	require.ErrorAs(t, missing.err, &ae)
	assert.Equal(t, activities.ErrTypeDownstreamMissing, ae.Type(), "the agent reads the type")
	require.Error(t, otherKey.err)
	assert.Contains(t, otherKey.err.Error(), "fk-impostor")
	require.Error(t, otherCluster.err)
	require.Len(t, sealed, 2, "rejected requests never reach a controller")
	assert.Equal(t, key, sealed[0].Request.Key)
}
