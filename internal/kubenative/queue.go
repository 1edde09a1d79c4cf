package kubenative

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/crds"
	"github.com/flotilla-gitops/flotilla/internal/fleetstatus"
)

// Finalizers: Fleet's own names where Fleet has one (a Fleet controller
// scaled to 0 leaves them, and Flotilla takes them over), Flotilla's for
// the kinds Fleet deletes without one.
const (
	FinalizerGitRepo = "fleet.cattle.io/gitrepo-finalizer"
	FinalizerHelmOp  = "fleet.cattle.io/helmop-finalizer"
	FinalizerCluster = "fleet.cattle.io/cluster-finalizer"
	FinalizerOther   = "flotilla.dev/management-finalizer"
)

// deletionPoll is how often a deletion in progress is looked at again.
const deletionPoll = 3 * time.Second

// served is one kind the controller serves: its handler and finalizer.
type served struct {
	kind, finalizer string
	handler         Handler
	lister          cache.GenericLister
}

// objKey names one watched object; Kind "Secret" is a core Secret.
type objKey struct{ Kind, Namespace, Name string }

func (k objKey) String() string { return k.Kind + " " + k.Namespace + "/" + k.Name }

// kindSecret is the key kind of core Secrets.
const kindSecret = "Secret"

// controller runs the informers and the workqueue of one leadership.
type controller struct {
	d     *Deps
	queue workqueue.TypedRateLimitingInterface[objKey]
	kinds map[string]*served
	dyn   dynamicinformer.DynamicSharedInformerFactory
	core  informers.SharedInformerFactory
	// labelled watches the ConfigMaps labelled LabelDownstream.
	labelled   informers.SharedInformerFactory
	secrets    *secretSync
	configMaps *configMapSync
	// refused are the objects shown Accepted=False by the controller.
	mu      sync.Mutex
	refused map[objKey]bool
}

// handlerTable lists the kinds served, their finalizers and handlers.
func handlerTable(d *Deps, ss *secretSync) []served {
	entity := newEntityHandler(d, ss)
	return []served{
		{kind: api.KindGitRepo, finalizer: FinalizerGitRepo, handler: entity},
		{kind: api.KindHelmOp, finalizer: FinalizerHelmOp, handler: entity},
		{kind: api.KindCluster, finalizer: FinalizerCluster, handler: newClusterHandler(d, ss)},
		{kind: api.KindClusterGroup, finalizer: FinalizerOther, handler: NewClusterGroupHandler(d)},
		{kind: "ClusterRegistrationToken", finalizer: FinalizerOther, handler: NewTokenHandler(d)},
		{kind: api.KindGitRepoRestriction, finalizer: FinalizerOther, handler: policyHandler{d: d, ev: newEventLog(d)}},
		{kind: api.KindPolicy, finalizer: FinalizerOther, handler: policyHandler{d: d, ev: newEventLog(d)}},
	}
}

