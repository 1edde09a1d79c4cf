package workflows

import (
	"errors"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/flotilla-gitops/flotilla/activities"
	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/notify"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
)

// Bounds of a NotificationsWorkflow's state (carried across
// continue-as-new).
const (
	// maxRecentEvents is how many event IDs are remembered for dedupe.
	maxRecentEvents = 1000
	// maxPendingDeliveries bounds the deliveries waiting; beyond it the
	// oldest are dropped and counted as failed.
	maxPendingDeliveries = 1000
)

// deliverOptions: one event to one receiver. Retried with exponential
// backoff up to 5 minutes apart for a day; a receiver's refusal (4xx but
// 408 and 429) or a Notification that cannot deliver ends it at once.
func deliverOptions() workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout:    30 * time.Second,
		ScheduleToCloseTimeout: 24 * time.Hour,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    5 * time.Minute,
			NonRetryableErrorTypes: []string{activities.ErrTypeDeliveryRejected, activities.ErrTypeNotificationInvalid,
				activities.ErrTypeSecretNotFound},
		},
	}
}

// NotificationsWorkflow is the entity workflow of one namespace's
// Notifications (ID notify.WorkflowID(namespace)). Every workflow of the
// namespace signals its events here (notify.SignalEvent); each event,
// once per ID, is matched against each Notification in name order
// (notify.Spec.Matches) and delivered by the Deliver activity, one event
// at a time per Notification, in the order they came. On a full history
// it stops starting deliveries, lets those in flight finish (none is sent
// twice), and continues as new with the rest. It ends once its last
// Notification is deleted and nothing is left to deliver.
func NotificationsWorkflow(ctx workflow.Context, in protocol.NotificationsStart) error {
	n := newNotifications(in)
	if err := n.register(ctx); err != nil {
		return err
	}
	ch := workflow.GetSignalChannel(ctx, notify.SignalEvent)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var ev notify.Event
			ch.Receive(ctx, &ev)
			n.take(ctx, ev)
		}
	})
	for {
		if err := workflow.Await(ctx, func() bool { return n.startable() || n.gone() || historyFull(ctx) }); err != nil {
			return err
		}
		if !n.gone() && !historyFull(ctx) {
			n.dispatch(ctx)
			continue
		}
		// Step: stop starting deliveries, let those in flight and the
		// updates finish, then take what signals wait and go on anew.
		n.draining = true
		if err := workflow.Await(ctx, func() bool { return len(n.inflight) == 0 && workflow.AllHandlersFinished(ctx) }); err != nil {
			return err
		}
		for {
			var ev notify.Event
			if !ch.ReceiveAsync(&ev) {
				break
			}
			n.take(ctx, ev)
		}
		if n.gone() {
			return nil
		}
		if !historyFull(ctx) {
			n.draining = false // an apply came while deleting the last one
			continue
		}
		return workflow.NewContinueAsNewError(ctx, NotificationsWorkflow, n.carry())
	}
}

// notifications is one NotificationsWorkflow run's state.
type notifications struct {
	rec     protocol.NotificationsRecord
	recent  []string
	seen    map[string]bool
	pending []protocol.NotificationDelivery
	// inflight names the Notifications with a delivery running.
	inflight map[string]bool
	// draining: no delivery starts (the run is about to continue as new).
	draining bool
}

func newNotifications(in protocol.NotificationsStart) *notifications {
	n := &notifications{rec: in.Record, recent: in.Recent, pending: in.Pending,
		seen: map[string]bool{}, inflight: map[string]bool{}}
	for _, id := range n.recent {
		n.seen[id] = true
	}
	n.count()
	return n
}

func (n *notifications) carry() protocol.NotificationsStart {
	return protocol.NotificationsStart{Record: n.rec, Recent: n.recent, Pending: n.pending}
}

// gone: Notifications were applied, the last one was deleted, and
// nothing is being delivered.
func (n *notifications) gone() bool {
	return n.rec.Generation > 0 && len(n.rec.Notifications) == 0 && len(n.pending) == 0 && len(n.inflight) == 0
}

// startable reports whether a pending delivery may start: its
// Notification has none in flight.
func (n *notifications) startable() bool {
	if n.draining {
		return false
	}
	for _, d := range n.pending {
		if !n.inflight[d.Notification] {
			return true
		}
	}
	return false
}

