package workflows

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/flotilla-gitops/flotilla/activities"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
)

// watchOptions: the cluster's long-running watch (activities.Watch). It
// heartbeats every few seconds, so a watch whose agent or controller died
// is started again within watchHeartbeatTimeout on the next worker of
// the cluster's queue; it is retried without limit and waits in the
// queue as long as it takes. A canceled watch is not waited for (its
// worker learns of the cancel only with a heartbeat's answer): the next
// one starts at once and takes over the worker's running monitor.
var watchOptions = workflow.ActivityOptions{
	StartToCloseTimeout: activities.WatchRun + 10*time.Minute,
	HeartbeatTimeout:    watchHeartbeatTimeout,
	RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: 30 * time.Second},
}

// watchHeartbeatTimeout bounds how long a dead watch goes unnoticed.
const watchHeartbeatTimeout = 20 * time.Second

// clusterWatch runs a cluster's watch over the releases GitRepos run
// there: one Watch activity at a time, restarted whenever a GitRepo's set
// changes, when a run ends, and in the next run after continue-as-new.
type clusterWatch struct {
	name string
	rec  *protocol.ClusterRecord
	// sets are the GitRepos' watch sets, sorted by GitRepo.
	sets []protocol.WatchSet
	// gen counts changes of sets; running is set while a Watch runs.
	gen     int
	running bool
	ch      workflow.ReceiveChannel
	// silent is told when a pull-mode watch stopped heartbeating: the
	// agent that ran it is gone (versionContact).
	silent func(workflow.Context)
	// token names the watch started last (its run and number), which its
	// contact reports carry; starts counts the watches started.
	token  string
	starts int
}

// pending reports whether a Watch runs or a watch signal waits: the run
// must not continue as new meanwhile (the signal would be lost).
func (w *clusterWatch) pending() bool { return w.running || w.ch != nil && w.ch.Len() > 0 }

// set takes a GitRepo's watch set.
func (w *clusterWatch) set(s protocol.WatchSet) {
	i, found := slices.BinarySearchFunc(w.sets, s.GitRepo, func(e protocol.WatchSet, g string) int { return strings.Compare(e.GitRepo, g) })
	switch {
	case len(s.Releases) == 0 && found:
		w.sets = slices.Delete(w.sets, i, i+1)
	case len(s.Releases) == 0:
		return
	case found:
		w.sets[i] = s
	default:
		w.sets = slices.Insert(w.sets, i, s)
	}
	w.gen++
}

// start receives watch sets and runs the watch loop.
func (w *clusterWatch) start(ctx workflow.Context) {
	w.ch = workflow.GetSignalChannel(ctx, protocol.SignalWatch)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var s protocol.WatchSet
			w.ch.Receive(ctx, &s)
			w.set(s)
		}
	})
	workflow.Go(ctx, w.loop)
}

// stopping reports whether the run should end its watch: its history is
// long enough to continue as new.
func stopping(ctx workflow.Context) bool {
	return historyFull(ctx)
}

// loop runs Watch while there is something to watch.
func (w *clusterWatch) loop(ctx workflow.Context) {
	for {
		if err := workflow.Await(ctx, func() bool { return len(w.sets) > 0 && !stopping(ctx) }); err != nil {
			return
		}
		if workflow.GetVersion(ctx, versionDriftWatch, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
			return
		}
		gen, pull := w.gen, w.rec.PullMode()
		actx, cancel := workflow.WithCancel(ctx)
		var a *activities.ClusterActivities
		w.running = true
		opts := watchOptions
		if workflow.GetVersion(ctx, versionWatchQueue, workflow.DefaultVersion, 1) == 1 {
			opts.TaskQueue = protocol.WatchQueue(workflow.GetInfo(ctx).TaskQueueName) // an agent's queue in pull mode
		}
		contact := workflow.GetVersion(ctx, versionContact, workflow.DefaultVersion, 1) == 1
		if contact && pull {
			// The workflow hears of a dead agent's watch at once, not the
			// server's retry.
			rp := *opts.RetryPolicy
			rp.MaximumAttempts = 1
			opts.RetryPolicy = &rp
		}
		in := activities.WatchInput{Cluster: w.name, Sets: w.sets}
		if contact {
			w.starts++
			w.token = workflow.GetInfo(ctx).WorkflowExecution.RunID + "/" + strconv.Itoa(w.starts)
			in.Unreachable, in.Token = w.rec.Unreachable != nil, w.token
		}
		f := workflow.ExecuteActivity(onCluster(actx, w.name, pull, opts), a.Watch, in)
		// A cluster that gets an agent (or loses it) is watched from its
		// new queue at once.
		_ = workflow.Await(ctx, func() bool { return f.IsReady() || w.gen != gen || stopping(ctx) || w.rec.PullMode() != pull })
		if !f.IsReady() {
			cancel()
		}
		err := f.Get(ctx, nil)
		w.running = false
		cancel()
		switch {
		case err == nil || temporal.IsCanceledError(err):
		case contact && pull && heartbeatTimedOut(err):
			if w.silent != nil {
				w.silent(ctx)
			}
		default:
			_ = workflow.Sleep(ctx, 10*time.Second) // retries exhausted or refused: pause
		}
	}
}