// newController sets up informers for the served kinds whose CRDs the
// management cluster has (a missing one is logged and skipped) and for
// Secrets.
func newController(d *Deps, resync time.Duration) (*controller, error) {
	have, err := servedResources(d)
	if err != nil {
		return nil, err
	}
	c := &controller{d: d, kinds: map[string]*served{}, refused: map[objKey]bool{},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[objKey](),
			workqueue.TypedRateLimitingQueueConfig[objKey]{Name: "flotilla-management"}),
		dyn:  dynamicinformer.NewDynamicSharedInformerFactory(d.Dynamic, resync),
		core: informers.NewSharedInformerFactory(d.Kube, resync),
		labelled: informers.NewSharedInformerFactoryWithOptions(d.Kube, resync,
			informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = LabelDownstream + "=true" })),
	}
	c.secrets = newSecretSync(d, c.core.Core().V1().Secrets().Lister())
	c.configMaps = newConfigMapSync(d, c.labelled.Core().V1().ConfigMaps().Lister())
	for _, s := range handlerTable(d, c.secrets) {
		k, ok := have[s.kind]
		if !ok {
			d.Logger.Warn("The management cluster has no CRD of this kind; it is not served", zap.String("kind", s.kind))
			continue
		}
		inf := c.dyn.ForResource(k.GroupVersionResource())
		s.lister = inf.Lister()
		c.kinds[s.kind] = &s
		if _, err := inf.Informer().AddEventHandler(c.objectEvents(s.kind)); err != nil {
			return nil, err
		}
	}
	if len(c.kinds) == 0 {
		// Tried again by the leader (CRDs may be installed after the
		// controller started).
		return nil, fmt.Errorf("the management cluster serves none of %s/%s's kinds: install the CRDs (kubectl apply -f %s)",
			crds.Group, crds.Version, crds.ChartDir)
	}
	if _, err := c.core.Core().V1().Secrets().Informer().AddEventHandler(c.secretEvents()); err != nil {
		return nil, err
	}
	if _, err := c.labelled.Core().V1().ConfigMaps().Informer().AddEventHandler(c.objectEvents(kindConfigMap)); err != nil {
		return nil, err
	}
	return c, nil
}

// servedResources returns the kinds of crds.Kinds the management cluster
// serves.
func servedResources(d *Deps) (map[string]crds.Kind, error) {
	list, err := d.Kube.Discovery().ServerResourcesForGroupVersion(crds.Group + "/" + crds.Version)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("management cluster: discover %s/%s: %w", crds.Group, crds.Version, err)
	}
	out := map[string]crds.Kind{}
	for _, k := range crds.Kinds {
		if list != nil && slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == k.Resource }) {
			out[k.Kind] = k
		}
	}
	return out, nil
}

func (c *controller) objectEvents(kind string) cache.ResourceEventHandlerFuncs {
	add := func(obj any) {
		if m, err := metaOf(obj); err == nil {
			c.queue.Add(objKey{Kind: kind, Namespace: m.GetNamespace(), Name: m.GetName()})
		}
	}
	return cache.ResourceEventHandlerFuncs{AddFunc: add, UpdateFunc: func(_, obj any) { add(obj) }, DeleteFunc: add}
}

// secretEvents enqueues the objects that reference a changed Secret, and
// the Secret itself when it is labelled LabelDownstream or deleted (its
// sealed copy goes too).
func (c *controller) secretEvents() cache.ResourceEventHandlerFuncs {
	changed := func(obj any) {
		m, err := metaOf(obj)
		if err != nil {
			return
		}
		for _, k := range c.secrets.referrers(m.GetNamespace() + "/" + m.GetName()) {
			c.queue.Add(k)
		}
		if isDownstream(m) {
			c.queue.Add(objKey{Kind: kindSecret, Namespace: m.GetNamespace(), Name: m.GetName()})
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: changed,
		UpdateFunc: func(old, obj any) {
			o, n := old.(*corev1.Secret), obj.(*corev1.Secret)
			if o.ResourceVersion != n.ResourceVersion {
				changed(obj)
			}
		},
		DeleteFunc: func(obj any) {
			changed(obj)
			if m, err := metaOf(obj); err == nil {
				c.queue.Add(objKey{Kind: kindSecret, Namespace: m.GetNamespace(), Name: m.GetName()})
			}
		},
	}
}

// metaOf reads an informer's object, a tombstone's too.
func metaOf(obj any) (metav1.Object, error) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("not an object: %T", obj)
	}
	return m, nil
}

// run starts the informers and workers and returns once ctx ends.
func (c *controller) run(ctx context.Context, workers int) error {
	defer c.queue.ShutDown()
	c.dyn.Start(ctx.Done())
	c.core.Start(ctx.Done())
	c.labelled.Start(ctx.Done())
	defer c.dyn.Shutdown()
	defer c.core.Shutdown()
	defer c.labelled.Shutdown()
	for t, ok := range c.dyn.WaitForCacheSync(ctx.Done()) {
		if !ok && ctx.Err() == nil {
			return fmt.Errorf("management cluster: informer of %s did not sync", t.Resource)
		}
	}
	c.core.WaitForCacheSync(ctx.Done())
	c.labelled.WaitForCacheSync(ctx.Done())
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for c.next(ctx) {
			}
		})
	}
	<-ctx.Done()
	c.queue.ShutDown()
	wg.Wait()
	return nil
}

