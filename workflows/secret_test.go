package workflows

import (
	"bytes"
	"crypto/ed25519"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/seal"
)

type updateResult struct {
	accepted bool
	err      error
	value    any
}

func sendUpdate(env *testsuite.TestWorkflowEnvironment, name string, arg any) *updateResult {
	r := &updateResult{}
	env.UpdateWorkflow(name, "", &testsuite.TestUpdateCallback{
		OnAccept: func() { r.accepted = true },
		OnReject: func(err error) { r.err = err },
		OnComplete: func(v any, err error) {
			r.value, r.err = v, err
		},
	}, arg)
	return r
}

func TestSecretWorkflow_ApplyQueryDelete(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	notified := mockNotifyNamespace(env)
	sealed := seal.Box{KeyID: "fk-1", Data: []byte("ciphertext")}
	var first, again, other, unsealed *updateResult
	env.RegisterDelayedCallback(func() {
		first = sendUpdate(env, protocol.UpdateApply,
			protocol.SecretRecord{Namespace: "ns", Name: "creds", Keys: []string{"password"}, Sealed: sealed})
		again = sendUpdate(env, protocol.UpdateApply,
			protocol.SecretRecord{Namespace: "ns", Name: "creds", Keys: []string{"password"}, Sealed: sealed})
		other = sendUpdate(env, protocol.UpdateApply,
			protocol.SecretRecord{Namespace: "ns", Name: "other", Sealed: sealed})
		unsealed = sendUpdate(env, protocol.UpdateApply,
			protocol.SecretRecord{Namespace: "ns", Name: "creds"})
	}, time.Second)
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(protocol.QueryStatus)
		require.NoError(t, err)
		var rec protocol.SecretRecord
		require.NoError(t, v.Get(&rec))
		assert.Equal(t, int64(1), rec.Generation, "the same content twice is one change")
		assert.Equal(t, sealed, rec.Sealed)
		assert.Equal(t, []string{"password"}, rec.Keys)
		env.SignalWorkflow(protocol.SignalDelete, nil)
	}, 2*time.Second)
	env.ExecuteWorkflow(SecretWorkflow, protocol.SecretStart{Record: protocol.SecretRecord{Namespace: "ns", Name: "creds"}})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	require.NoError(t, first.err)
	require.NoError(t, again.err)
	require.Error(t, other.err, "a Secret sent to another Secret's workflow")
	assert.Contains(t, other.err.Error(), "ns/other")
	require.Error(t, unsealed.err)
	assert.Contains(t, unsealed.err.Error(), "not sealed")
	assert.Equal(t, []string{"ns: changed secret ns/creds", "ns: deleted secret ns/creds"}, *notified,
		"the namespace's GitRepos hear of the new content and of the delete, once each")
}

func TestKeysWorkflow_PublishAndConflict(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	k := func(id string, b byte) seal.PublicKey {
		key := make([]byte, 32)
		key[0] = b
		return seal.PublicKey{ID: id, Key: key}
	}
	var a, b, conflict, bad *updateResult
	env.RegisterDelayedCallback(func() {
		a = sendUpdate(env, protocol.UpdatePublishKeys, []seal.PublicKey{k("fk-2", 2)})
		b = sendUpdate(env, protocol.UpdatePublishKeys, []seal.PublicKey{k("fk-1", 1), k("fk-2", 2)})
		conflict = sendUpdate(env, protocol.UpdatePublishKeys, []seal.PublicKey{k("fk-2", 9)})
		bad = sendUpdate(env, protocol.UpdatePublishKeys, []seal.PublicKey{{ID: "fk-3", Key: []byte{1}}})
	}, time.Second)
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(protocol.QueryStatus)
		require.NoError(t, err)
		var rec protocol.KeysRecord
		require.NoError(t, v.Get(&rec))
		require.Len(t, rec.Keys, 2)
		assert.Equal(t, "fk-1", rec.Keys[0].ID, "sorted oldest first")
		n, _ := seal.Newest(rec.Keys)
		assert.Equal(t, "fk-2", n.ID)
		env.CancelWorkflow()
	}, 2*time.Second)
	env.ExecuteWorkflow(KeysWorkflow, protocol.KeysRecord{})
	require.NoError(t, a.err)
	require.NoError(t, b.err)
	require.Error(t, conflict.err)
	assert.Contains(t, conflict.err.Error(), "same --seal-keys")
	require.Error(t, bad.err)
}

