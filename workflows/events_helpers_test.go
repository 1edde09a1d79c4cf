package workflows

import (
	"strings"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/testsuite"

	"github.com/flotilla-gitops/flotilla/internal/notify"
)

// ignoreEvents lets env take the notify.Events workflows emit (signals to
// notifications/<ns>), which a test environment otherwise refuses as an
// unexpected call. Tests that count events mock the signal themselves,
// before calling it (testify takes the first matching expectation).
func ignoreEvents(env *testsuite.TestWorkflowEnvironment) {
	env.OnSignalExternalWorkflow(mock.Anything, mock.MatchedBy(func(id string) bool {
		return strings.HasPrefix(id, notify.WorkflowIDPrefix)
	}), "", notify.SignalEvent, mock.Anything).Return(nil).Maybe()
}