// next reconciles one key; false once the queue shut down.
func (c *controller) next(ctx context.Context) bool {
	k, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(k)
	err := c.reconcile(ctx, k)
	var ref *RefusedError
	switch {
	case err == nil:
		c.queue.Forget(k)
	case errors.As(err, &ref):
		// The user must change the resource: its next change (or a
		// Secret it names) enqueues it again.
		c.queue.Forget(k)
		c.refuse(k, ref)
	case ctx.Err() != nil:
	default:
		c.d.Logger.Warn("Reconcile failed; retrying", zap.String("object", k.String()), zap.Error(err))
		c.queue.AddRateLimited(k)
	}
	return true
}

// step is what reconcile does with an object, decided from what it
// observed (decide).
type step int

const (
	// stepForget: the object is gone; what is kept of it is dropped.
	stepForget step = iota
	// stepIgnore: the object is being deleted without our finalizer
	// (removed already, or never added): nothing to do.
	stepIgnore
	// stepFinalize: the object is being deleted and holds our finalizer:
	// run its deletion, then remove the finalizer.
	stepFinalize
	// stepAdopt: a live object without our finalizer: add it, then apply.
	stepAdopt
	// stepApply: a live object with our finalizer: apply.
	stepApply
)

// decide names the step for obj (nil: not found) served with finalizer.
func decide(obj *unstructured.Unstructured, finalizer string) step {
	if obj == nil {
		return stepForget
	}
	ours := slices.Contains(obj.GetFinalizers(), finalizer)
	switch {
	case obj.GetDeletionTimestamp() != nil && ours:
		return stepFinalize
	case obj.GetDeletionTimestamp() != nil:
		return stepIgnore
	case !ours:
		return stepAdopt
	}
	return stepApply
}

// reconcile brings Flotilla in line with the object of k.
func (c *controller) reconcile(ctx context.Context, k objKey) error {
	switch k.Kind {
	case kindSecret:
		return c.secrets.reconcileSecret(ctx, k)
	case kindConfigMap:
		return c.configMaps.reconcile(ctx, k)
	}
	s := c.kinds[k.Kind]
	var obj *unstructured.Unstructured
	got, err := s.lister.ByNamespace(k.Namespace).Get(k.Name)
	switch {
	case err == nil:
		obj = got.(*unstructured.Unstructured).DeepCopy()
	case !apierrors.IsNotFound(err):
		return err
	}
	switch decide(obj, s.finalizer) {
	case stepForget:
		c.forget(k, "")
	case stepIgnore:
	case stepFinalize:
		return c.finalize(ctx, s, k, obj)
	case stepAdopt:
		if obj, err = c.setFinalizers(ctx, k, obj, append(obj.GetFinalizers(), s.finalizer)); err != nil {
			return err
		}
		return c.apply(ctx, s, k, obj)
	case stepApply:
		return c.apply(ctx, s, k, obj)
	}
	return nil
}

// apply runs the kind's handler and tracks the object's status.
func (c *controller) apply(ctx context.Context, s *served, k objKey, obj *unstructured.Unstructured) error {
	if err := s.handler.Apply(ctx, obj); err != nil {
		return err
	}
	c.accepted(k, obj)
	return nil
}

// finalize runs obj's deletion and removes the finalizer once it is over;
// a deletion in progress is looked at again after deletionPoll.
func (c *controller) finalize(ctx context.Context, s *served, k objKey, obj *unstructured.Unstructured) error {
	done, err := s.handler.Delete(ctx, obj)
	if err != nil {
		return err
	}
	if !done {
		c.queue.AddAfter(k, deletionPoll)
		return nil
	}
	rest := slices.DeleteFunc(slices.Clone(obj.GetFinalizers()), func(f string) bool { return f == s.finalizer })
	if _, err := c.setFinalizers(ctx, k, obj, rest); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	c.forget(k, obj.GetUID())
	c.d.Logger.Info("Deleted", zap.String("object", k.String()))
	return nil
}

