package deployer_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/flotilla-gitops/flotilla/internal/deployer"
)

// valuesTemplate renders ConfigMap "values" holding every value as JSON.
const valuesTemplate = `apiVersion: v1
kind: ConfigMap
metadata:
  name: values
data:
  json: {{ toJson .Values | quote }}
`

// renderedValues returns the values ConfigMap "values" of ns holds.
func (f *fixture) renderedValues(ctx context.Context, t *testing.T, ns string) map[string]any {
	t.Helper()
	var v map[string]any
	require.NoError(t, json.Unmarshal([]byte(f.configMap(ctx, t, ns, "values").Data["json"]), &v))
	return v
}

// createNamespace creates ns.
func (f *fixture) createNamespace(ctx context.Context, t *testing.T, ns string) {
	t.Helper()
	_, err := f.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// serviceAccount creates ServiceAccount name in ns (which must exist),
// bound to a Role of ns allowing every verb on resources.
func (f *fixture) serviceAccount(ctx context.Context, t *testing.T, ns, name string, resources ...string) {
	t.Helper()
	_, err := f.cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	require.NoError(t, err)
	f.role(ctx, t, ns, name, resources...)
	_, err = f.cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	// The API server's authorizer learns of the binding moments later.
	require.Eventually(t, func() bool {
		sar, err := f.cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: deployer.ServiceAccountUser(ns, name),
				ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: "get", Resource: resources[0]}}},
			metav1.CreateOptions{})
		return err == nil && sar.Status.Allowed
	}, 10*time.Second, 50*time.Millisecond, "ServiceAccount %s/%s bound", ns, name)
}

// role creates or replaces Role name of ns allowing every verb on
// resources (of the core group).
func (f *fixture) role(ctx context.Context, t *testing.T, ns, name string, resources ...string) {
	t.Helper()
	r := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: resources, Verbs: []string{"*"}}}}
	cur, err := f.cs.RbacV1().Roles(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = f.cs.RbacV1().Roles(ns).Create(ctx, r, metav1.CreateOptions{})
		require.NoError(t, err)
		return
	}
	require.NoError(t, err)
	cur.Rules = r.Rules
	_, err = f.cs.RbacV1().Roles(ns).Update(ctx, cur, metav1.UpdateOptions{})
	require.NoError(t, err)
}

