package kubenative

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"
)

func TestTokenStateOf(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	past, future := now.Add(-time.Minute), now.Add(time.Minute)
	crt := &unstructured.Unstructured{}
	crt.SetUID("crt-uid")
	secret := func(owner k8stypes.UID, id string) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{{UID: owner}}}}
		if id != "" {
			s.Annotations = map[string]string{AnnotationTokenID: id}
		}
		return s
	}
	tests := []struct {
		name    string
		sec     *corev1.Secret
		expires *time.Time
		want    tokenState
	}{
		{name: "new", want: tokenNone},
		{name: "new, expires later", expires: &future, want: tokenNone},
		{name: "expired before made", expires: &past, want: tokenExpired},
		{name: "made", sec: secret("crt-uid", "abc"), want: tokenHeld},
		{name: "made, expired since", sec: secret("crt-uid", "abc"), expires: &past, want: tokenHeld},
		{name: "another owner's Secret", sec: secret("other", "abc"), want: tokenForeign},
		{name: "a Secret without a token", sec: secret("crt-uid", ""), want: tokenForeign},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tokenStateOf(crt, tt.sec, tt.expires, now))
		})
	}
}

func TestAgentValues(t *testing.T) {
	tests := []struct {
		name string
		reg  Registration
		want map[string]any
	}{
		{name: "token alone", want: map[string]any{"registration": map[string]any{"token": "flt.x.y"}}},
		{name: "temporal", reg: Registration{Address: "temporal:7233", Namespace: "default"},
			want: map[string]any{"registration": map[string]any{"token": "flt.x.y"}, "temporal": map[string]any{"address": "temporal:7233", "namespace": "default"}}},
		{name: "gateway", reg: Registration{Address: "flotilla:7243", Namespace: "default", Gateway: true},
			want: map[string]any{"registration": map[string]any{"token": "flt.x.y"}, "gateway": true,
				"temporal": map[string]any{"address": "flotilla:7243", "namespace": "default"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, err := agentValues(tt.reg, "flt.x.y")
			require.NoError(t, err)
			var got map[string]any
			require.NoError(t, yaml.Unmarshal(data, &got))
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestTokenExpiry(t *testing.T) {
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		spec    map[string]any
		want    *time.Time
		wantErr bool
	}{
		{name: "no ttl: never", spec: map[string]any{}},
		{name: "ttl 0: never", spec: map[string]any{"ttl": "0s"}},
		{name: "ttl", spec: map[string]any{"ttl": "12h"}, want: ptrTime(created.Add(12 * time.Hour))},
		{name: "negative", spec: map[string]any{"ttl": "-1h"}, wantErr: true},
		{name: "not a duration", spec: map[string]any{"ttl": "3d"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "fleet.cattle.io/v1alpha1", "kind": "ClusterRegistrationToken", "spec": tt.spec}}
			obj.SetCreationTimestamp(metav1.NewTime(created))
			got, err := tokenExpiry(obj)
			if tt.wantErr {
				var ref *RefusedError
				require.ErrorAs(t, err, &ref)
				assert.Equal(t, "spec.ttl", ref.Field)
				return
			}
			require.NoError(t, err)
			if tt.want == nil {
				assert.Nil(t, got)
				return
			}
			require.NotNil(t, got)
			assert.True(t, tt.want.Equal(*got), "%s != %s", tt.want, got)
		})
	}
}

func ptrTime(t time.Time) *time.Time { return &t }
