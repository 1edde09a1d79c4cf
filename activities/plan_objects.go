package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	jsonpatch "github.com/evanphx/json-patch"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/dynamic"

	"github.com/flotilla-gitops/flotilla/internal/deployer"
	"github.com/flotilla-gitops/flotilla/internal/drift"
	"github.com/flotilla-gitops/flotilla/internal/plan"
)

// keepPolicy is Helm's resource policy that keeps an object when its
// release drops it.
const keepPolicy = "helm.sh/resource-policy"

// objectPlanner plans the objects of one release's manifest.
type objectPlanner struct {
	dyn    dynamic.Interface
	getter genericclioptions.RESTClientGetter
	// namespace is where namespaced objects without one go, as Helm
	// applies them.
	namespace string
	// crds are the kinds the release's own CRDs define.
	crds map[schema.GroupKind]bool
	// old are the objects of the deployed revision's manifest.
	old map[plan.Key]*unstructured.Unstructured
}

// planObjects diffs every object of pv's manifest against the cluster
// (see objectPlanner.object), and lists the objects of the deployed
// revision the manifest drops as deleted. Unchanged objects are left out.
// errText summarises the objects the API server refused ("" for none).
func planObjects(ctx context.Context, pv deployer.Preview, namespace string) (objs []plan.Object, errText string) {
	desired, err := plan.ParseManifest(pv.Manifest)
	if err != nil {
		return nil, err.Error()
	}
	dyn, err := dynamicOf(pv.Getter)
	if err != nil {
		return nil, err.Error()
	}
	p := &objectPlanner{dyn: dyn, getter: pv.Getter, namespace: namespace, crds: renderedKinds(desired), old: revisionObjects(pv.Current)}
	kept := map[plan.Key]bool{}
	var refused []string
	for _, o := range desired {
		obj := p.object(ctx, o)
		kept[plan.KeyOf(o)] = true
		if obj.Error != "" {
			refused = append(refused, obj.Kind+" "+obj.Name)
		}
		if obj.Change != plan.NoChange || obj.Error != "" {
			objs = append(objs, obj)
		}
	}
	gone, delErr := deletions(ctx, pv.Getter, pv.Current, kept)
	objs = append(objs, gone...)
	plan.SortObjects(objs)
	if len(refused) > 0 {
		errText = fmt.Sprintf("the API server refused %d object(s): %s", len(refused), strings.Join(refused, ", "))
	}
	if delErr != "" {
		errText = strings.TrimPrefix(errText+"; "+delErr, "; ")
	}
	return objs, errText
}

// object is what applying o would do: live (nil when missing) against
// the result of a forced server-side apply dry run of o (Helm's deploy
// overrides other managers), less the fields the deployed revision set
// and o drops (which Helm's three-way merge removes). A kind the cluster
// does not serve is an error unless the release's own CRDs define it; a
// refused dry run is the API server's error, with the diff against live
// merged with o (what was asked for). o gets its namespace set.
func (p *objectPlanner) object(ctx context.Context, o *unstructured.Unstructured) plan.Object {
	gvr, namespaced, err := deployer.Mapping(p.getter, o.GetAPIVersion(), o.GetKind())
	if err != nil {
		if o.GetNamespace() == "" {
			o.SetNamespace(p.namespace)
		}
		d := plan.Diff(nil, o)
		if !meta.IsNoMatchError(err) || !p.crds[o.GroupVersionKind().GroupKind()] {
			d.Error = plan.ErrorText(o, err)
		}
		return d
	}
	switch {
	case !namespaced:
		o.SetNamespace("")
	case o.GetNamespace() == "":
		o.SetNamespace(p.namespace)
	}
	live, err := p.dyn.Resource(gvr).Namespace(o.GetNamespace()).Get(ctx, o.GetName(), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		live = nil
	case err != nil:
		d := plan.Diff(nil, o)
		d.Error = plan.ErrorText(o, err)
		return d
	}
	applied, err := drift.DryRun(ctx, p.dyn, gvr, namespaced, o)
	switch {
	case err == nil:
		return plan.Diff(live, withoutDropped(applied, p.old[plan.KeyOf(o)], o), AnnotationCommit)
	case live == nil && apierrors.IsNotFound(err):
		// Its namespace does not exist yet: the deploy creates it first.
		return plan.Diff(nil, o)
	}
	d := plan.Diff(live, merged(live, o), AnnotationCommit)
	d.Error = plan.ErrorText(o, err)
	return d
}

