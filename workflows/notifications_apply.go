package workflows

import (
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
)

func (n *notifications) register(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, protocol.QueryStatus, func() (protocol.NotificationsRecord, error) { return n.rec, nil }); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, protocol.UpdateApply, n.apply,
		workflow.UpdateHandlerOptions{Validator: n.validateApply}); err != nil {
		return err
	}
	return workflow.SetUpdateHandler(ctx, protocol.UpdateNotificationDelete, n.remove)
}

func (n *notifications) validateApply(_ workflow.Context, nt api.Notification) error {
	if nt.Metadata.Namespace != n.rec.Namespace {
		return temporal.NewNonRetryableApplicationError("Notification "+nt.Metadata.Namespace+"/"+nt.Metadata.Name+
			" sent to the notifications workflow of namespace "+n.rec.Namespace, "InvalidSpec", nil)
	}
	err := nt.Validate() //workflowcheck:ignore validation only reads its input
	if err != nil {
		return temporal.NewNonRetryableApplicationError(err.Error(), "InvalidSpec", nil)
	}
	return nil
}

// apply stores a Notification; events that came before it are not
// delivered to it.
func (n *notifications) apply(_ workflow.Context, nt api.Notification) (protocol.NotificationResult, error) {
	var res protocol.NotificationResult
	res.Created, res.Changed = upsertDoc(&n.rec.Notifications, nt, func(x api.Notification) string { return x.Metadata.Name })
	res.Found = true
	if res.Changed {
		n.rec.Generation++
	}
	res.Generation = n.rec.Generation
	return res, nil
}

// remove deletes a Notification and drops what waits for it (a delivery
// in flight finishes).
func (n *notifications) remove(_ workflow.Context, d protocol.NotificationDelete) (protocol.NotificationResult, error) {
	res := protocol.NotificationResult{Found: removeDoc(&n.rec.Notifications, d.Name, func(x api.Notification) string { return x.Metadata.Name })}
	if res.Found {
		res.Changed = true
		n.rec.Generation++
		kept := n.pending[:0]
		for _, p := range n.pending {
			if p.Notification != d.Name {
				kept = append(kept, p)
			}
		}
		n.pending = kept
		removeDoc(&n.rec.Deliveries, d.Name, func(x protocol.DeliveryStats) string { return x.Name })
		n.count()
	}
	res.Generation = n.rec.Generation
	return res, nil
}
