package workflows

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/flotilla-gitops/flotilla/activities"
	"github.com/flotilla-gitops/flotilla/internal/cluster"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
)

const tokenTTL = time.Hour

// tokenRig runs a ClusterTokenWorkflow for a fresh token with a mocked
// RegisterAgent.
type tokenRig struct {
	t     *testing.T
	env   *testsuite.TestWorkflowEnvironment
	tok   cluster.Token
	proof string
	// calls are the RegisterAgent inputs, in order.
	calls []activities.RegisterAgentInput
}

func newTokenRig(t *testing.T) *tokenRig { return newTokenRigDelayed(t, 0) }

// newTokenRigDelayed is newTokenRig with a RegisterAgent that takes
// delay (of workflow time).
func newTokenRigDelayed(t *testing.T, delay time.Duration) *tokenRig {
	t.Helper()
	r := newBareTokenRig(t)
	var a *activities.Activities
	r.env.OnActivity(a.RegisterAgent, mock.Anything, mock.Anything).After(delay).Return(protocol.ClusterRecord{Name: "c1"}, nil).
		Run(func(args mock.Arguments) { r.calls = append(r.calls, args.Get(1).(activities.RegisterAgentInput)) })
	return r
}

// newBareTokenRig is a rig for a fresh token whose RegisterAgent the test
// mocks itself.
func newBareTokenRig(t *testing.T) *tokenRig {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	r := &tokenRig{t: t, env: suite.NewTestWorkflowEnvironment()}
	var err error
	r.tok, err = cluster.NewToken()
	require.NoError(t, err)
	_, r.proof, err = cluster.ParseToken(r.tok.Value)
	require.NoError(t, err)
	r.env.RegisterActivity(&activities.Activities{})
	return r
}

// registration is what an update call saw.
type registration struct {
	accepted, rejected, completed bool
	err                           error // the rejection or the handler's error
	rec                           protocol.ClusterRecord
}

// register sends the register update and records its outcome in reg.
func (r *tokenRig) register(id string, in protocol.Register) *registration {
	reg := &registration{}
	r.env.UpdateWorkflow(protocol.UpdateRegister, id, &testsuite.TestUpdateCallback{
		OnAccept: func() { reg.accepted = true },
		OnReject: func(err error) { reg.rejected, reg.err = true, err },
		OnComplete: func(v any, err error) {
			reg.completed, reg.err = true, err
			if rec, ok := v.(protocol.ClusterRecord); ok {
				reg.rec = rec
			}
		},
	}, in)
	return reg
}

func (r *tokenRig) run() protocol.TokenStatus {
	r.t.Helper()
	r.env.ExecuteWorkflow(ClusterTokenWorkflow, protocol.TokenStart{ID: r.tok.ID, Verifier: r.tok.Verifier, TTL: tokenTTL})
	require.True(r.t, r.env.IsWorkflowCompleted())
	require.NoError(r.t, r.env.GetWorkflowError())
	var st protocol.TokenStatus
	require.NoError(r.t, r.env.GetWorkflowResult(&st))
	return st
}

// query returns the token's status from its query handler.
func (r *tokenRig) query() protocol.TokenStatus {
	r.t.Helper()
	v, err := r.env.QueryWorkflow(protocol.QueryStatus)
	require.NoError(r.t, err)
	var st protocol.TokenStatus
	require.NoError(r.t, v.Get(&st))
	return st
}

// A valid proof registers the cluster once, with its labels and the
// token's ID, and uses the token up.
func TestClusterTokenWorkflow_Registers(t *testing.T) {
	r := newTokenRig(t)
	var reg *registration
	labels := map[string]string{"env": "prod", "region": "eu-west-1"}
	r.env.RegisterDelayedCallback(func() {
		reg = r.register("1", protocol.Register{Cluster: "c1", Proof: r.proof, Labels: labels})
	}, time.Minute)

	st := r.run()

	require.NotNil(t, reg)
	assert.True(t, reg.accepted)
	assert.False(t, reg.rejected)
	require.True(t, reg.completed)
	require.NoError(t, reg.err)
	assert.Equal(t, "c1", reg.rec.Name)
	require.Len(t, r.calls, 1)
	assert.Equal(t, activities.RegisterAgentInput{Cluster: "c1", Labels: labels, TokenID: r.tok.ID}, r.calls[0])

	assert.Equal(t, r.tok.ID, st.ID)
	assert.Equal(t, "c1", st.UsedBy)
	require.NotNil(t, st.UsedAt)
	assert.Equal(t, time.Minute, st.UsedAt.Sub(st.CreatedAt))
	assert.Equal(t, tokenTTL, st.ExpiresAt.Sub(st.CreatedAt))
	assert.False(t, st.Expired)
	assert.False(t, st.Revoked)
	assert.Less(t, r.env.Now().Sub(st.CreatedAt), tokenTTL, "the workflow ends once used, not at expiry")
	assert.Equal(t, st, r.query(), "a completed token still answers the status query")
}

