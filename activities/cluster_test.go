package activities_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
	"k8s.io/client-go/rest"

	"github.com/flotilla-gitops/flotilla/activities"
	"github.com/flotilla-gitops/flotilla/internal/bundle"
	"github.com/flotilla-gitops/flotilla/internal/cluster"
	"github.com/flotilla-gitops/flotilla/internal/content"
	"github.com/flotilla-gitops/flotilla/internal/deployer"
	"github.com/flotilla-gitops/flotilla/internal/fleetyaml"
	"github.com/flotilla-gitops/flotilla/internal/status"
	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

// configMapBundle stores bundle "app", one ConfigMap released as
// app-ns/app, in a new content store.
func configMapBundle(t *testing.T) (*content.Store, activities.Bundle) {
	t.Helper()
	store, err := content.New(t.TempDir())
	require.NoError(t, err)
	manifestID, err := store.PutManifest(bundle.Manifest{Resources: []bundle.Resource{{
		Name:    "cm.yaml",
		Content: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  value: one\n",
	}}})
	require.NoError(t, err)
	var opts bundle.Options
	optionsHash, err := store.PutOptions(opts)
	require.NoError(t, err)
	return store, activities.Bundle{
		Name: "app", Path: ".", ManifestID: manifestID, OptionsHash: optionsHash,
		DeploymentID: fleetyaml.DeploymentID(manifestID, opts), Release: "app", Namespace: "app-ns",
	}
}

// TestDeploy_InterruptedAttempt: a process killed after Helm recorded a
// revision but before it logged "Deployed bundle" leaves the retry a
// release already at its deployment ID. The retry must say that deploy
// happened ("Confirmed interrupted deploy") without a second "Deployed
// bundle"; a later activity that finds the same ID, which deployed
// nothing, must say neither.
func TestDeploy_InterruptedAttempt(t *testing.T) {
	kube := testenv.StartClusters(t, 1, testenv.Options{})[0]
	store, app := configMapBundle(t)

	core, logs := observer.New(zap.InfoLevel)
	acts := &activities.ClusterActivities{
		Clusters: cluster.NewConnections(cluster.ConnectionsOptions{
			Config: func(string) (*rest.Config, error) { return kube.RESTConfig(), nil },
		}),
		Deployer: deployer.New(deployer.Options{Logger: zap.New(core), Timeout: time.Minute}),
		Content:  store,
		Logger:   zap.New(core),
	}
	in := activities.DeployInput{
		Cluster: "cluster-1", GitRepo: activities.GitRepoRef{Namespace: "fleet-default", Name: "repo"},
		Commit: "0123456789abcdef0123456789abcdef01234567", WorkflowID: "rollout/fleet-default/repo/0123456789ab-1",
		Bundles: []activities.Bundle{app},
	}
	var suite testsuite.WorkflowTestSuite
	deploy := func(env *testsuite.TestActivityEnvironment) {
		t.Helper()
		env.RegisterActivity(acts)
		val, err := env.ExecuteActivity(acts.Deploy, in)
		require.NoError(t, err)
		var res activities.DeployResult
		require.NoError(t, val.Get(&res))
		require.False(t, res.Retry, res.Message)
		require.Len(t, res.Deployments, 1)
		assert.Equal(t, status.Ready, res.Deployments[0].State, res.Deployments[0].Message)
	}
	count := func(msg string) int { return logs.FilterMessage(msg).Len() }

	// The first attempt deploys, and says so once.
	first := suite.NewTestActivityEnvironment()
	deploy(first)
	assert.Equal(t, 1, count("Deployed bundle"))
	assert.Zero(t, count("Confirmed interrupted deploy"))

	// Another activity of the same workflow (a new activity ID) finds the
	// release at its ID: it deployed nothing, and says nothing.
	deploy(first)
	assert.Equal(t, 1, count("Deployed bundle"))
	assert.Zero(t, count("Confirmed interrupted deploy"))

	// A retry of the first attempt: a fresh environment has the same
	// workflow, run and activity IDs the first call had, as a retry after
	// a crash does. The revision is its own predecessor's.
	deploy(suite.NewTestActivityEnvironment())
	assert.Equal(t, 1, count("Deployed bundle"), "a retry must not log a second Deployed bundle")
	if assert.Equal(t, 1, count("Confirmed interrupted deploy"), "the retry must record the deploy its predecessor made") {
		line := logs.FilterMessage("Confirmed interrupted deploy").All()[0].ContextMap()
		assert.Equal(t, "cluster-1", line["cluster"])
		assert.Equal(t, int64(1), line["revision"])
		assert.Equal(t, in.Bundles[0].DeploymentID, line["deploymentID"])
	}
}

