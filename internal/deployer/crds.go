package deployer

import (
	"context"
	"fmt"
	"maps"
	"time"

	"go.uber.org/zap"
	"helm.sh/helm/v3/pkg/kube"
	"helm.sh/helm/v3/pkg/release"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/dynamic"
)

// The ownership metadata Helm requires before it adopts an existing object
// into a release (see Helm's action.existingResourceConflict).
const (
	managedByLabel             = "app.kubernetes.io/managed-by"
	managedByHelm              = "Helm"
	releaseNameAnnotation      = "meta.helm.sh/release-name"
	releaseNamespaceAnnotation = "meta.helm.sh/release-namespace"
)

// fieldManager names Flotilla's server-side applies.
const fieldManager = "flotilla"

// crdPollInterval is how often CRD installation checks the cluster.
const crdPollInterval = 100 * time.Millisecond

const crdGroup, crdKind = "apiextensions.k8s.io", "CustomResourceDefinition"

// isCRD reports whether obj is a CustomResourceDefinition.
func isCRD(obj *unstructured.Unstructured) bool {
	gvk := obj.GroupVersionKind()
	return gvk.Group == crdGroup && gvk.Kind == crdKind
}

// CRDCreatedByAnnotation records, on a CustomResourceDefinition a
// release's templates render, the release that created it
// ("namespace/name"): with Release.DeleteCRDResources, only such a CRD is
// deleted with its release. One that existed before and was adopted
// (Release.TakeOwnership, or kept by a release since uninstalled) carries
// none, and keeps helm.sh/resource-policy: keep.
const CRDCreatedByAnnotation = "flotilla.dev/created-by"

// addedAnnotations returns the annotations the post-renderer sets on obj:
// the release's, plus, on a CRD, Helm's resource-policy "keep" unless the
// release deletes CRDs and created this one (CRDCreatedByAnnotation, set
// here on a CRD about to be created).
func (p *postRenderer) addedAnnotations(obj *unstructured.Unstructured) map[string]string {
	if !isCRD(obj) {
		return p.rel.Annotations
	}
	switch {
	case !p.rel.DeleteCRDResources:
	case p.crds == nil:
		return p.rel.Annotations // rendered without a cluster: nothing is created
	case p.crds.createdHere(obj.GetName()):
		return with(p.rel.Annotations, map[string]string{CRDCreatedByAnnotation: p.rel.Namespace + "/" + p.rel.Name})
	}
	return with(p.rel.Annotations, map[string]string{kube.ResourcePolicyAnno: kube.KeepPolicy})
}

// crdInstaller makes the CustomResourceDefinitions that a release's
// templates render exist and be served before Helm builds the release's
// objects, so custom resources of them in the same release can be mapped:
// what Helm does for a chart's crds/ directory, for templated CRDs. The
// CRDs stay in the release manifest; Helm adopts them (they carry the
// release's ownership metadata) and owns them from then on.
type crdInstaller struct {
	// ctx is the Deploy call's context: Helm's post-renderer interface,
	// from which install runs, takes none.
	ctx    context.Context
	getter genericclioptions.RESTClientGetter
	log    *zap.Logger
	// release and namespace name the Helm release.
	release, namespace string
	// takeOwnership is Release.TakeOwnership.
	takeOwnership bool
	// timeout bounds one install call.
	timeout time.Duration
	// installed is set once install was given CRDs to make.
	installed bool
}