// Validation failures are rejected before anything runs or is recorded.
func TestClusterTokenWorkflow_RejectsInvalidRegistrations(t *testing.T) {
	other, err := cluster.NewToken()
	require.NoError(t, err)
	_, otherProof, err := cluster.ParseToken(other.Value)
	require.NoError(t, err)
	tests := []struct {
		name string
		in   func(r *tokenRig) protocol.Register
		// badProof: rejected as "invalid registration token <id>";
		// wantErr: other parts of the rejection.
		badProof bool
		wantErr  []string
	}{
		{name: "wrong proof", in: func(r *tokenRig) protocol.Register {
			return protocol.Register{Cluster: "c1", Proof: otherProof}
		}, badProof: true},
		{name: "verifier as proof", in: func(r *tokenRig) protocol.Register {
			return protocol.Register{Cluster: "c1", Proof: r.tok.Verifier}
		}, badProof: true},
		{name: "no proof", in: func(r *tokenRig) protocol.Register {
			return protocol.Register{Cluster: "c1"}
		}, badProof: true},
		{name: "invalid label value", in: func(r *tokenRig) protocol.Register {
			return protocol.Register{Cluster: "c1", Proof: r.proof, Labels: map[string]string{"env": "prod", "team": "not a label value"}}
		}, wantErr: []string{"team", "c1"}},
		{name: "invalid label key", in: func(r *tokenRig) protocol.Register {
			return protocol.Register{Cluster: "c1", Proof: r.proof, Labels: map[string]string{"bad key": "x"}}
		}, wantErr: []string{"bad key"}},
		{name: "invalid cluster name", in: func(r *tokenRig) protocol.Register {
			return protocol.Register{Cluster: "C_1", Proof: r.proof}
		}, wantErr: []string{"C_1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newTokenRig(t)
			var reg *registration
			r.env.RegisterDelayedCallback(func() { reg = r.register("1", tt.in(r)) }, time.Minute)
			var during protocol.TokenStatus
			r.env.RegisterDelayedCallback(func() { during = r.query() }, 2*time.Minute)

			st := r.run()

			require.NotNil(t, reg)
			assert.True(t, reg.rejected)
			assert.False(t, reg.accepted)
			assert.False(t, reg.completed)
			require.Error(t, reg.err)
			if tt.badProof {
				assert.Contains(t, reg.err.Error(), "invalid registration token "+r.tok.ID)
			} else {
				assert.NotContains(t, reg.err.Error(), "invalid registration token")
			}
			for _, want := range tt.wantErr {
				assert.Contains(t, reg.err.Error(), want)
			}
			assert.Empty(t, r.calls, "RegisterAgent is not called")
			assert.Empty(t, during.UsedBy, "a rejected registration does not use the token")
			assert.Nil(t, during.UsedAt)
			// The token stays valid until it expires.
			assert.True(t, st.Expired)
			assert.Empty(t, st.UsedBy)
		})
	}
}

// A bad registration does not burn the token: the right proof still
// registers afterwards.
func TestClusterTokenWorkflow_RejectionKeepsTokenUsable(t *testing.T) {
	r := newTokenRig(t)
	var bad, good *registration
	r.env.RegisterDelayedCallback(func() {
		bad = r.register("1", protocol.Register{Cluster: "c1", Proof: "0000"})
	}, time.Minute)
	r.env.RegisterDelayedCallback(func() {
		good = r.register("2", protocol.Register{Cluster: "c1", Proof: r.proof})
	}, 2*time.Minute)

	st := r.run()

	require.NotNil(t, bad)
	require.NotNil(t, good)
	assert.True(t, bad.rejected)
	assert.True(t, good.accepted)
	assert.True(t, good.completed)
	assert.Len(t, r.calls, 1)
	assert.Equal(t, "c1", st.UsedBy)
}

