package workflows

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/flotilla-gitops/flotilla/activities"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

// The warnings of the rendered bundles reach the GitRepo's status (and
// its Accepted condition), and only there: the bundles handed to targeting
// and to the clusters carry none.
func TestGitRepoWorkflow_WarningsReachStatus(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	var a *activities.Activities
	warnings := []string{
		`app/fleet.yaml: unknown field "helm.chrat" (ignored)`,
		"app/cm.yaml: document 2 has no kind; the file is skipped, as Fleet skips it",
	}
	// Registered before the fake fleet's, so these answer.
	env.OnActivity(a.Render, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.RenderInput) (activities.RenderResult, error) {
			res := appBundles(in.Commit)
			res.Bundles[0].Warnings = warnings
			return res, nil
		})
	var mu sync.Mutex
	var targeted []activities.Bundle
	env.OnActivity(a.TargetBundles, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.BundleTargetsInput) (activities.TargetsResult, error) {
			mu.Lock()
			defer mu.Unlock()
			targeted = append(targeted, in.Bundles...)
			return activities.TargetsResult{Registered: []string{"c1"},
				Matched: []activities.TargetCluster{{Name: "c1", Bundles: in.Bundles}}}, nil
		})
	f := newFakeFleet()
	f.register(env)

	env.RegisterDelayedCallback(func() { applyUpdate(t, env, testGitRepo(false)) }, 0)
	env.RegisterDelayedCallback(func() {
		st := queryStatus(t, env)
		assert.Equal(t, f.commit, st.Commit)
		assert.Equal(t, warnings, st.Warnings)
		accepted, ok := st.Condition(status.ConditionAccepted)
		require.True(t, ok)
		assert.Equal(t, status.ConditionTrue, accepted.Status)
		assert.Equal(t, status.ReasonWarnings, accepted.Reason)
		assert.Equal(t, "Ready", st.Display.State, "warnings do not change the state")
		env.SignalWorkflow(protocol.SignalDelete, nil)
	}, 5*time.Second)

	runGitRepo(t, env)
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, targeted)
	for _, b := range targeted {
		assert.Empty(t, b.Warnings, "warnings stay out of the targeting input and the clusters' work")
	}
}
