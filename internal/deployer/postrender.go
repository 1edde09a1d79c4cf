package deployer

import (
	"bytes"
	"errors"
	"fmt"
	"maps"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/postrender"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/cli-runtime/pkg/genericclioptions"
)

// postRenderer edits and checks what Helm rendered for one release, before
// Helm applies anything: it forces the namespace, adds the release's labels
// and annotations (and helm.sh/resource-policy: keep on CRDs unless
// Release.DeleteCRDResources), and validates every object's labels and
// annotations. Once everything passed, it installs the CRDs among the
// objects (see crdInstaller), so that Helm can map their custom resources.
// Helm v3 runs it over the templates' output only: hooks and the chart's
// crds/ files bypass it (see checkCRDFiles for the latter).
//
// One postRenderer serves one Deploy call; it is not safe for concurrent use.
type postRenderer struct {
	rel    Release
	mapper meta.RESTMapper
	// scopes caches clusterScoped answers for this call.
	scopes map[schema.GroupKind]bool
	// crds installs the rendered CRDs; nil renders without a cluster.
	crds *crdInstaller
	// ns applies the namespace's labels and annotations; nil renders
	// without a cluster.
	ns *namespaceMetadata
	// fields checks the objects' fields against the cluster's schema;
	// nil renders without a cluster.
	fields *fieldChecker
	// lease, when set, takes the release's lease once the namespace
	// exists and before anything else is applied (a first install into a
	// new namespace; see deployRun.begin).
	lease func() error
}

var _ postrender.PostRenderer = (*postRenderer)(nil)

// newPostRenderer returns the post-renderer for rel on the cluster behind
// getter, whose REST mapper tells namespaced from cluster-scoped kinds.
func newPostRenderer(getter genericclioptions.RESTClientGetter, rel Release) (*postRenderer, error) {
	mapper, err := getter.ToRESTMapper()
	if err != nil {
		return nil, fmt.Errorf("create REST mapper for release %s/%s: %w", rel.Namespace, rel.Name, err)
	}
	return &postRenderer{rel: rel, mapper: mapper, scopes: map[schema.GroupKind]bool{}}, nil
}

// Run implements postrender.PostRenderer. It drops empty documents, keeps
// the others in order (unchanged documents byte for byte, with their
// "# Source:" comments), and fails without output when any object is
// invalid, so that Helm applies nothing.
func (p *postRenderer) Run(rendered *bytes.Buffer) (*bytes.Buffer, error) {
	if p.rel.PreRender != nil {
		var err error
		if rendered, err = p.rel.PreRender.Run(rendered); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidRelease, err)
		}
	}
	docs, err := splitDocuments(rendered.Bytes())
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidRelease, err)
	}
	if err := p.process(docs); err != nil {
		return nil, err
	}
	if p.fields != nil {
		if err := p.fields.check(docs); err != nil {
			return nil, fmt.Errorf("release %s/%s: %w", p.rel.Namespace, p.rel.Name, err)
		}
	}
	if p.ns != nil {
		if err := p.ns.apply(); err != nil {
			return nil, fmt.Errorf("release %s/%s: %w", p.rel.Namespace, p.rel.Name, err)
		}
	}
	if p.lease != nil {
		if err := p.lease(); err != nil {
			return nil, fmt.Errorf("release %s/%s: %w", p.rel.Namespace, p.rel.Name, err)
		}
	}
	if p.crds != nil {
		if err := p.crds.install(crdObjects(docs)); err != nil {
			return nil, fmt.Errorf("install CRDs of release %s/%s: %w", p.rel.Namespace, p.rel.Name, err)
		}
	}
	out := new(bytes.Buffer)
	for _, doc := range docs {
		if err := doc.write(out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// checkCRDFiles applies Run's checks to the chart's crds/ files, which
// Helm installs unmodified before rendering: with ForceNamespace they are
// rejected (a CustomResourceDefinition is cluster-scoped), and their labels
// and annotations must be valid. It keeps a bad chart from changing the
// cluster before Run could reject it.
func (p *postRenderer) checkCRDFiles(c *chart.Chart) error {
	var errs []error
	for _, crd := range c.CRDObjects() {
		docs, err := splitDocuments(crd.File.Data)
		if err != nil {
			errs = append(errs, fmt.Errorf("%w: %s: %w", ErrInvalidRelease, crd.Filename, err))
			continue
		}
		if err := p.process(docs); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", crd.Filename, err))
		}
	}
	return errors.Join(errs...)
}

// process edits every object of docs in place. It returns all problems
// found, joined; problems with the release's content wrap ErrInvalidRelease.
func (p *postRenderer) process(docs []*document) error {
	var invalid []error
	for _, doc := range docs {
		for _, obj := range doc.objects() {
			changed, errs, err := p.edit(obj)
			if err != nil {
				return err
			}
			invalid = append(invalid, errs...)
			doc.changed = doc.changed || changed
		}
	}
	if len(invalid) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalidRelease, errors.Join(invalid...))
	}
	return nil
}

