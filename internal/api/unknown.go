package api

import (
	"encoding"
	"encoding/json"
	"reflect"
	"sort"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// UnknownFields lists, as dotted paths ("spec.pollingIntreval",
// "spec.targets[0].clusterSelectr"), the keys of raw that no field of a
// value of type t decodes: what a strict decoder would refuse and a
// lenient one drops without a word. Keys match JSON field names as the
// decoder does, case-insensitively. Maps and slices are followed into their
// elements; free-form values (interface types, json.RawMessage) and types
// that decode themselves (durations, quantities, int-or-strings) are taken
// whole. metadata is checked against Kubernetes' own ObjectMeta, so a
// document exported with kubectl (uid, resourceVersion, ...) is accepted;
// the top-level status of such an object (a type with a metadata field) is
// output, not input, and is skipped. Embedded structs and fields tagged
// `json:",inline"` contribute their fields to the enclosing object, at any
// depth (fleet.yaml's targetCustomizations[i] inline their selector and
// options).
func UnknownFields(raw map[string]any, t reflect.Type) []string {
	var out []string
	walkUnknown(raw, t, "", &out)
	sort.Strings(out)
	return out
}

var (
	objectMetaType  = reflect.TypeOf(ObjectMeta{})
	k8sMetaType     = reflect.TypeOf(metav1.ObjectMeta{})
	jsonUnmarshaler = reflect.TypeOf((*json.Unmarshaler)(nil)).Elem()
	textUnmarshaler = reflect.TypeOf((*encoding.TextUnmarshaler)(nil)).Elem()
)

func walkUnknown(v any, t reflect.Type, path string, out *[]string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == objectMetaType {
		t = k8sMetaType
	}
	if reflect.PointerTo(t).Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler) {
		return // decodes itself
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return // a type error, reported by the decoder
		}
		fields := jsonFields(t)
		_, object := fields["metadata"]
		for k, val := range m {
			if path == "" && k == "status" && object {
				continue
			}
			ft, ok := fields[strings.ToLower(k)]
			if !ok {
				*out = append(*out, join(path, k))
				continue
			}
			walkUnknown(val, ft, join(path, k), out)
		}
	case reflect.Map:
		if m, ok := v.(map[string]any); ok {
			for k, val := range m {
				walkUnknown(val, t.Elem(), join(path, k), out)
			}
		}
	case reflect.Slice, reflect.Array:
		if s, ok := v.([]any); ok {
			for i, val := range s {
				walkUnknown(val, t.Elem(), path+"["+strconv.Itoa(i)+"]", out)
			}
		}
	}
}

// jsonFields maps the lower-cased JSON names of t's fields, inline and
// embedded structs included, to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	EachJSONField(t, func(_ reflect.Type, f reflect.StructField, name string) {
		out[strings.ToLower(name)] = f.Type
	})
	return out
}

// EachJSONField calls fn for every field of struct type t that
// encoding/json reads, under the name it reads it by; the fields of
// embedded structs and of fields tagged inline are visited in place, with
// their own struct type as owner.
func EachJSONField(t reflect.Type, fn func(owner reflect.Type, f reflect.StructField, name string)) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if (f.Anonymous && name == "") || strings.Contains(opts, "inline") {
			if ft.Kind() == reflect.Struct {
				EachJSONField(ft, fn)
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		fn(t, f, name)
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
