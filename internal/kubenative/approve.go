package kubenative

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/applier"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

// The approval annotations of GitRepos and HelmOps: what `flotilla
// approve` does, from kubectl.
const (
	// AnnotationApprove releases partitions waiting for approval: "*"
	// every one waiting now, "PARTITION" that partition (also before the
	// rollout reaches it), "BUNDLE/PARTITION" that partition of one
	// bundle.
	AnnotationApprove = "flotilla.dev/approve"
	// AnnotationApproveDeletions "true" lets the uninstalls the deletion
	// guard holds go (`flotilla approve --deletions`).
	AnnotationApproveDeletions = "flotilla.dev/approve-deletions"
)

// Event reasons of approvals.
const (
	ReasonApproved        = "Approved"
	ReasonNotApproved     = "NotApproved"
	ReasonInvalidApproval = "InvalidApproval"
)

// approval is one annotation's request.
type approval struct {
	// key is the annotation, value its value.
	key, value string
	// deletions: approve held uninstalls; else partitions.
	deletions  bool
	partitions protocol.Approve
}

// parseApprovals reads the approval annotations; an invalid value is an
// error naming the annotation (the annotation is then dropped unapplied).
func parseApprovals(ann map[string]string) ([]approval, error) {
	var out []approval
	var errs []error
	if v, ok := ann[AnnotationApproveDeletions]; ok {
		switch strings.TrimSpace(v) {
		case "true":
			out = append(out, approval{key: AnnotationApproveDeletions, value: v, deletions: true})
		default:
			errs = append(errs, fmt.Errorf("metadata.annotations[%s]: %q: want \"true\"", AnnotationApproveDeletions, v))
		}
	}
	if v, ok := ann[AnnotationApprove]; ok {
		a, err := parseApprove(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("metadata.annotations[%s]: %q: %w", AnnotationApprove, v, err))
		} else {
			out = append(out, approval{key: AnnotationApprove, value: v, partitions: a})
		}
	}
	return out, errors.Join(errs...)
}

// parseApprove reads AnnotationApprove's value.
func parseApprove(v string) (protocol.Approve, error) {
	v = strings.TrimSpace(v)
	if v == "*" {
		return protocol.Approve{}, nil
	}
	bundle, partition, hasBundle := strings.Cut(v, "/")
	if !hasBundle {
		bundle, partition = "", v
	}
	if partition == "" || hasBundle && bundle == "" || strings.ContainsAny(partition, "/*") || strings.Contains(bundle, "*") {
		return protocol.Approve{}, errors.New(`want "*", "PARTITION" or "BUNDLE/PARTITION"`)
	}
	return protocol.Approve{Bundle: bundle, Partition: partition}, nil
}

