package workflows

import (
	"fmt"
	"slices"

	"go.temporal.io/sdk/workflow"

	"github.com/flotilla-gitops/flotilla/internal/notify"
)

// versionNotifyEvents: entity workflows emit notify.Events to their
// namespace's notifications workflow (issue 31). Runs recorded before it
// emit nothing.
const versionNotifyEvents = "notify-events"

// notifier emits a workflow's events. Its sequence numbers make event IDs
// that are unique within the run and the same on every replay.
type notifier struct{ seq int }

// emit sends ev to the notifications workflow of ev.Namespace, stamped
// with its ID and the workflow's time. It does not wait: a namespace
// without Notifications has no such workflow, and the signal failing then
// is the answer (nobody listens). The signal is a durable command once
// the task completes, so an event is never lost to a worker's crash.
func (n *notifier) emit(ctx workflow.Context, ev notify.Event) {
	if workflow.GetVersion(ctx, versionNotifyEvents, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return
	}
	info := workflow.GetInfo(ctx)
	n.seq++
	ev.ID = fmt.Sprintf("%s/%s/%d", info.WorkflowExecution.ID, info.WorkflowExecution.RunID, n.seq)
	ev.Time = workflow.Now(ctx).UTC()
	if ev.Severity == "" {
		ev.Severity = notify.Info
	}
	slices.Sort(ev.Bundles)
	slices.Sort(ev.Clusters)
	ev.Bundles, ev.Clusters = slices.Compact(ev.Bundles), slices.Compact(ev.Clusters)
	workflow.SignalExternalWorkflow(ctx, notify.WorkflowID(ev.Namespace), "", notify.SignalEvent, ev)
}
