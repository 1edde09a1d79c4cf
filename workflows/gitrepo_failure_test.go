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
	"github.com/flotilla-gitops/flotilla/internal/outcome"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

// failingFleet serves a GitRepo of two bundles (app, db) on two clusters;
// fail decides the outcome of a deploy of a bundle on a cluster, given
// how many deploys of it were tried before.
type failingFleet struct {
	mu    sync.Mutex
	env   *testsuite.TestWorkflowEnvironment
	fail  func(bundle, cluster string, tried int) (status.State, outcome.Class)
	tries map[status.Key][]time.Time
	calls [][]string // bundles of each Deploy call on c1
}

func newFailingFleet(fail func(bundle, cluster string, tried int) (status.State, outcome.Class)) (*testsuite.TestWorkflowEnvironment, *failingFleet) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	return env, failingFleetIn(env, fail)
}

// failingFleetIn sets env up as newFailingFleet does: mocks registered
// on env before it (an event log) take precedence.
func failingFleetIn(env *testsuite.TestWorkflowEnvironment, fail func(bundle, cluster string, tried int) (status.State, outcome.Class)) *failingFleet {
	f := &failingFleet{env: env, fail: fail, tries: map[status.Key][]time.Time{}}
	var a *activities.Activities
	var ca *activities.ClusterActivities
	env.RegisterWorkflow(RolloutWorkflow)
	allowPolicies(env)
	env.OnActivity(a.ResolveCommit, mock.Anything, mock.Anything).Return(activities.ResolveResult{Ref: "refs/heads/main",
		Commit: "c0ffee0000000000000000000000000000000001"}, nil)
	env.OnActivity(a.Render, mock.Anything, mock.Anything).Return(activities.RenderResult{Bundles: []activities.Bundle{
		{Name: "app", Release: "app", Namespace: "default", DeploymentID: "m-app:h"},
		{Name: "db", Release: "db", Namespace: "default", DeploymentID: "m-db:h"},
	}}, nil)
	env.OnActivity(a.TargetBundles, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.BundleTargetsInput) (activities.TargetsResult, error) {
			res := activities.TargetsResult{Registered: []string{"c1", "c2"}}
			for _, c := range []string{"c1", "c2"} {
				res.Matched = append(res.Matched, activities.TargetCluster{Name: c, Bundles: in.Bundles})
			}
			return res, nil
		})
	env.OnActivity(ca.Deploy, mock.Anything, mock.Anything).Return(f.deploy)
	return f
}

func (f *failingFleet) deploy(_ context.Context, in activities.DeployInput) (activities.DeployResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var res activities.DeployResult
	if in.Cluster == "c1" {
		f.calls = append(f.calls, bundleNames(in.Bundles))
	}
	for _, b := range in.Bundles {
		k := status.Key{Bundle: b.Name, Cluster: in.Cluster}
		st, class := f.fail(b.Name, in.Cluster, len(f.tries[k]))
		f.tries[k] = append(f.tries[k], f.env.Now())
		d := status.Deployment{Bundle: b.Name, Cluster: in.Cluster, Release: b.Release, Namespace: b.Namespace,
			DeploymentID: b.DeploymentID, State: st, Outcome: class}
		if st == status.Ready {
			d.AppliedDeploymentID = b.DeploymentID
		} else {
			d.Message = "cluster " + in.Cluster + ": bundle " + b.Name + ": " + string(class)
		}
		res.Deployments = append(res.Deployments, d)
	}
	return res, nil
}

func (f *failingFleet) triesOf(bundle, cluster string) []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Time(nil), f.tries[status.Key{Bundle: bundle, Cluster: cluster}]...)
}

func deploymentOf(st status.GitRepo, bundle, cluster string) status.Deployment {
	for _, d := range st.Deployments {
		if d.Bundle == bundle && d.Cluster == cluster {
			return d
		}
	}
	return status.Deployment{}
}

