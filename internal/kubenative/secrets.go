package kubenative

import (
	"context"
	"sort"
	"strings"
	"sync"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/applier"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
)

// ReasonSecretNotFound: a Secret a resource names is not in its
// namespace.
const ReasonSecretNotFound = "SecretNotFound"

// secretRef is a Secret a resource names, and the field naming it.
type secretRef struct{ field, name string }

// secretRefs lists the Secrets of obj's namespace a GitRepo or HelmOp
// names, in field order, each name once.
func secretRefs(obj *unstructured.Unstructured) []secretRef {
	fields := [][]string{{"helmSecretName"}}
	if obj.GetKind() == api.KindGitRepo {
		fields = [][]string{{"clientSecretName"}, {"helmSecretName"}, {"helmSecretNameForPaths"}, {"webhookSecret"},
			{"verify", "secretRef", "name"}, {"previews", "secretName"}}
	}
	var out []secretRef
	seen := map[string]bool{}
	for _, f := range fields {
		name, _, _ := unstructured.NestedString(obj.Object, append([]string{"spec"}, f...)...)
		if name != "" && !seen[name] {
			seen[name] = true
			out = append(out, secretRef{field: "spec." + strings.Join(f, "."), name: name})
		}
	}
	return out
}

// secretSync seals the Secrets GitRepos and HelmOps name into Temporal
// when they change, and indexes which objects name which Secret, so that
// a changed Secret applies them again. What it remembers lives in memory:
// after a restart or a leader change every named Secret is sealed once
// more (the same content under a new seal, which changes no deployment).
type secretSync struct {
	d      *Deps
	lister corelisters.SecretLister
	// sealed are the Secrets this controller sealed.
	sealed *copies
	// mu guards refs, the Secrets ("namespace/name") each object names.
	mu   sync.Mutex
	refs map[objKey][]string
}

func newSecretSync(d *Deps, lister corelisters.SecretLister) *secretSync {
	return &secretSync{d: d, lister: lister, sealed: newCopies(), refs: map[objKey][]string{}}
}

// index records the Secrets k names.
func (s *secretSync) index(k objKey, secrets []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(secrets) == 0 {
		delete(s.refs, k)
		return
	}
	s.refs[k] = secrets
}

func (s *secretSync) unindex(k objKey) { s.index(k, nil) }

// referrers are the objects that name the Secret "namespace/name".
func (s *secretSync) referrers(secret string) []objKey {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []objKey
	for k, names := range s.refs {
		for _, n := range names {
			if n == secret {
				out = append(out, k)
				break
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// ensure seals and stores each Secret obj names whose resourceVersion
// was not sealed yet. A missing Secret is a RefusedError naming the field
// (its creation enqueues obj again).
func (s *secretSync) ensure(ctx context.Context, obj *unstructured.Unstructured, refs []secretRef) error {
	ns := obj.GetNamespace()
	for _, r := range refs {
		sec, err := s.lister.Secrets(ns).Get(r.name)
		if apierrors.IsNotFound(err) {
			return refusal(obj, r.field, ReasonSecretNotFound, "Secret "+ns+"/"+r.name+" not found")
		}
		if err != nil {
			return err
		}
		if err := s.seal(ctx, sec); err != nil {
			return err
		}
	}
	return nil
}

// seal stores sec unless its resourceVersion is stored already. Only its
// type and data are read: never its annotations, which may hold the
// plaintext (kubectl's last-applied-configuration).
func (s *secretSync) seal(ctx context.Context, sec *corev1.Secret) error {
	key := sec.Namespace + "/" + sec.Name
	if s.sealed.has(key, sec.ResourceVersion) {
		return nil
	}
	doc := api.Document{Secret: &api.Secret{
		TypeMeta: api.TypeMeta{APIVersion: "v1", Kind: api.KindSecret},
		Metadata: api.ObjectMeta{Name: sec.Name, Namespace: sec.Namespace},
		Type:     string(sec.Type), Data: sec.Data,
	}}
	verb, err := s.applier().Apply(ctx, doc)
	if err != nil {
		return err
	}
	s.sealed.remember(key, sec.ResourceVersion)
	s.d.Logger.Info("Sealed a Secret into Temporal", zap.String("secret", key), zap.String("result", verb))
	return nil
}

// reconcileSecret seals a Secret labelled LabelDownstream when it
// changed, and removes the sealed copy of one deleted from the management
// cluster (if this controller sealed it).
func (s *secretSync) reconcileSecret(ctx context.Context, k objKey) error {
	sec, err := s.lister.Secrets(k.Namespace).Get(k.Name)
	switch {
	case apierrors.IsNotFound(err):
		return s.sealed.remove(ctx, s.applier(), api.KindSecret, k)
	case err != nil:
		return err
	case isDownstream(sec):
		return s.seal(ctx, sec)
	}
	return nil
}

func (s *secretSync) applier() *applier.Applier {
	return &applier.Applier{Temporal: s.d.Temporal, TaskQueue: s.d.TaskQueue, Sealer: s.d.sealer(), ManagedBy: protocol.ManagedByKubernetes}
}
