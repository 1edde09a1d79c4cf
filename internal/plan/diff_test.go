package plan_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/flotilla-gitops/flotilla/internal/plan"
)

func obj(t *testing.T, y string) *unstructured.Unstructured {
	t.Helper()
	objs, err := plan.ParseManifest(y)
	require.NoError(t, err)
	require.Len(t, objs, 1)
	return objs[0]
}

const cmA = `apiVersion: v1
kind: ConfigMap
metadata: {name: app, namespace: ns, resourceVersion: "7", uid: abc, managedFields: [{manager: x}]}
data: {color: red, size: big}
`

const cmB = `apiVersion: v1
kind: ConfigMap
metadata: {name: app, namespace: ns}
data: {color: blue, size: big}
`

func TestDiff(t *testing.T) {
	tests := []struct {
		name   string
		before string // "" for none
		after  string // "" for none
		change plan.Change
		// lines must each appear in the diff; absent must not.
		lines, absent []string
	}{
		{name: "changed value", before: cmA, after: cmB, change: plan.Update,
			lines: []string{"-  color: red", "+  color: blue", "   size: big", "--- before", "+++ after"}, absent: []string{"resourceVersion", "uid", "managedFields"}},
		{name: "server metadata only", before: cmA, after: strings.Replace(cmA, `resourceVersion: "7"`, `resourceVersion: "9"`, 1), change: plan.NoChange},
		{name: "new", after: cmB, change: plan.Create, lines: []string{"+  color: blue", "+kind: ConfigMap"}},
		{name: "deleted", before: cmA, change: plan.Delete, lines: []string{"-  color: red"}},
		{name: "status ignored", before: cmB, after: cmB + "status: {ready: true}\n", change: plan.NoChange},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var before, after *unstructured.Unstructured
			if tt.before != "" {
				before = obj(t, tt.before)
			}
			if tt.after != "" {
				after = obj(t, tt.after)
			}
			got := plan.Diff(before, after)
			assert.Equal(t, tt.change, got.Change)
			assert.Equal(t, "ConfigMap", got.Kind)
			assert.Equal(t, "ns/app", got.Namespace+"/"+got.Name)
			if tt.change == plan.NoChange {
				assert.Empty(t, got.Diff)
			}
			for _, l := range tt.lines {
				assert.Contains(t, got.Diff, l+"\n")
			}
			assert.NotContains(t, got.Diff, "\n \n", "no empty context line for a missing side")
			for _, l := range tt.absent {
				assert.NotContains(t, got.Diff, l)
			}
		})
	}
}

const secretTmpl = `apiVersion: v1
kind: Secret
metadata:
  name: creds
  namespace: ns
  annotations: {kubectl.kubernetes.io/last-applied-configuration: '{"data":{"password":"%s"}}'}
%s
`

func TestDiff_RedactsSecrets(t *testing.T) {
	// c2VjcmV0LW9uZQ== is "secret-one", c2VjcmV0LXR3bw== "secret-two".
	tests := []struct {
		name          string
		before, after string
		change        plan.Change
		lines         []string
	}{
		{name: "value changed", change: plan.Update,
			before: "data: {password: c2VjcmV0LW9uZQ==, user: YWRtaW4=}", after: "data: {password: c2VjcmV0LXR3bw==, user: YWRtaW4=}",
			lines: []string{"-  password: <redacted>", "+  password: <redacted, changed>", "   user: <redacted>"}},
		{name: "same value as stringData", change: plan.Update,
			before: "data: {password: c2VjcmV0LW9uZQ==}", after: "stringData: {password: secret-one}",
			lines: []string{"-data:", "+stringData:", "+  password: <redacted>"}},
		{name: "key added", change: plan.Update,
			before: "data: {user: YWRtaW4=}", after: "data: {user: YWRtaW4=, password: c2VjcmV0LXR3bw==}",
			lines: []string{"+  password: <redacted>"}},
		{name: "unchanged", change: plan.NoChange,
			before: "data: {password: c2VjcmV0LW9uZQ==}", after: "data: {password: c2VjcmV0LW9uZQ==}"},
		{name: "created", change: plan.Create,
			after: "stringData: {password: secret-two}", lines: []string{"+  password: <redacted>"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var before *unstructured.Unstructured
			if tt.before != "" {
				before = obj(t, fmt.Sprintf(secretTmpl, "c2VjcmV0LW9uZQ==", tt.before))
			}
			after := obj(t, fmt.Sprintf(secretTmpl, "secret-two", tt.after))
			got := plan.Diff(before, after)
			assert.Equal(t, tt.change, got.Change)
			for _, l := range tt.lines {
				assert.Contains(t, got.Diff, l+"\n")
			}
			js, err := json.Marshal(got)
			require.NoError(t, err)
			for _, secret := range []string{"secret-one", "secret-two", "c2VjcmV0", "YWRtaW4", "admin", "last-applied"} {
				assert.NotContains(t, string(js), secret)
			}
		})
	}
}

