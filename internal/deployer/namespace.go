package deployer

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
)

// NamespaceFieldManager is the server-side apply field manager under
// which release name sets its Release.NamespaceLabels and
// NamespaceAnnotations: one per release, so that releases sharing a
// namespace each own their own keys.
func NamespaceFieldManager(release string) string { return "flotilla-namespace/" + release }

// namespaceMetadata applies a release's labels and annotations to its
// namespace (Fleet's namespaceLabels and namespaceAnnotations) with the
// release's credentials: as its ServiceAccount when it names one, so a
// bundle cannot label its namespace (pod-security.kubernetes.io/enforce:
// privileged) unless its account may patch namespaces.
type namespaceMetadata struct {
	ctx         context.Context
	getter      genericclioptions.RESTClientGetter
	namespace   string
	release     string
	labels      map[string]string
	annotations map[string]string
	// create creates the namespace when it is missing, as Helm's
	// CreateNamespace would (labelled name=<namespace>), without Helm's
	// client-side OpenAPI validation of it, which parses the whole core
	// API's OpenAPI document on every install.
	create bool
}

// apply server-side applies the labels and annotations, creating the
// namespace when it is missing; without them it creates a missing
// namespace only when create is set. The release's field manager owns exactly these
// keys: a key dropped since the last apply is removed (unless another
// manager set it too), keys others set (kubernetes.io/metadata.name,
// pod-security.kubernetes.io/* from an admission policy, a person's) are
// left alone, and a key both set takes the release's value. With neither
// labels nor annotations it only removes what the release set before.
func (n *namespaceMetadata) apply() error {
	cs, err := newClientset(n.getter)
	if err != nil {
		return err
	}
	manager := NamespaceFieldManager(n.release)
	metadata := len(n.labels) > 0 || len(n.annotations) > 0
	if !metadata {
		ns, err := cs.CoreV1().Namespaces().Get(n.ctx, n.namespace, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err) && n.create:
			_, err := cs.CoreV1().Namespaces().Create(n.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
				Name: n.namespace, Labels: map[string]string{"name": n.namespace}}}, metav1.CreateOptions{FieldManager: FieldManager})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("create namespace %s: %w", n.namespace, err)
			}
			return nil
		case apierrors.IsNotFound(err):
			return nil
		case apierrors.IsForbidden(err) && !n.create:
			// A ServiceAccount that may not read its namespace may not
			// change it either: what the release set before stays.
			return nil
		case err != nil:
			return fmt.Errorf("read namespace %s: %w", n.namespace, err)
		case !slices.ContainsFunc(ns.ManagedFields, func(e metav1.ManagedFieldsEntry) bool {
			return e.Manager == manager && e.Operation == metav1.ManagedFieldsOperationApply
		}):
			return nil
		}
	}
	ac := corev1ac.Namespace(n.namespace)
	if len(n.labels) > 0 {
		ac.WithLabels(n.labels)
	}
	if len(n.annotations) > 0 {
		ac.WithAnnotations(n.annotations)
	}
	if _, err := cs.CoreV1().Namespaces().Apply(n.ctx, ac, metav1.ApplyOptions{FieldManager: manager, Force: true}); err != nil {
		return fmt.Errorf("apply labels and annotations of namespace %s: %w", n.namespace, err)
	}
	return nil
}
