package deploy_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/flotilla-gitops/flotilla/internal/crds"
	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

// The RBAC objects of the management mode, by kind and name, for the
// release controllerRelease.
var (
	managementRBAC = []string{
		"ClusterRole/flotilla-management", "ClusterRoleBinding/flotilla-management",
		"Role/flotilla-management", "RoleBinding/flotilla-management",
	}
	userRoles = []string{"ClusterRole/flotilla-gitrepo-admin", "ClusterRole/flotilla-gitrepo-edit", "ClusterRole/flotilla-gitrepo-view"}
)

// TestControllerChartManagement checks what management.* and the RBAC
// values render: the controller's flags, its RBAC and the users' roles.
// What the rules allow is proven on a real API server by
// TestChartRBACOnAPIServer.
func TestControllerChartManagement(t *testing.T) {
	tests := []struct {
		name string
		vals string
		// wantFlags: --management-in-cluster and --management-namespace
		// <release namespace>.
		wantFlags bool
		// wantLease is --management-lease-duration's value, "" for absent.
		wantLease string
		// wantObjects are the RBAC objects beyond the release's own Role
		// and RoleBinding; wantAggregated: whether the user roles carry
		// the aggregation labels.
		wantObjects    []string
		wantAggregated bool
	}{
		{name: "defaults", vals: "{}", wantFlags: true, wantObjects: slices.Concat(managementRBAC, userRoles), wantAggregated: true},
		{name: "disabled", vals: "management: {enabled: false}"},
		{name: "lease duration", vals: "management: {leaseDuration: 3s}", wantFlags: true, wantLease: "3s", wantObjects: slices.Concat(managementRBAC, userRoles), wantAggregated: true},
		{name: "no RBAC", vals: "rbac: {create: false}", wantFlags: true},
		{name: "no user roles", vals: "rbac: {userRoles: false}", wantFlags: true, wantObjects: managementRBAC},
		{name: "not aggregated", vals: "rbac: {aggregateToDefaultRoles: false}", wantFlags: true, wantObjects: slices.Concat(managementRBAC, userRoles)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, vals := controllerChartWith(t, tt.vals)
			objs := renderObjects(t, c, controllerRelease, controllerNamespace, vals)
			args := deployment(t, objs, controllerRelease).Spec.Template.Spec.Containers[0].Args

			assert.Equal(t, tt.wantFlags, slices.Contains(args, "--management-in-cluster"), "--management-in-cluster in %q", args)
			ns, ok := flagValue(args, "--management-namespace")
			assert.Equal(t, tt.wantFlags, ok, "--management-namespace")
			if ok {
				assert.Equal(t, controllerNamespace, ns, "the Lease lives in the release namespace")
			}
			lease, _ := flagValue(args, "--management-lease-duration")
			assert.Equal(t, tt.wantLease, lease, "--management-lease-duration")

			var got []string
			for _, kn := range kinds(objs) {
				if slices.Contains(managementRBAC, kn) || slices.Contains(userRoles, kn) {
					got = append(got, kn)
				}
			}
			assert.ElementsMatch(t, tt.wantObjects, got)
			for _, name := range []string{"admin", "edit", "view"} {
				role := find(objs, "ClusterRole", "flotilla-gitrepo-"+name)
				if role == nil {
					continue
				}
				_, aggregated := role.GetLabels()["rbac.authorization.k8s.io/aggregate-to-"+name]
				assert.Equal(t, tt.wantAggregated, aggregated, "aggregate-to-%s label", name)
			}
		})
	}
}

// clusterRole converts the ClusterRole name of objs to its typed form.
func clusterRole(t *testing.T, objs []*unstructured.Unstructured, name string) *rbacv1.ClusterRole {
	t.Helper()
	o := find(objs, "ClusterRole", name)
	require.NotNil(t, o, "no ClusterRole %s among %v", name, kinds(objs))
	var r rbacv1.ClusterRole
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &r))
	return &r
}

// The namespaces of TestChartRBACOnAPIServer's teams.
const (
	teamA = "team-a"
	teamB = "team-b"
)

