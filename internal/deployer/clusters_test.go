package deployer_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/internal/deployer"
	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

// TestOnBareCluster runs the post-render, Status, cleanup, rollback, CRD and
// history groups on one cluster without controllers, as starting a cluster
// costs more than a group. Namespaces are unique across groups. The groups
// run one after the other, the subtests of each in parallel.
func TestOnBareCluster(t *testing.T) {
	f := newFixture(t)
	t.Run("post-render", func(t *testing.T) { testPostRender(t, f) })
	t.Run("status", func(t *testing.T) { testStatus(t, f) })
	t.Run("cleanup", func(t *testing.T) { testCleanup(t, f) })
	t.Run("rollback", func(t *testing.T) { testRollback(t, f) })
	t.Run("crds", func(t *testing.T) { testCRDs(t, f) })
	t.Run("history", func(t *testing.T) { testHistory(t, f) })
}

// TestWithControllers covers what needs controllers to happen: Deployments
// becoming available, namespaces finishing termination.
func TestWithControllers(t *testing.T) {
	f := newFixtureWith(t, testenv.Options{Sim: true})

	t.Run("WaitReady returns once the Deployment is available", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		d := newDeployer(t)
		mustDeployWeb(ctx, t, d, f, "available")

		var last deployer.Status
		st, err := d.WaitReady(ctx, f.getter, "available", "app", deployer.ReadyOptions{}, 200*time.Millisecond, func(s deployer.Status) { last = s })

		require.NoError(t, err)
		assert.Equal(t, deployer.Status{DeploymentID: "id-1", Revision: 1, Resources: 2, Ready: 2}, st)
		assert.Equal(t, st, last, "progress saw the final status")
	})

	t.Run("DeleteNamespace removes the namespace and its objects", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		d := newDeployer(t)
		mustDeploy(ctx, t, d, f, "removed", "id-1", "one")

		require.NoError(t, d.DeleteNamespace(ctx, f.getter, "removed"))

		require.Eventually(t, func() bool {
			_, err := f.cs.CoreV1().Namespaces().Get(ctx, "removed", metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}, time.Minute, 200*time.Millisecond, "namespace is gone")
		require.NoError(t, d.DeleteNamespace(ctx, f.getter, "removed"), "DeleteNamespace of a deleted namespace")
	})
}
