package workflows

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/testsuite"

	"github.com/flotilla-gitops/flotilla/activities"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

// A cluster change while the GitRepo's rollout is superseded already
// (say a cluster removed while the rollout still waits for its agent)
// signals the rollout again, so it asks again which clusters were removed
// (ListTargets); before, only the first change reached it.
func TestGitRepoWorkflow_ClusterChangeResupersedes(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	f := newFakeFleet()
	var a *activities.Activities
	var ca *activities.ClusterActivities
	// Both clusters are agents whose deploys take a minute: the
	// superseded rollout waits for them.
	env.OnActivity(a.TargetBundles, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.BundleTargetsInput) (activities.TargetsResult, error) {
			res := activities.TargetsResult{Registered: []string{"c1", "c2"}, Agents: []string{"c1", "c2"}}
			for _, c := range []string{"c1", "c2"} {
				res.Matched = append(res.Matched, activities.TargetCluster{Name: c, Agent: true, Bundles: in.Bundles})
			}
			return res, nil
		})
	env.OnActivity(ca.Deploy, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.DeployInput) (activities.DeployResult, error) {
			var res activities.DeployResult
			for _, b := range in.Bundles {
				res.Deployments = append(res.Deployments, status.Deployment{Bundle: b.Name, Cluster: in.Cluster, Release: b.Release,
					Namespace: b.Namespace, DeploymentID: b.DeploymentID, AppliedDeploymentID: b.DeploymentID, State: status.Ready})
			}
			return res, nil
		}).After(time.Minute)
	var asked atomic.Int32
	env.OnActivity(a.ListTargets, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.TargetsInput) (activities.TargetsResult, error) {
			asked.Add(1)
			return activities.TargetsResult{Registered: []string{"c1", "c2"}}, nil
		})
	f.register(env) // after the mocks above: the first matching mock wins
	repo := testGitRepo(false)
	repo.Spec.DisablePolling = true
	env.RegisterDelayedCallback(func() { applyUpdate(t, env, repo) }, 0)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(protocol.SignalClustersChanged, nil) }, 5*time.Second)
	env.RegisterDelayedCallback(func() {
		assert.Equal(t, int32(1), asked.Load(), "the first change supersedes; the rollout looks for removed clusters")
		env.SignalWorkflow(protocol.SignalClustersChanged, nil) // a cluster removed
	}, 20*time.Second)
	env.RegisterDelayedCallback(func() {
		assert.Equal(t, int32(2), asked.Load(), "a later change makes the superseded rollout look again")
		env.SignalWorkflow(protocol.SignalDelete, nil)
	}, 25*time.Second)
	runGitRepo(t, env)
}
