package workflows

import "sort"

// sortedKeys returns m's keys, sorted.
func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	//workflowcheck:ignore deterministic: sorted below
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// maxClusterAttrBytes bounds the encoded FlotillaCluster search attribute:
// Temporal refuses keyword lists over 2 KiB.
const maxClusterAttrBytes = 1900

// fitsClusterAttr reports whether names fit in the FlotillaCluster search
// attribute (as a JSON list).
func fitsClusterAttr(names []string) bool {
	n := 2
	for _, c := range names {
		n += len(c) + 3
	}
	return n <= maxClusterAttrBytes
}
