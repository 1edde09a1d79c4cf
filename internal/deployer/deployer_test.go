package deployer_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/internal/deployer"
)

func TestDeployer(t *testing.T) {
	f := newFixture(t)

	// Every subtest uses its own namespace, so they run in parallel on the
	// one cluster, which also exercises concurrent use on different releases.
	t.Run("install", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		d := newDeployer(t)
		rel := testRelease("install", "app", "id-1", "one")
		rel.Description = "Flotilla rollout r/1"

		res, err := d.Deploy(ctx, f.getter, rel)
		require.NoError(t, err)

		assert.Equal(t, deployer.Result{Revision: 1, Changed: true, Previous: "", Description: "Flotilla rollout r/1"}, res)
		assert.Equal(t, map[string]string{"value": "one"}, f.configMap(ctx, t, "install", "app").Data)
		f.assertCurrent(t, d, "install", "app", "id-1", 1)
		assert.Equal(t, []release.Status{release.StatusDeployed}, f.statuses(t, "install", "app"))
		assert.Nil(t, rel.Chart.Metadata.Annotations, "Deploy must not modify the caller's chart")

		// A retry finds the revision and who recorded it.
		rel.Description = "Flotilla rollout r/2"
		res, err = d.Deploy(ctx, f.getter, rel)
		require.NoError(t, err)
		assert.Equal(t, deployer.Result{Revision: 1, Previous: "id-1", Description: "Flotilla rollout r/1"}, res)
	})

	t.Run("same ID is a no-op", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		d := newDeployer(t)
		_, err := d.Deploy(ctx, f.getter, testRelease("noop", "app", "id-1", "one"))
		require.NoError(t, err)
		before := f.configMap(ctx, t, "noop", "app")
		secretsBefore := f.helmSecrets(ctx, t, "noop", "app")
		require.Len(t, secretsBefore, 1)

		// Values differ but the ID is the same: the ID alone decides.
		res, err := d.Deploy(ctx, f.getter, testRelease("noop", "app", "id-1", "ignored"))
		require.NoError(t, err)

		assert.Equal(t, deployer.Result{Revision: 1, Changed: false, Previous: "id-1", Description: "Install complete"}, res)
		after := f.configMap(ctx, t, "noop", "app")
		assert.Equal(t, before.ResourceVersion, after.ResourceVersion, "ConfigMap must not be touched")
		assert.Equal(t, map[string]string{"value": "one"}, after.Data)
		secretsAfter := f.helmSecrets(ctx, t, "noop", "app")
		if assert.Len(t, secretsAfter, 1, "Helm history must keep one revision") {
			assert.Equal(t, secretsBefore[0].ResourceVersion, secretsAfter[0].ResourceVersion,
				"release record must not be rewritten")
		}
		f.assertCurrent(t, d, "noop", "app", "id-1", 1)
	})

	t.Run("new ID upgrades", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		d := newDeployer(t)
		_, err := d.Deploy(ctx, f.getter, testRelease("upgrade", "app", "id-1", "one"))
		require.NoError(t, err)

		res, err := d.Deploy(ctx, f.getter, testRelease("upgrade", "app", "id-2", "two"))
		require.NoError(t, err)

		assert.Equal(t, deployer.Result{Revision: 2, Changed: true, Previous: "id-1", Description: "Upgrade complete"}, res)
		assert.Equal(t, map[string]string{"value": "two"}, f.configMap(ctx, t, "upgrade", "app").Data)
		f.assertCurrent(t, d, "upgrade", "app", "id-2", 2)
		assert.Equal(t, []release.Status{release.StatusSuperseded, release.StatusDeployed}, f.statuses(t, "upgrade", "app"))
		assert.Len(t, f.helmSecrets(ctx, t, "upgrade", "app"), 2)
	})

	t.Run("failed release with same ID is upgraded", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		d := newDeployer(t)
		_, err := d.Deploy(ctx, f.getter, testRelease("failed", "app", "id-1", "one"))
		require.NoError(t, err)
		f.setStatus(t, "failed", "app", 1, release.StatusFailed)
		f.assertCurrent(t, d, "failed", "app", "", 0)

		res, err := d.Deploy(ctx, f.getter, testRelease("failed", "app", "id-1", "one"))
		require.NoError(t, err)

		// Previous names what last ran successfully: nothing, here.
		assert.Equal(t, deployer.Result{Revision: 2, Changed: true, Previous: "", Description: "Upgrade complete"}, res)
		f.assertCurrent(t, d, "failed", "app", "id-1", 2)
		assert.Equal(t, []release.Status{release.StatusSuperseded, release.StatusDeployed}, f.statuses(t, "failed", "app"))
		assert.Equal(t, map[string]string{"value": "one"}, f.configMap(ctx, t, "failed", "app").Data)
	})

	t.Run("uninstall is idempotent", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		d := newDeployer(t)
		_, err := d.Deploy(ctx, f.getter, testRelease("uninstall", "app", "id-1", "one"))
		require.NoError(t, err)
		f.configMap(ctx, t, "uninstall", "app")

		require.NoError(t, d.Uninstall(ctx, f.getter, "uninstall", "app", ""))

		f.assertNoConfigMap(ctx, t, "uninstall", "app")
		assert.Empty(t, f.helmSecrets(ctx, t, "uninstall", "app"), "release history must be gone")
		f.assertCurrent(t, d, "uninstall", "app", "", 0)

		require.NoError(t, d.Uninstall(ctx, f.getter, "uninstall", "app", ""), "second Uninstall")
		require.NoError(t, d.Uninstall(ctx, f.getter, "uninstall", "never-installed", ""), "Uninstall of an unknown release")
		f.assertCurrent(t, d, "uninstall", "app", "", 0)

		// The name is free again: the next Deploy is a fresh install.
		res, err := d.Deploy(ctx, f.getter, testRelease("uninstall", "app", "id-1", "one"))
		require.NoError(t, err)
		assert.Equal(t, deployer.Result{Revision: 1, Changed: true, Previous: "", Description: "Install complete"}, res)
	})

	t.Run("53-character name is accepted", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		d := newDeployer(t)
		name := strings.Repeat("a", 53)

		res, err := d.Deploy(ctx, f.getter, testRelease("longname", name, "id-1", "one"))
		require.NoError(t, err)

		assert.Equal(t, deployer.Result{Revision: 1, Changed: true, Description: "Install complete"}, res)
		f.configMap(ctx, t, "longname", name)
		f.assertCurrent(t, d, "longname", name, "id-1", 1)
	})

	// A getter serves a whole cluster and its default namespace is not the
	// release's: objects without a namespace must still go to the release
	// namespace, on install, upgrade and uninstall alike.
	t.Run("objects without namespace land in release namespace", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		d := newDeployer(t)
		// "other" exists, so a misplaced object is created there rather than
		// failing with NotFound.
		_, err := f.cs.CoreV1().Namespaces().Create(ctx,
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "other"}}, metav1.CreateOptions{})
		require.NoError(t, err)
		getter, err := deployer.NewRESTClientGetter(f.config, "other")
		require.NoError(t, err)

		res, err := d.Deploy(ctx, getter, testRelease("target", "app", "id-1", "one"))
		require.NoError(t, err)
		assert.Equal(t, deployer.Result{Revision: 1, Changed: true, Description: "Install complete"}, res)
		assert.Equal(t, map[string]string{"value": "one"}, f.configMap(ctx, t, "target", "app").Data)
		f.assertNoConfigMap(ctx, t, "other", "app")
		assert.Len(t, f.helmSecrets(ctx, t, "target", "app"), 1, "release record in the release namespace")
		assert.Empty(t, f.helmSecrets(ctx, t, "other", "app"), "no release record in the getter's namespace")

		res, err = d.Deploy(ctx, getter, testRelease("target", "app", "id-2", "two"))
		require.NoError(t, err)
		assert.Equal(t, deployer.Result{Revision: 2, Changed: true, Previous: "id-1", Description: "Upgrade complete"}, res)
		assert.Equal(t, map[string]string{"value": "two"}, f.configMap(ctx, t, "target", "app").Data)
		f.assertNoConfigMap(ctx, t, "other", "app")

		require.NoError(t, d.Uninstall(ctx, getter, "target", "app", ""))
		f.assertNoConfigMap(ctx, t, "target", "app")
		assert.Empty(t, f.helmSecrets(ctx, t, "target", "app"))
	})
}

