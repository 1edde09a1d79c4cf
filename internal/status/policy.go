package status

import "github.com/flotilla-gitops/flotilla/internal/outcome"

// StateOf is the state a deployment whose step ended with class c shows,
// from the class's row of outcome's policy table ("" for OK: an applied
// deployment shows its readiness). The table spells states as strings
// because this package imports outcome and not the other way round.
func StateOf(c outcome.Class) State { return State(c.Policy().State) }
