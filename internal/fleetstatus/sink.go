package fleetstatus

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// fieldManager names Flotilla's writes.
const fieldManager = "flotilla"

// writeStatus writes the status project returns (given the conditions
// last written, for their timestamps) unless it is what was last written;
// at most once per MinInterval: pending reports a change that waits.
// The first call reads the object's status, so a restart or a new leader
// does not write an unchanged status again.
func (w *Writer) writeStatus(ctx context.Context, e *entry, ref Ref, project func(prev []Condition, now time.Time) (any, []Condition)) (pending bool, err error) {
	if !e.loaded {
		found, err := w.load(ctx, e, ref)
		if err != nil || !found {
			return false, err
		}
	}
	now := time.Now()
	v, conds := project(e.conds, now)
	b, err := canonical(v)
	if err != nil {
		return false, err
	}
	if bytes.Equal(b, e.written) {
		return false, nil
	}
	if now.Sub(e.lastWrite) < w.cfg.MinInterval || !w.current(e) {
		return true, nil
	}
	// The interval counts from the request, not from the read before it.
	writeAt := time.Now()
	if err := w.patchStatus(ctx, ref, b); err != nil {
		e.loaded = false // read the object again: it may be gone or another one
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, err
	}
	e.written, e.conds, e.lastWrite = b, conds, writeAt
	return false, nil
}

// load reads the object's status into e; found is false when there is
// no such object (or only one with another UID).
func (w *Writer) load(ctx context.Context, e *entry, ref Ref) (found bool, err error) {
	obj, err := w.cfg.Dynamic.Resource(gvrOf(ref.Kind)).Namespace(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read %s %s/%s: %w", ref.Kind, ref.Namespace, ref.Name, err)
	}
	if ref.UID != "" && obj.GetUID() != ref.UID {
		return false, nil
	}
	e.written, e.conds = nil, nil
	if st, ok := obj.Object["status"]; ok {
		if e.written, err = canonical(st); err != nil {
			return false, err
		}
		e.conds = conditionsOf(e.written)
	}
	e.loaded = true
	return true, nil
}

// patchStatus replaces the object's status (a JSON patch of the status
// subresource), testing its UID so that it never lands on another object
// of the same name.
func (w *Writer) patchStatus(ctx context.Context, ref Ref, statusJSON []byte) error {
	ops := []map[string]any{{"op": "add", "path": "/status", "value": json.RawMessage(statusJSON)}}
	if ref.UID != "" {
		ops = append([]map[string]any{{"op": "test", "path": "/metadata/uid", "value": string(ref.UID)}}, ops...)
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	_, err = w.cfg.Dynamic.Resource(gvrOf(ref.Kind)).Namespace(ref.Namespace).Patch(ctx, ref.Name, types.JSONPatchType,
		patch, metav1.PatchOptions{FieldManager: fieldManager}, "status")
	if err != nil {
		return fmt.Errorf("write the status of %s %s/%s: %w", ref.Kind, ref.Namespace, ref.Name, err)
	}
	return nil
}

// canonical is v's JSON with object keys sorted, so a status read back
// from the API server compares equal to the same status built here.
func canonical(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var generic any
	if err := json.Unmarshal(b, &generic); err != nil {
		return nil, err
	}
	return json.Marshal(generic)
}

// conditionsOf returns the conditions of a status's JSON (none when it
// has another shape: there are no timestamps to keep then).
func conditionsOf(statusJSON []byte) []Condition {
	var parsed struct {
		Conditions []Condition `json:"conditions"`
	}
	if json.Unmarshal(statusJSON, &parsed) != nil {
		return nil
	}
	return parsed.Conditions
}