// A registration the cluster's workflow refuses (the cluster is
// registered in push mode) does not burn the token: the status says why,
// and a registration that is accepted later uses it.
func TestClusterTokenWorkflow_RefusedRegistrationKeepsToken(t *testing.T) {
	r := newBareTokenRig(t)
	var a *activities.Activities
	const refusal = `cluster "edge-1" is registered in push mode; a registration token cannot take over an existing cluster: remove it first (flotilla cluster remove edge-1)`
	r.env.OnActivity(a.RegisterAgent, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.RegisterAgentInput) (protocol.ClusterRecord, error) {
			r.calls = append(r.calls, in)
			if in.Cluster == "edge-1" {
				return protocol.ClusterRecord{}, temporal.NewNonRetryableApplicationError(refusal, activities.ErrTypeRegistrationRejected, nil)
			}
			return protocol.ClusterRecord{Name: in.Cluster}, nil
		})
	var refused, retried *registration
	r.env.RegisterDelayedCallback(func() {
		refused = r.register("1", protocol.Register{Cluster: "edge-1", Proof: r.proof})
	}, time.Minute)
	r.env.RegisterDelayedCallback(func() {
		st := r.query()
		assert.Empty(t, st.UsedBy)
		assert.Equal(t, refusal, st.Refused, "the status says why")
		assert.False(t, st.Expired)
		retried = r.register("2", protocol.Register{Cluster: "edge-2", Proof: r.proof})
	}, 2*time.Minute)

	st := r.run()

	require.NotNil(t, refused)
	require.NotNil(t, retried)
	require.Error(t, refused.err)
	assert.Equal(t, refusal, activityMessage(refused.err))
	require.NoError(t, retried.err, "the token was still usable")
	assert.Equal(t, "edge-2", st.UsedBy)
	assert.Empty(t, st.Refused)
	assert.Len(t, r.calls, 2)
}

// A token is single-use: a second registration, even arriving together
// with the first, is rejected and names the cluster that used it.
func TestClusterTokenWorkflow_SingleUse(t *testing.T) {
	r := newTokenRig(t)
	var first, second *registration
	r.env.RegisterDelayedCallback(func() {
		first = r.register("1", protocol.Register{Cluster: "c1", Proof: r.proof})
		second = r.register("2", protocol.Register{Cluster: "c2", Proof: r.proof})
	}, time.Minute)

	st := r.run()

	require.NotNil(t, first)
	require.NotNil(t, second)
	assert.True(t, first.accepted)
	assert.True(t, first.completed)
	assert.True(t, second.rejected)
	assert.False(t, second.accepted)
	require.Error(t, second.err)
	assert.Contains(t, second.err.Error(), "registration token "+r.tok.ID+" is being used by cluster c1", "the first registration still runs")
	require.Len(t, r.calls, 1)
	assert.Equal(t, "c1", r.calls[0].Cluster)
	assert.Equal(t, "c1", st.UsedBy)
}

// A token nobody used expires at its TTL and its workflow ends, so a
// registration arriving later reaches no workflow (a real server answers
// NotFound, which the agent explains by querying the ended workflow).
func TestClusterTokenWorkflow_Expires(t *testing.T) {
	r := newTokenRig(t)
	var late *registration
	r.env.RegisterDelayedCallback(func() {
		late = r.register("late", protocol.Register{Cluster: "c1", Proof: r.proof})
	}, tokenTTL+time.Second)

	st := r.run()

	assert.True(t, st.Expired)
	assert.Empty(t, st.UsedBy)
	assert.Nil(t, st.UsedAt)
	assert.False(t, st.Revoked)
	assert.Equal(t, tokenTTL, st.ExpiresAt.Sub(st.CreatedAt))
	assert.True(t, st.ExpiresAt.Equal(r.env.Now()), "the workflow ends when the token expires: %s, expiry %s", r.env.Now(), st.ExpiresAt)
	assert.Nil(t, late, "the workflow ended before the registration at TTL+1s")
	assert.Empty(t, r.calls)
	assert.Equal(t, st, r.query(), "the ended workflow still tells why the token is unusable")
}

