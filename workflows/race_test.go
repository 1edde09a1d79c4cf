//go:build race

package workflows

// raceEnabled: the race detector slows the workflow test environment
// about tenfold; the longest simulations run in make test's run without
// it.
const raceEnabled = true
