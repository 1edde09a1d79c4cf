package fleetyaml

import "maps"

// MergeValues returns base with overlay deep-merged on top, as Helm and
// Fleet merge values: where both hold a map under the same key the maps
// are merged, otherwise overlay's value wins (lists are replaced, not
// appended). Neither argument is modified.
func MergeValues(base, overlay map[string]any) map[string]any {
	out := maps.Clone(base)
	if out == nil {
		out = map[string]any{}
	}
	for k, v := range overlay {
		bm, bok := out[k].(map[string]any)
		om, ook := v.(map[string]any)
		if bok && ook {
			out[k] = MergeValues(bm, om)
			continue
		}
		out[k] = v
	}
	return out
}