func TestDeploy_RecoversInterruptedOperation(t *testing.T) {
	f := newFixture(t)

	tests := []struct {
		name string
		// crash leaves release "app" in namespace ns as an interrupted or
		// half-removed Helm operation would.
		crash func(ctx context.Context, t *testing.T, d *deployer.Deployer, ns string)
		// wantRevision is the revision Deploy must report.
		wantRevision int
		// wantHistory is each revision's status afterwards, oldest first.
		wantHistory []release.Status
		// wantPrevious is the ID of the last successfully deployed revision
		// before the recovering deploy; interrupted revisions do not count.
		wantPrevious string
	}{
		{
			name: "pending install",
			crash: func(ctx context.Context, t *testing.T, _ *deployer.Deployer, ns string) {
				in := action.NewInstall(f.helm(t, ns))
				in.ReleaseName = "app"
				in.Namespace = ns
				in.CreateNamespace = true
				rel := testRelease(ns, "app", "id-crashed", "crashed")
				_, err := in.RunWithContext(ctx, rel.Chart, rel.Values)
				require.NoError(t, err)
				f.setStatus(t, ns, "app", 1, release.StatusPendingInstall)
			},
			// Never uninstalled (objects it adopted would go): its record
			// is dropped and the install redone, taking its objects over.
			wantRevision: 1,
			wantPrevious: "",
			wantHistory:  []release.Status{release.StatusDeployed},
		},
		{
			name: "pending upgrade at revision 2 after revision 1 deployed",
			crash: func(ctx context.Context, t *testing.T, d *deployer.Deployer, ns string) {
				mustDeploy(ctx, t, d, f, ns, "id-1", "one")
				f.createPending(t, ns, "app", 1, "id-2", release.StatusPendingUpgrade)
			},
			// The interrupted revision 2 is dropped and redone: no extra revision.
			wantRevision: 2,
			wantPrevious: "id-1",
			wantHistory:  []release.Status{release.StatusSuperseded, release.StatusDeployed},
		},
		{
			name: "pending upgrade at revision 2 without a deployed revision",
			crash: func(ctx context.Context, t *testing.T, d *deployer.Deployer, ns string) {
				mustDeploy(ctx, t, d, f, ns, "id-1", "one")
				mustDeploy(ctx, t, d, f, ns, "id-2", "two")
				f.setStatus(t, ns, "app", 2, release.StatusPendingUpgrade)
			},
			wantRevision: 2,
			wantPrevious: "",
			wantHistory:  []release.Status{release.StatusSuperseded, release.StatusDeployed},
		},
		{
			name: "pending rollback",
			crash: func(ctx context.Context, t *testing.T, d *deployer.Deployer, ns string) {
				mustDeploy(ctx, t, d, f, ns, "id-1", "one")
				mustDeploy(ctx, t, d, f, ns, "id-2", "two")
				f.createPending(t, ns, "app", 1, "id-1", release.StatusPendingRollback)
			},
			wantRevision: 3,
			wantPrevious: "id-2",
			wantHistory: []release.Status{
				release.StatusSuperseded, release.StatusSuperseded, release.StatusDeployed,
			},
		},
		{
			name: "interrupted uninstall",
			crash: func(ctx context.Context, t *testing.T, d *deployer.Deployer, ns string) {
				mustDeploy(ctx, t, d, f, ns, "id-1", "one")
				f.setStatus(t, ns, "app", 1, release.StatusUninstalling)
			},
			wantRevision: 1,
			wantPrevious: "",
			wantHistory:  []release.Status{release.StatusDeployed},
		},
		{
			name: "uninstalled with history kept",
			crash: func(ctx context.Context, t *testing.T, d *deployer.Deployer, ns string) {
				mustDeploy(ctx, t, d, f, ns, "id-1", "one")
				f.setStatus(t, ns, "app", 1, release.StatusUninstalled)
				require.NoError(t, f.cs.CoreV1().ConfigMaps(ns).Delete(ctx, "app", metav1.DeleteOptions{}))
			},
			wantRevision: 1,
			wantPrevious: "",
			wantHistory:  []release.Status{release.StatusDeployed},
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t)
			d := newDeployer(t)
			ns := "recover-" + string(rune('a'+i))
			tt.crash(ctx, t, d, ns)

			res, err := d.Deploy(ctx, f.getter, testRelease(ns, "app", "id-new", "new"))
			require.NoError(t, err)

			assert.True(t, res.Changed, "Changed")
			assert.Equal(t, tt.wantRevision, res.Revision, "Revision")
			assert.Equal(t, tt.wantPrevious, res.Previous, "Previous")
			f.assertCurrent(t, d, ns, "app", "id-new", tt.wantRevision)
			assert.Equal(t, tt.wantHistory, f.statuses(t, ns, "app"))
			assert.Equal(t, map[string]string{"value": "new"}, f.configMap(ctx, t, ns, "app").Data)

			// Recovered releases then behave normally.
			res, err = d.Deploy(ctx, f.getter, testRelease(ns, "app", "id-new", "new"))
			require.NoError(t, err)
			desc := "Upgrade complete"
			if tt.wantRevision == 1 {
				desc = "Install complete"
			}
			assert.Equal(t, deployer.Result{Revision: tt.wantRevision, Previous: "id-new", Description: desc}, res, "redeploy")
		})
	}
}