// TestChartRBACOnAPIServer installs the CRDs and the chart's RBAC on a real
// kube-apiserver, whose kube-controller-manager aggregates the user roles
// into Kubernetes' admin, edit and view, and checks what they allow: a user
// bound to edit in team-a manages GitRepos there and nowhere else, and
// cannot write bundles, restrictions or status; view only reads; the
// controller's ServiceAccount may do what the management mode needs and
// not more.
func TestChartRBACOnAPIServer(t *testing.T) {
	cluster := testenv.StartClusters(t, 1, testenv.Options{Sim: true})[0]
	cfg := cluster.RESTConfig()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(t, crds.Install(ctx, cfg))
	cs := cluster.Clientset(t)
	for _, ns := range []string{controllerNamespace, teamA, teamB} {
		_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	c, vals := controllerChartWith(t, "{}")
	createRBAC(ctx, t, cs, renderObjects(t, c, controllerRelease, controllerNamespace, vals))
	for user, role := range map[string]string{"alice": "edit", "victor": "view"} {
		_, err := cs.RbacV1().RoleBindings(teamA).Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: user},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	gitrepos := crdResource(t, "GitRepo")

	t.Run("edit in team-a", func(t *testing.T) {
		alice := impersonate(t, cfg, "alice")
		// The aggregation controller adds the rules to edit shortly.
		require.Eventually(t, func() bool {
			_, err := alice.Resource(gitrepos).Namespace(teamA).Create(ctx, gitRepo(teamA, "apps"), metav1.CreateOptions{})
			return err == nil
		}, 30*time.Second, 200*time.Millisecond, "alice, edit in team-a, cannot create a GitRepo there")
		_, err := alice.Resource(gitrepos).Namespace(teamB).Create(ctx, gitRepo(teamB, "apps"), metav1.CreateOptions{})
		assert.True(t, apierrors.IsForbidden(err), "a GitRepo in team-b: %v", err)
		approve := []byte(`{"metadata":{"annotations":{"flotilla.dev/approve":"rollout"}}}`)
		_, err = alice.Resource(gitrepos).Namespace(teamA).Patch(ctx, "apps", types.MergePatchType, approve, metav1.PatchOptions{})
		assert.NoError(t, err, "approving with the annotation")
		_, err = alice.Resource(gitrepos).Namespace(teamA).Patch(ctx, "apps", types.MergePatchType, []byte(`{"status":{"display":{}}}`), metav1.PatchOptions{}, "status")
		assert.True(t, apierrors.IsForbidden(err), "writing status: %v", err)
		_, err = alice.Resource(crdResource(t, "Bundle")).Namespace(teamA).List(ctx, metav1.ListOptions{})
		assert.NoError(t, err, "listing bundles")
		for _, kind := range []string{"Bundle", "GitRepoRestriction", "Policy", "Cluster"} {
			obj := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": crds.Group + "/" + crds.Version, "kind": kind,
				"metadata": map[string]any{"name": "mine", "namespace": teamA},
			}}
			_, err := alice.Resource(crdResource(t, kind)).Namespace(teamA).Create(ctx, obj, metav1.CreateOptions{})
			assert.True(t, apierrors.IsForbidden(err), "creating a %s: %v", kind, err)
		}
	})
	t.Run("view in team-a", func(t *testing.T) {
		victor := impersonate(t, cfg, "victor")
		require.Eventually(t, func() bool {
			_, err := victor.Resource(gitrepos).Namespace(teamA).List(ctx, metav1.ListOptions{})
			return err == nil
		}, 30*time.Second, 200*time.Millisecond, "victor, view in team-a, cannot list its GitRepos")
		_, err := victor.Resource(gitrepos).Namespace(teamA).Create(ctx, gitRepo(teamA, "mine"), metav1.CreateOptions{})
		assert.True(t, apierrors.IsForbidden(err), "creating: %v", err)
		_, err = victor.Resource(gitrepos).Namespace(teamB).List(ctx, metav1.ListOptions{})
		assert.True(t, apierrors.IsForbidden(err), "listing team-b: %v", err)
	})
	t.Run("controller", func(t *testing.T) {
		assertControllerAccess(ctx, t, cs)
	})
}