// install server-side applies each of crds, with the release's ownership
// metadata, that Helm will be able to adopt, then waits until each is
// established and the getter's REST mapper knows its kinds. A CRD owned by
// another release that still exists, or by no Helm release, is left alone
// (unless takeOwnership): Helm then reports the conflict. A CRD kept
// (helm.sh/resource-policy) by a release since uninstalled is taken over.
// Running out of time (c.timeout) is an error wrapping ErrWaitTimeout.
func (c *crdInstaller) install(crds []*unstructured.Unstructured) error {
	if len(crds) == 0 {
		return nil
	}
	c.installed = true
	start := time.Now()
	ctx, cancel := context.WithTimeout(c.ctx, c.timeout)
	defer cancel()
	dyn, err := newDynamic(c.getter)
	if err != nil {
		return err
	}
	var applied []*unstructured.Unstructured
	for _, crd := range crds {
		client := crdClient(dyn, crd)
		ok, err := c.adoptable(ctx, client, crd.GetName())
		if err != nil {
			return err
		}
		if !ok {
			c.log.Info("CRD belongs to something else; leaving it to Helm",
				zap.String("crd", crd.GetName()), zap.String("release", c.release), zap.String("namespace", c.namespace))
			continue
		}
		obj := crd.DeepCopy()
		obj.SetLabels(with(obj.GetLabels(), map[string]string{managedByLabel: managedByHelm}))
		obj.SetAnnotations(with(obj.GetAnnotations(), map[string]string{
			releaseNameAnnotation: c.release, releaseNamespaceAnnotation: c.namespace,
		}))
		out, err := client.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: fieldManager, Force: true})
		if err != nil {
			return fmt.Errorf("apply CRD %s: %w", obj.GetName(), err)
		}
		applied = append(applied, out)
	}
	for _, crd := range applied {
		if err := c.waitEstablished(ctx, crdClient(dyn, crd), crd.GetName()); err != nil {
			return err
		}
	}
	if len(applied) == 0 {
		return nil
	}
	if err := c.waitMapped(ctx, applied); err != nil {
		return err
	}
	c.log.Debug("Installed CRDs ahead of their release", zap.Int("crds", len(applied)),
		zap.Duration("took", time.Since(start)), zap.String("release", c.release), zap.String("namespace", c.namespace))
	return nil
}

// createdHere reports whether the CRD called name is this release's own:
// it does not exist yet (the release creates it), or its
// CRDCreatedByAnnotation names the release. A CRD that cannot be read
// counts as adopted: kept.
func (c *crdInstaller) createdHere(name string) bool {
	dyn, err := newDynamic(c.getter)
	if err != nil {
		return false
	}
	live, err := crdClient(dyn, &unstructured.Unstructured{Object: map[string]any{"apiVersion": crdGroup + "/v1"}}).
		Get(c.ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return true
	case err != nil:
		c.log.Info("Could not read CRD; keeping it on uninstall", zap.String("crd", name), zap.Error(err))
		return false
	}
	return live.GetAnnotations()[CRDCreatedByAnnotation] == c.namespace+"/"+c.release
}

// crdClient returns the client for CRDs at crd's API version.
func crdClient(dyn dynamic.Interface, crd *unstructured.Unstructured) dynamic.ResourceInterface {
	return dyn.Resource(schema.GroupVersionResource{
		Group: crdGroup, Version: crd.GroupVersionKind().Version, Resource: "customresourcedefinitions",
	})
}

// adoptable reports whether install may apply the CRD called name: it is
// missing, or Helm would adopt it for this release once install has set
// the ownership metadata.
func (c *crdInstaller) adoptable(ctx context.Context, client dynamic.ResourceInterface, name string) (bool, error) {
	live, err := client.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("read CRD %s: %w", name, err)
	case c.takeOwnership:
		return true, nil
	}
	owner, ns := live.GetAnnotations()[releaseNameAnnotation], live.GetAnnotations()[releaseNamespaceAnnotation]
	switch {
	case live.GetLabels()[managedByLabel] != managedByHelm || owner == "" || ns == "":
		return false, nil
	case owner == c.release && ns == c.namespace:
		return true, nil
	}
	exists, err := c.releaseExists(ctx, ns, owner)
	return !exists, err
}

// releaseExists reports whether namespace holds a record of release name
// that is not an uninstalled one (the deployer's Helm storage is Secrets).
func (c *crdInstaller) releaseExists(ctx context.Context, namespace, name string) (bool, error) {
	cs, err := newClientset(c.getter)
	if err != nil {
		return false, err
	}
	list, err := cs.CoreV1().Secrets(namespace).List(ctx, metav1.ListOptions{
		LabelSelector: fmt.Sprintf("owner=helm,name=%s,status!=%s", name, release.StatusUninstalled),
		Limit:         1,
	})
	if err != nil {
		return false, fmt.Errorf("look for release %s/%s: %w", namespace, name, err)
	}
	return len(list.Items) > 0, nil
}