// setFinalizers writes obj's finalizers, failing with a conflict when obj
// changed meanwhile (the change enqueues it again).
func (c *controller) setFinalizers(ctx context.Context, k objKey, obj *unstructured.Unstructured, fin []string) (*unstructured.Unstructured, error) {
	if fin == nil {
		fin = []string{}
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": fin, "resourceVersion": obj.GetResourceVersion()}})
	if err != nil {
		return nil, err
	}
	out, err := c.d.Dynamic.Resource(gvrOf(k.Kind)).Namespace(k.Namespace).Patch(ctx, k.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return nil, fmt.Errorf("set the finalizers of %s: %w", k, err)
	}
	return out, nil
}

// gvrOf is kind's resource (crds.Kinds).
func gvrOf(kind string) schema.GroupVersionResource {
	for _, k := range crds.Kinds {
		if k.Kind == kind {
			return k.GroupVersionResource()
		}
	}
	return schema.GroupVersionResource{}
}

// statusKind reports whether the status writer keeps kind's status.
func statusKind(kind string) bool {
	switch kind {
	case fleetstatus.KindGitRepo, fleetstatus.KindHelmOp, fleetstatus.KindCluster, fleetstatus.KindClusterGroup:
		return true
	}
	return false
}

func refOf(k objKey, obj *unstructured.Unstructured) fleetstatus.Ref {
	return fleetstatus.Ref{Kind: k.Kind, Namespace: k.Namespace, Name: k.Name, Generation: obj.GetGeneration(), UID: obj.GetUID(),
		Created: obj.GetCreationTimestamp().Time}
}

// accepted tracks an applied object's status and lifts a refusal shown
// before.
func (c *controller) accepted(k objKey, obj *unstructured.Unstructured) {
	if c.d.Status == nil || !statusKind(k.Kind) {
		return
	}
	ref := refOf(k, obj)
	c.d.Status.Track(ref)
	c.mu.Lock()
	was := c.refused[k]
	delete(c.refused, k)
	c.mu.Unlock()
	if was {
		c.d.Status.SetCondition(ref, fleetstatus.Condition{Type: condAccepted})
	}
}

// condAccepted is Fleet's condition of an accepted spec.
const condAccepted = "Accepted"

// refuse shows a refused object as Accepted=False with the refusal's
// reason and message (its Warning event was recorded by the handler).
func (c *controller) refuse(k objKey, e *RefusedError) {
	c.d.Logger.Info("Refused", zap.String("object", k.String()), zap.String("reason", e.Reason), zap.String("message", e.Error()))
	if c.d.Status == nil || !statusKind(k.Kind) {
		return
	}
	s := c.kinds[k.Kind]
	got, err := s.lister.ByNamespace(k.Namespace).Get(k.Name)
	if err != nil {
		return
	}
	ref := refOf(k, got.(*unstructured.Unstructured))
	c.mu.Lock()
	c.refused[k] = true
	c.mu.Unlock()
	c.d.Status.SetCondition(ref, fleetstatus.Condition{Type: condAccepted, Status: "False", Reason: e.Reason, Message: e.Error(),
		ObservedGeneration: ref.Generation})
}

// forget drops what the controller keeps of a deleted object.
func (c *controller) forget(k objKey, uid types.UID) {
	c.mu.Lock()
	delete(c.refused, k)
	c.mu.Unlock()
	c.secrets.unindex(k)
	if c.d.Status != nil && statusKind(k.Kind) {
		c.d.Status.Forget(fleetstatus.Ref{Kind: k.Kind, Namespace: k.Namespace, Name: k.Name, UID: uid})
	}
}
