package activities

import (
	"context"
	"time"

	"github.com/flotilla-gitops/flotilla/internal/fleetyaml"
	"github.com/flotilla-gitops/flotilla/internal/strategy"
)

// WindowAtInput asks where now stands in a set of windows.
type WindowAtInput struct {
	Windows []fleetyaml.Window `json:"windows"`
	Now     time.Time          `json:"now"`
}

// WindowAt reports whether one of the windows is open at now, or when
// the next one opens. Workflows run it as a local activity: reading a
// window needs time zone data, which workflow code must not depend on
// (two workers' zone data may differ); the answer is recorded instead.
func WindowAt(_ context.Context, in WindowAtInput) (strategy.WindowState, error) {
	return strategy.WindowAt(in.Windows, in.Now)
}
