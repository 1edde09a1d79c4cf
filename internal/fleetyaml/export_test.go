package fleetyaml

import "time"

// SetTemplateTime sets the time budget until the returned func restores it.
// Callers must not run in parallel with other evaluations.
func SetTemplateTime(d time.Duration) (restore func()) {
	old := templateTime
	templateTime = d
	return func() { templateTime = old }
}
