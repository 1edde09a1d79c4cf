package main

import (
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/flotilla-gitops/flotilla/internal/api"
)

// Schema is the subset of OpenAPI v3 (apiextensions.k8s.io/v1
// JSONSchemaProps) the generated CRDs use. Marshalled through
// sigs.k8s.io/yaml, its maps come out with sorted keys.
type Schema struct {
	Type                 string             `json:"type,omitempty"`
	Format               string             `json:"format,omitempty"`
	Description          string             `json:"description,omitempty"`
	Nullable             bool               `json:"nullable,omitempty"`
	Properties           map[string]*Schema `json:"properties,omitempty"`
	Required             []string           `json:"required,omitempty"`
	Items                *Schema            `json:"items,omitempty"`
	AdditionalProperties *Schema            `json:"additionalProperties,omitempty"`
	AnyOf                []*Schema          `json:"anyOf,omitempty"`
	PreserveUnknown      bool               `json:"x-kubernetes-preserve-unknown-fields,omitempty"`
	IntOrString          bool               `json:"x-kubernetes-int-or-string,omitempty"`
	ListType             string             `json:"x-kubernetes-list-type,omitempty"`
	MapType              string             `json:"x-kubernetes-map-type,omitempty"`
}

// preserved is an object that keeps every field it is given.
func preserved() *Schema { return &Schema{Type: "object", PreserveUnknown: true} }

// anyValue accepts any JSON value, kept as it is.
func anyValue() *Schema { return &Schema{PreserveUnknown: true} }

func intOrString() *Schema {
	return &Schema{AnyOf: []*Schema{{Type: "integer"}, {Type: "string"}}, IntOrString: true}
}

// labelSelector is metav1.LabelSelector as Fleet's CRDs have it, plus
// preserve-unknown-fields on its objects.
func labelSelector() *Schema {
	strs := &Schema{Type: "array", Items: &Schema{Type: "string"}, ListType: "atomic"}
	expr := &Schema{
		Type: "object", PreserveUnknown: true, Required: []string{"key", "operator"},
		Properties: map[string]*Schema{"key": {Type: "string"}, "operator": {Type: "string"}, "values": strs},
	}
	return &Schema{
		Type: "object", PreserveUnknown: true, MapType: "atomic",
		Properties: map[string]*Schema{
			"matchExpressions": {Type: "array", Items: expr, ListType: "atomic"},
			"matchLabels":      {Type: "object", AdditionalProperties: &Schema{Type: "string"}},
		},
	}
}

// special maps types whose JSON form is not their Go structure (they
// encode themselves) to their schema: as permissive as Fleet's (durations
// are strings, quantities int-or-string without Fleet's pattern).
var special = map[reflect.Type]func() *Schema{
	reflect.TypeFor[metav1.Duration]():      func() *Schema { return &Schema{Type: "string"} },
	reflect.TypeFor[metav1.Time]():          func() *Schema { return &Schema{Type: "string", Format: "date-time"} },
	reflect.TypeFor[metav1.MicroTime]():     func() *Schema { return &Schema{Type: "string", Format: "date-time"} },
	reflect.TypeFor[resource.Quantity]():    intOrString,
	reflect.TypeFor[intstr.IntOrString]():   intOrString,
	reflect.TypeFor[metav1.LabelSelector](): labelSelector,
	reflect.TypeFor[json.RawMessage]():      anyValue,
}

// omitted lists fields of internal/api left out of the schemas, by struct
// type and JSON name, with why. Such a field, if a document sets it, is
// kept as an unknown field.
var omitted = map[reflect.Type]map[string]string{
	reflect.TypeFor[api.GitRepoSpec](): {
		"helmOp": "Flotilla-internal: set only on the GitRepo a HelmOp rolls out as (api.HelmOp.AsGitRepo)",
	},
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// builder turns Go types into schemas by their JSON encoding.
type builder struct {
	// path holds the struct types being expanded, to stop at a recursive type.
	path map[reflect.Type]bool
	// docs are internal/api's doc comments (apiDocs), the descriptions.
	docs map[string]string
}

// schemaOf returns the schema of values of type t.
func (b *builder) schemaOf(t reflect.Type) *Schema {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if f, ok := special[t]; ok {
		return f()
	}
	if reflect.PointerTo(t).Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler) {
		return anyValue() // decodes itself: its JSON form is unknown here
	}
	switch t.Kind() {
	case reflect.Struct:
		return b.object(t)
	case reflect.Map:
		if t.Key().Kind() != reflect.String || t.Elem().Kind() == reflect.Interface {
			return preserved()
		}
		return &Schema{Type: "object", AdditionalProperties: b.schemaOf(t.Elem())}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return &Schema{Type: "string", Format: "byte"}
		}
		return &Schema{Type: "array", Items: b.schemaOf(t.Elem())}
	case reflect.Interface:
		return anyValue()
	}
	return scalar(t)
}

// scalar is the schema of a bool, number or string type.
func scalar(t reflect.Type) *Schema {
	switch t.Kind() {
	case reflect.Bool:
		return &Schema{Type: "boolean"}
	case reflect.String:
		return &Schema{Type: "string"}
	case reflect.Int32, reflect.Int16, reflect.Int8, reflect.Uint16, reflect.Uint8:
		return &Schema{Type: "integer", Format: "int32"}
	case reflect.Int, reflect.Int64, reflect.Uint, reflect.Uint32, reflect.Uint64:
		return &Schema{Type: "integer", Format: "int64"}
	case reflect.Float32, reflect.Float64:
		return &Schema{Type: "number"}
	}
	panic(fmt.Sprintf("crdgen: no schema for %s (kind %s)", t, t.Kind()))
}

// object is the schema of a struct: its JSON fields, each nullable (as
// permissive as Fleet's, which marks optional fields nullable), and
// preserve-unknown-fields so that fields this version does not know are
// kept.
func (b *builder) object(t reflect.Type) *Schema {
	if b.path[t] {
		return preserved() // recursive: the inner level is not typed
	}
	b.path[t] = true
	defer delete(b.path, t)
	s := &Schema{Type: "object", PreserveUnknown: true, Properties: map[string]*Schema{}}
	s.Description = b.doc(t, "")
	b.addFields(s, t)
	return s
}

// addFields adds t's JSON fields to s.Properties; embedded structs and
// fields tagged inline contribute their own fields.
func (b *builder) addFields(s *Schema, t reflect.Type) {
	api.EachJSONField(t, func(owner reflect.Type, f reflect.StructField, name string) {
		if _, skip := omitted[owner][name]; skip {
			return
		}
		p := b.schemaOf(f.Type)
		p.Nullable = true
		if d := b.doc(owner, f.Name); d != "" {
			p.Description = d
		}
		s.Properties[name] = p
	})
}

// newBuilder returns a builder that describes internal/api's types and
// fields with docs.
func newBuilder(docs map[string]string) *builder {
	return &builder{path: map[reflect.Type]bool{}, docs: docs}
}

// doc is the doc comment of internal/api's type t, or of its field.
func (b *builder) doc(t reflect.Type, field string) string {
	if t.PkgPath() != apiPkg {
		return ""
	}
	if field != "" {
		return b.docs[t.Name()+"."+field]
	}
	return b.docs[t.Name()]
}
