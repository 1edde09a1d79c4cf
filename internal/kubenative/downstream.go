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

// configMapSync stores the labelled ConfigMaps when they change.
type configMapSync struct {
	d      *Deps
	lister corelisters.ConfigMapLister
	mu     sync.Mutex
	// stored is the resourceVersion last stored per "namespace/name".
	stored map[string]string
}

func newConfigMapSync(d *Deps, lister corelisters.ConfigMapLister) *configMapSync {
	return &configMapSync{d: d, lister: lister, stored: map[string]string{}}
}

// reconcile stores the ConfigMap of k when it is labelled and changed, and
// removes the stored one when it is gone or no longer labelled.
func (s *configMapSync) reconcile(ctx context.Context, k objKey) error {
	key := k.Namespace + "/" + k.Name
	ap := &applier.Applier{Temporal: s.d.Temporal, TaskQueue: s.d.TaskQueue}
	cm, err := s.lister.ConfigMaps(k.Namespace).Get(k.Name)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	s.mu.Lock()
	rv, ours := s.stored[key]
	s.mu.Unlock()
	if err != nil || !isDownstream(cm) {
		if !ours {
			return nil
		}
		if err := ap.Delete(ctx, api.KindConfigMap, k.Namespace, k.Name); err != nil && !errors.Is(err, applier.ErrNotFound) {
			return err
		}
		s.mu.Lock()
		delete(s.stored, key)
		s.mu.Unlock()
		return nil
	}
	if ours && rv == cm.ResourceVersion {
		return nil
	}
	doc := api.Document{ConfigMap: &api.ConfigMap{TypeMeta: api.TypeMeta{APIVersion: "v1", Kind: kindConfigMap},
		Metadata: api.ObjectMeta{Name: cm.Name, Namespace: cm.Namespace}, Data: cm.Data, BinaryData: cm.BinaryData}}
	if _, err := ap.Apply(ctx, doc); err != nil {
		return err
	}
	s.mu.Lock()
	s.stored[key] = cm.ResourceVersion
	s.mu.Unlock()
	s.d.Logger.Info("Stored a downstream ConfigMap in Temporal", zap.String("configMap", key))
	return nil
}
