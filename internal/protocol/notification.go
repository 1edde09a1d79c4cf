package protocol

import (
	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/notify"
)

// NotificationsWorkflow holds the Notifications of one namespace and
// delivers the namespace's events (notify.SignalEvent) to those whose
// filters match, ID notify.WorkflowID(namespace). UpdateApply stores a
// Notification (api.Notification), UpdateNotificationDelete removes one
// (NotificationDelete), QueryStatus answers NotificationsRecord. It ends
// once its last Notification is deleted and its deliveries are done.
const NotificationsWorkflow = "NotificationsWorkflow"

// UpdateNotificationDelete removes a Notification from its namespace's
// NotificationsWorkflow.
const UpdateNotificationDelete = "delete"

// NotificationsRecord is a namespace's Notifications (sorted by name)
// and how their deliveries went.
type NotificationsRecord struct {
	Namespace     string             `json:"namespace"`
	Notifications []api.Notification `json:"notifications,omitempty"`
	// Deliveries counts each Notification's deliveries, by name (sorted).
	Deliveries []DeliveryStats `json:"deliveries,omitempty"`
	// Generation counts changes of the Notifications.
	Generation int64 `json:"generation"`
}

// DeliveryStats is how one Notification's deliveries went.
type DeliveryStats struct {
	Name string `json:"name"`
	// Delivered and Failed count the events delivered and given up on
	// (refused by the receiver, or still failing after a day of retries).
	Delivered int `json:"delivered,omitempty"`
	Failed    int `json:"failed,omitempty"`
	// Pending counts the events waiting or being delivered.
	Pending int `json:"pending,omitempty"`
	// LastError says why the last failed delivery failed.
	LastError string `json:"lastError,omitempty"`
}

// NotificationsStart starts (or continues) a NotificationsWorkflow.
type NotificationsStart struct {
	Record NotificationsRecord `json:"record"`
	// Recent are the IDs of the last events taken, oldest first: an event
	// signalled again (a replayed emitter) is not delivered twice.
	Recent []string `json:"recent,omitempty"`
	// Pending are the deliveries not done yet, in order.
	Pending []NotificationDelivery `json:"pending,omitempty"`
}

// NotificationDelivery is one event to deliver to one Notification.
type NotificationDelivery struct {
	Notification string       `json:"notification"`
	Event        notify.Event `json:"event"`
}

// NotificationDelete removes the Notification Name.
type NotificationDelete struct {
	Name string `json:"name"`
}

// NotificationResult answers UpdateApply and UpdateNotificationDelete as
// PolicyResult does.
type NotificationResult struct {
	Created    bool  `json:"created,omitempty"`
	Changed    bool  `json:"changed,omitempty"`
	Found      bool  `json:"found,omitempty"`
	Generation int64 `json:"generation"`
}