// TestGitRepoWorkflow_FailedBundleRetriesWithBackoff: a bundle that fails
// on one cluster is ErrApplied there alone, the other bundle of that
// cluster and the other cluster are Ready, and the failed deploy is
// retried after 30 s, 1 min, 2 min (each a new rollout, at the same
// deployment ID) until it succeeds; then no more retries happen.
func TestGitRepoWorkflow_FailedBundleRetriesWithBackoff(t *testing.T) {
	env, f := newFailingFleet(func(bundle, cluster string, tried int) (status.State, outcome.Class) {
		if bundle == "app" && cluster == "c1" && tried < 3 {
			return status.ErrApplied, outcome.BundleFailed
		}
		return status.Ready, outcome.OK
	})
	env.RegisterDelayedCallback(func() { applyUpdate(t, env, testGitRepo(false)) }, 0)
	env.RegisterDelayedCallback(func() {
		st := queryStatus(t, env)
		app := deploymentOf(st, "app", "c1")
		assert.Equal(t, status.ErrApplied, app.State)
		assert.Equal(t, outcome.BundleFailed, app.Outcome)
		assert.Equal(t, 1, app.Attempts)
		assert.NotEmpty(t, app.NextRetry)
		assert.Equal(t, status.Ready, deploymentOf(st, "db", "c1").State, "the other bundle on the same cluster")
		assert.Equal(t, status.Ready, deploymentOf(st, "app", "c2").State, "the same bundle on the other cluster")
	}, 10*time.Second)
	env.RegisterDelayedCallback(func() {
		st := queryStatus(t, env)
		app := deploymentOf(st, "app", "c1")
		assert.Equal(t, status.Ready, app.State, app.Message)
		assert.Zero(t, app.Attempts)
		env.SignalWorkflow(protocol.SignalDelete, nil)
	}, 30*time.Minute)
	env.ExecuteWorkflow(GitRepoWorkflow, appInput)
	require.NoError(t, env.GetWorkflowError())

	tries := f.triesOf("app", "c1")
	require.Len(t, tries, 4, "three failures, then the success; nothing after it")
	for i, want := range []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute} {
		got := tries[i+1].Sub(tries[i])
		assert.GreaterOrEqual(t, got, want, "retry %d waits its backoff", i+1)
		assert.Less(t, got, want+20*time.Second, "retry %d does not wait much longer than its backoff", i+1)
	}
	assert.Len(t, f.triesOf("db", "c1"), 1+3, "db is only confirmed (a no-op deploy) by each retry rollout")
}

// TestRolloutWorkflow_ContentUnavailableRetriesOnlyThatBundle: a bundle
// whose content cannot be read is retried within the rollout, alone; it
// is never ErrApplied, and the other bundle is not deployed again.
func TestRolloutWorkflow_ContentUnavailableRetriesOnlyThatBundle(t *testing.T) {
	env, f := newFailingFleet(func(bundle, cluster string, tried int) (status.State, outcome.Class) {
		if bundle == "db" && cluster == "c1" && tried == 0 {
			return status.WaitApplied, outcome.ContentUnavailable
		}
		return status.Ready, outcome.OK
	})
	env.ExecuteWorkflow(RolloutWorkflow, RolloutInput{GitRepo: activities.GitRepoRef{Namespace: "fleet-default", Name: "app"},
		Spec: testGitRepo(false).Spec, Commit: "c0ffee0000000000000000000000000000000001", Generation: 1})
	require.NoError(t, env.GetWorkflowError())
	var res RolloutResult
	require.NoError(t, env.GetWorkflowResult(&res))
	for _, d := range res.Deployments {
		assert.Equal(t, status.Ready, d.State, "%s@%s: %s", d.Bundle, d.Cluster, d.Message)
	}
	assert.Equal(t, [][]string{{"app", "db"}, {"db"}}, f.calls, "only db is tried again on c1")
	for _, e := range res.Inventory {
		assert.Nil(t, e.Failure, "a transient failure leaves no backoff: %s@%s", e.Bundle, e.Cluster)
	}
}
