package activities_test

import (
	"errors"
	"fmt"
	"net"
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
	"github.com/flotilla-gitops/flotilla/internal/cluster"
	"github.com/flotilla-gitops/flotilla/internal/content"
	"github.com/flotilla-gitops/flotilla/internal/deployer"
	"github.com/flotilla-gitops/flotilla/internal/fleetyaml"
	"github.com/flotilla-gitops/flotilla/internal/outcome"
	"github.com/flotilla-gitops/flotilla/internal/status"
	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

// outcomeEnv is a ClusterActivities on one real kube-apiserver (or on
// the REST config config returns) with an observed logger.
type outcomeEnv struct {
	acts  *activities.ClusterActivities
	store *content.Store
	logs  *observer.ObservedLogs
}

func newOutcomeEnv(t *testing.T, config func(string) (*rest.Config, error)) *outcomeEnv {
	t.Helper()
	store, err := content.New(t.TempDir())
	require.NoError(t, err)
	core, logs := observer.New(zap.InfoLevel)
	return &outcomeEnv{store: store, logs: logs, acts: &activities.ClusterActivities{
		Clusters: cluster.NewConnections(cluster.ConnectionsOptions{Config: config}),
		Deployer: deployer.New(deployer.Options{Logger: zap.NewNop(), Timeout: 30 * time.Second}),
		Content:  store,
		Logger:   zap.New(core),
	}}
}

// bundleOf stores a raw-YAML bundle and returns it, released as name.
func (e *outcomeEnv) bundleOf(t *testing.T, name, manifest string) activities.Bundle {
	t.Helper()
	manifestID, err := e.store.PutManifest(bundle.Manifest{Resources: []bundle.Resource{{Name: name + ".yaml", Content: manifest}}})
	require.NoError(t, err)
	var opts bundle.Options
	optionsHash, err := e.store.PutOptions(opts)
	require.NoError(t, err)
	return activities.Bundle{Name: name, Path: name, ManifestID: manifestID, OptionsHash: optionsHash,
		DeploymentID: fleetyaml.DeploymentID(manifestID, opts), Release: name, Namespace: "outcomes"}
}

func (e *outcomeEnv) deploy(t *testing.T, bundles ...activities.Bundle) activities.DeployResult {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(e.acts)
	val, err := env.ExecuteActivity(e.acts.Deploy, activities.DeployInput{Cluster: "cluster-1",
		GitRepo: activities.GitRepoRef{Namespace: "fleet-default", Name: "repo"}, Commit: "c0ffee",
		WorkflowID: "rollout/fleet-default/repo/c0ffee-1", Bundles: bundles})
	require.NoError(t, err)
	var res activities.DeployResult
	require.NoError(t, val.Get(&res))
	return res
}

func (e *outcomeEnv) count(msg string) int { return e.logs.FilterMessage(msg).Len() }

func byBundle(deps []status.Deployment) map[string]status.Deployment {
	out := map[string]status.Deployment{}
	for _, d := range deps {
		out[d.Bundle] = d
	}
	return out
}

const goodConfigMap = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: good\ndata:\n  a: b\n"

// TestDeploy_TypedOutcomes: on a cluster that answers, a bundle the API
// server refuses fails alone (BundleFailed, ErrApplied, named), a bundle
// whose content is missing waits (ContentUnavailable), and the healthy
// bundle of the same call is deployed and Ready. Nothing is reported as
// an unreachable cluster.
func TestDeploy_TypedOutcomes(t *testing.T) {
	kube := testenv.StartClusters(t, 1, testenv.Options{})[0]
	e := newOutcomeEnv(t, func(string) (*rest.Config, error) { return kube.RESTConfig(), nil })
	bad := e.bundleOf(t, "bad", "apiVersion: example.com/v1\nkind: NoSuchKind\nmetadata:\n  name: x\n")
	good := e.bundleOf(t, "good", goodConfigMap)
	gone := good
	gone.Name, gone.Release, gone.ManifestID = "gone", "gone", "sha256-0000000000000000000000000000000000000000000000000000000000000000"

	res := e.deploy(t, bad, gone, good)
	require.False(t, res.Retry, res.Message)
	deps := byBundle(res.Deployments)
	require.Len(t, deps, 3)
	assert.Equal(t, status.ErrApplied, deps["bad"].State)
	assert.Equal(t, outcome.BundleFailed, deps["bad"].Outcome)
	assert.Contains(t, deps["bad"].Message, "cluster cluster-1: bundle bad: ")
	assert.Equal(t, status.WaitApplied, deps["gone"].State)
	assert.Equal(t, outcome.ContentUnavailable, deps["gone"].Outcome)
	assert.Contains(t, deps["gone"].Message, "cluster cluster-1: bundle gone: content unavailable")
	assert.Equal(t, status.Ready, deps["good"].State, deps["good"].Message)
	assert.Equal(t, outcome.OK, deps["good"].Outcome)

	assert.Equal(t, 1, e.count("Deployed bundle"), "only the good bundle was deployed")
	assert.Equal(t, 1, e.count("Bundle failed"))
	assert.Equal(t, 1, e.count("Content unavailable"))
	assert.Zero(t, e.count("Cluster not reachable"), "the cluster answered every request")
}

// TestDeploy_ClusterOutcomes: a cluster that does not answer is
// Unreachable (retried by the rollout); one that refuses the credentials
// is Unauthorized for every bundle, with no retry loop.
func TestDeploy_ClusterOutcomes(t *testing.T) {
	kube := testenv.StartClusters(t, 1, testenv.Options{})[0]
	t.Run("Unreachable", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := l.Addr().String()
		require.NoError(t, l.Close()) // nothing listens there now
		e := newOutcomeEnv(t, func(string) (*rest.Config, error) {
			return &rest.Config{Host: "https://" + addr, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}, nil
		})
		res := e.deploy(t, e.bundleOf(t, "good", goodConfigMap))
		assert.True(t, res.Retry)
		assert.Equal(t, outcome.Unreachable, res.Class)
		assert.Contains(t, res.Message, "cluster cluster-1: ")
		assert.Equal(t, 1, e.count("Cluster not reachable"))
	})
	t.Run("Unauthorized", func(t *testing.T) {
		e := newOutcomeEnv(t, func(string) (*rest.Config, error) {
			cfg := kube.RESTConfig()
			cfg.BearerToken = "revoked-token"
			return cfg, nil
		})
		res := e.deploy(t, e.bundleOf(t, "good", goodConfigMap), e.bundleOf(t, "other", goodConfigMap))
		assert.False(t, res.Retry, "a refused credential is not retried in a loop")
		assert.Equal(t, outcome.Unauthorized, res.Class)
		require.Len(t, res.Deployments, 2)
		for _, d := range res.Deployments {
			assert.Equal(t, status.WaitApplied, d.State)
			assert.Equal(t, outcome.Unauthorized, d.Outcome)
			assert.Contains(t, d.Message, "cluster cluster-1: API server")
			assert.Contains(t, d.Message, "refused the credentials")
		}
		assert.Equal(t, 1, e.count("Cluster refused credentials"))
		assert.Zero(t, e.count("Cluster not reachable"))
	})
}

