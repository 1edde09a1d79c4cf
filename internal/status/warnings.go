package status

import "fmt"

// MaxWarnings bounds the warnings a GitRepo's status lists (and its
// workflow keeps); LimitWarnings says how many more there were.
const MaxWarnings = 50

// LimitWarnings returns warnings, or its first MaxWarnings-1 followed by a
// line saying how many were left out when there are more than MaxWarnings.
// warnings is not modified.
func LimitWarnings(warnings []string) []string {
	if len(warnings) <= MaxWarnings {
		return warnings
	}
	out := append([]string(nil), warnings[:MaxWarnings-1]...)
	return append(out, fmt.Sprintf("... and %d more warnings", len(warnings)-(MaxWarnings-1)))
}
