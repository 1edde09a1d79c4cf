package activities_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"k8s.io/client-go/rest"

	"github.com/flotilla-gitops/flotilla/activities"
	"github.com/flotilla-gitops/flotilla/internal/bundle"
	"github.com/flotilla-gitops/flotilla/internal/content"
	"github.com/flotilla-gitops/flotilla/internal/deployer"
	"github.com/flotilla-gitops/flotilla/internal/status"
	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

// TestDeploy_InterruptedAttempt: a process killed after Helm recorded a
// revision but before it logged "Deployed bundle" leaves the retry a
// release already at its deployment ID. The retry must say that deploy
// happened ("Confirmed interrupted deploy") without a second "Deployed
// bundle"; a later activity that finds the same ID, which deployed
// nothing, must say neither.
func TestDeploy_InterruptedAttempt(t *testing.T) {
	cluster := testenv.StartClusters(t, 1, testenv.Options{})[0]
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

	core, logs := observer.New(zap.InfoLevel)
	acts := &activities.ClusterActivities{
		Config:   func(string) (*rest.Config, error) { return cluster.RESTConfig(), nil },
		Deployer: deployer.New(deployer.Options{Logger: zap.New(core), Timeout: time.Minute}),
		Content:  store,
		Logger:   zap.New(core),
	}
	in := activities.DeployInput{
		Cluster: "cluster-1", GitRepo: activities.GitRepoRef{Namespace: "fleet-default", Name: "repo"},
		Commit: "0123456789abcdef0123456789abcdef01234567", WorkflowID: "rollout/fleet-default/repo/0123456789ab-1",
		Bundles: []activities.Bundle{{
			Name: "app", Path: ".", ManifestID: manifestID, OptionsHash: optionsHash,
			DeploymentID: bundle.DeploymentID(manifestID, opts), Release: "app", Namespace: "app-ns",
		}},
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