// Approve carries out the approval annotations of obj, a GitRepo or
// HelmOp, as `flotilla approve` would, then removes them and records an
// Event naming who set them (the field manager). Each annotation value is
// applied once: the update carries an ID derived from the resource, the
// annotation, its value and when it was set, so a retry after a crash
// before the annotation was removed is deduplicated by Temporal; the
// removal is conditional on the value, so a new value set meanwhile is
// kept for the next call. An invalid value is removed with a Warning
// event. Errors are left for the caller to retry (the annotation stays).
func Approve(ctx context.Context, d *Deps, obj *unstructured.Unstructured) error {
	ann := obj.GetAnnotations()
	_, hasA := ann[AnnotationApprove]
	_, hasD := ann[AnnotationApproveDeletions]
	if !hasA && !hasD {
		return nil
	}
	approvals, perr := parseApprovals(ann)
	for _, a := range approvals {
		who := setBy(obj, a.key)
		msg, err := runApproval(ctx, d, obj, a)
		var nothing *nothingWaits
		evType, reason := corev1.EventTypeNormal, ReasonApproved
		switch {
		case errors.As(err, &nothing):
			evType, reason, msg = corev1.EventTypeWarning, ReasonNotApproved, nothing.msg
		case err != nil:
			return err
		}
		// The event follows the annotation's removal: a removal that
		// conflicts is retried with the approval (the same update ID
		// approves nothing twice), and the event is then recorded once.
		if err := removeAnnotation(ctx, d, obj, a.key, a.value); err != nil {
			return err
		}
		recordEvent(ctx, d, obj, evType, reason, fmt.Sprintf("%s=%q%s: %s", a.key, a.value, who, msg))
	}
	if perr != nil {
		recordEvent(ctx, d, obj, corev1.EventTypeWarning, ReasonInvalidApproval, perr.Error())
		for _, key := range []string{AnnotationApprove, AnnotationApproveDeletions} {
			if v, ok := ann[key]; ok && !applied(approvals, key) {
				if err := removeAnnotation(ctx, d, obj, key, v); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func applied(as []approval, key string) bool {
	for _, a := range as {
		if a.key == key {
			return true
		}
	}
	return false
}

// nothingWaits: the approval found nothing to act on (no rollout runs).
type nothingWaits struct{ msg string }

func (e *nothingWaits) Error() string { return e.msg }

// runApproval sends the approval's update and says what it released.
func runApproval(ctx context.Context, d *Deps, obj *unstructured.Unstructured, a approval) (string, error) {
	id := applier.WorkflowID(obj.GetKind(), obj.GetNamespace(), obj.GetName())
	if id == "" {
		return "", fmt.Errorf("approve %s %s/%s: not a GitRepo or HelmOp", obj.GetKind(), obj.GetNamespace(), obj.GetName())
	}
	uid := approvalID(obj, a)
	who := approver(obj, a.key)
	if a.deletions {
		res, err := update(ctx, d, id, uid, protocol.UpdateApproveDeletions, protocol.Approve{Identity: who})
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("approved %d held uninstall(s): %s", len(res.Approved), strings.Join(res.Approved, ", ")), nil
	}
	v, err := d.Temporal.QueryWorkflow(ctx, id, "", protocol.QueryStatus)
	if err != nil {
		return "", fmt.Errorf("query %s: %w", id, err)
	}
	var st status.GitRepo
	if err := v.Get(&st); err != nil {
		return "", fmt.Errorf("query %s: %w", id, err)
	}
	if st.Rollout == "" {
		return "", &nothingWaits{msg: "no rollout is running; nothing waits for approval"}
	}
	a.partitions.Identity = who
	res, err := update(ctx, d, st.Rollout, uid, protocol.UpdateApprove, a.partitions)
	if err != nil {
		return "", err
	}
	if len(res.Approved) == 0 {
		return "", &nothingWaits{msg: "rollout " + st.Rollout + ": no partition is waiting for approval"}
	}
	return "rollout " + st.Rollout + ": approved " + strings.Join(res.Approved, ", "), nil
}

// update sends an approval update with updateID (Temporal runs one
// update of an ID once per workflow run). A rejected update is a
// nothingWaits with the workflow's message.
func update(ctx context.Context, d *Deps, wfID, updateID, name string, args ...any) (protocol.ApproveResult, error) {
	var res protocol.ApproveResult
	h, err := d.Temporal.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: wfID, UpdateID: updateID, UpdateName: name,
		Args: args, WaitForStage: client.WorkflowUpdateStageCompleted})
	if err == nil {
		err = h.Get(ctx, &res)
	}
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) {
		return res, &nothingWaits{msg: ae.Message()}
	}
	if err != nil {
		return res, fmt.Errorf("%s %s: %w", name, wfID, err)
	}
	return res, nil
}

// approvalID identifies one setting of an approval annotation: the
// resource's UID, the annotation, its value and when its manager last
// set it (managedFields), so setting the same value again later is a new
// approval, and retrying this one is not.
func approvalID(obj *unstructured.Unstructured, a approval) string {
	h := sha256.New()
	for _, s := range []string{string(obj.GetUID()), a.key, a.value, setAt(obj, a.key)} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return "kubernetes-approve-" + hex.EncodeToString(h.Sum(nil))[:32]
}

// managerOf returns the managedFields entry that owns annotation key.
func managerOf(obj *unstructured.Unstructured, key string) *metav1.ManagedFieldsEntry {
	path := "f:" + key
	var found *metav1.ManagedFieldsEntry
	for _, m := range obj.GetManagedFields() {
		if m.FieldsV1 == nil {
			continue
		}
		var fs map[string]any
		if json.Unmarshal(m.FieldsV1.GetRawBytes(), &fs) != nil {
			continue
		}
		md, _ := fs["f:metadata"].(map[string]any)
		an, _ := md["f:annotations"].(map[string]any)
		if _, ok := an[path]; ok && (found == nil || m.Time != nil && found.Time != nil && found.Time.Before(m.Time)) {
			e := m
			found = &e
		}
	}
	return found
}

// setBy is " (set by MANAGER)" when managedFields tell who set key.
func setBy(obj *unstructured.Unstructured, key string) string {
	if m := managerOf(obj, key); m != nil && m.Manager != "" {
		return " (set by " + m.Manager + ")"
	}
	return ""
}

// approver is who approved through annotation key, as the history
// records it: via kubernetes, by the field manager that set it (the
// Kubernetes API knows no more of the user here).
func approver(obj *unstructured.Unstructured, key string) protocol.Identity {
	who := protocol.Identity{Via: "kubernetes"}
	if m := managerOf(obj, key); m != nil {
		who.User = m.Manager
	}
	return who
}

// setAt is when key's manager last wrote it, "" when unknown.
func setAt(obj *unstructured.Unstructured, key string) string {
	if m := managerOf(obj, key); m != nil && m.Time != nil {
		return m.Manager + "@" + m.Time.UTC().Format("2006-01-02T15:04:05Z")
	}
	return ""
}

// removeAnnotation removes annotation key from obj if it still has
// value (a JSON patch with a test): a value set meanwhile stays.
func removeAnnotation(ctx context.Context, d *Deps, obj *unstructured.Unstructured, key, value string) error {
	p := "/metadata/annotations/" + strings.ReplaceAll(strings.ReplaceAll(key, "~", "~0"), "/", "~1")
	patch, _ := json.Marshal([]map[string]any{{"op": "test", "path": p, "value": value}, {"op": "remove", "path": p}})
	gvr := schema.GroupVersionResource{Group: "fleet.cattle.io", Version: "v1alpha1", Resource: resourceOf(obj.GetKind())}
	_, err := d.Dynamic.Resource(gvr).Namespace(obj.GetNamespace()).Patch(ctx, obj.GetName(), types.JSONPatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsInvalid(err) {
		// Gone, or the test failed: the annotation changed meanwhile and
		// the next call handles the new value.
		return nil
	}
	if err != nil {
		return fmt.Errorf("remove annotation %s from %s %s/%s: %w", key, obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}

func resourceOf(kind string) string {
	if kind == api.KindHelmOp {
		return "helmops"
	}
	return "gitrepos"
}