// A registration arriving at the very moment the token expires is never
// accepted: the validator refuses it as expired, or the workflow has
// already ended (what the test environment does, firing the TTL timer
// first).
func TestClusterTokenWorkflow_RegisterAtExpiry(t *testing.T) {
	r := newTokenRig(t)
	var reg *registration
	r.env.RegisterDelayedCallback(func() {
		reg = r.register("1", protocol.Register{Cluster: "c1", Proof: r.proof})
	}, tokenTTL)

	st := r.run()

	require.NotNil(t, reg, "the callback ran")
	assert.False(t, reg.accepted)
	assert.False(t, reg.completed)
	if reg.rejected {
		assert.Contains(t, reg.err.Error(), "expired at")
	}
	assert.True(t, st.Expired)
	assert.Empty(t, st.UsedBy)
	assert.Empty(t, r.calls)
}

// Revoking a token while its registration runs: the registration
// completes (it was accepted) and the workflow waits for it.
func TestClusterTokenWorkflow_RevokeDuringRegistration(t *testing.T) {
	r := newTokenRigDelayed(t, time.Minute)
	var reg *registration
	r.env.RegisterDelayedCallback(func() {
		reg = r.register("1", protocol.Register{Cluster: "c1", Proof: r.proof})
	}, time.Minute)
	r.env.RegisterDelayedCallback(func() { r.env.SignalWorkflow(protocol.SignalDelete, nil) }, time.Minute+time.Second)

	st := r.run()

	require.NotNil(t, reg)
	assert.True(t, reg.accepted)
	assert.True(t, reg.completed, "the workflow waits for the accepted registration")
	require.NoError(t, reg.err)
	assert.Len(t, r.calls, 1)
	assert.Equal(t, "c1", st.UsedBy, "agents are told the token was used (UsedBy wins over Revoked)")
}

// The delete signal revokes an unused token: the workflow ends at once,
// Revoked, and a later registration reaches no workflow.
func TestClusterTokenWorkflow_Revoke(t *testing.T) {
	r := newTokenRig(t)
	var late *registration
	r.env.RegisterDelayedCallback(func() { r.env.SignalWorkflow(protocol.SignalDelete, nil) }, time.Minute)
	r.env.RegisterDelayedCallback(func() {
		late = r.register("late", protocol.Register{Cluster: "c1", Proof: r.proof})
	}, 2*time.Minute)

	st := r.run()

	assert.True(t, st.Revoked)
	assert.False(t, st.Expired)
	assert.Empty(t, st.UsedBy)
	assert.Equal(t, time.Minute, r.env.Now().Sub(st.CreatedAt), "a revoked token's workflow ends at once")
	assert.Nil(t, late, "the workflow ended before the registration")
	assert.Empty(t, r.calls)
	assert.Equal(t, st, r.query())
}

// A revocation and a registration arriving together, the revocation
// first: the token is never used after being revoked. (The validator
// rejects it, or, as in the test environment, the workflow has ended.)
func TestClusterTokenWorkflow_RevokeThenRegisterSameTask(t *testing.T) {
	r := newTokenRig(t)
	var reg *registration
	r.env.RegisterDelayedCallback(func() {
		r.env.SignalWorkflow(protocol.SignalDelete, nil)
		reg = r.register("1", protocol.Register{Cluster: "c1", Proof: r.proof})
	}, time.Minute)

	st := r.run()

	require.NotNil(t, reg)
	assert.False(t, reg.accepted, "registration after the revocation")
	assert.False(t, reg.completed)
	if reg.rejected {
		assert.Contains(t, reg.err.Error(), "was revoked")
	}
	assert.True(t, st.Revoked)
	assert.Empty(t, st.UsedBy)
	assert.Empty(t, r.calls)
}

// A token whose history fills up with refused registrations continues as
// new, carrying its status (and its expiry) to the new run.
func TestClusterTokenWorkflow_ContinuesAsNewWhenFull(t *testing.T) {
	r := newTokenRig(t)
	r.env.RegisterDelayedCallback(func() { r.env.SetCurrentHistoryLength(historyLimit + 1) }, time.Minute)
	r.env.ExecuteWorkflow(ClusterTokenWorkflow, protocol.TokenStart{ID: r.tok.ID, Verifier: r.tok.Verifier, TTL: tokenTTL})
	require.True(t, r.env.IsWorkflowCompleted())
	var can *workflow.ContinueAsNewError
	require.ErrorAs(t, r.env.GetWorkflowError(), &can)
	var next protocol.TokenStart
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	require.NotNil(t, next.Status)
	assert.Equal(t, r.tok.ID, next.Status.ID)
	assert.Equal(t, next.Status.CreatedAt.Add(tokenTTL), next.Status.ExpiresAt, "the expiry carries over")
	assert.Empty(t, next.Status.UsedBy)
}
