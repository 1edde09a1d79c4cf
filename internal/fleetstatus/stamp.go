package fleetstatus

import "time"

// formatTime writes t as Kubernetes does (RFC 3339, UTC, seconds).
func formatTime(t time.Time) string { return t.UTC().Truncate(time.Second).Format(time.RFC3339) }

// Stamp sets the timestamps of conds from prev, the conditions last
// written: a condition whose status is unchanged keeps its
// lastTransitionTime, one whose status, reason and message are unchanged
// keeps its lastUpdateTime too; others get now. So an unchanged meaning
// gives unchanged conditions, and the Writer does not write them again.
func Stamp(conds, prev []Condition, now time.Time) []Condition {
	byType := make(map[string]Condition, len(prev))
	for _, c := range prev {
		byType[c.Type] = c
	}
	ts := formatTime(now)
	out := make([]Condition, len(conds))
	for i, c := range conds {
		p, ok := byType[c.Type]
		c.LastTransitionTime, c.LastUpdateTime = ts, ts
		if ok && p.Status == c.Status && p.LastTransitionTime != "" {
			c.LastTransitionTime = p.LastTransitionTime
			if p.Reason == c.Reason && p.Message == c.Message && p.LastUpdateTime != "" {
				c.LastUpdateTime = p.LastUpdateTime
			}
		}
		out[i] = c
	}
	return out
}
