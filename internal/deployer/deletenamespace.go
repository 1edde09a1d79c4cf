package deployer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/metadata"
)

// DefaultProtectedNamespaces returns the namespaces DeleteNamespace never
// deletes besides Kubernetes' own: Flotilla's controller and default agent
// namespace (agentcfg.DefaultNamespace) and Fleet's agent namespace.
func DefaultProtectedNamespaces() []string { return []string{"flotilla-system", "cattle-fleet-system"} }

// KeepReason says why DeleteNamespace kept a namespace.
type KeepReason string

const (
	// KeptKubernetes: the namespace is one of Kubernetes' own (default,
	// kube-system, kube-public, kube-node-lease).
	KeptKubernetes KeepReason = "KubernetesNamespace"
	// KeptProtected: the namespace is Flotilla's or an agent's
	// (DefaultProtectedNamespaces, Options.ProtectedNamespaces).
	KeptProtected KeepReason = "ProtectedNamespace"
	// KeptInUse: the namespace, or an object in it, belongs to another
	// release.
	KeptInUse KeepReason = "InUse"
	// KeptUnverified: objects of a kind in the namespace could not be
	// listed (forbidden), so whose they are is unknown.
	KeptUnverified KeepReason = "Unverified"
	// KeptForbidden: the credentials DeleteNamespace acts with (the
	// release's ServiceAccount) may not read or delete the namespace.
	KeptForbidden KeepReason = "Forbidden"
)

// ErrNamespaceKept marks a namespace DeleteNamespace refused to delete;
// the error is a *NamespaceKeptError.
var ErrNamespaceKept = errors.New("namespace kept")

// NamespaceKeptError says which namespace DeleteNamespace kept and why. It
// wraps ErrNamespaceKept.
type NamespaceKeptError struct {
	Namespace string
	Reason    KeepReason
	// Why is the reason in words, such as "it holds release other-app's
	// objects (ConfigMap settings)".
	Why string
}

func (e *NamespaceKeptError) Error() string { return "namespace " + e.Namespace + " kept: " + e.Why }

// Unwrap returns ErrNamespaceKept.
func (e *NamespaceKeptError) Unwrap() error { return ErrNamespaceKept }

// NamespaceDeletion is a namespace DeleteNamespace deletes because the
// release it was created for is removed.
type NamespaceDeletion struct {
	// Namespace is the namespace to delete. Required.
	Namespace string
	// Release is the Helm release being removed, whose records are kept in
	// Namespace: its own records and objects do not keep the namespace.
	// Required.
	Release string
	// Labels are labels every object of the release carries (its
	// Release.Labels, such as flotilla.dev/bundle): an object carrying one
	// of these keys with another value belongs to another release.
	// Optional.
	Labels map[string]string
}

