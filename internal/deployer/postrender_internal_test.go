package deployer

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// staticMapper knows ConfigMap and Deployment (namespaced) and ClusterRole
// (cluster-scoped); every other kind is unknown to it, as a kind whose
// CRD the cluster does not serve yet is.
func staticMapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	m.Add(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, meta.RESTScopeNamespace)
	m.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, meta.RESTScopeNamespace)
	m.Add(schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"}, meta.RESTScopeRoot)
	return m
}

// The integration tests in render_test.go cover what reaches the cluster;
// these cover the document handling that a cluster cannot observe.
func TestPostRenderer_Run(t *testing.T) {
	tests := []struct {
		name string
		// rel supplies ForceNamespace, Labels and Annotations; Namespace is
		// always "rel".
		rel Release
		in  string
		// want is the exact output; wantErr, when set, is a substring of
		// the error instead (the error must wrap ErrInvalidRelease).
		want    string
		wantErr string
	}{
		{
			name: "unchanged documents are kept byte for byte, empty ones dropped",
			in: "---\n# Source: c/templates/a.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {z: \"1\", a: x}\n" +
				"---\n# Source: c/templates/empty.yaml\n# only a comment\n" +
				"---\n\n" +
				"---\n{}\n" +
				"---\n# Source: c/templates/b.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n",
			want: "---\n# Source: c/templates/a.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {z: \"1\", a: x}\n" +
				"---\n# Source: c/templates/b.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n",
		},
		{
			name: "edited documents keep their source comment and integers",
			rel:  Release{ForceNamespace: "forced", Labels: map[string]string{"flotilla.dev/bundle": "b", "app": "ours"}},
			in: "---\n# Source: c/templates/d.yaml\napiVersion: apps/v1\nkind: Deployment\n" +
				"metadata:\n  name: web\n  namespace: elsewhere\n  labels: {app: theirs, tier: web}\n" +
				"spec:\n  replicas: 1000000\n  revisionHistoryLimit: 0\n",
			want: "---\n# Source: c/templates/d.yaml\napiVersion: apps/v1\nkind: Deployment\n" +
				"metadata:\n  labels:\n    app: ours\n    flotilla.dev/bundle: b\n    tier: web\n  name: web\n  namespace: forced\n" +
				"spec:\n  replicas: 1000000\n  revisionHistoryLimit: 0\n",
		},
		{
			name: "items of a List are edited",
			rel:  Release{Annotations: map[string]string{"flotilla.dev/gitrepo": "r"}},
			in:   "apiVersion: v1\nkind: ConfigMapList\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: a}\n",
			want: "---\napiVersion: v1\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n" +
				"    annotations:\n      flotilla.dev/gitrepo: r\n    name: a\nkind: ConfigMapList\n",
		},
		{
			name: "CRDs are kept on uninstall",
			rel:  Release{Annotations: map[string]string{"flotilla.dev/gitrepo": "r"}},
			in: "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: widgets.example.com}\n" +
				"---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
			want: "---\napiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n" +
				"  annotations:\n    flotilla.dev/gitrepo: r\n    helm.sh/resource-policy: keep\n  name: widgets.example.com\n" +
				"---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  annotations:\n    flotilla.dev/gitrepo: r\n  name: a\n",
		},
		{
			name: "CRDs are not kept with DeleteCRDResources",
			rel:  Release{DeleteCRDResources: true},
			in:   "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: widgets.example.com}\n",
			want: "---\napiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: widgets.example.com}\n",
		},
		{
			name:    "cluster-scoped object with forced namespace",
			rel:     Release{ForceNamespace: "forced"},
			in:      "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: reader}\n",
			wantErr: "ClusterRole reader is cluster-scoped; forced namespace forced forbids it",
		},
		{
			name: "kind unknown to the cluster falls back to the built-in list",
			rel:  Release{ForceNamespace: "forced"},
			in: "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: fast}\n" +
				"---\napiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n",
			wantErr: "StorageClass fast is cluster-scoped",
		},
		{
			name:    "invalid label value names object, key and value",
			in:      "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  labels: {tier: \"bad value!\"}\n",
			wantErr: `Deployment rel/web: metadata.labels[tier]: Invalid value: "bad value!"`,
		},
		{
			name:    "non-string label value",
			in:      "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: x\n  labels: {version: 1.5}\n",
			wantErr: "ConfigMap x/a: metadata.labels[version]: Invalid value: 1.5: must be a string",
		},
		{
			name:    "invalid annotation key on a cluster-scoped object",
			in:      "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: reader\n  annotations: {\"bad key\": x}\n",
			wantErr: `ClusterRole reader: metadata.annotations[bad key]: Invalid value: "bad key"`,
		},
		{
			name:    "a document that is not an object",
			in:      "# Source: c/templates/list.yaml\n- a\n- b\n",
			wantErr: "document 1 (c/templates/list.yaml): not a YAML object",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rel := tt.rel
			rel.Namespace = "rel"
			p := &postRenderer{rel: rel, mapper: staticMapper(), scopes: map[schema.GroupKind]bool{}}

			out, err := p.Run(bytes.NewBufferString(tt.in))

			if tt.wantErr != "" {
				require.ErrorIs(t, err, ErrInvalidRelease)
				assert.ErrorContains(t, err, tt.wantErr)
				assert.Nil(t, out)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, out.String())
		})
	}
}
