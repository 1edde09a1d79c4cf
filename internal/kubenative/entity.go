package kubenative

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/applier"
	"github.com/flotilla-gitops/flotilla/internal/bundle"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
)

// ReasonUnknownFields is the Warning event of a resource with fields
// Flotilla does not know (kept in the object, ignored).
const ReasonUnknownFields = "UnknownFields"

// entityHandler applies Fleet's GitRepos and HelmOps to their workflows,
// marked as managed from the cluster, after sealing the Secrets they
// name; deleting one runs the workflow's deletion (uninstall, or keep
// with spec.keepResources).
type entityHandler struct {
	d       *Deps
	ev      *eventLog
	secrets *secretSync
	mu      sync.Mutex
	// seen is, per object, the generation last applied and the one whose
	// unknown fields were told; deleting the objects whose workflow was
	// asked to delete.
	applied, warned map[types.UID]int64
	deleting        map[types.UID]bool
}

func newEntityHandler(d *Deps, ss *secretSync) *entityHandler {
	return &entityHandler{d: d, ev: newEventLog(d), secrets: ss,
		applied: map[types.UID]int64{}, warned: map[types.UID]int64{}, deleting: map[types.UID]bool{}}
}

func (h *entityHandler) applier() *applier.Applier {
	return &applier.Applier{Temporal: h.d.Temporal, TaskQueue: h.d.TaskQueue, Sealer: h.d.sealer(), ManagedBy: protocol.ManagedByKubernetes}
}

// Apply seals the Secrets obj names, applies its spec when its generation
// was not applied yet (an unchanged spec is "unchanged" in the workflow
// anyway), and carries out its approval annotations.
func (h *entityHandler) Apply(ctx context.Context, obj *unstructured.Unstructured) error {
	return h.ev.report(ctx, obj, h.apply(ctx, obj))
}

func (h *entityHandler) apply(ctx context.Context, obj *unstructured.Unstructured) error {
	doc, err := documentOf(obj)
	if err != nil {
		return err
	}
	if err := checkHelmOp(obj, &doc); err != nil {
		return err
	}
	h.warnUnknown(ctx, obj, doc.Warnings)
	refs := secretRefs(obj)
	names := make([]string, len(refs))
	for i, r := range refs {
		names[i] = obj.GetNamespace() + "/" + r.name
	}
	h.secrets.index(objKey{Kind: obj.GetKind(), Namespace: obj.GetNamespace(), Name: obj.GetName()}, names)
	if err := h.secrets.ensure(ctx, obj, refs); err != nil {
		return err
	}
	if h.due(obj) {
		verb, err := h.applier().Apply(ctx, doc)
		if err != nil {
			return rejected(obj, err)
		}
		h.mu.Lock()
		h.applied[obj.GetUID()] = obj.GetGeneration()
		h.mu.Unlock()
		h.d.Logger.Info("Applied", zap.String("kind", obj.GetKind()), zap.String("namespace", obj.GetNamespace()),
			zap.String("name", obj.GetName()), zap.Int64("generation", obj.GetGeneration()), zap.String("result", verb))
	}
	return Approve(ctx, h.d, obj)
}

// checkHelmOp checks a HelmOp's bundle part as `flotilla apply` does
// (bundle.CheckHelmOp): an invalid one is refused, unknown keys join the
// document's warnings.
func checkHelmOp(obj *unstructured.Unstructured, doc *api.Document) error {
	if doc.HelmOp == nil {
		return nil
	}
	unknown, err := bundle.CheckHelmOp(obj.GetKind(), obj.GetName(), doc.HelmOp.Spec.Bundle)
	if err != nil {
		return refusal(obj, "spec", ReasonInvalidSpec, err.Error())
	}
	for _, k := range unknown {
		doc.Warnings = append(doc.Warnings, fmt.Sprintf("HelmOp %s/%s: unknown field %q (ignored)", obj.GetNamespace(), obj.GetName(), "spec."+k))
	}
	return nil
}

// due reports whether obj's generation is still to be applied.
func (h *entityHandler) due(obj *unstructured.Unstructured) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	g, ok := h.applied[obj.GetUID()]
	return !ok || g != obj.GetGeneration()
}

// warnUnknown records one Warning event per generation naming the fields
// Flotilla ignores.
func (h *entityHandler) warnUnknown(ctx context.Context, obj *unstructured.Unstructured, warnings []string) {
	if len(warnings) == 0 {
		return
	}
	h.mu.Lock()
	told := h.warned[obj.GetUID()] == obj.GetGeneration()
	h.warned[obj.GetUID()] = obj.GetGeneration()
	h.mu.Unlock()
	if !told {
		recordEvent(ctx, h.d, obj, corev1.EventTypeWarning, ReasonUnknownFields, strings.Join(warnings, "; "))
	}
}

// Delete asks the workflow to delete (once per object) and is done once
// it has ended.
func (h *entityHandler) Delete(ctx context.Context, obj *unstructured.Unstructured) (bool, error) {
	kind, ns, name, uid := obj.GetKind(), obj.GetNamespace(), obj.GetName(), obj.GetUID()
	ap := h.applier()
	h.mu.Lock()
	asked := h.deleting[uid]
	h.mu.Unlock()
	if !asked {
		if err := ap.Delete(ctx, kind, ns, name); err != nil && !errors.Is(err, applier.ErrNotFound) {
			return false, err
		}
		h.mu.Lock()
		h.deleting[uid] = true
		h.mu.Unlock()
	}
	ended, err := ap.Ended(ctx, kind, ns, name)
	if err != nil || !ended {
		return false, err
	}
	h.mu.Lock()
	delete(h.applied, uid)
	delete(h.warned, uid)
	delete(h.deleting, uid)
	h.mu.Unlock()
	return true, nil
}

// policyHandler applies GitRepoRestrictions and Policies
// (internal/policy) and deletes them.
type policyHandler struct {
	d  *Deps
	ev *eventLog
}

func (h policyHandler) Apply(ctx context.Context, obj *unstructured.Unstructured) error {
	return h.ev.report(ctx, obj, h.apply(ctx, obj))
}

func (h policyHandler) apply(ctx context.Context, obj *unstructured.Unstructured) error {
	doc, err := documentOf(obj)
	if err != nil {
		return err
	}
	ap := &applier.Applier{Temporal: h.d.Temporal, TaskQueue: h.d.TaskQueue}
	if _, err := ap.Apply(ctx, doc); err != nil {
		return rejected(obj, err)
	}
	return nil
}

func (h policyHandler) Delete(ctx context.Context, obj *unstructured.Unstructured) (bool, error) {
	ap := &applier.Applier{Temporal: h.d.Temporal, TaskQueue: h.d.TaskQueue}
	err := ap.Delete(ctx, obj.GetKind(), obj.GetNamespace(), obj.GetName())
	if err != nil && !errors.Is(err, applier.ErrNotFound) {
		return false, err
	}
	return true, nil
}
