package kubenative

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/applier"
	"github.com/flotilla-gitops/flotilla/internal/cluster"
	"github.com/flotilla-gitops/flotilla/internal/outcome"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/seal"
	"github.com/flotilla-gitops/flotilla/internal/temporalx"
)

// KubeconfigSecretKey is the key of a Cluster's kubeConfigSecret that
// holds the kubeconfig, as in Fleet.
const KubeconfigSecretKey = "value"

// lastApplied is kubectl's annotation holding the whole last applied
// document: not a cluster annotation anyone templates with.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// Fleet's resources served by the handlers of this file and its siblings.
var (
	fleetClusters      = schema.GroupVersionResource{Group: "fleet.cattle.io", Version: "v1alpha1", Resource: "clusters"}
	fleetClusterGroups = schema.GroupVersionResource{Group: "fleet.cattle.io", Version: "v1alpha1", Resource: "clustergroups"}
)

// RefusedError is a resource the controller does not apply as it is: an
// invalid spec, a kubeconfig that is not inline data, a name another
// namespace's resource holds. Retrying does not help; the user must change
// the resource. The handler has told the user already (a Warning event
// with Reason); the controller shows it as Accepted=False with Reason and
// the message.
type RefusedError struct {
	// Kind, Namespace and Name are the refused resource.
	Kind, Namespace, Name string
	// Field is the path of the field at fault (spec.kubeConfigSecret), or
	// "" for the resource as a whole.
	Field string
	// Reason is the event's and the condition's reason (CamelCase).
	Reason string
	// Message says what is wrong and what to do; it never holds a secret.
	Message string
}

func (e *RefusedError) Error() string {
	at := ""
	if e.Field != "" {
		at = e.Field + ": "
	}
	return fmt.Sprintf("%s %s/%s: %s%s", e.Kind, e.Namespace, e.Name, at, e.Message)
}

// OutcomeClass is Invalid: the resource must change.
func (e *RefusedError) OutcomeClass() outcome.Class { return outcome.Invalid }

// refusal builds the RefusedError of obj.
func refusal(obj *unstructured.Unstructured, field, reason, msg string) *RefusedError {
	return &RefusedError{Kind: obj.GetKind(), Namespace: obj.GetNamespace(), Name: obj.GetName(), Field: field, Reason: reason, Message: msg}
}

// Refusal reasons.
const (
	ReasonInvalidSpec       = "InvalidSpec"
	ReasonNameTaken         = "NameTaken"
	ReasonInvalidKubeconfig = "InvalidKubeconfig"
)

// documentOf decodes obj as `flotilla apply` decodes a document (defaults
// and validation included), without its status and server-set metadata.
// An invalid one is a RefusedError naming the field.
func documentOf(obj *unstructured.Unstructured) (api.Document, error) {
	doc := map[string]any{"apiVersion": obj.GetAPIVersion(), "kind": obj.GetKind()}
	meta := map[string]any{"name": obj.GetName(), "namespace": obj.GetNamespace()}
	if l := obj.GetLabels(); len(l) > 0 {
		meta["labels"] = l
	}
	if a := obj.GetAnnotations(); len(a) > 0 {
		a = maps(a)
		delete(a, lastApplied)
		meta["annotations"] = a
	}
	doc["metadata"] = meta
	for k, v := range obj.Object {
		if k != "apiVersion" && k != "kind" && k != "metadata" && k != "status" {
			doc[k] = v
		}
	}
	data, err := json.Marshal(doc)
	if err != nil {
		return api.Document{}, err
	}
	docs, err := api.Decode(bytes.NewReader(data), obj.GetKind())
	if err != nil {
		return api.Document{}, refusal(obj, "", ReasonInvalidSpec, err.Error())
	}
	if len(docs) != 1 {
		return api.Document{}, refusal(obj, "", ReasonInvalidSpec, "not one document")
	}
	return docs[0], nil
}