// DeleteNamespace asks the cluster to delete del.Namespace and everything
// in it (Fleet's deleteNamespace) once release del.Release is removed,
// and returns without waiting for the namespace controller to finish. A
// namespace that is missing or already terminating is not an error.
//
// It deletes nothing, and returns a *NamespaceKeptError saying why, when
// the namespace is one of Kubernetes' own or a protected one (see
// KeepReason), or when the namespace itself or any object in it, of any
// kind, belongs to another release: a Helm record of another release (a
// Secret or ConfigMap labelled owner=helm), an object whose Helm ownership
// annotations name another release, or one carrying a key of del.Labels
// with another value. A kind it may not list keeps the namespace too. A
// kept namespace is an answer, not a failure to retry. The check reads
// every object's metadata, with fresh discovery so that kinds of new CRDs
// are seen; the deletion then requires the namespace's UID, but an object
// another release creates between the check and the deletion is not seen.
func (d *Deployer) DeleteNamespace(ctx context.Context, getter genericclioptions.RESTClientGetter, del NamespaceDeletion) error {
	if del.Namespace == "" || del.Release == "" {
		return fmt.Errorf("delete namespace %q of release %q: namespace and release are required", del.Namespace, del.Release)
	}
	if reason, ok := d.protected[del.Namespace]; ok {
		why := "it is one of Kubernetes' own namespaces"
		if reason == KeptProtected {
			why = "it is a protected namespace (Flotilla's or an agent's)"
		}
		return &NamespaceKeptError{Namespace: del.Namespace, Reason: reason, Why: why}
	}
	cs, err := newClientset(getter)
	if err != nil {
		return err
	}
	ns, err := cs.CoreV1().Namespaces().Get(ctx, del.Namespace, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case apierrors.IsForbidden(err):
		return forbiddenKept(del.Namespace, "read", err)
	case err != nil:
		return fmt.Errorf("read namespace %s: %w", del.Namespace, err)
	case ns.DeletionTimestamp != nil:
		return nil
	}
	if err := keep(ctx, getter, del, ns); err != nil {
		return err
	}
	err = cs.CoreV1().Namespaces().Delete(ctx, del.Namespace, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &ns.UID}})
	if err == nil || apierrors.IsNotFound(err) {
		return nil
	}
	// Deleting a terminating namespace is a conflict ("the system is
	// ensuring all content is removed"): the request is already granted.
	// So is a namespace recreated since the check (another UID): the
	// caller's retry checks the new one.
	if apierrors.IsForbidden(err) {
		return forbiddenKept(del.Namespace, "delete", err)
	}
	if apierrors.IsConflict(err) {
		now, getErr := cs.CoreV1().Namespaces().Get(ctx, del.Namespace, metav1.GetOptions{})
		if apierrors.IsNotFound(getErr) || (getErr == nil && now.UID == ns.UID && now.DeletionTimestamp != nil) {
			return nil
		}
	}
	return fmt.Errorf("delete namespace %s: %w", del.Namespace, err)
}

// forbiddenKept is the answer when DeleteNamespace's credentials (a
// release's ServiceAccount) may not verb the namespace: it is kept, and
// a retry would be refused again.
func forbiddenKept(namespace, verb string, err error) error {
	return &NamespaceKeptError{Namespace: namespace, Reason: KeptForbidden,
		Why: fmt.Sprintf("the credentials it is deleted with may not %s it (%v)", verb, err)}
}

// protectedNamespaces returns Kubernetes' namespaces, the default
// protected ones and extra, with the reason each is kept.
func protectedNamespaces(extra []string) map[string]KeepReason {
	out := map[string]KeepReason{}
	for _, ns := range append(DefaultProtectedNamespaces(), extra...) {
		out[ns] = KeptProtected
	}
	for _, ns := range []string{metav1.NamespaceDefault, metav1.NamespaceSystem, metav1.NamespacePublic, corev1.NamespaceNodeLease} {
		out[ns] = KeptKubernetes
	}
	return out
}

// keep returns a *NamespaceKeptError when ns, or an object in it, belongs
// to another release than del's, or an object in it cannot be listed.
func keep(ctx context.Context, getter genericclioptions.RESTClientGetter, del NamespaceDeletion, ns *corev1.Namespace) error {
	if o := del.otherOwner(ns, false); o != (owner{}) {
		return &NamespaceKeptError{Namespace: del.Namespace, Reason: KeptInUse, Why: o.of("")}
	}
	cfg, err := getter.ToRESTConfig()
	if err != nil {
		return fmt.Errorf("read REST config: %w", err)
	}
	// Not the getter's cached discovery: it may predate a CRD whose
	// objects another release keeps here.
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fmt.Errorf("create discovery client for %s: %w", cfg.Host, err)
	}
	mc, err := metadata.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("create metadata client for %s: %w", cfg.Host, err)
	}
	// A group whose discovery failed (an aggregated API that is down) may
	// hold another release's objects: fail, to retry, rather than guess.
	lists, err := dc.ServerPreferredNamespacedResources()
	if err != nil {
		return fmt.Errorf("discover the kinds namespace %s may hold: %w", del.Namespace, err)
	}
	for _, list := range lists {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			return fmt.Errorf("discover the kinds namespace %s may hold: %w", del.Namespace, err)
		}
		for _, r := range list.APIResources {
			if !checked(gv.Group, r) {
				continue
			}
			ri := mc.Resource(gv.WithResource(r.Name)).Namespace(del.Namespace)
			record := gv.Group == "" && (r.Kind == "Secret" || r.Kind == "ConfigMap")
			if err := del.checkObjects(ctx, ri, r.Kind, record); err != nil {
				return err
			}
		}
	}
	return nil
}

