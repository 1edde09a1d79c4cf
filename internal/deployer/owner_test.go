package deployer_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/release"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/internal/deployer"
	"github.com/flotilla-gitops/flotilla/internal/outcome"
)

// TestOwnership: a release records its owner; another owner's Deploy,
// Correct, Rollback, Uninstall and Forget of it fail with an OwnedError
// naming the owner and change nothing; a release without the record is
// adopted by the first owner that deploys it.
func TestOwnership(t *testing.T) {
	f := newFixture(t)
	const first, second deployer.Owner = "GitRepo fleet-local/first", "GitRepo fleet-local/second"

	t.Run("another owner touches nothing", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		d := newDeployer(t)
		const ns = "owned"
		rel := testRelease(ns, "app", "id-1", "one")
		rel.Owner, rel.OwnerBundle = first, "web"
		_, err := d.Deploy(ctx, f.getter, rel)
		require.NoError(t, err)
		rel = testRelease(ns, "app", "id-2", "one")
		rel.Owner, rel.OwnerBundle = first, "web-renamed" // same GitRepo, bundle renamed: still its release
		_, err = d.Deploy(ctx, f.getter, rel)
		require.NoError(t, err)
		records := f.helmSecrets(ctx, t, ns, "app")
		cm := f.configMap(ctx, t, ns, "app")

		theirs := testRelease(ns, "app", "id-other", "theirs")
		theirs.Owner = second
		calls := map[string]error{}
		_, calls["Deploy"] = d.Deploy(ctx, f.getter, theirs)
		_, calls["Correct"] = d.Correct(ctx, f.getter, ns, "app", "id-2", deployer.CorrectOptions{Owner: second})
		_, calls["Rollback"] = d.Rollback(ctx, f.getter, ns, "app", "id-2", "id-1", second)
		calls["Forget"] = d.Forget(ctx, f.getter, ns, "app", second)
		calls["Uninstall"] = d.Uninstall(ctx, f.getter, ns, "app", second)

		for call, err := range calls {
			var owned *deployer.OwnedError
			if assert.True(t, errors.As(err, &owned), "%s: %v", call, err) {
				assert.Equal(t, first, owned.Owner, call)
				assert.Contains(t, err.Error(), string(first)+" (bundle web-renamed)", "%s names the owner and its bundle", call)
			}
			assert.Equal(t, outcome.Invalid, deployer.Classify(err), call)
		}
		after := f.helmSecrets(ctx, t, ns, "app")
		require.Len(t, after, len(records), "records")
		for i := range after {
			assert.Equal(t, records[i].ResourceVersion, after[i].ResourceVersion, "record %s rewritten", after[i].Name)
		}
		assert.Equal(t, cm.ResourceVersion, f.configMap(ctx, t, ns, "app").ResourceVersion, "object touched")
		_, err = f.cs.CoreV1().Secrets(ns).Get(ctx, "flotilla.release-lease.app", metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "no lease taken: %v", err)

		// Its owner still removes it.
		require.NoError(t, d.Uninstall(ctx, f.getter, ns, "app", first))
		f.assertNoConfigMap(ctx, t, ns, "app")
		assert.Empty(t, f.helmSecrets(ctx, t, ns, "app"))
		_, err = f.cs.CoreV1().Secrets(ns).Get(ctx, "flotilla.release-lease.app", metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "the lease went with the release: %v", err)
	})

	t.Run("a release without owner is adopted", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		d := newDeployer(t)
		const ns = "adopt-owner"
		mustDeploy(ctx, t, d, f, ns, "id-1", "one") // no owner: an older Flotilla
		rel := testRelease(ns, "app", "id-1", "one")
		rel.Owner = first

		res, err := d.Deploy(ctx, f.getter, rel)
		require.NoError(t, err)
		assert.Equal(t, deployer.Result{Revision: 1, Previous: "id-1", Description: "Install complete"}, res,
			"same deployment ID: no new revision")
		assert.Equal(t, first, deployer.OwnerOf(f.history(t, ns, "app")[0]), "adopted on the first deploy")

		rel.DeploymentID = "id-2"
		_, err = d.Deploy(ctx, f.getter, rel)
		require.NoError(t, err)
		history := f.history(t, ns, "app")
		assert.Equal(t, first, deployer.OwnerOf(history[len(history)-1]), "the new revision records its owner")
		assert.Equal(t, []release.Status{release.StatusSuperseded, release.StatusDeployed}, f.statuses(t, ns, "app"))

		theirs := rel
		theirs.Owner, theirs.DeploymentID = second, "id-3"
		_, err = d.Deploy(ctx, f.getter, theirs)
		var owned *deployer.OwnedError
		require.ErrorAs(t, err, &owned, "adopted: another owner is refused now")
	})
}
