package activities_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/flotilla-gitops/flotilla/activities"
	"github.com/flotilla-gitops/flotilla/deploy"
	"github.com/flotilla-gitops/flotilla/internal/agentcfg"
	"github.com/flotilla-gitops/flotilla/internal/deployer"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

// TestEnsureAgent_NamespaceMove: a managed agent whose namespace changes
// is uninstalled from the old namespace before it is installed in the new
// one. Left behind, the old agent would poll the same queue with the old
// configuration, and its cluster-scoped RBAC makes the new install fail.
func TestEnsureAgent_NamespaceMove(t *testing.T) {
	cluster := testenv.StartClusters(t, 1, testenv.Options{})[0]
	chrt, err := deploy.AgentChart()
	require.NoError(t, err)
	core, logs := observer.New(zap.InfoLevel)
	acts := &activities.AgentActivities{
		Config:      func(string) (*rest.Config, error) { return cluster.RESTConfig(), nil },
		Deployer:    deployer.New(deployer.Options{Logger: zap.New(core), Timeout: time.Minute}),
		Controller:  agentcfg.Controller{Version: "v1.0.0", TemporalAddress: "temporal.example:7233", TemporalNamespace: "default"},
		Chart:       chrt,
		ChartDigest: agentcfg.ChartDigest(chrt),
		Logger:      zap.New(core),
	}
	var suite testsuite.WorkflowTestSuite
	// One environment: each call is another activity (a fresh environment
	// would replay the first call's identity, as a retry does).
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(acts)
	ensureFor := func(cluster, namespace string) (activities.EnsureAgentResult, error) {
		t.Helper()
		val, err := env.ExecuteActivity(acts.EnsureAgent, activities.EnsureAgentInput{
			Cluster: cluster, Config: &protocol.AgentConfig{Namespace: namespace},
		})
		if err != nil {
			return activities.EnsureAgentResult{}, err
		}
		var res activities.EnsureAgentResult
		require.NoError(t, val.Get(&res))
		return res, nil
	}
	ensure := func(namespace string) activities.EnsureAgentResult {
		t.Helper()
		res, err := ensureFor("cluster-1", namespace)
		require.NoError(t, err)
		return res
	}
	cs := cluster.Clientset(t)
	deployment := func(namespace string) error {
		_, err := cs.AppsV1().Deployments(namespace).Get(context.Background(), agentcfg.ReleaseName, metav1.GetOptions{})
		return err
	}

	first := ensure("agents-a")
	assert.True(t, first.Deployed)
	assert.Empty(t, first.RemovedFrom)
	require.NoError(t, deployment("agents-a"))

	moved := ensure("agents-b")
	assert.True(t, moved.Deployed, "installed in the new namespace")
	assert.Equal(t, []string{"agents-a"}, moved.RemovedFrom)
	require.NoError(t, deployment("agents-b"))
	assert.True(t, apierrors.IsNotFound(deployment("agents-a")), "the old agent is gone: %v", deployment("agents-a"))
	assert.Equal(t, 1, logs.FilterMessage("Removed agent from its old namespace").Len())

	// Nothing left to move: the next check does nothing at all.
	again := ensure("agents-b")
	assert.False(t, again.Deployed)
	assert.Empty(t, again.RemovedFrom)
	assert.Equal(t, 2, logs.FilterMessage("Deployed agent").Len())

	// Another cluster registered on the same API server (a virtual
	// cluster) never removes cluster-1's agent: its own install fails on
	// the shared cluster-scoped names instead, and says so.
	_, err = ensureFor("cluster-2", "agents-c")
	require.Error(t, err)
	require.NoError(t, deployment("agents-b"), "cluster-1's agent stays")
	assert.Equal(t, 1, logs.FilterMessage("Removed agent from its old namespace").Len())
}
