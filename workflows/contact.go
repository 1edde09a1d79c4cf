package workflows

import (
	"errors"
	"slices"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/flotilla-gitops/flotilla/activities"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

// contactWatch keeps a cluster's contact state and tells the GitRepos
// that run releases there about it.
type contactWatch struct {
	rec *protocol.ClusterRecord
	// sets are the GitRepos' watch sets (clusterWatch.sets): who runs
	// releases on the cluster.
	sets *[]protocol.WatchSet
	// toldLost is the contact state last told, and told the GitRepos told
	// of a loss, sorted.
	toldLost bool
	told     []string
	// sending is set while signals are out: the run must not continue as
	// new meanwhile.
	sending bool
	ch      workflow.ReceiveChannel
}

// pending reports whether signals are out or a contact report waits.
func (w *contactWatch) pending() bool { return w.sending || w.ch != nil && w.ch.Len() > 0 }

func (w *contactWatch) start(ctx workflow.Context) {
	w.ch = workflow.GetSignalChannel(ctx, protocol.SignalContact)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var c protocol.Contact
			w.ch.Receive(ctx, &c)
			w.take(ctx, c)
		}
	})
	workflow.Go(ctx, w.tell)
}

// take records what the drift watch's probe found.
func (w *contactWatch) take(ctx workflow.Context, c protocol.Contact) {
	switch {
	case c.Reachable && w.rec.Unreachable != nil:
		w.rec.Unreachable = nil
		workflow.GetLogger(ctx).Info("Cluster reachable again", "cluster", w.rec.Name)
	case !c.Reachable && w.rec.Unreachable == nil:
		w.rec.Unreachable = &protocol.Unreachable{LastContact: c.LastContact, Reason: c.Reason}
		workflow.GetLogger(ctx).Warn("Cluster unreachable", "cluster", w.rec.Name, "lastContact", c.LastContact, "reason", c.Reason)
	default:
		return
	}
	upsertCluster(ctx, *w.rec)
}

// repos returns the GitRepos that run releases on the cluster, sorted
// (the sets are).
func (w *contactWatch) repos() []string {
	out := make([]string, 0, len(*w.sets))
	for _, s := range *w.sets {
		out = append(out, s.GitRepo)
	}
	return out
}

// due reports whether a GitRepo is to be told: the state changed, or a
// GitRepo came to run releases on a cluster out of contact.
func (w *contactWatch) due() bool {
	lost, _, _ := w.rec.OutOfContact()
	if lost != w.toldLost {
		return true
	}
	return lost && slices.ContainsFunc(w.repos(), func(r string) bool { return !slices.Contains(w.told, r) })
}

// tell signals the GitRepos whenever due. The signals are not retried: a
// GitRepo that no longer exists needs no telling.
func (w *contactWatch) tell(ctx workflow.Context) {
	for {
		if err := workflow.Await(ctx, w.due); err != nil {
			return
		}
		if workflow.GetVersion(ctx, versionContact, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
			return
		}
		lost, seen, reason := w.rec.OutOfContact()
		var to []string
		switch {
		case lost != w.toldLost && !lost:
			to, w.told = w.told, nil
		case lost != w.toldLost:
			to = w.repos()
			w.told = slices.Clone(to)
		default:
			for _, r := range w.repos() {
				if !slices.Contains(w.told, r) {
					to = append(to, r)
				}
			}
			w.told = append(w.told, to...)
			slices.Sort(w.told)
		}
		w.toldLost, w.sending = lost, true
		sig := status.LiveSignal{Cluster: w.rec.Name, Contact: &status.ClusterContact{Cluster: w.rec.Name, Lost: lost, LastSeen: seen, Reason: reason}}
		fs := make([]workflow.Future, len(to))
		for i, r := range to {
			fs[i] = workflow.SignalExternalWorkflow(ctx, activities.ParseGitRepoRef(r).WorkflowID(), "", protocol.SignalLive, sig)
		}
		for _, f := range fs {
			_ = f.Get(ctx, nil)
		}
		w.sending = false
	}
}

// heartbeatTimedOut reports whether err is an activity's heartbeat
// timeout: the worker that ran it stopped answering.
func heartbeatTimedOut(err error) bool {
	var te *temporal.TimeoutError
	return errors.As(err, &te) && te.TimeoutType() == enumspb.TIMEOUT_TYPE_HEARTBEAT
}