func maps(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// nameHolder returns the namespace of the resource that holds a global
// name among same-named resources of several namespaces: the oldest
// (creationTimestamp), ties broken by namespace. Flotilla's clusters and
// groups are global by name, Fleet's are namespaced.
func nameHolder(items []metav1.Object) string {
	if len(items) == 0 {
		return ""
	}
	sorted := append([]metav1.Object(nil), items...)
	sort.Slice(sorted, func(i, j int) bool {
		ti, tj := sorted[i].GetCreationTimestamp(), sorted[j].GetCreationTimestamp()
		if !ti.Equal(&tj) {
			return ti.Before(&tj)
		}
		return sorted[i].GetNamespace() < sorted[j].GetNamespace()
	})
	return sorted[0].GetNamespace()
}

// holdsName reports whether obj holds its global name (see nameHolder),
// and the namespace that does.
func holdsName(ctx context.Context, d *Deps, gvr schema.GroupVersionResource, obj *unstructured.Unstructured) (bool, string, error) {
	list, err := d.Dynamic.Resource(gvr).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", obj.GetName()).String()})
	if err != nil {
		return false, "", fmt.Errorf("list %s named %s: %w", gvr.Resource, obj.GetName(), err)
	}
	items := make([]metav1.Object, 0, len(list.Items)+1)
	seen := false
	for i := range list.Items {
		items = append(items, &list.Items[i])
		seen = seen || list.Items[i].GetUID() == obj.GetUID()
	}
	if !seen {
		items = append(items, obj)
	}
	holder := nameHolder(items)
	return holder == obj.GetNamespace(), holder, nil
}

// checkName refuses obj when another namespace's resource holds its name.
func checkName(ctx context.Context, d *Deps, gvr schema.GroupVersionResource, obj *unstructured.Unstructured) error {
	ok, holder, err := holdsName(ctx, d, gvr, obj)
	if err != nil || ok {
		return err
	}
	return refusal(obj, "metadata.name", ReasonNameTaken, fmt.Sprintf(
		"%s %s/%s holds the name %q: Flotilla's %ss are global by name, so one name can be used in one namespace only; rename this one",
		obj.GetKind(), holder, obj.GetName(), obj.GetName(), lower(obj.GetKind())))
}

func lower(kind string) string {
	if kind == api.KindClusterGroup {
		return "cluster group"
	}
	return "cluster"
}

// clusterHandler applies Fleet's Cluster resources: labels, annotations,
// paused, templateValues and agent settings as `flotilla apply` of a
// Cluster, and spec.kubeConfigSecret's kubeconfig as `flotilla cluster
// add` (push mode). A Cluster is namespaced in Fleet; its Flotilla cluster
// is metadata.name (see nameHolder).
type clusterHandler struct {
	globalName
	// secrets indexes each Cluster's kubeConfigSecret, so that a changed
	// Secret applies the Cluster again; nil: not indexed.
	secrets *secretSync
}

// globalName is what the handlers of Fleet's namespaced kinds that are
// global by name in Flotilla (Cluster, ClusterGroup) share.
type globalName struct {
	d    *Deps
	ev   *eventLog
	gvr  schema.GroupVersionResource
	kind string
}

func newGlobalName(d *Deps, gvr schema.GroupVersionResource, kind string) globalName {
	return globalName{d: d, ev: newEventLog(d), gvr: gvr, kind: kind}
}

// NewClusterHandler returns the Handler of fleet.cattle.io Clusters.
func NewClusterHandler(d *Deps) Handler { return newClusterHandler(d, nil) }

// newClusterHandler is NewClusterHandler with kubeConfigSecrets indexed
// in ss.
func newClusterHandler(d *Deps, ss *secretSync) *clusterHandler {
	return &clusterHandler{globalName: newGlobalName(d, fleetClusters, api.KindCluster), secrets: ss}
}

// Apply registers or updates the cluster. A Cluster without
// kubeConfigSecret is one an agent registers (pull mode): until its agent
// has registered, nothing is applied (a later resync applies it).
func (h *clusterHandler) Apply(ctx context.Context, obj *unstructured.Unstructured) error {
	return h.ev.report(ctx, obj, h.apply(ctx, obj))
}

func (h *clusterHandler) apply(ctx context.Context, obj *unstructured.Unstructured) error {
	if h.secrets != nil {
		h.secrets.index(objKey{Kind: obj.GetKind(), Namespace: obj.GetNamespace(), Name: obj.GetName()}, SecretsOf(obj))
	}
	doc, err := documentOf(obj)
	if err != nil {
		return err
	}
	if err := checkName(ctx, h.d, h.gvr, obj); err != nil {
		return err
	}
	cl := *doc.Cluster
	name := cl.Metadata.Name
	rec, found, err := clusterRecord(ctx, h.d, name)
	if err != nil {
		return err
	}
	a := applier.ClusterApply(cl)
	if cl.Spec.KubeConfigSecret == "" {
		if !found {
			h.d.Logger.Debug("Cluster waits for its agent to register", zap.String("cluster", name))
			return nil
		}
	} else if err := h.kubeconfig(ctx, obj, cl, rec, &a); err != nil {
		return err
	}
	if _, err := temporalx.ApplyCluster(ctx, h.d.Temporal, h.d.TaskQueue, name, a); err != nil {
		return rejected(obj, err)
	}
	return nil
}

// rejected turns an update the cluster's workflow rejected (a final
// ApplicationError) into a RefusedError; other errors stay as they are.
func rejected(obj *unstructured.Unstructured, err error) error {
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) {
		return refusal(obj, "", ReasonInvalidSpec, ae.Message())
	}
	return err
}

