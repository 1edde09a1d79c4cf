package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/notify"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
)

// contactEvents tells the notifications of the clusters' namespace
// (api.DefaultNamespace: clusters belong to no GitRepo's namespace, as
// in Fleet) when the cluster goes out of contact (ClusterOffline) and
// when it is back (ClusterOnline): once per transition, whichever way it
// was noticed (no agent heartbeat, or the drift watch's probe failing).
type contactEvents struct {
	rec    *protocol.ClusterRecord
	events *notifier
	// offline is what was told last; carried across continue-as-new.
	offline bool
}

func (e *contactEvents) start(ctx workflow.Context) {
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			if err := workflow.Await(ctx, e.changed); err != nil {
				return
			}
			e.tell(ctx)
		}
	})
}

// changed reports whether the cluster's contact differs from what was
// told. A removed cluster tells nothing more.
func (e *contactEvents) changed() bool {
	lost, _, _ := e.rec.OutOfContact()
	return lost != e.offline && !e.rec.Removed
}

func (e *contactEvents) tell(ctx workflow.Context) {
	lost, seen, reason := e.rec.OutOfContact()
	e.offline = lost
	ev := notify.Event{Type: notify.ClusterOnline, Severity: notify.Info, Namespace: api.DefaultNamespace,
		Clusters: []string{e.rec.Name}, Message: "Cluster " + e.rec.Name + " is in contact again"}
	if lost {
		ev.Type, ev.Severity = notify.ClusterOffline, notify.Warning
		ev.Message = "Cluster " + e.rec.Name + " is out of contact: " + reason
		if !seen.IsZero() {
			ev.Message += " (last seen " + seen.UTC().Format(time.RFC3339) + ")"
		}
	}
	e.events.emit(ctx, ev)
}
