package deployer_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/deployer"
)

// testCleanup is TestOnBareCluster's Forget and DeleteNamespace group.
func testCleanup(t *testing.T, f *fixture) {
	t.Run("Forget drops every revision and keeps the objects", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		d := newDeployer(t)
		mustDeploy(ctx, t, d, f, "forget", "id-1", "one")
		mustDeploy(ctx, t, d, f, "forget", "id-2", "two")
		before := f.configMap(ctx, t, "forget", "app")

		require.NoError(t, d.Forget(ctx, f.getter, "forget", "app", ""))

		after := f.configMap(ctx, t, "forget", "app")
		assert.Equal(t, before.ResourceVersion, after.ResourceVersion, "ConfigMap untouched")
		assert.Empty(t, f.helmSecrets(ctx, t, "forget", "app"), "release records")
		f.assertCurrent(t, d, "forget", "app", "", 0)
		_, err := d.Status(ctx, f.getter, "forget", "app", deployer.ReadyOptions{})
		require.ErrorIs(t, err, deployer.ErrNotFound)

		require.NoError(t, d.Forget(ctx, f.getter, "forget", "app", ""), "second Forget")
		require.NoError(t, d.Forget(ctx, f.getter, "nowhere", "never-installed", ""), "Forget of an unknown release")

		// The kept objects still carry Helm's ownership metadata for the
		// release, so deploying it again adopts them.
		res, err := d.Deploy(ctx, f.getter, testRelease("forget", "app", "id-3", "three"))
		require.NoError(t, err)
		assert.Equal(t, deployer.Result{Revision: 1, Changed: true, Description: "Install complete"}, res)
		assert.Equal(t, map[string]string{"value": "three"}, f.configMap(ctx, t, "forget", "app").Data)
	})

	t.Run("DeleteNamespace", func(t *testing.T) { testDeleteNamespace(t, f) })
}