// waitEstablished waits until the CRD called name is established. A CRD
// whose names the cluster does not accept fails at once.
func (c *crdInstaller) waitEstablished(ctx context.Context, client dynamic.ResourceInterface, name string) error {
	err := wait.PollUntilContextCancel(ctx, crdPollInterval, true, func(ctx context.Context) (bool, error) {
		crd, err := client.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, fmt.Errorf("read CRD %s: %w", name, err)
		}
		if status, msg := condition(crd, "NamesAccepted"); status == string(metav1.ConditionFalse) {
			return false, fmt.Errorf("CRD %s: names not accepted: %s", name, msg)
		}
		status, _ := condition(crd, "Established")
		return status == string(metav1.ConditionTrue), nil
	})
	return c.waitError(ctx, err, "CRD "+name+" not established")
}

// waitMapped waits until the getter's REST mapper, which Helm builds
// objects with, maps every served version of each CRD's kind, dropping the
// getter's discovery cache whenever it misses one.
func (c *crdInstaller) waitMapped(ctx context.Context, crds []*unstructured.Unstructured) error {
	dc, err := c.getter.ToDiscoveryClient()
	if err != nil {
		return fmt.Errorf("create discovery client: %w", err)
	}
	mapper, err := c.getter.ToRESTMapper()
	if err != nil {
		return fmt.Errorf("create REST mapper: %w", err)
	}
	var missing string
	err = wait.PollUntilContextCancel(ctx, crdPollInterval, true, func(context.Context) (bool, error) {
		for _, crd := range crds {
			for _, gvk := range servedKinds(crd) {
				_, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
				if meta.IsNoMatchError(err) {
					// New to the cache, or discovery lags behind the
					// Established condition.
					missing = gvk.String()
					dc.Invalidate()
					meta.MaybeResetRESTMapper(mapper)
					return false, nil
				}
				if err != nil {
					return false, fmt.Errorf("map %s: %w", gvk, err)
				}
			}
		}
		return true, nil
	})
	return c.waitError(ctx, err, missing+" not served")
}

// waitError returns the error of a wait on ctx, which install derived from
// c.ctx: when install's own timeout ended it, one wrapping ErrWaitTimeout
// that says what did not happen.
func (c *crdInstaller) waitError(ctx context.Context, err error, what string) error {
	if err != nil && ctx.Err() != nil && c.ctx.Err() == nil {
		return fmt.Errorf("%w: %s within %s: %w", ErrWaitTimeout, what, c.timeout, ctx.Err())
	}
	return err
}

// servedKinds returns the kind of crd at each version it serves.
func servedKinds(crd *unstructured.Unstructured) []schema.GroupVersionKind {
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	var out []schema.GroupVersionKind
	for _, v := range versions {
		m, _ := v.(map[string]any)
		if name, _ := m["name"].(string); name != "" && m["served"] == true {
			out = append(out, schema.GroupVersionKind{Group: group, Version: name, Kind: kind})
		}
	}
	return out
}

// condition returns the status and message of obj's status condition
// named type, or "" when obj has none.
func condition(obj *unstructured.Unstructured, typ string) (status, message string) {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			status, _ = m["status"].(string)
			message, _ = m["message"].(string)
			return status, message
		}
	}
	return "", ""
}

// with returns a copy of m (which may be nil) with add's entries set.
func with(m, add map[string]string) map[string]string {
	out := maps.Clone(m)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, add)
	return out
}

// crdObjects returns the CustomResourceDefinitions among docs' objects.
func crdObjects(docs []*document) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, doc := range docs {
		for _, obj := range doc.objects() {
			if isCRD(obj) {
				out = append(out, obj)
			}
		}
	}
	return out
}