// TestDeployOptions covers the fleet.yaml options Deploy acts on:
// namespaceLabels/namespaceAnnotations, serviceAccount and valuesFrom.
func TestDeployOptions(t *testing.T) {
	f := newFixture(t)

	t.Run("namespace labels and annotations", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		d := newDeployer(t)
		const ns = "ns-meta"
		rel := testRelease(ns, "app", "id-1", "one")
		rel.NamespaceLabels = map[string]string{"team": "a", "tier": "web"}
		rel.NamespaceAnnotations = map[string]string{"owner": "ops"}
		_, err := d.Deploy(ctx, f.getter, rel)
		require.NoError(t, err)
		got, err := f.cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, "a", got.Labels["team"])
		assert.Equal(t, "web", got.Labels["tier"])
		assert.Equal(t, "ops", got.Annotations["owner"])

		// Others label the namespace: a person, and an admission policy's
		// pod-security label.
		patch := `{"metadata":{"labels":{"by-hand":"x","pod-security.kubernetes.io/enforce":"baseline"}}}`
		_, err = f.cs.CoreV1().Namespaces().Patch(ctx, ns, types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "kubectl"})
		require.NoError(t, err)

		// A no-op deploy changes nothing.
		rel.NamespaceLabels = map[string]string{"team": "ignored"}
		res, err := d.Deploy(ctx, f.getter, rel)
		require.NoError(t, err)
		assert.False(t, res.Changed)
		got, err = f.cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, "a", got.Labels["team"], "only a real deploy applies namespace labels")

		// The next deploy drops tier and the annotation, changes team, and
		// leaves what others set.
		rel.DeploymentID, rel.NamespaceLabels, rel.NamespaceAnnotations = "id-2", map[string]string{"team": "b"}, nil
		_, err = d.Deploy(ctx, f.getter, rel)
		require.NoError(t, err)
		got, err = f.cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, map[string]string{"team": "b", "by-hand": "x", "pod-security.kubernetes.io/enforce": "baseline",
			"kubernetes.io/metadata.name": ns}, got.Labels)
		assert.NotContains(t, got.Annotations, "owner")

		// Without any, what the release set is removed.
		rel.DeploymentID, rel.NamespaceLabels = "id-3", nil
		_, err = d.Deploy(ctx, f.getter, rel)
		require.NoError(t, err)
		got, err = f.cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		require.NoError(t, err)
		assert.NotContains(t, got.Labels, "team")
		assert.Equal(t, "x", got.Labels["by-hand"])
		for _, e := range got.ManagedFields {
			assert.NotEqual(t, deployer.NamespaceFieldManager("app"), e.Manager, "the release owns nothing any more")
		}
	})

	t.Run("invalid namespace label applies nothing", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		rel := testRelease("ns-invalid", "app", "id-1", "one")
		rel.NamespaceLabels = map[string]string{"bad key!": "x"}
		_, err := newDeployer(t).Deploy(ctx, f.getter, rel)
		require.ErrorIs(t, err, deployer.ErrInvalidMetadata)
		require.ErrorIs(t, err, deployer.ErrInvalidRelease)
		assert.Contains(t, err.Error(), "namespaceLabels[bad key!]")
		f.assertNothingApplied(ctx, t, "ns-invalid", "app")
	})

	t.Run("a template error leaves the namespace alone", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		rel := testRelease("ns-broken", "app", "id-1", "one")
		rel.Chart = testChart("{{ fail \"broken\" }}")
		rel.NamespaceLabels = map[string]string{"team": "a"}
		_, err := newDeployer(t).Deploy(ctx, f.getter, rel)
		require.Error(t, err)
		f.assertNothingApplied(ctx, t, "ns-broken", "app")
	})

	t.Run("service account", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		d := newDeployer(t)
		const ns = "sa-ok"
		f.createNamespace(ctx, t, ns)
		f.serviceAccount(ctx, t, ns, "deployer", "configmaps", "secrets")
		rel := testRelease(ns, "app", "id-1", "one")
		rel.ServiceAccount = "deployer"
		res, err := d.Deploy(ctx, f.getter, rel)
		require.NoError(t, err)
		assert.True(t, res.Changed)
		assert.Equal(t, "one", f.configMap(ctx, t, ns, "app").Data["value"])
		st, err := d.Status(ctx, f.getter, ns, "app", deployer.ReadyOptions{})
		require.NoError(t, err)
		assert.Equal(t, 1, st.Ready)

		// An object outside the account's namespace is refused: Helm acts
		// as the account, not as the admin behind the getter.
		other := rel
		other.DeploymentID = "id-2"
		other.Chart = testChart("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: elsewhere, namespace: default}\n")
		_, err = d.Deploy(ctx, f.getter, other)
		require.Error(t, err)
		assert.True(t, apierrors.IsForbidden(err), "%v", err)
		assert.Contains(t, err.Error(), "service account sa-ok/deployer: ")
		assert.Contains(t, err.Error(), `"system:serviceaccount:sa-ok:deployer"`)

		// Status reads act as the account too. (The API server's RBAC
		// authorizer sees a changed Role within moments.)
		f.role(ctx, t, ns, "deployer", "secrets")
		require.Eventually(t, func() bool {
			_, err = d.Status(ctx, f.getter, ns, "app", deployer.ReadyOptions{})
			return err != nil
		}, 10*time.Second, 100*time.Millisecond, "Status fails once the account may not read ConfigMaps")
		assert.True(t, apierrors.IsForbidden(err), "%v", err)
		assert.Contains(t, err.Error(), "service account sa-ok/deployer: ")

		// And so does the uninstall: refused without the right to delete
		// the ConfigMap, done with it.
		err = d.Uninstall(ctx, f.getter, ns, "app", "")
		require.Error(t, err)
		assert.Contains(t, err.Error(), "as service account sa-ok/deployer: ")
		f.role(ctx, t, ns, "deployer", "configmaps", "secrets")
		require.Eventually(t, func() bool { return d.Uninstall(ctx, f.getter, ns, "app", "") == nil },
			10*time.Second, 100*time.Millisecond, "Uninstall succeeds once the account may delete ConfigMaps")
		f.assertNoConfigMap(ctx, t, ns, "app")
	})

	t.Run("missing service account applies nothing", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		rel := testRelease("sa-missing", "app", "id-1", "one")
		rel.ServiceAccount = "nobody"
		rel.NamespaceLabels = map[string]string{"team": "a"}
		_, err := newDeployer(t).Deploy(ctx, f.getter, rel)
		require.ErrorIs(t, err, deployer.ErrServiceAccountNotFound)
		assert.EqualError(t, err, "service account sa-missing/nobody: not found")
		f.assertNothingApplied(ctx, t, "sa-missing", "app")
	})

	t.Run("service account without rights", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		const ns = "sa-weak"
		f.createNamespace(ctx, t, ns)
		f.serviceAccount(ctx, t, ns, "weak", "secrets")
		rel := testRelease(ns, "app", "id-1", "one")
		rel.ServiceAccount = "weak"
		_, err := newDeployer(t).Deploy(ctx, f.getter, rel)
		require.Error(t, err)
		assert.True(t, apierrors.IsForbidden(err), "%v", err)
		assert.Contains(t, err.Error(), "service account sa-weak/weak: ")
		assert.Contains(t, err.Error(), "configmaps")
		f.assertNoConfigMap(ctx, t, ns, "app")
	})

	t.Run("service account bounds every operation", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		d := newDeployer(t)
		const ns, other = "sa-bound", "sa-bound-other"
		f.createNamespace(ctx, t, ns)
		f.createNamespace(ctx, t, other)
		f.serviceAccount(ctx, t, ns, "deployer", "configmaps", "secrets")
		_, err := f.cs.CoreV1().Secrets(other).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds"},
			Data: map[string][]byte{"values.yaml": []byte("value: hunter2-secret\n")}}, metav1.CreateOptions{})
		require.NoError(t, err)

		// valuesFrom of another namespace is read as the account: refused,
		// naming the account and the object, nothing applied.
		rel := testRelease(ns, "app", "id-1", "one")
		rel.ServiceAccount = "deployer"
		rel.ValuesFrom = []deployer.ValuesRef{{Secret: true, Namespace: other, Name: "creds"}}
		_, err = d.Deploy(ctx, f.getter, rel)
		require.Error(t, err)
		assert.True(t, apierrors.IsForbidden(err), "%v", err)
		assert.ErrorIs(t, err, deployer.ErrValuesFrom)
		assert.Contains(t, err.Error(), "service account sa-bound/deployer: valuesFrom secret sa-bound-other/creds")
		assert.NotContains(t, err.Error(), "hunter2")
		f.assertNoConfigMap(ctx, t, ns, "app")

		// Namespace labels are set as the account: it may not patch
		// namespaces, so a privileged pod-security label is refused.
		rel.ValuesFrom = nil
		rel.NamespaceLabels = map[string]string{"pod-security.kubernetes.io/enforce": "privileged"}
		_, err = d.Deploy(ctx, f.getter, rel)
		require.Error(t, err)
		assert.True(t, apierrors.IsForbidden(err), "%v", err)
		assert.Contains(t, err.Error(), "service account sa-bound/deployer: ")
		nsObj, err := f.cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		require.NoError(t, err)
		assert.NotContains(t, nsObj.Labels, "pod-security.kubernetes.io/enforce")

		// Without labels it deploys; Actor names the account for what a
		// cleanup does beside Helm, and deleteNamespace as the account is
		// refused and keeps the namespace, an answer rather than a retry.
		rel.NamespaceLabels = nil
		_, err = d.Deploy(ctx, f.getter, rel)
		require.NoError(t, err)
		actor, sa, err := d.Actor(f.getter, ns, "app")
		require.NoError(t, err)
		assert.Equal(t, "deployer", sa)
		err = d.DeleteNamespace(ctx, actor, deployer.NamespaceDeletion{Namespace: ns, Release: "app"})
		var kept *deployer.NamespaceKeptError
		require.ErrorAs(t, err, &kept)
		assert.Equal(t, deployer.KeptForbidden, kept.Reason)
		nsObj, err = f.cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Nil(t, nsObj.DeletionTimestamp)
		_, sa, err = d.Actor(f.getter, ns, "never-installed")
		require.NoError(t, err)
		assert.Empty(t, sa)
	})

	t.Run("valuesFrom", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		d := newDeployer(t)
		const ns = "values-from"
		f.createNamespace(ctx, t, ns)
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "vals"},
			Data: map[string]string{"values.yaml": "a: cm\nb: cm\nnested: {x: cm, w: cm}\n"}}
		_, err := f.cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
		require.NoError(t, err)
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds"},
			Data: map[string][]byte{"custom": []byte("b: secret\nnested: {w: secret}\n")}}
		_, err = f.cs.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{})
		require.NoError(t, err)

		rel := testRelease(ns, "app", "id-1", "one")
		rel.Chart = testChart(valuesTemplate)
		rel.Values = map[string]any{"value": "one", "a": "inline", "c": "inline", "nested": map[string]any{"x": "inline", "z": "inline"}}
		rel.ValuesFrom = []deployer.ValuesRef{{Namespace: ns, Name: "vals"}, {Secret: true, Namespace: ns, Name: "creds", Key: "custom"}}
		res, err := d.Deploy(ctx, f.getter, rel)
		require.NoError(t, err)
		assert.True(t, res.Changed)
		assert.Equal(t, map[string]any{"value": "one", "a": "cm", "b": "secret", "c": "inline",
			"nested": map[string]any{"x": "cm", "w": "secret", "z": "inline"}}, f.renderedValues(ctx, t, ns),
			"later sources win, maps merge")
		assert.Equal(t, "inline", rel.Values["a"], "Deploy must not modify the caller's values")

		rev, err := d.Deployed(f.getter, ns, "app")
		require.NoError(t, err)
		require.Len(t, rev.ValuesFrom, 2)
		assert.Equal(t, rel.ValuesFrom[1], rev.ValuesFrom[1].Ref)
		want, ok := deployer.DigestOf(rel.ValuesFrom[1], nil, secret.Data)
		require.True(t, ok)
		assert.Equal(t, want, rev.ValuesFrom[1].SHA256)

		// Same ID, same data: nothing to do.
		res, err = d.Deploy(ctx, f.getter, rel)
		require.NoError(t, err)
		assert.False(t, res.Changed)

		// Same ID, new data: upgraded.
		cm.Data["values.yaml"] = "a: cm2\n"
		_, err = f.cs.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
		require.NoError(t, err)
		res, err = d.Deploy(ctx, f.getter, rel)
		require.NoError(t, err)
		assert.True(t, res.Changed)
		assert.Equal(t, 2, res.Revision)
		assert.Equal(t, "id-1", res.Previous)
		assert.Equal(t, "cm2", f.renderedValues(ctx, t, ns)["a"])
		assert.Equal(t, "inline", f.renderedValues(ctx, t, ns)["nested"].(map[string]any)["x"])
	})

	t.Run("valuesFrom errors", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		d := newDeployer(t)
		const ns = "values-bad"
		f.createNamespace(ctx, t, ns)
		_, err := f.cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"},
			Data: map[string][]byte{"values.yaml": []byte("hunter2-secret")}}, metav1.CreateOptions{})
		require.NoError(t, err)
		for _, tc := range []struct {
			ref  deployer.ValuesRef
			want string
		}{
			{deployer.ValuesRef{Namespace: ns, Name: "nothing"}, "valuesFrom configmap values-bad/nothing key values.yaml: configmap not found"},
			{deployer.ValuesRef{Secret: true, Namespace: ns, Name: "s", Key: "other"}, "valuesFrom secret values-bad/s key other: key not found in the secret"},
			{deployer.ValuesRef{Secret: true, Namespace: ns, Name: "s"}, "valuesFrom secret values-bad/s key values.yaml: not a YAML map of values"},
		} {
			rel := testRelease(ns, "app", "id-1", "one")
			rel.ValuesFrom = []deployer.ValuesRef{tc.ref}
			_, err := d.Deploy(ctx, f.getter, rel)
			require.ErrorIs(t, err, deployer.ErrValuesFrom)
			assert.EqualError(t, err, tc.want)
			assert.NotContains(t, err.Error(), "hunter2")
			assert.False(t, errors.Is(err, deployer.ErrInvalidRelease))
		}
		rel := testRelease(ns, "app", "id-1", "one")
		rel.ValuesFrom = []deployer.ValuesRef{{Namespace: ns, Name: "Bad_Name"}}
		_, err = d.Deploy(ctx, f.getter, rel)
		require.ErrorIs(t, err, deployer.ErrInvalidRelease)
		f.assertNoConfigMap(ctx, t, ns, "app")
	})
}