func TestDeploy_InvalidRelease(t *testing.T) {
	getter := unreachableGetter(t)
	d := deployer.New(deployer.Options{})

	tests := []struct {
		name   string
		modify func(*deployer.Release)
	}{
		{name: "empty name", modify: func(r *deployer.Release) { r.Name = "" }},
		{name: "54-character name", modify: func(r *deployer.Release) { r.Name = strings.Repeat("a", 54) }},
		{name: "empty namespace", modify: func(r *deployer.Release) { r.Namespace = "" }},
		{name: "nil chart", modify: func(r *deployer.Release) { r.Chart = nil }},
		{name: "chart without metadata", modify: func(r *deployer.Release) { r.Chart.Metadata = nil }},
		{name: "empty deployment ID", modify: func(r *deployer.Release) { r.DeploymentID = "" }},
		{name: "everything missing", modify: func(r *deployer.Release) { *r = deployer.Release{} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rel := testRelease("ns", "app", "id-1", "one")
			tt.modify(&rel)

			res, err := d.Deploy(t.Context(), getter, rel)

			require.ErrorIs(t, err, deployer.ErrInvalidRelease)
			assert.Equal(t, deployer.Result{}, res)
		})
	}

	t.Run("valid release passes validation", func(t *testing.T) {
		_, err := d.Deploy(t.Context(), getter, testRelease("ns", "app", "id-1", "one"))
		require.Error(t, err, "nothing listens on the getter's server")
		assert.NotErrorIs(t, err, deployer.ErrInvalidRelease)
	})
}