// checked reports whether DeleteNamespace looks at the objects of r, a
// resource of group: every listable kind but subresources and Events,
// which belong to nobody and can be many.
func checked(group string, r metav1.APIResource) bool {
	if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") {
		return false
	}
	return r.Name != "events" || (group != "" && group != "events.k8s.io")
}

// checkObjects returns a *NamespaceKeptError when an object of kind that ri
// lists belongs to another release or cannot be listed. record says
// whether the kind holds Helm release records.
func (del NamespaceDeletion) checkObjects(ctx context.Context, ri metadata.ResourceInterface, kind string, record bool) error {
	opts := metav1.ListOptions{Limit: 500}
	for {
		list, err := ri.List(ctx, opts)
		switch {
		case apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err):
			return nil // the kind went away since discovery
		case apierrors.IsForbidden(err):
			return &NamespaceKeptError{Namespace: del.Namespace, Reason: KeptUnverified,
				Why: fmt.Sprintf("its %s objects cannot be checked: %v", kind, err)}
		case err != nil:
			return fmt.Errorf("list %s objects of namespace %s: %w", kind, del.Namespace, err)
		}
		for i := range list.Items {
			obj := &list.Items[i]
			if o := del.otherOwner(obj, record); o != (owner{}) {
				return &NamespaceKeptError{Namespace: del.Namespace, Reason: KeptInUse, Why: o.of(kind + " " + obj.Name)}
			}
		}
		if list.Continue == "" {
			return nil
		}
		opts.Continue = list.Continue
	}
}

// Labels Helm's storage drivers put on a release record.
const (
	recordOwnerLabel = "owner"
	recordNameLabel  = "name"
)

// owner is whoever, other than the release being removed, owns an
// object: another release, or another value of a label of the release.
// The zero owner is nobody else.
type owner struct {
	// release is the other release: "name" in the same namespace,
	// "namespace/name" in another.
	release string
	// label is "key=value" of the other value.
	label string
}

// otherOwner returns who owns obj if not del's release. A record is a
// Secret or ConfigMap, which may be a Helm release record.
func (del NamespaceDeletion) otherOwner(obj metav1.Object, record bool) owner {
	labels, annotations := obj.GetLabels(), obj.GetAnnotations()
	if name := labels[recordNameLabel]; record && labels[recordOwnerLabel] == "helm" && name != "" && name != del.Release {
		return owner{release: name}
	}
	if name := annotations[releaseNameAnnotation]; name != "" {
		ns := annotations[releaseNamespaceAnnotation]
		switch {
		case ns != "" && ns != del.Namespace:
			return owner{release: ns + "/" + name}
		case name != del.Release:
			return owner{release: name}
		}
	}
	keys := make([]string, 0, len(del.Labels))
	for k := range del.Labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if v, ok := labels[k]; ok && v != del.Labels[k] {
			return owner{label: k + "=" + v}
		}
	}
	return owner{}
}

// of says why o keeps the namespace: o owns object ("Kind name"), or the
// namespace itself when object is "".
func (o owner) of(object string) string {
	switch {
	case object == "" && o.release != "":
		return "it is an object of release " + o.release
	case object == "":
		return "it is labelled " + o.label
	case o.release != "":
		return fmt.Sprintf("it holds release %s's objects (%s)", o.release, object)
	default:
		return fmt.Sprintf("it holds objects labelled %s (%s)", o.label, object)
	}
}
