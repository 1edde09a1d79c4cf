package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/flotilla-gitops/flotilla/activities"
	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/fleetyaml"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/strategy"
)

// Agent liveness: an agent that sent no heartbeat for offlineAfterBeats
// of its heartbeat intervals is Offline.
const (
	offlineAfterBeats        = 3
	defaultHeartbeatInterval = 30 * time.Second
)

// ensureAgentOptions: installing or upgrading a managed agent. A cluster
// that stays unreachable is reported on the record and tried again on the
// next change or controller start.
var ensureAgentOptions = workflow.ActivityOptions{
	StartToCloseTimeout: 5 * time.Minute,
	HeartbeatTimeout:    30 * time.Second,
	RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: 30 * time.Second, MaximumAttempts: 5,
		NonRetryableErrorTypes: []string{activities.ErrTypeInvalidAgentConfig}},
}

// applyAgent folds an agent change into the cluster's agent record; state
// the workflow observed (last seen, deployed configuration) is kept.
func applyAgent(ctx workflow.Context, cur *protocol.AgentRecord, a protocol.AgentApply) *protocol.AgentRecord {
	next := protocol.AgentRecord{}
	if cur != nil {
		next = *cur
	}
	if a.Managed {
		next.Managed, next.Config = true, a.Config
	}
	if a.TokenID != "" && a.TokenID != next.TokenID {
		now := workflow.Now(ctx)
		next.TokenID, next.RegisteredAt = a.TokenID, &now
	}
	return &next
}

// agentWatch keeps a cluster's agent state: heartbeats, Offline after
// missed heartbeats, and the managed agent's deployment.
type agentWatch struct {
	rec *protocol.ClusterRecord
	// ensureDue asks for the managed agent to be (re)checked; busy while
	// the check runs (the workflow does not continue as new meanwhile).
	ensureDue bool
	busy      bool
	// defaultsHash is the latest controller defaults hash signalled;
	// recheck is set when one arrived while a check ran.
	defaultsHash string
	recheck      bool
	// notify tells the GitRepos of the cluster's change (its agent is back
	// online: what it missed goes out now).
	notify func()
	// The signal channels, so continue-as-new waits until they are drained.
	heartbeatCh, defaultsCh workflow.ReceiveChannel
}

// pending reports whether a check runs or a signal waits to be handled:
// the workflow must not continue as new meanwhile.
func (w *agentWatch) pending() bool {
	return w.busy || w.heartbeatCh.Len() > 0 || w.defaultsCh.Len() > 0
}

// managed reports whether the controller installs this cluster's agent.
func (w *agentWatch) managed() bool { return w.rec.Agent != nil && w.rec.Agent.Managed }

func (w *agentWatch) start(ctx workflow.Context) {
	w.heartbeatCh = workflow.GetSignalChannel(ctx, protocol.SignalHeartbeat)
	w.defaultsCh = workflow.GetSignalChannel(ctx, protocol.SignalAgentDefaults)
	workflow.Go(ctx, w.heartbeats)
	workflow.Go(ctx, w.liveness)
	workflow.Go(ctx, w.defaults)
	workflow.Go(ctx, w.ensure)
}

// heartbeats records each heartbeat's (workflow) time. Heartbeats are not
// spec changes: no generation bump, no GitRepo notification.
func (w *agentWatch) heartbeats(ctx workflow.Context) {
	ch := w.heartbeatCh
	for {
		var hb protocol.Heartbeat
		ch.Receive(ctx, &hb)
		if !w.rec.PullMode() {
			continue
		}
		a := protocol.AgentRecord{}
		if w.rec.Agent != nil {
			a = *w.rec.Agent
		}
		now := workflow.Now(ctx)
		wasOffline := a.Offline
		a.LastSeen, a.Version, a.HeartbeatInterval, a.Offline = &now, hb.Version, hb.Interval, false
		if hb.SealKey != nil {
			a.SealKey = hb.SealKey // downstreamResources are sealed to it
		}
		w.rec.Agent = &a
		if wasOffline {
			workflow.GetLogger(ctx).Info("Agent back online", "cluster", w.rec.Name)
			upsertCluster(ctx, *w.rec)
			if w.notify != nil && workflow.GetVersion(ctx, versionNotifyOnReturn, workflow.DefaultVersion, 1) == 1 {
				w.notify()
			}
		}
	}
}

// liveness marks the agent Offline when no heartbeat arrived for
// offlineAfterBeats intervals. It sleeps until the deadline implied by the
// last heartbeat, so a steady agent costs one timer per few heartbeats.
func (w *agentWatch) liveness(ctx workflow.Context) {
	for {
		_ = workflow.Await(ctx, func() bool {
			a := w.rec.Agent
			return a != nil && a.LastSeen != nil && !a.Offline
		})
		a := w.rec.Agent
		interval := a.HeartbeatInterval
		if interval <= 0 {
			interval = defaultHeartbeatInterval
		}
		wait := a.LastSeen.Add(offlineAfterBeats * interval).Sub(workflow.Now(ctx))
		if wait > 0 {
			_ = workflow.Sleep(ctx, wait)
			continue
		}
		w.offline(ctx, "no heartbeat")
	}
}

// offline marks the agent Offline.
func (w *agentWatch) offline(ctx workflow.Context, why string) {
	next := *w.rec.Agent
	next.Offline = true
	w.rec.Agent = &next
	workflow.GetLogger(ctx).Warn("Agent offline: "+why, "cluster", w.rec.Name, "lastSeen", next.LastSeen)
	upsertCluster(ctx, *w.rec)
}

