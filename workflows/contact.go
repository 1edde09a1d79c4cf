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
// that run releases there about it: while the cluster is out of contact
// every such GitRepo is told it is lost, and told it is back when contact
// returns, when it stops running releases there, or when the cluster is
// removed (so that a GitRepo never keeps a cluster out of contact that
// came back under the same name).
type contactWatch struct {
	rec *protocol.ClusterRecord
	// sets are the GitRepos' watch sets (clusterWatch.sets): who runs
	// releases on the cluster.
	sets *[]protocol.WatchSet
	// watch names the drift watch running now (clusterWatch.token): a
	// report from a watch canceled since is stale.
	watch *string
	// told are the GitRepos that were told the cluster is lost and not
	// told since that it is back, sorted.
	told []string
	// sending is set while signals are out: the run must not continue as
	// new meanwhile.
	sending bool
	ch      workflow.ReceiveChannel
	// off: the run is from before versionContact and tells nothing.
	off bool
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
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			if err := workflow.Await(ctx, w.due); err != nil {
				return
			}
			if !w.tell(ctx) {
				w.off = true
				return
			}
		}
	})
}

// take records what the drift watch's probe found; a report of a watch
// that was canceled since is ignored.
func (w *contactWatch) take(ctx workflow.Context, c protocol.Contact) {
	if c.Watch != "" && w.watch != nil && c.Watch != *w.watch {
		return
	}
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

// lostTo returns the GitRepos that should believe the cluster lost: every
// one that runs releases there while it is out of contact, none
// otherwise or once it is removed.
func (w *contactWatch) lostTo() []string {
	if lost, _, _ := w.rec.OutOfContact(); !lost || w.rec.Removed {
		return nil
	}
	return w.repos()
}

// due reports whether a GitRepo is to be told, or the cluster's contact
// state is to be forgotten: nothing runs there any more, so nothing
// probes it.
func (w *contactWatch) due() bool {
	return !slices.Equal(w.lostTo(), w.told) || len(*w.sets) == 0 && w.rec.Unreachable != nil
}

// tell signals each GitRepo whose belief differs from lostTo. The
// signals are not retried: a GitRepo that no longer exists needs no
// telling. It reports false on runs from before versionContact.
func (w *contactWatch) tell(ctx workflow.Context) bool {
	if workflow.GetVersion(ctx, versionContact, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return false
	}
	if len(*w.sets) == 0 && w.rec.Unreachable != nil {
		w.rec.Unreachable = nil
		upsertCluster(ctx, *w.rec)
	}
	want := w.lostTo()
	_, seen, reason := w.rec.OutOfContact()
	var sigs []workflow.Future
	send := func(repo string, lost bool) {
		c := &status.ClusterContact{Cluster: w.rec.Name, Lost: lost}
		if lost {
			c.LastSeen, c.Reason = seen, reason
		}
		sigs = append(sigs, workflow.SignalExternalWorkflow(ctx, activities.ParseGitRepoRef(repo).WorkflowID(), "", protocol.SignalLive,
			status.LiveSignal{Cluster: w.rec.Name, Contact: c}))
	}
	for _, r := range w.told {
		if !slices.Contains(want, r) {
			send(r, false)
		}
	}
	for _, r := range want {
		if !slices.Contains(w.told, r) {
			send(r, true)
		}
	}
	w.told, w.sending = want, true
	for _, f := range sigs {
		_ = f.Get(ctx, nil)
	}
	w.sending = false
	return true
}

// flush waits until every GitRepo is told what it should believe (on
// removal: that the cluster is gone), so the run may end.
func (w *contactWatch) flush(ctx workflow.Context) {
	_ = workflow.Await(ctx, func() bool { return w.off || !w.sending && !w.due() })
}

// heartbeatTimedOut reports whether err is an activity's heartbeat
// timeout: the worker that ran it stopped answering.
func heartbeatTimedOut(err error) bool {
	var te *temporal.TimeoutError
	return errors.As(err, &te) && te.TimeoutType() == enumspb.TIMEOUT_TYPE_HEARTBEAT
}