// Once the published keys are signed, the workflow refuses keys of
// another signer (as type ForeignSigner, which controllers read) and
// unsigned new keys; the signer's own newer key is published.
func TestKeysWorkflow_Signer(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	signer := func(b byte) *seal.Signer {
		sg, err := seal.NewSigner(bytes.Repeat([]byte{b}, ed25519.SeedSize))
		require.NoError(t, err)
		return sg
	}
	mine, theirs := signer(1), signer(2)
	k := func(id string, b byte) seal.PublicKey {
		return seal.PublicKey{ID: id, Key: bytes.Repeat([]byte{b}, 32)}
	}
	var first, unsigned, foreign, newer *updateResult
	env.RegisterDelayedCallback(func() {
		first = sendUpdate(env, protocol.UpdatePublishKeys, []seal.PublicKey{mine.Sign(k("fk-1", 1))})
		unsigned = sendUpdate(env, protocol.UpdatePublishKeys, []seal.PublicKey{k("fk-2", 2)})
		foreign = sendUpdate(env, protocol.UpdatePublishKeys, []seal.PublicKey{theirs.Sign(k("fk-2", 2))})
		newer = sendUpdate(env, protocol.UpdatePublishKeys, []seal.PublicKey{mine.Sign(k("fk-3", 3))})
	}, time.Second)
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(protocol.QueryStatus)
		require.NoError(t, err)
		var rec protocol.KeysRecord
		require.NoError(t, v.Get(&rec))
		n, _ := seal.Newest(rec.Keys)
		assert.Equal(t, "fk-3", n.ID)
		assert.Len(t, rec.Keys, 2, "neither refused key was published")
		env.CancelWorkflow()
	}, 2*time.Second)
	env.ExecuteWorkflow(KeysWorkflow, protocol.KeysRecord{})
	require.NoError(t, first.err)
	require.NoError(t, newer.err)
	for _, r := range []*updateResult{unsigned, foreign} {
		var ae *temporal.ApplicationError
		require.ErrorAs(t, r.err, &ae)
		assert.Equal(t, seal.ErrTypeForeignSigner, ae.Type())
		assert.Contains(t, ae.Error(), mine.Fingerprint())
	}
}

// A cluster's kubeconfig is held sealed beside the record, never in it; a
// re-seal (same hash) replaces the box without changing the record.
func TestClusterWorkflow_SealedKubeconfig(t *testing.T) {
	r := newAgentRig(t)
	box1 := &seal.Box{KeyID: "fk-1", Data: []byte("c1")}
	box2 := &seal.Box{KeyID: "fk-2", Data: []byte("c2")}
	query := func() *seal.Box {
		v, err := r.env.QueryWorkflow(protocol.QueryKubeconfig)
		require.NoError(t, err)
		var b *seal.Box
		require.NoError(t, v.Get(&b))
		return b
	}
	var noHash error
	r.at(time.Second, func() {
		assert.Nil(t, query())
		r.apply(protocol.ClusterApply{KubeconfigHash: "h", Kubeconfig: box1}, nil)
		r.apply(protocol.ClusterApply{Kubeconfig: box1}, &noHash)
	})
	var gen int64
	r.at(2*time.Second, func() {
		assert.Equal(t, box1, query())
		gen = r.record().Generation
		r.apply(protocol.ClusterApply{KubeconfigHash: "h", Kubeconfig: box2}, nil)
	})
	r.at(3*time.Second, func() {
		assert.Equal(t, box2, query())
		assert.Equal(t, gen, r.record().Generation, "a re-seal is not a change of the cluster")
	})
	r.run(protocol.ClusterRecord{Name: "c1"}, 4*time.Second)
	require.Error(t, noHash)
	assert.Contains(t, noHash.Error(), "hash")
}