// withoutDropped is applied without the fields old sets and want does
// not (map keys, at any depth; lists are compared whole). The dry run
// keeps them, as the deploy's field manager, not the dry run's, owns
// them; Helm's upgrade removes them. applied is returned as it is when
// old is nil or anything does not encode.
func withoutDropped(applied, old, want *unstructured.Unstructured) *unstructured.Unstructured {
	if old == nil {
		return applied
	}
	o, err1 := json.Marshal(old.Object)
	w, err2 := json.Marshal(want.Object)
	if err1 != nil || err2 != nil {
		return applied
	}
	patch, err := jsonpatch.CreateMergePatch(o, w)
	if err != nil {
		return applied
	}
	var removals map[string]any
	if json.Unmarshal(patch, &removals) != nil || !onlyRemovals(removals) {
		return applied
	}
	r, err := json.Marshal(removals)
	if err != nil {
		return applied
	}
	if out := mergePatch(applied, r); out != nil {
		return out
	}
	return applied
}

// onlyRemovals keeps, at every depth of patch, only the entries that
// remove a field (null) or hold such entries; it reports whether any is
// left.
func onlyRemovals(patch map[string]any) bool {
	for k, v := range patch {
		switch v := v.(type) {
		case nil:
		case map[string]any:
			if !onlyRemovals(v) {
				delete(patch, k)
			}
		default:
			delete(patch, k)
		}
	}
	return len(patch) > 0
}

// merged is live with want merged in as a JSON merge patch (RFC 7386):
// what was asked for. It is want when live is nil or either does not
// encode.
func merged(live, want *unstructured.Unstructured) *unstructured.Unstructured {
	if live == nil {
		return want
	}
	w, err := json.Marshal(want.Object)
	if err != nil {
		return want
	}
	if out := mergePatch(live, w); out != nil {
		return out
	}
	return want
}

// mergePatch is obj with the JSON merge patch applied; nil when either
// does not encode.
func mergePatch(obj *unstructured.Unstructured, patch []byte) *unstructured.Unstructured {
	o, err := json.Marshal(obj.Object)
	if err != nil {
		return nil
	}
	m, err := jsonpatch.MergePatch(o, patch)
	out := &unstructured.Unstructured{}
	if err != nil || out.UnmarshalJSON(m) != nil {
		return nil
	}
	return out
}

// deletions lists the objects of rev that keep does not hold as deleted,
// each as it is live (or, when already gone, as rev has it). Objects
// Helm keeps (helm.sh/resource-policy: keep) are left out. errText names
// the objects that could not be read.
func deletions(ctx context.Context, getter genericclioptions.RESTClientGetter, rev deployer.Revision, keep map[plan.Key]bool) (objs []plan.Object, errText string) {
	if len(rev.Objects) == 0 {
		return nil, ""
	}
	dyn, err := dynamicOf(getter)
	if err != nil {
		return nil, err.Error()
	}
	var unread []string
	for _, info := range rev.Objects {
		o, err := toUnstructured(info.Object)
		if err != nil || info.Mapping == nil {
			unread = append(unread, info.ObjectName())
			continue
		}
		o.SetNamespace(info.Namespace)
		if keep[plan.KeyOf(o)] || o.GetAnnotations()[keepPolicy] == "keep" {
			continue
		}
		live, err := dyn.Resource(info.Mapping.Resource).Namespace(info.Namespace).Get(ctx, info.Name, metav1.GetOptions{})
		switch {
		case err == nil:
			o = live
		case !apierrors.IsNotFound(err):
			unread = append(unread, info.ObjectName())
		}
		objs = append(objs, plan.Diff(o, nil))
	}
	if len(unread) > 0 {
		errText = "could not read " + strings.Join(unread, ", ")
	}
	return objs, errText
}

// renderedKinds are the kinds the CustomResourceDefinitions among objs
// define.
func renderedKinds(objs []*unstructured.Unstructured) map[schema.GroupKind]bool {
	out := map[schema.GroupKind]bool{}
	for _, o := range objs {
		if o.GetKind() != "CustomResourceDefinition" {
			continue
		}
		group, _, _ := unstructured.NestedString(o.Object, "spec", "group")
		kind, _, _ := unstructured.NestedString(o.Object, "spec", "names", "kind")
		out[schema.GroupKind{Group: group, Kind: kind}] = true
	}
	return out
}

// revisionObjects are rev's objects by key, namespaces set.
func revisionObjects(rev deployer.Revision) map[plan.Key]*unstructured.Unstructured {
	out := make(map[plan.Key]*unstructured.Unstructured, len(rev.Objects))
	for _, info := range rev.Objects {
		if o, err := toUnstructured(info.Object); err == nil {
			o.SetNamespace(info.Namespace)
			out[plan.KeyOf(o)] = o
		}
	}
	return out
}

// dynamicOf is a dynamic client acting as getter does.
func dynamicOf(getter genericclioptions.RESTClientGetter) (dynamic.Interface, error) {
	cfg, err := getter.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	return dynamic.NewForConfig(cfg)
}

// toUnstructured is obj as an Unstructured (Helm builds them so).
func toUnstructured(obj runtime.Object) (*unstructured.Unstructured, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u.DeepCopy(), nil
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: m}, nil
}
