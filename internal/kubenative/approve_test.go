package kubenative

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/flotilla-gitops/flotilla/internal/protocol"
)

func TestParseApprovals(t *testing.T) {
	tests := []struct {
		name string
		ann  map[string]string
		want []approval
		// wantErr is a substring of the error, "" for none.
		wantErr string
	}{
		{name: "none", ann: map[string]string{"other": "x"}},
		{name: "every waiting partition", ann: map[string]string{AnnotationApprove: "*"},
			want: []approval{{key: AnnotationApprove, value: "*"}}},
		{name: "one partition", ann: map[string]string{AnnotationApprove: "canary"},
			want: []approval{{key: AnnotationApprove, value: "canary", partitions: protocol.Approve{Partition: "canary"}}}},
		{name: "one bundle's partition", ann: map[string]string{AnnotationApprove: "app/canary"},
			want: []approval{{key: AnnotationApprove, value: "app/canary", partitions: protocol.Approve{Bundle: "app", Partition: "canary"}}}},
		{name: "spaces around", ann: map[string]string{AnnotationApprove: " canary "},
			want: []approval{{key: AnnotationApprove, value: " canary ", partitions: protocol.Approve{Partition: "canary"}}}},
		{name: "deletions", ann: map[string]string{AnnotationApproveDeletions: "true"},
			want: []approval{{key: AnnotationApproveDeletions, value: "true", deletions: true}}},
		{name: "deletions then partitions", ann: map[string]string{AnnotationApproveDeletions: "true", AnnotationApprove: "*"},
			want: []approval{{key: AnnotationApproveDeletions, value: "true", deletions: true}, {key: AnnotationApprove, value: "*"}}},
		{name: "empty", ann: map[string]string{AnnotationApprove: ""}, wantErr: "metadata.annotations[flotilla.dev/approve]"},
		{name: "empty bundle", ann: map[string]string{AnnotationApprove: "/canary"}, wantErr: "BUNDLE/PARTITION"},
		{name: "empty partition", ann: map[string]string{AnnotationApprove: "app/"}, wantErr: "BUNDLE/PARTITION"},
		{name: "two slashes", ann: map[string]string{AnnotationApprove: "a/b/c"}, wantErr: "BUNDLE/PARTITION"},
		{name: "bundle wildcard", ann: map[string]string{AnnotationApprove: "*/canary"}, wantErr: "BUNDLE/PARTITION"},
		{name: "deletions false", ann: map[string]string{AnnotationApproveDeletions: "false"}, wantErr: "approve-deletions"},
		{name: "a valid one stays with an invalid one", ann: map[string]string{AnnotationApproveDeletions: "yes", AnnotationApprove: "*"},
			want: []approval{{key: AnnotationApprove, value: "*"}}, wantErr: "approve-deletions"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseApprovals(tt.ann)
			if tt.wantErr == "" {
				require.NoError(t, err)
			} else {
				require.ErrorContains(t, err, tt.wantErr)
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

// managed returns a GitRepo whose annotation key was set by manager at t.
func managed(uid, key, manager string, t time.Time) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{}
	obj.SetUID(k8stypes.UID(uid))
	obj.SetAnnotations(map[string]string{key: "*"})
	mt := metav1.NewTime(t)
	obj.SetManagedFields([]metav1.ManagedFieldsEntry{
		{Manager: "other", Time: &mt, FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:repo":{}}}`)},
		{Manager: manager, Time: &mt, FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:annotations":{"f:` + key + `":{}}}}`)},
	})
	return obj
}

// One approval ID per setting of an annotation: the same setting gives the
// same ID (a retry is deduplicated), a later setting, another value,
// another annotation or another resource a new one.
func TestApprovalID(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	a := approval{key: AnnotationApprove, value: "*"}
	base := approvalID(managed("u1", AnnotationApprove, "kubectl", t0), a)
	assert.Equal(t, base, approvalID(managed("u1", AnnotationApprove, "kubectl", t0), a), "a retry")
	for name, id := range map[string]string{
		"set again later":    approvalID(managed("u1", AnnotationApprove, "kubectl", t0.Add(time.Second)), a),
		"another value":      approvalID(managed("u1", AnnotationApprove, "kubectl", t0), approval{key: AnnotationApprove, value: "canary"}),
		"another resource":   approvalID(managed("u2", AnnotationApprove, "kubectl", t0), a),
		"another annotation": approvalID(managed("u1", AnnotationApproveDeletions, "kubectl", t0), approval{key: AnnotationApproveDeletions, value: "*"}),
	} {
		assert.NotEqual(t, base, id, name)
	}
	assert.Equal(t, " (set by kubectl)", setBy(managed("u1", AnnotationApprove, "kubectl", t0), AnnotationApprove))
	assert.Empty(t, setBy(&unstructured.Unstructured{}, AnnotationApprove), "no managedFields: no one named")
	assert.Equal(t, protocol.Identity{User: "kubectl", Via: "kubernetes"}, approver(managed("u1", AnnotationApprove, "kubectl", t0), AnnotationApprove))
	assert.Equal(t, protocol.Identity{Via: "kubernetes"}, approver(&unstructured.Unstructured{}, AnnotationApprove))
}
