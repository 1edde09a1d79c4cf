package drift

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	jsonpatch "github.com/evanphx/json-patch"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// FieldManager is the field manager of drift dry runs.
const FieldManager = "flotilla-drift"

// DryRun returns the object a forced server-side apply of desired would
// leave in the cluster (DryRun: All, Force: true, FieldManager), through
// dyn. desired is not modified. A namespaced object needs a namespace; a
// cluster-scoped one is applied without any.
//
// The body sent is a copy of desired without status and without the
// metadata the server maintains (serverMetadata), which an apply body must
// not carry: the server rejects managedFields, and treats resourceVersion
// and uid as preconditions that a manifest read from the cluster would
// fail. The result still carries managedFields and status; Compare drops
// them.
//
// When the server finds the applied object invalid, DryRun falls back to
// a dry-run update (see dryRunReplace). Server-side apply merges
// associative lists by key, keeping elements other managers own: after a
// Service port or container port was changed by hand, Git's element is
// added next to the hand-made one, and the two clash (a duplicate port
// name). What Git wants is then its list instead of the live one.
func DryRun(ctx context.Context, dyn dynamic.Interface, gvr schema.GroupVersionResource, namespaced bool, desired *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if desired == nil {
		return nil, errors.New("drift: dry run of a nil object")
	}
	obj := desired.DeepCopy()
	delete(obj.Object, "status")
	dropMetadata(obj.Object, serverMetadata...)
	namespace := ""
	if namespaced {
		namespace = obj.GetNamespace()
		if namespace == "" {
			return nil, fmt.Errorf("drift: dry run of %s %q: namespaced object without a namespace", gvr.Resource, obj.GetName())
		}
	} else {
		obj.SetNamespace("")
	}
	client := dyn.Resource(gvr).Namespace(namespace)
	out, err := client.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{
		FieldManager: FieldManager,
		Force:        true,
		DryRun:       []string{metav1.DryRunAll},
	})
	if apierrors.IsInvalid(err) {
		var fallbackErr error
		if out, fallbackErr = dryRunReplace(ctx, client, obj); fallbackErr == nil {
			return out, nil
		}
		err = fmt.Errorf("%w (and as an update: %w)", err, fallbackErr)
	}
	if err != nil {
		return nil, fmt.Errorf("drift: dry-run apply of %s %s/%s: %w", gvr.Resource, namespace, obj.GetName(), err)
	}
	return out, nil
}

// dryRunReplace returns the object a dry-run update would leave: the live
// object with body merged in as a JSON merge patch (RFC 7386: maps merge,
// lists are replaced whole), so that fields Git does not set keep their
// live values and lists Git sets are exactly Git's. body's nulls are
// dropped first: they would delete fields, and a null is not an opinion.
func dryRunReplace(ctx context.Context, client dynamic.ResourceInterface, body *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	live, err := client.Get(ctx, body.GetName(), metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	delete(live.Object, "status")
	dropMetadata(live.Object, "managedFields")
	want := body.DeepCopy()
	dropNulls(want.Object)
	liveJSON, err := json.Marshal(live.Object)
	if err != nil {
		return nil, err
	}
	wantJSON, err := json.Marshal(want.Object)
	if err != nil {
		return nil, err
	}
	merged, err := jsonpatch.MergePatch(liveJSON, wantJSON)
	if err != nil {
		return nil, err
	}
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(merged); err != nil {
		return nil, err
	}
	return client.Update(ctx, obj, metav1.UpdateOptions{FieldManager: FieldManager, DryRun: []string{metav1.DryRunAll}})
}