// take matches a new event against every Notification, in name order,
// and queues a delivery for each match. An event seen before is dropped.
func (n *notifications) take(ctx workflow.Context, ev notify.Event) {
	if ev.ID == "" || n.seen[ev.ID] {
		return
	}
	n.seen[ev.ID] = true
	n.recent = append(n.recent, ev.ID)
	if over := len(n.recent) - maxRecentEvents; over > 0 {
		for _, id := range n.recent[:over] {
			delete(n.seen, id)
		}
		n.recent = slices.Clone(n.recent[over:])
	}
	for _, nt := range n.rec.Notifications {
		if nt.Spec.Matches(ev) {
			n.pending = append(n.pending, protocol.NotificationDelivery{Notification: nt.Metadata.Name, Event: ev})
		}
	}
	if over := len(n.pending) - maxPendingDeliveries; over > 0 {
		for _, d := range n.pending[:over] {
			n.stats(d.Notification).Failed++
			n.stats(d.Notification).LastError = "dropped: more than 1000 events waiting"
		}
		workflow.GetLogger(ctx).Warn("Dropped events", "count", over)
		n.pending = slices.Clone(n.pending[over:])
	}
	n.count()
}

// dispatch starts the first pending delivery of each Notification that
// has none in flight, in queue order.
func (n *notifications) dispatch(ctx workflow.Context) {
	for i := 0; i < len(n.pending); {
		d := n.pending[i]
		if n.inflight[d.Notification] {
			i++
			continue
		}
		n.pending = slices.Delete(n.pending, i, i+1)
		nt, ok := n.find(d.Notification)
		if !ok || nt.Spec.Suspend {
			continue // deleted or suspended since: dropped
		}
		n.inflight[d.Notification] = true
		workflow.Go(ctx, func(ctx workflow.Context) { n.deliver(ctx, nt, d) })
	}
}

// deliver runs the Deliver activity for d and records how it went.
func (n *notifications) deliver(ctx workflow.Context, nt api.Notification, d protocol.NotificationDelivery) {
	var a *activities.Activities
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, deliverOptions()), a.Deliver, activities.DeliverInput{
		Namespace: n.rec.Namespace, Notification: d.Notification, Spec: nt.Spec, Event: d.Event}).Get(ctx, nil)
	delete(n.inflight, d.Notification)
	if _, ok := n.find(d.Notification); !ok {
		return // deleted meanwhile: nobody reads its counts
	}
	st := n.stats(d.Notification)
	if err != nil {
		st.Failed++
		st.LastError = deliveryError(err)
		workflow.GetLogger(ctx).Warn("Gave up delivering an event", "notification", d.Notification, "event", d.Event.ID, "err", err)
	} else {
		st.Delivered++
	}
	n.count()
}

// deliveryError is the message of an activity's failure.
func deliveryError(err error) string {
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) {
		return ae.Message()
	}
	return err.Error()
}

func (n *notifications) find(name string) (api.Notification, bool) {
	i, ok := slices.BinarySearchFunc(n.rec.Notifications, name, func(x api.Notification, n string) int {
		return strings.Compare(x.Metadata.Name, n)
	})
	if !ok {
		return api.Notification{}, false
	}
	return n.rec.Notifications[i], true
}

// stats returns the delivery counts of Notification name, added in name
// order when new.
func (n *notifications) stats(name string) *protocol.DeliveryStats {
	i, ok := slices.BinarySearchFunc(n.rec.Deliveries, name, func(x protocol.DeliveryStats, n string) int {
		return strings.Compare(x.Name, n)
	})
	if !ok {
		n.rec.Deliveries = slices.Insert(n.rec.Deliveries, i, protocol.DeliveryStats{Name: name})
	}
	return &n.rec.Deliveries[i]
}

// count sets each Notification's Pending count.
func (n *notifications) count() {
	for i := range n.rec.Deliveries {
		n.rec.Deliveries[i].Pending = 0
	}
	for _, d := range n.pending {
		n.stats(d.Notification).Pending++
	}
	for _, nt := range n.rec.Notifications {
		if n.inflight[nt.Metadata.Name] {
			n.stats(nt.Metadata.Name).Pending++
		}
	}
}
