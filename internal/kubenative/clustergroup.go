package kubenative

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/applier"
)

// clusterGroupHandler applies Fleet's ClusterGroups as `flotilla apply`
// does and deletes them as `flotilla delete clustergroup/NAME`.
// Flotilla's groups are global by name: a ClusterGroup whose name
// another namespace's ClusterGroup holds is refused (see nameHolder).
type clusterGroupHandler struct{ globalName }

// NewClusterGroupHandler returns the Handler of fleet.cattle.io
// ClusterGroups.
func NewClusterGroupHandler(d *Deps) Handler {
	return &clusterGroupHandler{newGlobalName(d, fleetClusterGroups, api.KindClusterGroup)}
}

// Apply stores the group's selector in its workflow.
func (h *clusterGroupHandler) Apply(ctx context.Context, obj *unstructured.Unstructured) error {
	return h.ev.report(ctx, obj, h.apply(ctx, obj))
}

func (h *clusterGroupHandler) apply(ctx context.Context, obj *unstructured.Unstructured) error {
	doc, err := documentOf(obj)
	if err != nil {
		return err
	}
	if err := checkName(ctx, h.d, h.gvr, obj); err != nil {
		return err
	}
	ap := &applier.Applier{Temporal: h.d.Temporal, TaskQueue: h.d.TaskQueue}
	if _, err := ap.Apply(ctx, doc); err != nil {
		return rejected(obj, err)
	}
	return nil
}