// watchSilent is told that the cluster's drift watch, which runs on the
// agent, stopped heartbeating (within watchHeartbeatTimeout): unless a
// heartbeat arrived since, the agent is gone, and it is Offline now
// rather than after offlineAfterBeats heartbeat intervals.
func (w *agentWatch) watchSilent(ctx workflow.Context) {
	a := w.rec.Agent
	if a == nil || a.Offline || a.LastSeen != nil && workflow.Now(ctx).Sub(*a.LastSeen) < watchHeartbeatTimeout {
		return
	}
	w.offline(ctx, "its drift watch stopped heartbeating")
}

// defaults receives the controller's agent defaults (sent when a
// controller starts); only a changed hash triggers a check.
func (w *agentWatch) defaults(ctx workflow.Context) {
	ch := w.defaultsCh
	for {
		var d protocol.AgentDefaults
		ch.Receive(ctx, &d)
		w.defaultsHash = d.Hash
		switch {
		case !w.managed():
		case w.busy:
			w.recheck = true // compared with the running check's result
		case d.Hash != w.rec.Agent.DefaultsHash:
			w.ensureDue = true
		}
	}
}

// ensure installs or upgrades the managed agent when asked. The activity
// compares the hash of the agent's effective configuration with what the
// cluster runs and deploys only on a difference.
func (w *agentWatch) ensure(ctx workflow.Context) {
	var aa *activities.AgentActivities
	for {
		_ = workflow.Await(ctx, func() bool { return w.ensureDue && w.managed() && !w.rec.Removed })
		if w.waitForWindow(ctx) {
			continue // decide again: the window opened, or the cluster changed
		}
		w.ensureDue, w.busy = false, true
		in := activities.EnsureAgentInput{Cluster: w.rec.Name, KubeconfigHash: w.rec.KubeconfigHash, Config: w.rec.Agent.Config}
		var res activities.EnsureAgentResult
		err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, ensureAgentOptions), aa.EnsureAgent, in).Get(ctx, &res)
		a := *w.rec.Agent
		if err != nil {
			// Forget the defaults hash so the next controller start tries
			// again.
			a.Error, a.DefaultsHash = activityMessage(err), ""
		} else {
			a.Error, a.DeploymentID, a.DefaultsHash = "", res.DeploymentID, res.DefaultsHash
			if res.Deployed {
				a.Deploys++
			}
			if w.recheck && w.defaultsHash != res.DefaultsHash {
				w.ensureDue = true // another controller announced other defaults meanwhile
			}
		}
		w.rec.Agent = &a
		w.busy, w.recheck = false, false
	}
}

// windowAtOptions: reading windows (activities.WindowAt) is quick and
// local; one that fails does not hold an upgrade.
var windowAtOptions = workflow.LocalActivityOptions{StartToCloseTimeout: 10 * time.Second,
	RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 3}}

// waitForWindow holds an upgrade of the managed agent while its upgrade
// windows are closed (versionAgentUpgradeWindows): the record says which
// window it waits for, and the wait ends when that window opens, the
// cluster changes or it is removed. It reports whether it waited. The
// first install does not wait: there is nothing to interrupt.
func (w *agentWatch) waitForWindow(ctx workflow.Context) bool {
	a := w.rec.Agent
	if a.DeploymentID == "" || a.Config == nil || len(a.Config.UpgradeWindows) == 0 {
		return w.clearUpgradeWaits()
	}
	if workflow.GetVersion(ctx, versionAgentUpgradeWindows, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return false
	}
	ws := fleetWindows(a.Config.UpgradeWindows)
	now := workflow.Now(ctx)
	var st strategy.WindowState
	err := workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, windowAtOptions), activities.WindowAt,
		activities.WindowAtInput{Windows: ws, Now: now}).Get(ctx, &st)
	if err != nil || st.Open || st.Next.IsZero() || st.Window < 0 || st.Window >= len(ws) {
		// Windows that do not parse are refused when applied.
		return w.clearUpgradeWaits()
	}
	win := ws[st.Window]
	next := *a
	next.UpgradeWaits = fmt.Sprintf("agent upgrade waits for window %s, which opens %s", fleetyaml.Window(win),
		st.Next.UTC().Format(time.RFC3339))
	w.rec.Agent = &next
	workflow.GetLogger(ctx).Info("Managed agent upgrade waits for its window", "cluster", w.rec.Name, "opens", st.Next)
	gen := w.rec.Generation
	_, _ = workflow.AwaitWithTimeout(ctx, st.Next.Sub(now), func() bool { return w.rec.Removed || w.rec.Generation != gen })
	return true
}

// clearUpgradeWaits forgets that an upgrade waited; it reports false (no
// wait).
func (w *agentWatch) clearUpgradeWaits() bool {
	if w.rec.Agent.UpgradeWaits != "" {
		next := *w.rec.Agent
		next.UpgradeWaits = ""
		w.rec.Agent = &next
	}
	return false
}

// fleetWindows are ws as fleet.yaml's windows, which internal/strategy
// reads.
func fleetWindows(ws []api.Window) []fleetyaml.Window {
	out := make([]fleetyaml.Window, len(ws))
	for i, w := range ws {
		out[i] = fleetyaml.Window(w)
	}
	return out
}