// kubeconfig reads spec.kubeConfigSecret, checks it as `cluster add` does
// and, when it differs from what the cluster has, seals it into a.
func (h *clusterHandler) kubeconfig(ctx context.Context, obj *unstructured.Unstructured, cl api.Cluster, rec protocol.ClusterRecord, a *protocol.ClusterApply) error {
	ns := cl.Spec.KubeConfigSecretNamespace
	if ns == "" {
		ns = obj.GetNamespace()
	}
	ref := fmt.Sprintf("Secret %s/%s", ns, cl.Spec.KubeConfigSecret)
	sec, err := h.d.Kube.CoreV1().Secrets(ns).Get(ctx, cl.Spec.KubeConfigSecret, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return refusal(obj, "spec.kubeConfigSecret", ReasonInvalidKubeconfig, ref+" does not exist")
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", ref, err)
	}
	raw := sec.Data[KubeconfigSecretKey]
	if len(raw) == 0 {
		return refusal(obj, "spec.kubeConfigSecret", ReasonInvalidKubeconfig, ref+" has no key "+KubeconfigSecretKey+" (the kubeconfig, as in Fleet)")
	}
	data, hash, err := cluster.PrepareKubeconfig(cl.Metadata.Name, raw, "")
	var ke *cluster.KubeconfigError
	switch {
	case errors.As(err, &ke):
		return refusal(obj, "spec.kubeConfigSecret", ReasonInvalidKubeconfig, fmt.Sprintf("%s key %s: %v", ref, KubeconfigSecretKey, err))
	case errors.Is(err, cluster.ErrInvalidKubeconfig):
		// Parse errors may quote the content: say only where.
		return refusal(obj, "spec.kubeConfigSecret", ReasonInvalidKubeconfig, fmt.Sprintf("%s key %s: %v", ref, KubeconfigSecretKey, cluster.ErrInvalidKubeconfig))
	case err != nil:
		return refusal(obj, "metadata.name", ReasonInvalidSpec, err.Error())
	}
	if hash == rec.KubeconfigHash {
		return nil // unchanged: nothing to seal or store
	}
	box, err := h.d.sealer().Seal(ctx, h.d.Temporal, data)
	if err != nil {
		return fmt.Errorf("seal the kubeconfig of cluster %s: %w", cl.Metadata.Name, err)
	}
	a.KubeconfigHash, a.Kubeconfig = hash, &box
	return nil
}

// SecretsOf names the Secrets a Cluster reads ("namespace/name"): its
// kubeConfigSecret. The controller indexes them so that a changed Secret
// applies the Cluster again.
func SecretsOf(obj *unstructured.Unstructured) []string {
	name, _, _ := unstructured.NestedString(obj.Object, "spec", "kubeConfigSecret")
	if name == "" {
		return nil
	}
	ns, _, _ := unstructured.NestedString(obj.Object, "spec", "kubeConfigSecretNamespace")
	if ns == "" {
		ns = obj.GetNamespace()
	}
	return []string{ns + "/" + name}
}

// clusterRecord queries cluster name's record; found is false when no
// workflow runs for it.
func clusterRecord(ctx context.Context, d *Deps, name string) (rec protocol.ClusterRecord, found bool, err error) {
	v, err := d.Temporal.QueryWorkflow(ctx, protocol.ClusterID(name), "", protocol.QueryStatus)
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return rec, false, nil
	}
	if err != nil {
		return rec, false, fmt.Errorf("query cluster %s: %w", name, err)
	}
	if err := v.Get(&rec); err != nil {
		return rec, false, fmt.Errorf("query cluster %s: %w", name, err)
	}
	return rec, !rec.Removed, nil
}

