package workflows

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/flotilla-gitops/flotilla/activities"
	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
)

// The PolicyWorkflow keeps a namespace's documents sorted by name, tells
// the namespace's GitRepos (policyChanged) after changes and not after an
// unchanged apply or a delete of nothing, refuses documents of another
// namespace or invalid ones, and ends once its last document is deleted.
func TestPolicyWorkflow_ApplyDeleteNotify(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	var notified []activities.NotifyNamespaceInput
	var a *activities.Activities
	env.OnActivity(a.NotifyNamespace, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.NotifyNamespaceInput) error {
			notified = append(notified, in)
			return nil
		})
	pol := func(ns, name string) *api.Policy {
		return &api.Policy{Metadata: api.ObjectMeta{Namespace: ns, Name: name}, AllowedServiceAccounts: []string{name}}
	}
	restriction := &api.GitRepoRestriction{Metadata: api.ObjectMeta{Namespace: "team-a", Name: "r"}, DefaultServiceAccount: "sa"}
	var created, unchanged, foreign, both, invalid, missing *updateResult
	var rec protocol.PolicyRecord
	env.RegisterDelayedCallback(func() {
		created = sendUpdate(env, protocol.UpdateApply, protocol.PolicyApply{Policy: pol("team-a", "b")})
		sendUpdate(env, protocol.UpdateApply, protocol.PolicyApply{Restriction: restriction})
		sendUpdate(env, protocol.UpdateApply, protocol.PolicyApply{Policy: pol("team-a", "a")})
	}, time.Second)
	env.RegisterDelayedCallback(func() {
		unchanged = sendUpdate(env, protocol.UpdateApply, protocol.PolicyApply{Policy: pol("team-a", "b")})
		foreign = sendUpdate(env, protocol.UpdateApply, protocol.PolicyApply{Policy: pol("team-b", "x")})
		both = sendUpdate(env, protocol.UpdateApply, protocol.PolicyApply{Policy: pol("team-a", "c"), Restriction: restriction})
		bad := pol("team-a", "bad")
		bad.GitRepo = &api.GitRepoPolicy{AllowedRepoPatterns: []string{"("}}
		invalid = sendUpdate(env, protocol.UpdateApply, protocol.PolicyApply{Policy: bad})
		missing = sendUpdate(env, protocol.UpdatePolicyDelete, protocol.PolicyDelete{Kind: api.KindPolicy, Name: "nope"})
		v, err := env.QueryWorkflow(protocol.QueryStatus)
		require.NoError(t, err)
		require.NoError(t, v.Get(&rec))
	}, 2*time.Second)
	env.RegisterDelayedCallback(func() {
		sendUpdate(env, protocol.UpdatePolicyDelete, protocol.PolicyDelete{Kind: api.KindPolicy, Name: "a"})
		sendUpdate(env, protocol.UpdatePolicyDelete, protocol.PolicyDelete{Kind: api.KindGitRepoRestriction, Name: "r"})
		sendUpdate(env, protocol.UpdatePolicyDelete, protocol.PolicyDelete{Kind: api.KindPolicy, Name: "b"})
	}, 3*time.Second)
	env.ExecuteWorkflow(PolicyWorkflow, protocol.PolicyStart{Record: protocol.PolicyRecord{Namespace: "team-a"}})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError(), "ends once the last document is gone")

	require.NoError(t, created.err)
	assert.True(t, created.value.(protocol.PolicyResult).Created)
	require.NoError(t, unchanged.err)
	assert.False(t, unchanged.value.(protocol.PolicyResult).Changed)
	for _, r := range []*updateResult{foreign, both, invalid} {
		assert.Error(t, r.err)
	}
	assert.Contains(t, foreign.err.Error(), "team-b/x sent to the policy workflow of namespace team-a")
	assert.Contains(t, invalid.err.Error(), "gitRepo.allowedRepoPatterns[0]")
	require.NoError(t, missing.err)
	assert.False(t, missing.value.(protocol.PolicyResult).Found)

	assert.Equal(t, []string{"a", "b"}, []string{rec.Policies[0].Metadata.Name, rec.Policies[1].Metadata.Name})
	require.Len(t, rec.Restrictions, 1)
	assert.Equal(t, int64(3), rec.Generation, "three changes; the unchanged apply and the missing delete are none")

	require.NotEmpty(t, notified)
	for _, n := range notified {
		assert.Equal(t, "team-a", n.Namespace)
		assert.Equal(t, protocol.SignalPolicyChanged, n.Signal)
	}
	assert.Equal(t, "deleted Policy team-a/b", notified[len(notified)-1].Reason, "the last change is told before the end")
}
