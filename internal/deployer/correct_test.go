package deployer_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/release"

	"github.com/flotilla-gitops/flotilla/internal/deployer"
)

// TestCorrect: a correction adds one record at the same deployment ID;
// it never runs over an install or upgrade another process has pending
// (that deploy, or its retry, settles the release), while a correction
// left pending by a killed process is finished without a second record.
func TestCorrect(t *testing.T) {
	f := newFixture(t)
	d := newDeployer(t)
	ctx := testContext(t)

	t.Run("restores at the same deployment ID", func(t *testing.T) {
		mustDeploy(ctx, t, d, f, "correct", "id-1", "one")
		rev, err := d.Correct(ctx, f.getter, "correct", "app", "id-1", deployer.CorrectOptions{})
		require.NoError(t, err)
		assert.Equal(t, 2, rev)
		f.assertCurrent(t, d, "correct", "app", "id-1", 2)
		_, err = d.Correct(ctx, f.getter, "correct", "app", "id-2", deployer.CorrectOptions{})
		assert.ErrorIs(t, err, deployer.ErrNotCurrent, "the release runs another deployment ID")
	})

	t.Run("leaves a pending upgrade alone", func(t *testing.T) {
		mustDeploy(ctx, t, d, f, "busy", "id-1", "one")
		f.createPending(t, "busy", "app", 1, "id-2", release.StatusPendingUpgrade)
		_, err := d.Correct(ctx, f.getter, "busy", "app", "id-1", deployer.CorrectOptions{})
		assert.ErrorIs(t, err, deployer.ErrNotCurrent)
		assert.Equal(t, []release.Status{release.StatusDeployed, release.StatusPendingUpgrade}, f.statuses(t, "busy", "app"),
			"the upgrade's record is untouched")
	})

	t.Run("finishes an interrupted correction", func(t *testing.T) {
		mustDeploy(ctx, t, d, f, "killed", "id-1", "one")
		f.createPending(t, "killed", "app", 1, "id-1", release.StatusPendingRollback)
		rev, err := d.Correct(ctx, f.getter, "killed", "app", "id-1", deployer.CorrectOptions{})
		require.NoError(t, err)
		assert.Equal(t, 2, rev, "the pending record is replaced, not stacked")
		assert.Equal(t, []release.Status{release.StatusSuperseded, release.StatusDeployed}, f.statuses(t, "killed", "app"))
	})
}