// Delete removes the Flotilla cluster or group obj maps to, as `flotilla
// cluster remove` or `flotilla delete clustergroup/NAME` do (a cluster's
// releases stay), unless another namespace's resource holds the name;
// done once its workflow has ended.
func (g globalName) Delete(ctx context.Context, obj *unstructured.Unstructured) (bool, error) {
	ok, _, err := holdsName(ctx, g.d, g.gvr, obj)
	if err != nil {
		return false, err
	}
	if !ok {
		g.ev.forget(obj)
		return true, nil
	}
	ap := &applier.Applier{Temporal: g.d.Temporal, TaskQueue: g.d.TaskQueue}
	if err := ap.Delete(ctx, g.kind, "", obj.GetName()); err != nil && !errors.Is(err, applier.ErrNotFound) {
		return false, err
	}
	done, err := ap.Ended(ctx, g.kind, "", obj.GetName())
	if done {
		g.ev.forget(obj)
	}
	return done, err
}

// eventLog records Events on the resources of these handlers, a refusal
// once per resource and message (handlers are called again on resyncs).
type eventLog struct {
	d    *Deps
	mu   sync.Mutex
	last map[string]string
}

func newEventLog(d *Deps) *eventLog { return &eventLog{d: d, last: map[string]string{}} }

// report records a Warning event for a RefusedError (once per message)
// and returns err.
func (l *eventLog) report(ctx context.Context, obj *unstructured.Unstructured, err error) error {
	var ref *RefusedError
	if errors.As(err, &ref) {
		l.warnOnce(ctx, obj, ref.Reason, ref.Error())
	}
	return err
}

// forget drops what the log keeps of obj (it was deleted).
func (l *eventLog) forget(obj *unstructured.Unstructured) {
	l.mu.Lock()
	delete(l.last, string(obj.GetUID()))
	l.mu.Unlock()
}

// warnOnce records a Warning event unless the last one on obj said the same.
func (l *eventLog) warnOnce(ctx context.Context, obj *unstructured.Unstructured, reason, msg string) {
	key := string(obj.GetUID())
	l.mu.Lock()
	same := l.last[key] == reason+msg
	l.last[key] = reason + msg
	l.mu.Unlock()
	if same {
		return
	}
	recordEvent(ctx, l.d, obj, corev1.EventTypeWarning, reason, msg)
}

// recordEvent records a Kubernetes Event on obj; a failure is logged, not
// returned (an event is a courtesy).
func recordEvent(ctx context.Context, d *Deps, obj *unstructured.Unstructured, eventType, reason, msg string) {
	now := metav1.Now()
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{GenerateName: obj.GetName() + ".", Namespace: obj.GetNamespace()},
		InvolvedObject: corev1.ObjectReference{APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(), Namespace: obj.GetNamespace(),
			Name: obj.GetName(), UID: obj.GetUID(), ResourceVersion: obj.GetResourceVersion()},
		Reason: reason, Message: msg, Type: eventType, Count: 1, FirstTimestamp: now, LastTimestamp: now,
		Source: corev1.EventSource{Component: "flotilla"}, ReportingController: "flotilla.dev/management",
	}
	if _, err := d.Kube.CoreV1().Events(obj.GetNamespace()).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		d.Logger.Warn("Failed to record an event", zap.String("kind", obj.GetKind()), zap.String("namespace", obj.GetNamespace()),
			zap.String("name", obj.GetName()), zap.String("reason", reason), zap.Error(err))
	}
}

// sealer seals what the handlers store for the controllers: to the newest
// sealing key the controllers published whose signature verifies.
func (d *Deps) sealer() applier.Sealer {
	if d.Sealer != nil {
		return d.Sealer
	}
	return publishedSealer{}
}

// publishedSealer seals to the newest published sealing key.
type publishedSealer struct{}

// Seal seals data to the newest published key, refusing an unsigned one.
func (publishedSealer) Seal(ctx context.Context, c client.Client, data []byte) (seal.Box, error) {
	k, err := cluster.CurrentKey(ctx, c)
	if err != nil {
		return seal.Box{}, err
	}
	if err := k.Verify(); err != nil {
		return seal.Box{}, err
	}
	return seal.Seal(k, data)
}
