package fleetstatus

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/flotilla-gitops/flotilla/internal/status"
)

// syncMirrors makes owner's Bundle mirrors what st says, at most once per
// MinInterval: it creates missing ones, reverts edited ones (metadata and
// spec as found on the server; status when it differs from what was last
// written) and deletes those of bundles that are gone. pending reports
// work that waits for MinInterval.
func (w *Writer) syncMirrors(ctx context.Context, e *entry, owner Ref, st status.GitRepo) (pending bool, err error) {
	if !w.current(e) {
		return false, nil // forgotten: its mirrors are being deleted
	}
	if time.Since(e.mirrorWrite) < w.cfg.MinInterval {
		return true, nil
	}
	res := w.cfg.Dynamic.Resource(gvrOf(KindBundle)).Namespace(owner.Namespace)
	list, err := res.List(ctx, metav1.ListOptions{LabelSelector: mirrorSelector(owner)})
	if err != nil {
		return false, fmt.Errorf("list the bundle mirrors of %s %s/%s: %w", owner.Kind, owner.Namespace, owner.Name, err)
	}
	have := map[string]*unstructured.Unstructured{}
	for i := range list.Items {
		have[list.Items[i].GetName()] = &list.Items[i]
	}
	if e.mirrors == nil {
		e.mirrors = map[string][]byte{}
	}
	wrote := false
	for _, m := range Mirrors(owner, st) {
		name := m.Object.GetName()
		n, p, err := w.syncMirror(ctx, res, e, m, have[name])
		if err != nil {
			return false, err
		}
		wrote, pending = wrote || n, pending || p
		delete(have, name)
	}
	for name := range have {
		if err := res.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("delete bundle mirror %s/%s: %w", owner.Namespace, name, err)
		}
		delete(e.mirrors, name)
		wrote = true
	}
	if wrote {
		e.mirrorWrite = time.Now()
	}
	return pending, nil
}

// syncMirror makes one request at most for one mirror (live: the object
// on the server, nil if none): it creates it, or reverts its metadata and
// spec, or writes its status; so a mirror, too, is written at most once
// per MinInterval. wrote reports a request, pending a status still to
// write.
func (w *Writer) syncMirror(ctx context.Context, res dynamic.ResourceInterface, e *entry, m Mirror, live *unstructured.Unstructured) (wrote, pending bool, err error) {
	name := m.Object.GetName()
	switch {
	case live == nil:
		delete(e.mirrors, name)
		_, err = res.Create(ctx, m.Object, metav1.CreateOptions{FieldManager: fieldManager})
		if apierrors.IsAlreadyExists(err) {
			// An object of that name without the mirror label: a
			// mirror someone relabelled is taken back; anything else is
			// not Flotilla's to touch.
			if live, err = res.Get(ctx, name, metav1.GetOptions{}); err == nil && live.GetAnnotations()[MirrorKey] == MirrorReadOnly {
				_, err = res.Update(ctx, reverted(live, m.Object), metav1.UpdateOptions{FieldManager: fieldManager})
			}
		}
		return true, true, wrapMirrorErr(err, m)
	case !sameMirror(live, m.Object):
		_, err = res.Update(ctx, reverted(live, m.Object), metav1.UpdateOptions{FieldManager: fieldManager})
		return true, true, wrapMirrorErr(err, m)
	}
	m.Status.Conditions = Stamp(m.Status.Conditions, statusConditions(live), time.Now())
	b, err := canonical(m.Status)
	if err != nil || bytes.Equal(b, e.mirrors[name]) {
		return false, false, err
	}
	obj := live.DeepCopy()
	var st map[string]any
	if err := json.Unmarshal(b, &st); err != nil {
		return false, false, err
	}
	obj.Object["status"] = st
	if _, err := res.UpdateStatus(ctx, obj, metav1.UpdateOptions{FieldManager: fieldManager}); err != nil {
		return true, false, fmt.Errorf("write the status of bundle mirror %s/%s: %w", m.Object.GetNamespace(), name, err)
	}
	e.mirrors[name] = b
	return true, false, nil
}

// reverted is live with want's labels, annotations, owner references and
// spec.
func reverted(live, want *unstructured.Unstructured) *unstructured.Unstructured {
	obj := live.DeepCopy()
	obj.SetLabels(want.GetLabels())
	obj.SetAnnotations(want.GetAnnotations())
	obj.SetOwnerReferences(want.GetOwnerReferences())
	obj.Object["spec"] = want.Object["spec"]
	return obj
}

func wrapMirrorErr(err error, m Mirror) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("write bundle mirror %s/%s: %w", m.Object.GetNamespace(), m.Object.GetName(), err)
}

// sameMirror reports whether live has want's labels, annotations, owner
// references and spec.
func sameMirror(live, want *unstructured.Unstructured) bool {
	return reflect.DeepEqual(live.GetLabels(), want.GetLabels()) &&
		reflect.DeepEqual(live.GetAnnotations(), want.GetAnnotations()) &&
		reflect.DeepEqual(live.GetOwnerReferences(), want.GetOwnerReferences()) &&
		reflect.DeepEqual(live.Object["spec"], want.Object["spec"])
}

func statusConditions(obj *unstructured.Unstructured) []Condition {
	raw, ok := obj.Object["status"]
	if !ok {
		return nil
	}
	b, err := canonical(raw)
	if err != nil {
		return nil
	}
	return conditionsOf(b)
}

// deleteMirrors deletes the Bundle mirrors of a forgotten owner (the
// garbage collector would, on a cluster that runs one), one by one: the
// chart grants list and delete, not deletecollection.
func (w *Writer) deleteMirrors(ctx context.Context, owner Ref) {
	res := w.cfg.Dynamic.Resource(gvrOf(KindBundle)).Namespace(owner.Namespace)
	list, err := res.List(ctx, metav1.ListOptions{LabelSelector: mirrorSelector(owner)})
	for i := 0; err == nil && i < len(list.Items); i++ {
		if err = res.Delete(ctx, list.Items[i].GetName(), metav1.DeleteOptions{}); apierrors.IsNotFound(err) {
			err = nil
		}
	}
	if err != nil {
		w.cfg.Logger.Warn("Failed to delete bundle mirrors", refField(owner), zap.Error(err))
	}
}