// assertControllerAccess asks the API server what the controller's
// ServiceAccount may do.
func assertControllerAccess(ctx context.Context, t *testing.T, cs kubernetes.Interface) {
	t.Helper()
	tests := []struct {
		verb, group, resource, subresource, namespace, name string
		want                                                bool
	}{
		{verb: "watch", group: crds.Group, resource: "gitrepos", want: true},
		{verb: "list", group: crds.Group, resource: "policies", want: true},
		{verb: "update", group: crds.Group, resource: "gitrepos", subresource: "status", namespace: teamA, want: true},
		{verb: "update", group: crds.Group, resource: "helmops", subresource: "finalizers", namespace: teamB, want: true},
		{verb: "patch", group: crds.Group, resource: "clusters", subresource: "status", namespace: "fleet-default", want: true},
		{verb: "create", group: crds.Group, resource: "bundles", namespace: teamA, want: true},
		{verb: "delete", group: crds.Group, resource: "bundles", namespace: teamA, want: true},
		{verb: "create", group: crds.Group, resource: "gitrepos", namespace: teamA},
		{verb: "delete", group: crds.Group, resource: "gitrepos", namespace: teamA},
		{verb: "get", resource: "secrets", namespace: teamB, want: true},
		{verb: "watch", resource: "configmaps", want: true},
		{verb: "create", resource: "secrets", namespace: teamA, want: true},
		{verb: "update", resource: "secrets", namespace: teamA},
		{verb: "delete", resource: "secrets", namespace: teamA},
		{verb: "create", resource: "events", namespace: teamA, want: true},
		{verb: "patch", group: "events.k8s.io", resource: "events", namespace: teamA, want: true},
		{verb: "create", group: "coordination.k8s.io", resource: "leases", namespace: controllerNamespace, want: true},
		{verb: "update", group: "coordination.k8s.io", resource: "leases", namespace: controllerNamespace, name: "flotilla-management", want: true},
		{verb: "update", group: "coordination.k8s.io", resource: "leases", namespace: controllerNamespace, name: "other"},
		{verb: "create", group: "coordination.k8s.io", resource: "leases", namespace: teamA},
		{verb: "create", group: "apps", resource: "deployments", namespace: teamA},
	}
	user := "system:serviceaccount:" + controllerNamespace + ":" + controllerRelease
	for _, tt := range tests {
		name := strings.Join([]string{tt.verb, tt.group, tt.resource, tt.subresource, tt.namespace, tt.name}, " ")
		review, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{
				User:   user,
				Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + controllerNamespace, "system:authenticated"},
				ResourceAttributes: &authorizationv1.ResourceAttributes{
					Verb: tt.verb, Group: tt.group, Resource: tt.resource, Subresource: tt.subresource,
					Namespace: tt.namespace, Name: tt.name,
				},
			},
		}, metav1.CreateOptions{})
		require.NoError(t, err, name)
		assert.Equal(t, tt.want, review.Status.Allowed, "%s: %s", name, review.Status.Reason)
	}
}

// createRBAC creates the ServiceAccount and the RBAC objects among objs.
func createRBAC(ctx context.Context, t *testing.T, cs kubernetes.Interface, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, o := range objs {
		var err error
		switch o.GetKind() {
		case "ServiceAccount":
			var sa corev1.ServiceAccount
			require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &sa))
			_, err = cs.CoreV1().ServiceAccounts(o.GetNamespace()).Create(ctx, &sa, metav1.CreateOptions{})
		case "ClusterRole":
			_, err = cs.RbacV1().ClusterRoles().Create(ctx, clusterRole(t, objs, o.GetName()), metav1.CreateOptions{})
		case "ClusterRoleBinding":
			var b rbacv1.ClusterRoleBinding
			require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &b))
			_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, &b, metav1.CreateOptions{})
		case "Role":
			var r rbacv1.Role
			require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &r))
			_, err = cs.RbacV1().Roles(o.GetNamespace()).Create(ctx, &r, metav1.CreateOptions{})
		case "RoleBinding":
			var b rbacv1.RoleBinding
			require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &b))
			_, err = cs.RbacV1().RoleBindings(o.GetNamespace()).Create(ctx, &b, metav1.CreateOptions{})
		}
		require.NoError(t, err, "creating %s %s", o.GetKind(), o.GetName())
	}
}

// impersonate returns a dynamic client acting as user.
func impersonate(t *testing.T, cfg *rest.Config, user string) dynamic.Interface {
	t.Helper()
	cfg = rest.CopyConfig(cfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	return dyn
}

// crdResource returns the resource of kind, one of crds.Kinds.
func crdResource(t *testing.T, kind string) schema.GroupVersionResource {
	t.Helper()
	for _, k := range crds.Kinds {
		if k.Kind == kind {
			return k.GroupVersionResource()
		}
	}
	t.Fatalf("no kind %s in crds.Kinds", kind)
	return schema.GroupVersionResource{}
}

// gitRepo returns a GitRepo as a team would apply it.
func gitRepo(namespace, name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": crds.Group + "/" + crds.Version, "kind": "GitRepo",
		"metadata": map[string]any{"name": name, "namespace": namespace},
		"spec":     map[string]any{"repo": "https://git.example.com/" + namespace + "/apps", "paths": []any{"simple"}},
	}}
}