// edit forces obj's namespace, adds the release's labels and annotations,
// and validates the result. It reports whether obj changed, what is wrong
// with it, and, separately, a failure to decide (discovery unavailable).
func (p *postRenderer) edit(obj *unstructured.Unstructured) (bool, []error, error) {
	var errs []error
	nsChanged, err := p.forceNamespace(obj)
	var scopeErr *clusterScopedError
	if errors.As(err, &scopeErr) {
		errs = append(errs, err)
	} else if err != nil {
		return false, nil, err
	}
	mdChanged, fieldErrs := p.addMetadata(obj)
	for _, fe := range fieldErrs {
		errs = append(errs, fmt.Errorf("%w: %s %s: %s", ErrInvalidMetadata, obj.GetKind(), p.describe(obj), fe.Error()))
	}
	return nsChanged || mdChanged, errs, nil
}

// clusterScopedError reports a cluster-scoped object in a release confined
// to a namespace.
type clusterScopedError struct{ kind, name, namespace string }

func (e *clusterScopedError) Error() string {
	return fmt.Sprintf("%s %s is cluster-scoped; forced namespace %s forbids it", e.kind, e.name, e.namespace)
}

// forceNamespace moves obj into ForceNamespace, if set, and reports whether
// it changed. A cluster-scoped obj is a *clusterScopedError.
func (p *postRenderer) forceNamespace(obj *unstructured.Unstructured) (bool, error) {
	ns := p.rel.ForceNamespace
	if ns == "" {
		return false, nil
	}
	clusterScoped, err := p.clusterScoped(obj.GroupVersionKind())
	switch {
	case err != nil:
		return false, err
	case clusterScoped:
		return false, &clusterScopedError{kind: obj.GetKind(), name: objectName(obj), namespace: ns}
	case obj.GetNamespace() == ns:
		return false, nil
	}
	obj.SetNamespace(ns)
	return true, nil
}

// addMetadata sets the release's labels and annotations on obj (and the
// keep policy on a CRD, see addedAnnotations), then validates all of obj's
// labels and annotations. It reports whether obj changed and what is
// invalid; obj is left alone when its labels or annotations are malformed
// (not a map of strings).
func (p *postRenderer) addMetadata(obj *unstructured.Unstructured) (bool, field.ErrorList) {
	if md, ok := obj.Object["metadata"]; ok {
		if _, ok := md.(map[string]any); !ok {
			return false, field.ErrorList{field.Invalid(field.NewPath("metadata"), md, "must be an object")}
		}
	}
	labelsPath, annotationsPath := field.NewPath("metadata", "labels"), field.NewPath("metadata", "annotations")
	labels, errs := stringMap(obj, "labels", labelsPath)
	annotations, annErrs := stringMap(obj, "annotations", annotationsPath)
	if errs = append(errs, annErrs...); len(errs) > 0 {
		return false, errs
	}
	changed := merge(obj, "labels", labels, p.rel.Labels)
	changed = merge(obj, "annotations", annotations, p.addedAnnotations(obj)) || changed
	return changed, metadataErrors(labels, annotations, labelsPath, annotationsPath)
}

