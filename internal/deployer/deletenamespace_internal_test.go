package deployer

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestOtherOwner(t *testing.T) {
	del := NamespaceDeletion{Namespace: "apps", Release: "app", Labels: map[string]string{"flotilla.dev/bundle": "mine"}}
	helm := func(name, namespace string) map[string]string {
		return map[string]string{releaseNameAnnotation: name, releaseNamespaceAnnotation: namespace}
	}
	tests := []struct {
		name        string
		labels      map[string]string
		annotations map[string]string
		// record says the object is a Secret or ConfigMap.
		record bool
		// want is why the object keeps the namespace; "" when it does not.
		want string
	}{
		{name: "unmarked object"},
		{name: "the release's object", annotations: helm("app", "apps"), labels: map[string]string{"flotilla.dev/bundle": "mine"}},
		{name: "the release's object without a namespace annotation", annotations: map[string]string{releaseNameAnnotation: "app"}},
		{name: "the release's record", record: true, labels: map[string]string{"owner": "helm", "name": "app"}},
		{name: "another release's record", record: true, labels: map[string]string{"owner": "helm", "name": "other-app", "status": "deployed"},
			want: "it holds release other-app's objects (Secret s)"},
		{name: "a record label on what is no record", labels: map[string]string{"owner": "helm", "name": "other-app"}},
		{name: "another release's object", annotations: helm("other-app", "apps"),
			want: "it holds release other-app's objects (Secret s)"},
		{name: "a same-named release of another namespace", annotations: helm("app", "elsewhere"),
			want: "it holds release elsewhere/app's objects (Secret s)"},
		{name: "another bundle's object", labels: map[string]string{"flotilla.dev/bundle": "other"},
			want: "it holds objects labelled flotilla.dev/bundle=other (Secret s)"},
		{name: "another label", labels: map[string]string{"app": "other"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := &metav1.ObjectMeta{Name: "s", Labels: tt.labels, Annotations: tt.annotations}
			o := del.otherOwner(obj, tt.record)
			if tt.want == "" {
				assert.Equal(t, owner{}, o)
				return
			}
			assert.Equal(t, tt.want, o.of("Secret s"))
		})
	}
}
