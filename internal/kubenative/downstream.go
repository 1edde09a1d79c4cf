package kubenative

import (
	"context"
	"errors"
	"sync"

	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/applier"
)

// LabelDownstream marks the Secrets and ConfigMaps of the management
// cluster that the controller copies into Temporal (a Secret sealed, a
// ConfigMap as it is), where fleet.yaml downstreamResources of the
// bundles of their namespace copy them from, as `flotilla apply` of them
// would. Only labelled ones are copied: a namespace holds Secrets no
// bundle names (service account tokens, Helm's release records, TLS
// keys), and the controller cannot know which ones a fleet.yaml names
// before it renders it. A change of one redeploys the bundles that copy
// it; deleting one removes the copy (a ConfigMap's also when its label is
// removed; a Secret may still be named by a GitRepo, whose copy stays).
const LabelDownstream = "flotilla.dev/downstream"

// kindConfigMap is the key kind of labelled core ConfigMaps.
const kindConfigMap = "ConfigMap"

func isDownstream(m metav1.Object) bool { return m.GetLabels()[LabelDownstream] == "true" }

// copies remembers the objects this controller stored in Temporal, by
// "namespace/name", with the resourceVersion stored: a change is stored
// once, and only a copy this controller stored is ever removed.
type copies struct {
	mu sync.Mutex
	rv map[string]string
}

func newCopies() *copies { return &copies{rv: map[string]string{}} }

// has reports whether resourceVersion rv of key is stored already.
func (c *copies) has(key, rv string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	stored, ok := c.rv[key]
	return ok && stored == rv
}

// remember records that resourceVersion rv of key is stored.
func (c *copies) remember(key, rv string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rv[key] = rv
}

// remove deletes the stored copy of kind k with ap, if this controller
// stored it; a copy gone already is not an error.
func (c *copies) remove(ctx context.Context, ap *applier.Applier, kind string, k objKey) error {
	key := k.Namespace + "/" + k.Name
	c.mu.Lock()
	_, ours := c.rv[key]
	c.mu.Unlock()
	if !ours {
		return nil
	}
	if err := ap.Delete(ctx, kind, k.Namespace, k.Name); err != nil && !errors.Is(err, applier.ErrNotFound) {
		return err
	}
	c.mu.Lock()
	delete(c.rv, key)
	c.mu.Unlock()
	return nil
}

// configMapSync stores the labelled ConfigMaps when they change.
type configMapSync struct {
	d      *Deps
	lister corelisters.ConfigMapLister
	stored *copies
}

func newConfigMapSync(d *Deps, lister corelisters.ConfigMapLister) *configMapSync {
	return &configMapSync{d: d, lister: lister, stored: newCopies()}
}

// reconcile stores the ConfigMap of k when it is labelled and changed, and
// removes the stored one when it is gone or no longer labelled.
func (s *configMapSync) reconcile(ctx context.Context, k objKey) error {
	ap := &applier.Applier{Temporal: s.d.Temporal, TaskQueue: s.d.TaskQueue}
	cm, err := s.lister.ConfigMaps(k.Namespace).Get(k.Name)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if err != nil || !isDownstream(cm) {
		return s.stored.remove(ctx, ap, api.KindConfigMap, k)
	}
	key := k.Namespace + "/" + k.Name
	if s.stored.has(key, cm.ResourceVersion) {
		return nil
	}
	doc := api.Document{ConfigMap: &api.ConfigMap{TypeMeta: api.TypeMeta{APIVersion: "v1", Kind: kindConfigMap},
		Metadata: api.ObjectMeta{Name: cm.Name, Namespace: cm.Namespace}, Data: cm.Data, BinaryData: cm.BinaryData}}
	if _, err := ap.Apply(ctx, doc); err != nil {
		return err
	}
	s.stored.remember(key, cm.ResourceVersion)
	s.d.Logger.Info("Stored a downstream ConfigMap in Temporal", zap.String("configMap", key))
	return nil
}
