package fleetstatus

import (
	"encoding/json"
	"fmt"
	"sort"
)

// MaxStatusSize bounds the JSON of a written status (Fleet had to cap
// per-cluster state under etcd's request limit, fleet#4160).
const MaxStatusSize = 512 << 10

// Bound returns s cut to at most limit bytes of JSON: it drops, in this
// order and each from the end of its sorted order, status.resources,
// status.perClusterResourceCounts (clusters sorted by name) and
// summary.nonReadyResources, as few as needed, and says what it left out
// in display.message. The result depends only on s and limit.
func Bound(s GitRepoStatus, limit int) GitRepoStatus {
	if size(s) <= limit {
		return s
	}
	var dropped droppedCounts
	s.Resources, dropped.resources = shrink(s, s.Resources, limit, func(s *GitRepoStatus, r []Resource) { s.Resources = r })
	if size(s) > limit {
		names := make([]string, 0, len(s.PerClusterResourceCounts))
		for n := range s.PerClusterResourceCounts {
			names = append(names, n)
		}
		sort.Strings(names)
		var keep []string
		keep, dropped.clusters = shrink(s, names, limit, func(s *GitRepoStatus, keep []string) {
			s.PerClusterResourceCounts = pick(s.PerClusterResourceCounts, keep)
		})
		s.PerClusterResourceCounts = pick(s.PerClusterResourceCounts, keep)
	}
	if size(s) > limit {
		s.Summary.NonReadyResources, dropped.nonReady = shrink(s, s.Summary.NonReadyResources, limit,
			func(s *GitRepoStatus, r []NonReadyResource) { s.Summary.NonReadyResources = r })
	}
	s.Display.Message = dropped.note(s.Display.Message)
	return s
}

type droppedCounts struct{ resources, clusters, nonReady int }

func (d droppedCounts) note(msg string) string {
	n := fmt.Sprintf("status truncated to %d KiB: %d resources, %d clusters' resource counts and %d non-ready bundles left out",
		MaxStatusSize>>10, d.resources, d.clusters, d.nonReady)
	if msg == "" {
		return n
	}
	return msg + "; " + n
}

// shrink returns the longest prefix of list that, set into s with set,
// makes s fit limit (with room for the note), and how many it dropped.
// It searches by halving, so it marshals s O(log n) times.
func shrink[T any](s GitRepoStatus, list []T, limit int, set func(*GitRepoStatus, []T)) ([]T, int) {
	const noteRoom = 256
	fits := func(n int) bool {
		c := s
		set(&c, list[:n])
		return size(c)+noteRoom <= limit
	}
	lo, hi := 0, len(list) // fits(lo) is assumed; find the largest n that fits
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if fits(mid) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return list[:lo:lo], len(list) - lo
}

func pick[V any](m map[string]V, keys []string) map[string]V {
	if m == nil {
		return nil
	}
	out := make(map[string]V, len(keys))
	for _, k := range keys {
		out[k] = m[k]
	}
	return out
}

func size(v any) int {
	b, err := json.Marshal(v)
	if err != nil {
		return 0
	}
	return len(b)
}
