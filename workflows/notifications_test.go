package workflows

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/flotilla-gitops/flotilla/activities"
	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/notify"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
)

func testNotification(name string, spec notify.Spec) api.Notification {
	return api.Notification{TypeMeta: api.TypeMeta{APIVersion: api.Version, Kind: api.KindNotification},
		Metadata: api.ObjectMeta{Namespace: "ns", Name: name}, Spec: spec}
}

func notifyEvent(id string, t notify.Type) notify.Event {
	return notify.Event{ID: id, Type: t, Severity: notify.Info, Namespace: "ns", GitRepo: "app",
		RepoURL: "https://git.example/o/app", Commit: "c0ffee"}
}

// deliveries records the Deliver calls of a test, as "notification event".
// The test environment runs activities on goroutines of their own: mu
// guards what they record.
type deliveries struct {
	mu    sync.Mutex
	calls []string
}

func (d *deliveries) mock(env *testsuite.TestWorkflowEnvironment, fail func(in activities.DeliverInput, attempt int) error) {
	attempts := map[string]int{}
	var a *activities.Activities
	env.OnActivity(a.Deliver, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.DeliverInput) error {
		key := in.Notification + " " + in.Event.ID
		d.mu.Lock()
		attempts[key]++
		attempt := attempts[key]
		d.calls = append(d.calls, key)
		d.mu.Unlock()
		if fail != nil {
			return fail(in, attempt)
		}
		return nil
	})
}

// Events are matched against each Notification, delivered once per ID
// (a repeated signal is dropped) and in the order they came; a transient
// failure is retried, a refusal is not; the counts show both; deleting
// the last Notification ends the workflow.
func TestNotificationsWorkflow_DedupeOrderRetries(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	var d deliveries
	d.mock(env, func(in activities.DeliverInput, attempt int) error {
		switch {
		case in.Notification == "hook" && in.Event.ID == "e2" && attempt < 3:
			return temporal.NewApplicationError("hook: HTTP 503", activities.ErrTypeDeliveryFailed)
		case in.Notification == "gh" && in.Event.ID == "e2":
			return temporal.NewNonRetryableApplicationError("github: HTTP 422", activities.ErrTypeDeliveryRejected, nil)
		}
		return nil
	})
	start := protocol.NotificationsStart{Record: protocol.NotificationsRecord{Namespace: "ns", Generation: 2, Notifications: []api.Notification{
		testNotification("gh", notify.Spec{Provider: notify.GitHub}),
		testNotification("hook", notify.Spec{Provider: notify.Webhook, Address: "https://x"}),
	}}}
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(notify.SignalEvent, notifyEvent("e1", notify.RolloutStarted))
		env.SignalWorkflow(notify.SignalEvent, notifyEvent("e1", notify.RolloutStarted))
		env.SignalWorkflow(notify.SignalEvent, notifyEvent("e2", notify.RolloutSucceeded))
		env.SignalWorkflow(notify.SignalEvent, notifyEvent("e3", notify.DriftDetected))
	}, time.Second)
	var rec protocol.NotificationsRecord
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(protocol.QueryStatus)
		require.NoError(t, err)
		require.NoError(t, v.Get(&rec))
		sendUpdate(env, protocol.UpdateNotificationDelete, protocol.NotificationDelete{Name: "gh"})
		sendUpdate(env, protocol.UpdateNotificationDelete, protocol.NotificationDelete{Name: "hook"})
	}, time.Hour)
	env.ExecuteWorkflow(NotificationsWorkflow, start)
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError(), "ends once the last Notification is gone")

	var hook, gh []string
	for _, c := range d.calls {
		if c[:2] == "gh" {
			gh = append(gh, c)
		} else {
			hook = append(hook, c)
		}
	}
	assert.Equal(t, []string{"hook e1", "hook e2", "hook e2", "hook e2", "hook e3"}, hook, "in order; e2 retried until it went through")
	assert.Equal(t, []string{"gh e1", "gh e2"}, gh, "the status provider takes no drift event; a refusal is not retried")
	assert.Equal(t, []protocol.DeliveryStats{
		{Name: "gh", Delivered: 1, Failed: 1, LastError: "github: HTTP 422"},
		{Name: "hook", Delivered: 3},
	}, rec.Deliveries)
}

