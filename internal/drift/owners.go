package drift

import (
	"encoding/json"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Owner returns the field manager that owns, in live's
// metadata.managedFields, the first field patch changes (depth-first over
// the merge patch's keys in sorted order, descending into maps), skipping
// managers in exclude, and that field as a dotted path ("spec.replicas",
// "data.key"). It returns "", "" when no other manager owns it. live must
// carry managedFields (read it with a GET, not from a cache that strips
// them).
//
// "The first field" is the first one in that order that a manager outside
// exclude owns: a field the patch adds back was removed, and nobody owns it
// any more. A manager owns a field when its field set holds the field's
// path, or an atomic ancestor of it; a list (which a merge patch replaces
// whole) is owned by every manager owning any of its elements. When
// several managers own the field, the most recent entry (by time) wins.
func Owner(live *unstructured.Unstructured, patch []byte, exclude ...string) (manager, field string) {
	var changes map[string]any
	if live == nil || json.Unmarshal(patch, &changes) != nil {
		return "", ""
	}
	owners := fieldOwners(live, exclude)
	for _, path := range leafPaths(changes, nil) {
		if m := latestOwner(owners, path); m != "" {
			return m, strings.Join(path, ".")
		}
	}
	return "", ""
}

// fieldOwner is one managedFields entry: a manager, when it last wrote and
// its field set (the fieldsV1 JSON decoded).
type fieldOwner struct {
	manager string
	time    time.Time
	fields  map[string]any
}

// fieldOwners decodes live's managedFields, leaving out managers in
// exclude and entries whose field set does not decode.
func fieldOwners(live *unstructured.Unstructured, exclude []string) []fieldOwner {
	var owners []fieldOwner
	for _, e := range live.GetManagedFields() {
		if slices.Contains(exclude, e.Manager) || e.FieldsV1 == nil {
			continue
		}
		o := fieldOwner{manager: e.Manager}
		if e.Time != nil {
			o.time = e.Time.Time
		}
		if json.Unmarshal(e.FieldsV1.GetRawBytes(), &o.fields) != nil {
			continue
		}
		owners = append(owners, o)
	}
	return owners
}

// leafPaths returns, depth-first in sorted key order, the paths of the
// fields patch sets: a non-empty map is descended into, anything else (a
// value, a list, null, an empty map) is a field. prefix is the path so far.
func leafPaths(patch map[string]any, prefix []string) [][]string {
	var paths [][]string
	keys := make([]string, 0, len(patch))
	for k := range patch {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		path := append(slices.Clip(prefix), k)
		if child, ok := patch[k].(map[string]any); ok && len(child) > 0 {
			paths = append(paths, leafPaths(child, path)...)
			continue
		}
		paths = append(paths, path)
	}
	return paths
}

// latestOwner returns the manager of the most recent entry in owners that
// owns path, or "".
func latestOwner(owners []fieldOwner, path []string) string {
	var best *fieldOwner
	for i := range owners {
		if owns(owners[i].fields, path) && (best == nil || owners[i].time.After(best.time)) {
			best = &owners[i]
		}
	}
	if best == nil {
		return ""
	}
	return best.manager
}

// owns reports whether the fieldsV1 set holds path, or an ancestor of path
// as a whole (an empty set: an atomic field).
func owns(set map[string]any, path []string) bool {
	for _, p := range path {
		child, ok := set["f:"+p].(map[string]any)
		if !ok {
			return false
		}
		set = child
		if len(set) == 0 {
			return true
		}
	}
	return true
}
