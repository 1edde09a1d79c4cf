package deployer_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/deployer"
)

func testRollback(t *testing.T, f *fixture) {
	t.Run("Rollback returns to the revision carrying the previous deployment ID", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		d := newDeployer(t)
		mustDeploy(ctx, t, d, f, "rollback", "id-1", "one")
		mustDeploy(ctx, t, d, f, "rollback", "id-2", "two")

		rev, err := d.Rollback(ctx, f.getter, "rollback", "app", "id-2", "id-1", "")

		require.NoError(t, err)
		assert.Equal(t, 3, rev, "a rollback is a new revision")
		assert.Equal(t, "one", f.configMap(ctx, t, "rollback", "app").Data["value"])
		f.assertCurrent(t, d, "rollback", "app", "id-1", 3)

		again, err := d.Rollback(ctx, f.getter, "rollback", "app", "id-2", "id-1", "")
		require.NoError(t, err)
		assert.Equal(t, 3, again, "already at id-1: nothing done")
	})

	t.Run("Rollback leaves a release a newer deploy changed", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		d := newDeployer(t)
		mustDeploy(ctx, t, d, f, "rollback-newer", "id-1", "one")
		mustDeploy(ctx, t, d, f, "rollback-newer", "id-2", "two")
		mustDeploy(ctx, t, d, f, "rollback-newer", "id-3", "three")

		rev, err := d.Rollback(ctx, f.getter, "rollback-newer", "app", "id-2", "id-1", "")

		require.NoError(t, err)
		assert.Equal(t, 3, rev)
		assert.Equal(t, "three", f.configMap(ctx, t, "rollback-newer", "app").Data["value"])
	})

	t.Run("Rollback to a deployment no longer in history fails clearly", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		d := newDeployer(t)
		mustDeploy(ctx, t, d, f, "rollback-gone", "id-2", "two")

		_, err := d.Rollback(ctx, f.getter, "rollback-gone", "app", "id-2", "id-1", "")

		require.ErrorIs(t, err, deployer.ErrNoRevision)
		assert.Contains(t, err.Error(), "rollback-gone/app")
		assert.Equal(t, "two", f.configMap(ctx, t, "rollback-gone", "app").Data["value"])
	})
}
