package deployer_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"

	"github.com/flotilla-gitops/flotilla/internal/deployer"
)

// bundleLabel stands for the label Flotilla puts on every object of a
// bundle (activities.LabelBundle).
const bundleLabel = "flotilla.dev/bundle"

// crossTemplate renders ConfigMap cross-cm into namespace keep-cross,
// whichever namespace its release is in.
const crossTemplate = `apiVersion: v1
kind: ConfigMap
metadata:
  name: cross-cm
  namespace: keep-cross
`

// testDeleteNamespace is TestOnBareCluster's DeleteNamespace group. The
// cluster runs no namespace controller: a deleted namespace stays
// Terminating, which is all DeleteNamespace promises.
func testDeleteNamespace(t *testing.T, f *fixture) {
	t.Run("deletes a namespace holding only the release's objects, idempotently", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		d := newDeployer(t)
		deployLabelled(ctx, t, d, f, "doomed", "app", "mine")
		createConfigMap(ctx, t, f, "doomed", "unowned", nil) // nobody's: not a reason to keep
		del := deployer.NamespaceDeletion{Namespace: "doomed", Release: "app", Labels: map[string]string{bundleLabel: "mine"}}

		require.NoError(t, d.DeleteNamespace(ctx, f.getter, del))

		ns, err := f.cs.CoreV1().Namespaces().Get(ctx, "doomed", metav1.GetOptions{})
		require.NoError(t, err)
		assert.NotNil(t, ns.DeletionTimestamp, "namespace is terminating")
		require.NoError(t, d.DeleteNamespace(ctx, f.getter, del), "DeleteNamespace of a terminating namespace")
		del.Namespace = "never-created"
		require.NoError(t, d.DeleteNamespace(ctx, f.getter, del), "DeleteNamespace of a missing namespace")
	})

	t.Run("keeps a namespace and says why", func(t *testing.T) {
		t.Parallel()
		testKeptNamespaces(t, f)
	})
}

