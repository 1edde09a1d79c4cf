package deployer_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/internal/deployer"
)

// testStatus is TestOnBareCluster's Status and WaitReady group.
func testStatus(t *testing.T, f *fixture) {
	t.Run("ConfigMap is ready", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		d := newDeployer(t)
		mustDeploy(ctx, t, d, f, "ready", "id-1", "one")
		want := deployer.Status{DeploymentID: "id-1", Revision: 1, Resources: 1, Ready: 1}

		st, err := d.Status(ctx, f.getter, "ready", "app")
		require.NoError(t, err)
		assert.Equal(t, want, st)
		assert.True(t, st.AllReady())

		var seen []deployer.Status
		st, err = d.WaitReady(ctx, f.getter, "ready", "app", time.Hour, func(s deployer.Status) { seen = append(seen, s) })
		require.NoError(t, err, "WaitReady returns at once, without waiting an interval")
		assert.Equal(t, want, st)
		assert.Equal(t, []deployer.Status{want}, seen, "progress")
	})

	t.Run("Deployment on a cluster without controllers is not ready", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		d := newDeployer(t)
		mustDeployWeb(ctx, t, d, f, "notready")
		want := deployer.Status{
			DeploymentID: "id-1", Revision: 1, Resources: 2, Ready: 1,
			NotReady: []string{"Deployment notready/web: 0/1 replicas available"},
		}

		st, err := d.Status(ctx, f.getter, "notready", "app")
		require.NoError(t, err)
		assert.Equal(t, want, st)
		assert.False(t, st.AllReady())

		// The caller gives up after the second poll.
		waitCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		polls := 0
		st, err = d.WaitReady(waitCtx, f.getter, "notready", "app", 10*time.Millisecond, func(deployer.Status) {
			if polls++; polls == 2 {
				cancel()
			}
		})
		require.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, want, st, "the last status")
		assert.Equal(t, 2, polls, "progress calls")
	})

	t.Run("deleted object is missing", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		d := newDeployer(t)
		mustDeploy(ctx, t, d, f, "missing", "id-1", "one")
		require.NoError(t, f.cs.CoreV1().ConfigMaps("missing").Delete(ctx, "app", metav1.DeleteOptions{}))

		st, err := d.Status(ctx, f.getter, "missing", "app")

		require.NoError(t, err)
		assert.Equal(t, deployer.Status{
			DeploymentID: "id-1", Revision: 1, Resources: 1, Ready: 0,
			Missing: []string{"ConfigMap missing/app"},
		}, st)
		assert.False(t, st.AllReady())
	})

	t.Run("unknown release is not found", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		d := newDeployer(t)

		_, err := d.Status(ctx, f.getter, metav1.NamespaceDefault, "never-installed")
		require.ErrorIs(t, err, deployer.ErrNotFound)

		_, err = d.WaitReady(ctx, f.getter, metav1.NamespaceDefault, "never-installed", time.Millisecond, nil)
		require.ErrorIs(t, err, deployer.ErrNotFound)
	})
}
