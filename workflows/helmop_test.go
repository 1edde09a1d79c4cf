package workflows

import (
	"context"
	"encoding/json"
	"strings"
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

// helmOpEnv serves the fake fleet's activities to a HelmOp workflow whose
// chart versions are what version returns; it records the resolve and
// render inputs.
func helmOpEnv(t *testing.T) (*testsuite.TestWorkflowEnvironment, *fakeFleet, *[]activities.ResolveInput, *[]activities.RenderInput) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	f := newFakeFleet()
	f.commit = "1.0.0"
	var a *activities.Activities
	var resolves []activities.ResolveInput
	var renders []activities.RenderInput
	env.OnActivity(a.ResolveCommit, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.ResolveInput) (activities.ResolveResult, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			resolves = append(resolves, in)
			return activities.ResolveResult{Commit: f.commit}, nil
		})
	env.OnActivity(a.Render, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.RenderInput) (activities.RenderResult, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			renders = append(renders, in)
			return activities.RenderResult{Bundles: []activities.Bundle{{Name: "app", Release: "app", Namespace: "default",
				DeploymentID: "s-" + in.Commit + ":h", Resources: 1}}}, nil
		})
	f.register(env) // after the mocks above: the first matching mock wins
	env.RegisterWorkflow(HelmOpWorkflow)
	return env, f, &resolves, &renders
}

func testHelmOp(t *testing.T, version string) api.HelmOp {
	var h api.HelmOp
	doc := `{"metadata":{"name":"app","namespace":"fleet-default"},"spec":{"helm":{"repo":"https://charts.example","chart":"app","version":"` +
		version + `"},"targets":[{"clusterSelector":{}}],"pollingInterval":"10s"}}`
	require.NoError(t, json.Unmarshal([]byte(doc), &h))
	return h
}

func applyHelmOp(t *testing.T, env *testsuite.TestWorkflowEnvironment, h api.HelmOp, rejected *error) {
	env.UpdateWorkflow(protocol.UpdateApply, "apply-"+h.Spec.HelmSecretName+string(h.Spec.Bundle), &testsuite.TestUpdateCallback{
		OnReject: func(err error) {
			if rejected == nil {
				t.Errorf("apply rejected: %v", err)
				return
			}
			*rejected = err
		},
		OnAccept:   func() {},
		OnComplete: func(any, error) {},
	}, protocol.HelmOpApply{HelmOp: h})
}

var helmOpInput = GitRepoInput{GitRepoStart: protocol.GitRepoStart{Namespace: "fleet-default", Name: "app"}}

// A constraint is polled: a newly matching version rolls out on the next
// poll, with the HelmOp's bundle and the resolved version.
func TestHelmOpWorkflow_ConstraintPollsAndUpgrades(t *testing.T) {
	env, f, resolves, renders := helmOpEnv(t)
	env.RegisterDelayedCallback(func() { applyHelmOp(t, env, testHelmOp(t, "~1"), nil) }, 0)
	env.RegisterDelayedCallback(func() {
		st := queryStatus(t, env)
		assert.Equal(t, api.KindHelmOp, st.Kind)
		assert.Equal(t, "1.0.0", st.Version)
		assert.Equal(t, "https://charts.example/app", st.Repo)
		assert.Equal(t, 2, st.Summary.Ready)
		assert.True(t, strings.HasPrefix(st.LastRollout, "rollout/helmop/fleet-default/app/1.0.0-"), st.LastRollout)
		f.mu.Lock()
		f.commit = "1.1.0"
		f.mu.Unlock()
	}, 5*time.Second)
	env.RegisterDelayedCallback(func() {
		st := queryStatus(t, env)
		assert.Equal(t, "1.1.0", st.Version, "the next poll upgrades")
		for _, d := range st.Deployments {
			assert.Equal(t, "s-1.1.0:h", d.AppliedDeploymentID)
		}
		env.SignalWorkflow(protocol.SignalDelete, nil)
	}, 30*time.Second)
	env.ExecuteWorkflow(HelmOpWorkflow, helmOpInput)
	require.NoError(t, env.GetWorkflowError())
	assert.Equal(t, 2, f.deploys["c1"], "one deploy per version")
	require.NotEmpty(t, *resolves)
	in := (*resolves)[0]
	assert.Equal(t, api.KindHelmOp, in.GitRepo.Kind)
	require.NotNil(t, in.Spec.HelmOp)
	_, _, v := in.Spec.HelmOp.Chart()
	assert.Equal(t, "~1", v)
	require.NotEmpty(t, *renders)
	assert.Equal(t, "helmop/fleet-default/app", (*renders)[0].GitRepo.String())
	assert.Equal(t, []string{"c1", "c2"}, f.matched)
}

// An exact version is resolved once and never polled.
func TestHelmOpWorkflow_ExactVersionIsNotPolled(t *testing.T) {
	env, _, resolves, _ := helmOpEnv(t)
	env.RegisterDelayedCallback(func() { applyHelmOp(t, env, testHelmOp(t, "1.0.0"), nil) }, 0)
	env.RegisterDelayedCallback(func() {
		st := queryStatus(t, env)
		assert.Equal(t, "1.0.0", st.Version)
		assert.Empty(t, st.PollingInterval, "no polling")
		env.SignalWorkflow(protocol.SignalDelete, nil)
	}, time.Minute)
	env.ExecuteWorkflow(HelmOpWorkflow, helmOpInput)
	require.NoError(t, env.GetWorkflowError())
	assert.Len(t, *resolves, 1)
}

func TestHelmOpWorkflow_BadConstraintIsRejected(t *testing.T) {
	env, _, _, _ := helmOpEnv(t)
	var rejected error
	env.RegisterDelayedCallback(func() { applyHelmOp(t, env, testHelmOp(t, ">>1"), &rejected) }, 0)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(protocol.SignalDelete, nil) }, time.Second)
	env.ExecuteWorkflow(HelmOpWorkflow, helmOpInput)
	require.Error(t, rejected)
	assert.Contains(t, rejected.Error(), "spec.helm.version")
	assert.Contains(t, rejected.Error(), "HelmOp fleet-default/app")
}
