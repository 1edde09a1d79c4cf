package applier

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/notify"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/temporalx"
)

// applyNotification stores a Notification in its namespace's
// NotificationsWorkflow, started when the namespace has none.
func (a *Applier) applyNotification(ctx context.Context, nt api.Notification) (string, error) {
	nt.Default()
	ns := nt.Metadata.Namespace
	var res protocol.NotificationResult
	err := temporalx.UpdateWithStart(ctx, a.Temporal, a.TaskQueue, notify.WorkflowID(ns), protocol.UpdateApply, nt, &res,
		protocol.NotificationsWorkflow, protocol.NotificationsStart{Record: protocol.NotificationsRecord{Namespace: ns}})
	return Verb(res.Created, res.Changed), err
}

// deleteNotification removes a Notification; ErrNotFound when it is not
// stored.
func deleteNotification(ctx context.Context, c client.Client, namespace, name string) error {
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   notify.WorkflowID(namespace),
		UpdateName:   protocol.UpdateNotificationDelete,
		Args:         []any{protocol.NotificationDelete{Name: name}},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	var res protocol.NotificationResult
	if err == nil {
		err = h.Get(ctx, &res)
	}
	if nf := (*serviceerror.NotFound)(nil); errors.As(err, &nf) || (err == nil && !res.Found) {
		return fmt.Errorf("delete %s %s/%s: %w", api.KindNotification, namespace, name, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("delete %s %s/%s: %w", api.KindNotification, namespace, name, err)
	}
	return nil
}