func TestDiff_RedactsDeletedSecret(t *testing.T) {
	gone := obj(t, fmt.Sprintf(secretTmpl, "c2VjcmV0LW9uZQ==", "data: {password: c2VjcmV0LW9uZQ==}\nstringData: {token: secret-two}"))
	got := plan.Diff(gone, nil)
	assert.Equal(t, plan.Delete, got.Change)
	assert.Contains(t, got.Diff, "-  password: <redacted>\n")
	assert.Contains(t, got.Diff, "-  token: <redacted>\n")
	for _, secret := range []string{"secret-one", "secret-two", "c2VjcmV0", "last-applied"} {
		assert.NotContains(t, got.Diff, secret)
	}
}

func TestObjects(t *testing.T) {
	keep := obj(t, cmB)
	gone := obj(t, strings.Replace(cmB, "name: app", "name: old", 1))
	added := obj(t, strings.Replace(cmB, "name: app", "name: new", 1))
	changed := obj(t, strings.Replace(cmB, "blue", "green", 1))
	got := plan.Objects([]*unstructured.Unstructured{keep, gone}, []*unstructured.Unstructured{changed, added})
	var summary []string
	for _, o := range got {
		summary = append(summary, o.Name+":"+string(o.Change))
	}
	assert.Equal(t, []string{"app:update", "new:create", "old:delete"}, summary)
	assert.Empty(t, plan.Objects([]*unstructured.Unstructured{keep}, []*unstructured.Unstructured{keep}))
}

func TestActionFor(t *testing.T) {
	tests := []struct {
		from, to string
		want     plan.Action
	}{
		{"", "m:o", plan.Install},
		{"m:o", "m:o", plan.Unchanged},
		{"m:o", "m:p", plan.Upgrade},
		{"m:o", "", plan.Uninstall},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, plan.ActionFor(tt.from, tt.to), "%q -> %q", tt.from, tt.to)
	}
}

func TestErrorText(t *testing.T) {
	invalid := apierrors.NewInvalid(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "web", field.ErrorList{
		field.Invalid(field.NewPath("spec", "selector"), "app=x", "field is immutable")})
	deploy := obj(t, "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: ns}\n")
	assert.Equal(t, invalid.ErrStatus.Message, plan.ErrorText(deploy, fmt.Errorf("dry run: %w", invalid)))
	assert.Contains(t, plan.ErrorText(deploy, invalid), "field is immutable")

	leaky := apierrors.NewInvalid(schema.GroupKind{Kind: "Secret"}, "creds", field.ErrorList{
		field.Invalid(field.NewPath("data").Key("password"), "hunter2", "bad value hunter2")})
	secret := obj(t, "apiVersion: v1\nkind: Secret\nmetadata: {name: creds, namespace: ns}\n")
	got := plan.ErrorText(secret, leaky)
	assert.NotContains(t, got, "hunter2")
	assert.Contains(t, got, "data[password]")
	assert.Contains(t, got, string(metav1.CauseTypeFieldValueInvalid))
	assert.NotContains(t, plan.ErrorText(secret, errors.New("value hunter2 rejected")), "hunter2")
}