// On a full history the workflow starts no more deliveries, lets the one
// in flight finish (it is not sent again), and continues as new with the
// events not delivered and the IDs it has seen.
func TestNotificationsWorkflow_ContinueAsNewCarriesPending(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	var d deliveries
	var a *activities.Activities
	env.OnActivity(a.Deliver, mock.Anything, mock.Anything).After(10 * time.Second).Return(func(_ context.Context, in activities.DeliverInput) error {
		d.mu.Lock()
		defer d.mu.Unlock()
		d.calls = append(d.calls, in.Notification+" "+in.Event.ID)
		return nil
	})
	start := protocol.NotificationsStart{
		Record: protocol.NotificationsRecord{Namespace: "ns", Generation: 1, Notifications: []api.Notification{
			testNotification("hook", notify.Spec{Provider: notify.Webhook, Address: "https://x"})}},
		Recent: []string{"e0"},
	}
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(notify.SignalEvent, notifyEvent("e0", notify.RolloutStarted)) // seen in the last run
		env.SignalWorkflow(notify.SignalEvent, notifyEvent("e1", notify.RolloutStarted))
		env.SignalWorkflow(notify.SignalEvent, notifyEvent("e2", notify.RolloutSucceeded))
	}, time.Second)
	env.RegisterDelayedCallback(func() { env.SetCurrentHistoryLength(historyLimit + 1) }, 2*time.Second)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(notify.SignalEvent, notifyEvent("e3", notify.RolloutFailed)) // while draining
	}, 5*time.Second)
	env.ExecuteWorkflow(NotificationsWorkflow, start)

	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(env.GetWorkflowError(), &can), "got %v", env.GetWorkflowError())
	var next protocol.NotificationsStart
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	assert.Equal(t, []string{"hook e1"}, d.calls, "only the delivery in flight ran, once")
	var pending []string
	for _, p := range next.Pending {
		pending = append(pending, p.Notification+" "+p.Event.ID)
	}
	assert.Equal(t, []string{"hook e2", "hook e3"}, pending, "the rest is carried, in order")
	assert.Equal(t, []string{"e0", "e1", "e2", "e3"}, next.Recent)
	assert.Equal(t, []protocol.DeliveryStats{{Name: "hook", Delivered: 1, Pending: 2}}, next.Record.Deliveries)
	assert.Len(t, next.Record.Notifications, 1)
}

// Applies are validated (namespace, spec) and counted; an event that came
// before a Notification existed is not delivered to it, nor one that
// comes while it is suspended.
func TestNotificationsWorkflow_Apply(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	var d deliveries
	d.mock(env, nil)
	hook := testNotification("hook", notify.Spec{Provider: notify.Webhook, Address: "https://x"})
	var created, unchanged, foreign, invalid *updateResult
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(notify.SignalEvent, notifyEvent("before", notify.RolloutStarted))
	}, time.Second)
	env.RegisterDelayedCallback(func() {
		created = sendUpdate(env, protocol.UpdateApply, hook)
		unchanged = sendUpdate(env, protocol.UpdateApply, hook)
		other := hook
		other.Metadata.Namespace = "other"
		foreign = sendUpdate(env, protocol.UpdateApply, other)
		bad := hook
		bad.Spec.Provider = "pager"
		invalid = sendUpdate(env, protocol.UpdateApply, bad)
	}, 2*time.Second)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(notify.SignalEvent, notifyEvent("after", notify.RolloutStarted))
	}, 3*time.Second)
	env.RegisterDelayedCallback(func() {
		suspended := hook
		suspended.Spec.Suspend = true
		sendUpdate(env, protocol.UpdateApply, suspended)
		env.SignalWorkflow(notify.SignalEvent, notifyEvent("suspended", notify.RolloutStarted))
	}, 4*time.Second)
	env.RegisterDelayedCallback(func() {
		sendUpdate(env, protocol.UpdateNotificationDelete, protocol.NotificationDelete{Name: "hook"})
	}, time.Minute)
	env.ExecuteWorkflow(NotificationsWorkflow, protocol.NotificationsStart{Record: protocol.NotificationsRecord{Namespace: "ns"}})
	require.NoError(t, env.GetWorkflowError())
	require.NoError(t, created.err)
	assert.True(t, created.value.(protocol.NotificationResult).Created)
	require.NoError(t, unchanged.err)
	assert.False(t, unchanged.value.(protocol.NotificationResult).Changed)
	require.Error(t, foreign.err)
	assert.Contains(t, foreign.err.Error(), "other/hook sent to the notifications workflow of namespace ns")
	require.Error(t, invalid.err)
	assert.Contains(t, invalid.err.Error(), "spec.provider")
	assert.Equal(t, []string{"hook after"}, d.calls)
}

// acceptEvents lets env's workflow signal events to any namespace's
// notifications workflow and records them.
func acceptEvents(env *testsuite.TestWorkflowEnvironment) *[]notify.Event {
	var got []notify.Event
	env.OnSignalExternalWorkflow(mock.Anything, mock.MatchedBy(func(id string) bool { return strings.HasPrefix(id, notify.WorkflowIDPrefix) }),
		mock.Anything, notify.SignalEvent, mock.Anything).Return(func(_, id, _, _ string, arg any) error {
		ev := arg.(notify.Event)
		if id != notify.WorkflowID(ev.Namespace) {
			return errors.New("event of namespace " + ev.Namespace + " sent to " + id)
		}
		got = append(got, ev)
		return nil
	})
	return &got
}

func eventTypes(evs []notify.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = string(ev.Type)
	}
	return out
}
