// Package drift tells how a live object differs from what Git wants.
//
// The approach is Flux's: DryRun server-side applies the desired object
// without persisting it, which yields the object as it would be after
// applying Git's version (server defaults filled in, fields that other
// managers own and Git does not set kept). Compare then diffs that result
// against the live object after normalising both, so that only fields Git
// sets and someone changed count as drift. Owner names who changed them.
package drift

import (
	"encoding/json"
	"errors"
	"fmt"

	jsonpatch "github.com/evanphx/json-patch"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Scaler is a HorizontalPodAutoscaler: the object it scales and its bounds.
type Scaler struct {
	Namespace, Kind, Name string
	Min, Max              int64
}

// serverMetadata are the metadata fields the server maintains: they never
// count as drift, and DryRun does not send them.
var serverMetadata = []string{
	"managedFields", "resourceVersion", "generation", "creationTimestamp",
	"uid", "selfLink", "deletionTimestamp", "deletionGracePeriodSeconds",
}

// Compare returns a JSON merge patch (RFC 7386) that turns live into want —
// what a correction would restore — after normalising both; nil when they
// do not differ. want is normally DryRun's result. Neither argument is
// modified.
//
// Normalisation drops status, server-maintained metadata (serverMetadata),
// fields whose value is null, webhook CA bundles that controllers inject,
// and spec.replicas of an object a Scaler targets while live's replicas
// are within the Scaler's bounds; then it applies rules to both sides. An
// object that rules ignore (Rules.Ignored, by want's identity) never
// differs.
func Compare(live, want *unstructured.Unstructured, rules Rules, scalers []Scaler) ([]byte, error) {
	if live == nil || want == nil {
		return nil, errors.New("drift: compare needs both a live and a wanted object")
	}
	apiVersion, kind := want.GetAPIVersion(), want.GetKind()
	namespace, name := want.GetNamespace(), want.GetName()
	if rules.Ignored(apiVersion, kind, namespace, name) {
		return nil, nil
	}
	scaled := scaledByHPA(live, scalers)
	sides := [2][]byte{}
	for i, obj := range []*unstructured.Unstructured{live, want} {
		doc, err := json.Marshal(normalise(obj, scaled))
		if err != nil {
			return nil, fmt.Errorf("drift: encoding %s %s/%s: %w", kind, namespace, name, err)
		}
		sides[i] = rules.apply(apiVersion, kind, namespace, name, doc)
	}
	patch, err := jsonpatch.CreateMergePatch(sides[0], sides[1])
	if err != nil {
		return nil, fmt.Errorf("drift: diffing %s %s/%s: %w", kind, namespace, name, err)
	}
	if string(patch) == "{}" {
		return nil, nil
	}
	return patch, nil
}

// Normalise returns a normalised deep copy of obj's content, as Compare
// compares it: without status, server-maintained metadata, null fields and
// injected CA bundles. obj is not modified.
func Normalise(obj *unstructured.Unstructured) map[string]any { return normalise(obj, false) }

// normalise returns a normalised deep copy of obj's content (see Compare);
// dropReplicas drops spec.replicas too.
func normalise(obj *unstructured.Unstructured, dropReplicas bool) map[string]any {
	out := obj.DeepCopy().Object
	delete(out, "status")
	dropMetadata(out, serverMetadata...)
	dropNulls(out)
	dropCABundles(out, obj.GetAPIVersion(), obj.GetKind())
	if dropReplicas {
		unstructured.RemoveNestedField(out, "spec", "replicas")
	}
	return out
}

// dropMetadata removes fields from obj's metadata.
func dropMetadata(obj map[string]any, fields ...string) {
	meta, ok := obj["metadata"].(map[string]any)
	if !ok {
		return
	}
	for _, f := range fields {
		delete(meta, f)
	}
}

// dropNulls removes, at every depth of v, the map entries whose value is
// null. Null list elements stay: removing them would shift the others.
func dropNulls(v any) {
	switch v := v.(type) {
	case map[string]any:
		for k, child := range v {
			if child == nil {
				delete(v, k)
				continue
			}
			dropNulls(child)
		}
	case []any:
		for _, child := range v {
			dropNulls(child)
		}
	}
}

// dropCABundles removes the CA bundles that controllers (cert-manager's
// cainjector, for one) inject into webhook configurations, CRD conversion
// webhooks and APIServices.
func dropCABundles(obj map[string]any, apiVersion, kind string) {
	group := schema.FromAPIVersionAndKind(apiVersion, kind).Group
	switch {
	case group == "admissionregistration.k8s.io" &&
		(kind == "MutatingWebhookConfiguration" || kind == "ValidatingWebhookConfiguration"):
		webhooks, _ := obj["webhooks"].([]any)
		for _, w := range webhooks {
			if w, ok := w.(map[string]any); ok {
				unstructured.RemoveNestedField(w, "clientConfig", "caBundle")
			}
		}
	case group == "apiextensions.k8s.io" && kind == "CustomResourceDefinition":
		unstructured.RemoveNestedField(obj, "spec", "conversion", "webhook", "clientConfig", "caBundle")
	case group == "apiregistration.k8s.io" && kind == "APIService":
		unstructured.RemoveNestedField(obj, "spec", "caBundle")
	}
}

// scaledByHPA reports whether a Scaler targets live and live's
// spec.replicas is within its bounds, so that the HPA owns the field.
func scaledByHPA(live *unstructured.Unstructured, scalers []Scaler) bool {
	replicas, ok := int64Field(live.Object, "spec", "replicas")
	if !ok {
		return false
	}
	for _, s := range scalers {
		if s.Namespace == live.GetNamespace() && s.Kind == live.GetKind() && s.Name == live.GetName() &&
			replicas >= s.Min && replicas <= s.Max {
			return true
		}
	}
	return false
}

// int64Field returns the integer at path in obj, which JSON decoding may
// have made an int64 or a float64.
func int64Field(obj map[string]any, path ...string) (int64, bool) {
	v, found, err := unstructured.NestedFieldNoCopy(obj, path...)
	if !found || err != nil {
		return 0, false
	}
	switch n := v.(type) {
	case int64:
		return n, true
	case float64:
		return int64(n), n == float64(int64(n))
	case json.Number:
		i, err := n.Int64()
		return i, err == nil
	}
	return 0, false
}