// describe names obj as it will exist on the cluster: "ns/name" for a
// namespaced object (the release namespace when it names none), "name"
// otherwise. It is best effort: an undecidable scope counts as namespaced.
func (p *postRenderer) describe(obj *unstructured.Unstructured) string {
	if obj.GetNamespace() == "" {
		if clusterScoped, err := p.clusterScoped(obj.GroupVersionKind()); err == nil && clusterScoped {
			return objectName(obj)
		}
		return p.rel.Namespace + "/" + objectName(obj)
	}
	return obj.GetNamespace() + "/" + objectName(obj)
}

// clusterScoped reports whether objects of gvk's kind are cluster-scoped,
// asking the cluster first. A kind the cluster does not serve (yet) is
// looked up among the built-in cluster-scoped kinds and is otherwise
// namespaced: a custom resource whose CustomResourceDefinition comes with
// the release either fails to apply or, with ForceNamespace, is rejected
// with its definition.
func (p *postRenderer) clusterScoped(gvk schema.GroupVersionKind) (bool, error) {
	gk := gvk.GroupKind()
	if v, ok := p.scopes[gk]; ok {
		return v, nil
	}
	var clusterScoped bool
	mapping, err := p.mapper.RESTMapping(gk, gvk.Version)
	switch {
	case err == nil:
		clusterScoped = mapping.Scope.Name() == meta.RESTScopeNameRoot
	case meta.IsNoMatchError(err):
		clusterScoped = builtinClusterScoped(gk)
	default:
		return false, fmt.Errorf("look up the scope of %s: %w", gvk, err)
	}
	p.scopes[gk] = clusterScoped
	return clusterScoped, nil
}

// builtinClusterScoped reports whether gk is a cluster-scoped kind built
// into Kubernetes.
func builtinClusterScoped(gk schema.GroupKind) bool {
	switch gk.Group {
	case "":
		return gk.Kind == "Namespace" || gk.Kind == "Node" || gk.Kind == "PersistentVolume" || gk.Kind == "ComponentStatus"
	case "rbac.authorization.k8s.io":
		return gk.Kind == "ClusterRole" || gk.Kind == "ClusterRoleBinding"
	case "apiextensions.k8s.io", "apiregistration.k8s.io", "admissionregistration.k8s.io",
		"flowcontrol.apiserver.k8s.io", "scheduling.k8s.io", "node.k8s.io", "certificates.k8s.io":
		// Every persisted kind of these groups is cluster-scoped.
		return true
	case "storage.k8s.io":
		return gk.Kind != "CSIStorageCapacity"
	case "networking.k8s.io":
		return gk.Kind == "IngressClass" || gk.Kind == "IPAddress" || gk.Kind == "ServiceCIDR"
	case "resource.k8s.io":
		return gk.Kind == "DeviceClass"
	}
	return false
}

// stringMap returns obj's metadata.<key> as a map of strings, with an
// error per value that is not a string.
func stringMap(obj *unstructured.Unstructured, key string, path *field.Path) (map[string]string, field.ErrorList) {
	// addMetadata has checked that metadata, if present, is an object.
	raw, _, _ := unstructured.NestedFieldNoCopy(obj.Object, "metadata", key)
	if raw == nil {
		return map[string]string{}, nil
	}
	m, ok := raw.(map[string]any)
	if !ok {
		return nil, field.ErrorList{field.Invalid(path, raw, "must be a map of strings")}
	}
	out := make(map[string]string, len(m))
	var errs field.ErrorList
	for k, v := range m {
		s, ok := v.(string)
		if !ok {
			errs = append(errs, field.Invalid(path.Key(k), v, "must be a string"))
			continue
		}
		out[k] = s
	}
	return out, errs
}

// merge sets add's entries in current and, when that changes anything,
// stores current as obj's metadata.<key>. It reports whether obj changed.
func merge(obj *unstructured.Unstructured, key string, current, add map[string]string) bool {
	changed := false
	for k, v := range add {
		if old, ok := current[k]; !ok || old != v {
			current[k] = v
			changed = true
		}
	}
	if changed {
		// Cannot fail: addMetadata has checked that metadata, if present, is an object.
		_ = unstructured.SetNestedStringMap(obj.Object, maps.Clone(current), "metadata", key)
	}
	return changed
}

// objectName returns obj's name, or its generateName followed by "*".
func objectName(obj *unstructured.Unstructured) string {
	if name := obj.GetName(); name != "" {
		return name
	}
	return obj.GetGenerateName() + "*"
}
