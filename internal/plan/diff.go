package plan

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-gitops/flotilla/internal/drift"
)

// diffContext is how many unchanged lines a diff shows around a change.
const diffContext = 3

// Diff compares one object before the rollout (live, or last deployed;
// nil: it does not exist) with after it (the dry run's result, or the
// render; nil: it is deleted): Create, Delete, Update with a unified diff
// of the two YAML documents, or NoChange. Both sides are normalised as
// drift compares objects (drift.Normalise: no status, no
// server-maintained metadata, no nulls), and a Secret's values are
// redacted (see Redacted). Annotations named in ignore are disregarded
// on both sides (those a deploy changes on every object each time, such
// as the commit's). Neither argument is modified; both nil is a zero
// Object.
func Diff(before, after *unstructured.Unstructured, ignore ...string) Object {
	id := after
	if id == nil {
		id = before
	}
	if id == nil {
		return Object{}
	}
	out := Object{APIVersion: id.GetAPIVersion(), Kind: id.GetKind(), Namespace: id.GetNamespace(), Name: id.GetName()}
	var b, a map[string]any
	if before != nil {
		b = drift.Normalise(before)
	}
	if after != nil {
		a = drift.Normalise(after)
	}
	for _, side := range []map[string]any{b, a} {
		dropAnnotations(side, ignore)
	}
	if isSecret(id) {
		redactSecret(b, a)
	}
	switch {
	case before == nil:
		out.Change = Create
	case after == nil:
		out.Change = Delete
	case reflect.DeepEqual(b, a):
		out.Change = NoChange
		return out
	default:
		out.Change = Update
	}
	out.Diff = unified(b, a)
	return out
}

// unified is the unified diff of before's and after's YAML ("" for a nil
// side).
func unified(before, after map[string]any) string {
	text, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: lines(before), B: lines(after),
		FromFile: "before", ToFile: "after", Context: diffContext,
	})
	if err != nil {
		// difflib fails only when writing to its buffer fails.
		return ""
	}
	return text
}

// lines are obj's YAML lines, none for nil.
func lines(obj map[string]any) []string {
	if obj == nil {
		return nil
	}
	return difflib.SplitLines(toYAML(obj))
}

// toYAML is obj as YAML, "" for nil.
func toYAML(obj map[string]any) string {
	if obj == nil {
		return ""
	}
	out, err := yaml.Marshal(obj)
	if err != nil {
		// obj came from JSON or YAML: it always encodes.
		return fmt.Sprintf("# not encodable: %v\n", err)
	}
	return string(out)
}

// Key identifies an object within a cluster: its API group (not version:
// the same object read at another version is the same object), kind,
// namespace and name.
type Key struct {
	Group, Kind, Namespace, Name string
}

// KeyOf is obj's Key.
func KeyOf(obj *unstructured.Unstructured) Key {
	return Key{Group: obj.GroupVersionKind().Group, Kind: obj.GetKind(), Namespace: obj.GetNamespace(), Name: obj.GetName()}
}

// Objects diffs the objects of two manifests of one release (before: what
// the cluster runs; after: what it would run), paired by Key: objects only
// in after are created, only in before deleted (ignore as in Diff).
// Unchanged objects are left out; the result is sorted by kind, namespace
// and name.
func Objects(before, after []*unstructured.Unstructured, ignore ...string) []Object {
	old := make(map[Key]*unstructured.Unstructured, len(before))
	for _, o := range before {
		old[KeyOf(o)] = o
	}
	var out []Object
	for _, o := range after {
		k := KeyOf(o)
		if d := Diff(old[k], o, ignore...); d.Change != NoChange {
			out = append(out, d)
		}
		delete(old, k)
	}
	for _, o := range before {
		if _, gone := old[KeyOf(o)]; gone {
			out = append(out, Diff(o, nil, ignore...))
		}
	}
	SortObjects(out)
	return out
}

// SortObjects orders objects by kind, namespace and name, as Result.Sort.
func SortObjects(objs []Object) {
	slices.SortFunc(objs, func(a, b Object) int {
		return strings.Compare(a.Kind+"/"+a.Namespace+"/"+a.Name, b.Kind+"/"+b.Namespace+"/"+b.Name)
	})
}

// ParseManifest reads a multi-document YAML stream (a Helm release's
// manifest) into objects, in order. Empty documents are skipped; a
// kind: List is expanded into its items. A document that is not an
// object is an error naming its position, never its content (it may be
// a Secret).
func ParseManifest(manifest string) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader([]byte(manifest)), 4096)
	var out []*unstructured.Unstructured
	for i := 1; ; i++ {
		var doc map[string]any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%w: document %d is not a YAML object", ErrManifest, i)
		}
		if len(doc) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: doc}
		if u.IsList() {
			err = u.EachListItem(func(o runtime.Object) error {
				out = append(out, o.(*unstructured.Unstructured))
				return nil
			})
			if err != nil {
				return nil, fmt.Errorf("%w: document %d: list items are not objects", ErrManifest, i)
			}
			continue
		}
		out = append(out, u)
	}
}

// ErrManifest marks a manifest that is not a stream of YAML objects.
var ErrManifest = errors.New("manifest is not a YAML stream of objects")

// ActionFor decides a release's action from the deployment ID the cluster
// runs (from; "" when the release is not installed) and the one the
// rollout deploys (to; "" when it removes the release).
func ActionFor(from, to string) Action {
	switch {
	case to == "":
		return Uninstall
	case from == "":
		return Install
	case from == to:
		return Unchanged
	default:
		return Upgrade
	}
}

// isSecret reports whether obj is a core Secret.
func isSecret(obj *unstructured.Unstructured) bool {
	gvk := obj.GroupVersionKind()
	return gvk.GroupKind() == schema.GroupKind{Kind: "Secret"}
}

// dropAnnotations removes keys from obj's annotations (obj may be nil),
// and the annotations themselves when none are left.
func dropAnnotations(obj map[string]any, keys []string) {
	meta, ok := obj["metadata"].(map[string]any)
	if !ok || len(keys) == 0 {
		return
	}
	ann, ok := meta["annotations"].(map[string]any)
	if !ok {
		return
	}
	for _, k := range keys {
		delete(ann, k)
	}
	if len(ann) == 0 {
		delete(meta, "annotations")
	}
}