// TestWaitReady: WaitReady reports each bundle as it last saw it: Ready at
// once when its release runs the deployment ID and every object is ready;
// WaitApplied when the release runs another ID, and NotReady naming the
// cluster and bundle when it has no release, once the timeout passes.
func TestWaitReady(t *testing.T) {
	kube := testenv.StartClusters(t, 1, testenv.Options{})[0]
	store, app := configMapBundle(t)

	logger := zaptest.NewLogger(t)
	acts := &activities.ClusterActivities{
		Clusters: cluster.NewConnections(cluster.ConnectionsOptions{
			Config: func(string) (*rest.Config, error) { return kube.RESTConfig(), nil },
		}),
		Deployer:  deployer.New(deployer.Options{Logger: logger, Timeout: time.Minute}),
		Content:   store,
		Logger:    logger,
		ReadyPoll: 50 * time.Millisecond,
	}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(acts)
	val, err := env.ExecuteActivity(acts.Deploy, activities.DeployInput{
		Cluster: "cluster-1", GitRepo: activities.GitRepoRef{Namespace: "fleet-default", Name: "repo"},
		Commit: "0123456789abcdef0123456789abcdef01234567", Bundles: []activities.Bundle{app},
	})
	require.NoError(t, err)
	var deployed activities.DeployResult
	require.NoError(t, val.Get(&deployed))
	require.False(t, deployed.Retry, deployed.Message)

	wait := func(t *testing.T, timeout time.Duration, bundles ...activities.Bundle) []status.Deployment {
		t.Helper()
		val, err := env.ExecuteActivity(acts.WaitReady, activities.WaitReadyInput{
			DeployInput: activities.DeployInput{Cluster: "cluster-1", Bundles: bundles}, Timeout: timeout})
		require.NoError(t, err)
		var res activities.DeployResult
		require.NoError(t, val.Get(&res))
		require.Len(t, res.Deployments, len(bundles))
		return res.Deployments
	}

	t.Run("ready", func(t *testing.T) {
		start := time.Now()
		got := wait(t, time.Minute, app)
		assert.Less(t, time.Since(start), 30*time.Second, "a ready bundle does not wait for the timeout")
		assert.Equal(t, status.Ready, got[0].State, got[0].Message)
		assert.Equal(t, app.DeploymentID, got[0].AppliedDeploymentID)
		assert.Equal(t, 1, got[0].Resources)
		assert.Equal(t, 1, got[0].ReadyResources)
	})

	t.Run("other deployment and no release", func(t *testing.T) {
		newer := app
		newer.DeploymentID = "other:id"
		missing := app
		missing.Name, missing.Release = "missing", "missing"
		got := wait(t, time.Second, newer, missing)
		assert.Equal(t, status.WaitApplied, got[0].State)
		assert.Equal(t, "cluster cluster-1: release runs "+app.DeploymentID, got[0].Message)
		assert.Equal(t, status.NotReady, got[1].State)
		assert.Contains(t, got[1].Message, "cluster cluster-1: bundle missing: ")
		assert.Contains(t, got[1].Message, "release not found")
	})
}
