package drift

import (
	"encoding/base64"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/flotilla-gitops/flotilla/internal/deployer"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

var (
	configMapsGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	secretsGVR    = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
)

// sourceKey names a valuesFrom source object in Monitor.bySource.
func sourceKey(secret bool, namespace, name string) string {
	kind := "configmap"
	if secret {
		kind = "secret"
	}
	return kind + "|" + namespace + "|" + name
}

// valuesKey is the watch of r's object alone (a field selector on its
// name), whose data the informer caches as digests.
func valuesKey(r deployer.ValuesRef) informerKey {
	gvr := configMapsGVR
	if r.Secret {
		gvr = secretsGVR
	}
	return informerKey{gvr: gvr, namespace: r.Namespace, field: "metadata.name=" + r.Name}
}

// watchValuesFrom watches the ConfigMaps and Secrets w's values come
// from, once each.
func (m *Monitor) watchValuesFrom(w *watched) {
	for _, r := range w.t.ValuesFrom {
		key := sourceKey(r.Secret, r.Namespace, r.Name)
		if err := m.watch(valuesKey(r), func(*unstructured.Unstructured, cache.Store) { m.onValuesSource(key) }); err != nil {
			w.watchErr = err.Error()
		}
	}
}

// onValuesSource marks the releases whose values come from the source
// key (see sourceKey).
func (m *Monitor) onValuesSource(key string) {
	m.mu.Lock()
	keys := m.bySource[key]
	m.mu.Unlock()
	for _, k := range keys {
		m.touch(k, false)
	}
}

// valuesFromDrift lists the valuesFrom sources of w whose data differs
// from what its deployed revision was deployed with: gone ("missing"),
// without the key, or with other data.
func (m *Monitor) valuesFromDrift(w *watched) []status.ModifiedStatus {
	var out []status.ModifiedStatus
	for _, r := range w.t.ValuesFrom {
		inf, ok := m.informers[valuesKey(r)]
		if !ok {
			continue // not watched: the watch error is reported
		}
		entry := status.ModifiedStatus{Kind: "valuesFrom " + r.Kind(), Namespace: r.Namespace, Name: r.Name}
		obj, exists, err := inf.GetStore().GetByKey(r.Namespace + "/" + r.Name)
		if err != nil {
			continue
		}
		u, _ := obj.(*unstructured.Unstructured)
		if !exists || u == nil {
			entry.Missing = true
			out = append(out, entry)
			continue
		}
		sum, found, _ := unstructured.NestedString(u.Object, "data", r.DataKey())
		switch {
		case !found:
			entry.Patch = "(key " + r.DataKey() + " missing)"
		case sum != recordedDigest(w.rev.ValuesFrom, r):
			entry.Patch = "(key " + r.DataKey() + " changed since the last deploy)"
		default:
			continue
		}
		out = append(out, entry)
	}
	return out
}

// recordedDigest returns the digest the revision recorded for r, "" when
// it recorded none (deployed before r was listed).
func recordedDigest(recorded []deployer.ValuesDigest, r deployer.ValuesRef) string {
	for _, d := range recorded {
		if d.Ref.Secret == r.Secret && d.Ref.Namespace == r.Namespace && d.Ref.Name == r.Name && d.Ref.DataKey() == r.DataKey() {
			return d.SHA256
		}
	}
	return ""
}

// digestedMark is the annotation digestData marks the objects it
// transformed with (in the informer's cache only).
const digestedMark = "flotilla.dev/digested"

// digestData is the transform of valuesFrom watches: it replaces each
// data value of a ConfigMap or Secret by its digest (as Deploy records
// it) and drops everything else that could hold the data (binaryData,
// annotations such as kubectl's last-applied-configuration, managed
// fields), so that no Secret data is kept in memory.
// It is idempotent, as informers require: a digested object is marked.
func digestData(obj any, secret bool) any {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok || u.GetAnnotations()[digestedMark] != "" {
		return obj
	}
	u.SetManagedFields(nil)
	u.SetAnnotations(map[string]string{digestedMark: "true"})
	delete(u.Object, "binaryData")
	delete(u.Object, "stringData")
	data, ok := u.Object["data"].(map[string]any)
	if !ok {
		return u
	}
	sums := make(map[string]any, len(data))
	for key, v := range data {
		s, _ := v.(string)
		ref := deployer.ValuesRef{Secret: secret, Key: key}
		var sum string
		if secret {
			raw, err := base64.StdEncoding.DecodeString(s)
			if err != nil {
				raw = []byte(s)
			}
			sum, _ = deployer.DigestOf(ref, nil, map[string][]byte{key: raw})
		} else {
			sum, _ = deployer.DigestOf(ref, map[string]string{key: s}, nil)
		}
		sums[key] = sum
	}
	u.Object["data"] = sums
	return u
}