func testKeptNamespaces(t *testing.T, f *fixture) {
	d := deployer.New(deployer.Options{
		Logger:              zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel)),
		ProtectedNamespaces: []string{"my-agent"},
	})
	tests := []struct {
		name string
		// ns is the namespace deleted for release "app" of bundle "mine".
		ns string
		// setup prepares ns; nil leaves the cluster as it is.
		setup func(ctx context.Context, t *testing.T)
		// getter deletes it; nil is the fixture's (system:masters).
		getter genericclioptions.RESTClientGetter
		reason deployer.KeepReason
		// want is the error's message, or its start when prefix is set.
		want   string
		prefix bool
	}{
		{name: "kube-system", ns: "kube-system", reason: deployer.KeptKubernetes,
			want: "namespace kube-system kept: it is one of Kubernetes' own namespaces"},
		{name: "default", ns: "default", reason: deployer.KeptKubernetes,
			want: "namespace default kept: it is one of Kubernetes' own namespaces"},
		{name: "kube-public", ns: "kube-public", reason: deployer.KeptKubernetes,
			want: "namespace kube-public kept: it is one of Kubernetes' own namespaces"},
		{name: "kube-node-lease", ns: "kube-node-lease", reason: deployer.KeptKubernetes,
			want: "namespace kube-node-lease kept: it is one of Kubernetes' own namespaces"},
		{name: "Flotilla's namespace", ns: "flotilla-system", reason: deployer.KeptProtected,
			setup: func(ctx context.Context, t *testing.T) {
				deployLabelled(ctx, t, d, f, "flotilla-system", "app", "mine")
			},
			want: "namespace flotilla-system kept: it is a protected namespace (Flotilla's or an agent's)"},
		{name: "Fleet's agent namespace", ns: "cattle-fleet-system", reason: deployer.KeptProtected,
			want: "namespace cattle-fleet-system kept: it is a protected namespace (Flotilla's or an agent's)"},
		{name: "a configured agent namespace", ns: "my-agent", reason: deployer.KeptProtected,
			setup: func(ctx context.Context, t *testing.T) { createNamespace(ctx, t, f, "my-agent", nil) },
			want:  "namespace my-agent kept: it is a protected namespace (Flotilla's or an agent's)"},
		{name: "another release's record", ns: "keep-records", reason: deployer.KeptInUse,
			setup: func(ctx context.Context, t *testing.T) {
				deployLabelled(ctx, t, d, f, "keep-records", "app", "mine")
				createRecord(t, f, "keep-records", "other-app")
			},
			want: "namespace keep-records kept: it holds release other-app's objects (Secret sh.helm.release.v1.other-app.v1)"},
		{name: "another namespace's release's object", ns: "keep-cross", reason: deployer.KeptInUse,
			setup: func(ctx context.Context, t *testing.T) {
				deployLabelled(ctx, t, d, f, "keep-cross", "app", "mine")
				rel := testRelease("keep-cross-src", "app", "id-1", "one")
				rel.Chart = testChart(crossTemplate)
				_, err := d.Deploy(ctx, f.getter, rel)
				require.NoError(t, err)
			},
			want: "namespace keep-cross kept: it holds release keep-cross-src/app's objects (ConfigMap cross-cm)"},
		{name: "another bundle's object", ns: "keep-bundle", reason: deployer.KeptInUse,
			setup: func(ctx context.Context, t *testing.T) {
				deployLabelled(ctx, t, d, f, "keep-bundle", "app", "mine")
				createConfigMap(ctx, t, f, "keep-bundle", "stray", map[string]string{bundleLabel: "other"})
			},
			want: "namespace keep-bundle kept: it holds objects labelled flotilla.dev/bundle=other (ConfigMap stray)"},
		{name: "a namespace another release created", ns: "keep-owned", reason: deployer.KeptInUse,
			setup: func(ctx context.Context, t *testing.T) {
				createNamespace(ctx, t, f, "keep-owned", map[string]string{
					"meta.helm.sh/release-name": "infra", "meta.helm.sh/release-namespace": "infra-system"})
			},
			want: "namespace keep-owned kept: it is an object of release infra-system/infra"},
		{name: "objects it may not list", ns: "keep-unverified", reason: deployer.KeptUnverified,
			setup:  func(ctx context.Context, t *testing.T) { createNamespace(ctx, t, f, "keep-unverified", nil) },
			getter: namespaceOnlyGetter(t, f),
			want:   "namespace keep-unverified kept: its ", prefix: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t)
			if tt.setup != nil {
				tt.setup(ctx, t)
			}
			getter := tt.getter
			if getter == nil {
				getter = f.getter
			}

			err := d.DeleteNamespace(ctx, getter, deployer.NamespaceDeletion{Namespace: tt.ns, Release: "app",
				Labels: map[string]string{bundleLabel: "mine"}})

			require.ErrorIs(t, err, deployer.ErrNamespaceKept)
			var kept *deployer.NamespaceKeptError
			require.ErrorAs(t, err, &kept)
			assert.Equal(t, tt.reason, kept.Reason)
			if tt.prefix {
				assert.Contains(t, err.Error(), tt.want)
			} else {
				assert.EqualError(t, err, tt.want)
			}
			ns, err := f.cs.CoreV1().Namespaces().Get(ctx, tt.ns, metav1.GetOptions{})
			if !apierrors.IsNotFound(err) {
				require.NoError(t, err)
				assert.Nil(t, ns.DeletionTimestamp, "%s must not be terminating", tt.ns)
			}
		})
	}
}

// deployLabelled deploys release name of bundle into ns, its objects
// labelled as Flotilla labels them.
func deployLabelled(ctx context.Context, t *testing.T, d *deployer.Deployer, f *fixture, ns, name, bundle string) {
	t.Helper()
	rel := testRelease(ns, name, "id-1", "one")
	rel.Labels = map[string]string{bundleLabel: bundle}
	_, err := d.Deploy(ctx, f.getter, rel)
	require.NoError(t, err)
}

func createNamespace(ctx context.Context, t *testing.T, f *fixture, name string, annotations map[string]string) {
	t.Helper()
	_, err := f.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations}}, metav1.CreateOptions{})
	require.NoError(t, err)
}

func createConfigMap(ctx context.Context, t *testing.T, f *fixture, ns, name string, labels map[string]string) {
	t.Helper()
	_, err := f.cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// createRecord stores a deployed revision 1 of release name in ns, without
// any object: only its Helm record.
func createRecord(t *testing.T, f *fixture, ns, name string) {
	t.Helper()
	rel := &release.Release{Name: name, Namespace: ns, Version: 1, Chart: testChart(),
		Info: &release.Info{Status: release.StatusDeployed, Description: "created by the test"}}
	require.NoError(t, f.helm(t, ns).Releases.Create(rel))
}

// namespaceOnlyGetter returns a getter for the fixture's cluster acting as
// a user who may read and delete namespaces, and list nothing in them.
func namespaceOnlyGetter(t *testing.T, f *fixture) genericclioptions.RESTClientGetter {
	t.Helper()
	ctx := testContext(t)
	const user = "namespace-only"
	_, err := f.cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "delete"}}}},
		metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = f.cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	cfg := rest.CopyConfig(f.config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	getter, err := deployer.NewRESTClientGetter(cfg, metav1.NamespaceDefault)
	require.NoError(t, err)
	return getter
}
