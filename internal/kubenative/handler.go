// Package kubenative serves Fleet's resources (fleet.cattle.io/v1alpha1)
// from a management cluster: it watches them, applies each to its
// Temporal workflow, runs deletions through finalizers and keeps their
// status current (internal/fleetstatus).
package kubenative

import (
	"context"

	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/flotilla-gitops/flotilla/internal/applier"
	"github.com/flotilla-gitops/flotilla/internal/fleetstatus"
)

// ManagedBy marks what the management controller applies (protocol's
// ManagedBy fields): the CLI may read such a resource, not change it.
const ManagedBy = "kubernetes"

// Handler reconciles the resources of one kind.
type Handler interface {
	// Apply brings Flotilla in line with obj (created or changed). It is
	// called again for the same generation after restarts and leader
	// changes, so it must be idempotent.
	Apply(ctx context.Context, obj *unstructured.Unstructured) error
	// Delete runs obj's deletion (obj carries a deletionTimestamp); the
	// finalizer is removed when it returns nil. done false asks to be
	// called again later (a deletion still in progress).
	Delete(ctx context.Context, obj *unstructured.Unstructured) (done bool, err error)
}

// Deps is what handlers share.
type Deps struct {
	Temporal  client.Client
	TaskQueue string
	Kube      kubernetes.Interface
	Dynamic   dynamic.Interface
	Logger    *zap.Logger
	// Sealer seals the Secrets the handlers store: the controller's own
	// newest sealing key (applier.KeySealer). Optional: nil seals to the
	// newest verified published key.
	Sealer applier.Sealer
	// Status keeps the resources' Fleet status; nil in unit tests.
	Status *fleetstatus.Writer
	// Registration is what token Secrets tell agents besides the token.
	Registration Registration
}
