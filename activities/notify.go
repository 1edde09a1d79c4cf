package activities

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/flotilla-gitops/flotilla/internal/cluster"
	"github.com/flotilla-gitops/flotilla/internal/notify"
)

// Error types of a delivery (Deliver). The notifications workflow
// retries ErrTypeDeliveryFailed and gives up at once on the others.
const (
	// ErrTypeDeliveryFailed: the receiver did not answer, or answered
	// 408, 429 or 5xx. Retryable.
	ErrTypeDeliveryFailed = "DeliveryFailed"
	// ErrTypeDeliveryRejected: the receiver answered another 4xx (or a
	// redirect, never followed). Not retryable.
	ErrTypeDeliveryRejected = "DeliveryRejected"
	// ErrTypeNotificationInvalid: the Notification cannot deliver (its
	// Secret is missing or lacks a key, a repository URL the provider
	// cannot read). Not retryable.
	ErrTypeNotificationInvalid = "NotificationInvalid"
)

// DeliverInput is one event for one Notification. It names the Secret
// (in the spec); the activity reads it, so no credential is in history.
type DeliverInput struct {
	Namespace    string       `json:"namespace"`
	Notification string       `json:"notification"`
	Spec         notify.Spec  `json:"spec"`
	Event        notify.Event `json:"event"`
}

// Deliver sends one event to one Notification's provider, once per
// attempt (receivers dedupe retries by the event's ID). Errors are
// ApplicationErrors of the types above; none holds an address or a
// credential.
func (a *Activities) Deliver(ctx context.Context, in DeliverInput) error {
	title := "notification " + in.Namespace + "/" + in.Notification
	cred, err := a.notificationCredentials(ctx, in)
	if err != nil {
		return err
	}
	err = notify.Send(ctx, notify.NewHTTPClient(0), in.Spec, cred, in.Event)
	if err == nil {
		activity.GetLogger(ctx).Info("Delivered event", "notification", in.Namespace+"/"+in.Notification,
			"event", in.Event.ID, "type", string(in.Event.Type))
		return nil
	}
	var de *notify.DeliveryError
	if !errors.As(err, &de) {
		return temporal.NewApplicationError(title+": "+err.Error(), ErrTypeDeliveryFailed)
	}
	msg := fmt.Sprintf("%s: event %s: %v", title, in.Event.ID, de)
	switch {
	case errors.Is(err, notify.ErrTransient):
		activity.GetLogger(ctx).Warn("Delivery failed", "notification", in.Notification, "event", in.Event.ID, "err", de.Error())
		return temporal.NewApplicationErrorWithOptions(msg, ErrTypeDeliveryFailed,
			temporal.ApplicationErrorOptions{NextRetryDelay: de.RetryAfter})
	case errors.Is(err, notify.ErrInvalid):
		return temporal.NewNonRetryableApplicationError(msg, ErrTypeNotificationInvalid, nil)
	}
	return temporal.NewNonRetryableApplicationError(msg, ErrTypeDeliveryRejected, nil)
}

// notificationCredentials reads the Notification's Secret: "token" and
// "address".
func (a *Activities) notificationCredentials(ctx context.Context, in DeliverInput) (notify.Credentials, error) {
	ref := in.Spec.SecretRef
	if ref == nil {
		return notify.Credentials{}, nil
	}
	if a.Secrets == nil {
		return notify.Credentials{}, errors.New("this worker reads no Secrets")
	}
	_, data, err := a.Secrets.SecretData(ctx, in.Namespace, ref.Name)
	switch {
	case errors.Is(err, cluster.ErrNotFound), errors.Is(err, cluster.ErrNoData):
		return notify.Credentials{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("notification %s/%s: spec.secretRef %q: no such secret in namespace %s (apply a v1 Secret with keys token or address)",
			in.Namespace, in.Notification, ref.Name, in.Namespace), ErrTypeNotificationInvalid, nil)
	case err != nil:
		return notify.Credentials{}, fmt.Errorf("notification %s/%s: read secret %s: %w", in.Namespace, in.Notification, ref.Name, err)
	}
	return notify.Credentials{Token: string(data["token"]), Address: string(data["address"])}, nil
}
