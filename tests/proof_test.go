package tests

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"helm.sh/helm/v3/pkg/chart"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/internal/deployer"
	"github.com/flotilla-gitops/flotilla/internal/testenv"
	"github.com/flotilla-gitops/flotilla/internal/testenv/devtemporal"
)

// proofInput names the clusters to deploy to; kubeconfigs stay in the
// worker, never in workflow history.
type proofInput struct {
	Clusters     []string
	DeploymentID string
}

type proofResult struct {
	Cluster  string
	Revision int
	Changed  bool
}

// proofWorkflow deploys the same release to every cluster in parallel.
func proofWorkflow(ctx workflow.Context, in proofInput) ([]proofResult, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 2 * time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
	})
	var a *proofActivities
	futures := make([]workflow.Future, len(in.Clusters))
	for i, c := range in.Clusters {
		futures[i] = workflow.ExecuteActivity(ctx, a.DeployConfigMap, c, in.DeploymentID)
	}
	out := make([]proofResult, len(in.Clusters))
	for i, f := range futures {
		if err := f.Get(ctx, &out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

type proofActivities struct {
	deployer *deployer.Deployer
	getters  map[string]*deployer.RESTClientGetter
}

func (a *proofActivities) DeployConfigMap(ctx context.Context, cluster, deploymentID string) (proofResult, error) {
	getter, ok := a.getters[cluster]
	if !ok {
		return proofResult{}, temporal.NewNonRetryableApplicationError("unknown cluster "+cluster, "ClusterUnknown", nil)
	}
	res, err := a.deployer.Deploy(ctx, getter, deployer.Release{
		Name:         "proof",
		Namespace:    "proof",
		Chart:        configMapChart(),
		Values:       map[string]any{"cluster": cluster},
		DeploymentID: deploymentID,
	})
	if err != nil {
		return proofResult{}, fmt.Errorf("cluster %s: %w", cluster, err)
	}
	return proofResult{Cluster: cluster, Revision: res.Revision, Changed: res.Changed}, nil
}

func configMapChart() *chart.Chart {
	return &chart.Chart{
		Metadata: &chart.Metadata{APIVersion: chart.APIVersionV2, Name: "proof", Version: "0.1.0"},
		Templates: []*chart.File{{
			Name: "templates/configmap.yaml",
			Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: proof\ndata:\n  cluster: {{ .Values.cluster | quote }}\n"),
		}},
	}
}

// TestProof_HelmInstallOnTwoClustersIsIdempotent is the foundation's proof:
// a workflow on a real Temporal server installs a one-ConfigMap Helm chart
// into two real kube-apiservers, and a second run changes nothing.
func TestProof_HelmInstallOnTwoClustersIsIdempotent(t *testing.T) {
	if testing.Short() {
		t.Skip("starts kube-apiservers and a Temporal server")
	}
	clusters := testenv.StartClusters(t, 2, testenv.Options{})
	srv := devtemporal.Start(t, devtemporal.Options{})

	acts := &proofActivities{deployer: deployer.New(deployer.Options{}), getters: map[string]*deployer.RESTClientGetter{}}
	var names []string
	for _, c := range clusters {
		g, err := deployer.NewRESTClientGetter(c.RESTConfig(), "proof")
		require.NoError(t, err)
		acts.getters[c.Name] = g
		names = append(names, c.Name)
	}
	w := worker.New(srv.Client, "proof", worker.Options{})
	w.RegisterWorkflowWithOptions(proofWorkflow, workflow.RegisterOptions{Name: "ProofDeploy"})
	w.RegisterActivity(acts)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)

	run := func(id string) []proofResult {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		wr, err := srv.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: "proof"},
			"ProofDeploy", proofInput{Clusters: names, DeploymentID: "s-proof:1"})
		require.NoError(t, err)
		var out []proofResult
		require.NoError(t, wr.Get(ctx, &out))
		return out
	}

	first := run("proof-1")
	require.Len(t, first, 2)
	resourceVersions := map[string]string{}
	for i, c := range clusters {
		assert.Equal(t, proofResult{Cluster: c.Name, Revision: 1, Changed: true}, first[i])
		cm, err := c.Clientset(t).CoreV1().ConfigMaps("proof").Get(context.Background(), "proof", metav1.GetOptions{})
		require.NoError(t, err, "ConfigMap on %s", c.Name)
		assert.Equal(t, c.Name, cm.Data["cluster"])
		resourceVersions[c.Name] = cm.ResourceVersion
	}

	second := run("proof-2")
	for i, c := range clusters {
		assert.Equal(t, proofResult{Cluster: c.Name, Revision: 1, Changed: false}, second[i], "second run must be a no-op")
		id, rev, err := acts.deployer.Current(acts.getters[c.Name], "proof", "proof")
		require.NoError(t, err)
		assert.Equal(t, "s-proof:1", id)
		assert.Equal(t, 1, rev, "release revision on %s", c.Name)
		cm, err := c.Clientset(t).CoreV1().ConfigMaps("proof").Get(context.Background(), "proof", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, resourceVersions[c.Name], cm.ResourceVersion, "ConfigMap on %s must be untouched", c.Name)
	}
}