// TestRollback_ConnectFails: when the cluster cannot be connected to,
// every release's rollback fails with a typed outcome naming the cluster
// (this used to dereference a nil connection at the second release).
func TestRollback_ConnectFails(t *testing.T) {
	e := newOutcomeEnv(t, func(name string) (*rest.Config, error) {
		return nil, errors.New("no kubeconfig stored for " + name)
	})
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(e.acts)
	in := activities.RollbackInput{Cluster: "cluster-1", WorkflowID: "rollout/x", Releases: []activities.RollbackRelease{
		{Bundle: "a", Release: "a", Namespace: "ns", From: "new-a", To: "old-a"},
		{Bundle: "b", Release: "b", Namespace: "ns", From: "new-b", To: "old-b"},
	}}
	val, err := env.ExecuteActivity(e.acts.Rollback, in)
	require.NoError(t, err)
	var res activities.DeployResult
	require.NoError(t, val.Get(&res))
	require.Len(t, res.Deployments, 2)
	for i, d := range res.Deployments {
		assert.Equal(t, outcome.RollbackFailed, d.Rollback, "release %d", i)
		assert.Equal(t, in.Releases[i].From, d.AppliedDeploymentID, "the release still runs what the halted rollout deployed")
		assert.Contains(t, d.Message, fmt.Sprintf("cluster cluster-1: bundle %s", in.Releases[i].Bundle))
	}
}
