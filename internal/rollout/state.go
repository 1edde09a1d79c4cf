package rollout

import (
	"time"

	"github.com/flotilla-gitops/flotilla/internal/outcome"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

// State is one rollout's state from its plan on, in one place: what each
// deployment shows and what the inventory holds (its Tracker), which
// units may start next under the rollout strategies, approvals, windows
// and failure thresholds (its Scheduler), which clusters' agents were
// offline when the rollout resolved its targets, and what the clusters'
// watches vouch for. The rollout workflow feeds it events (Report, Mark,
// Approve, Supersede) and asks it what to do (Next, Start, Rollbacks); it
// does no I/O and reads time only from its arguments, so its decisions
// are table-tested here and replay the same.
type State struct {
	track *Tracker
	// sched is nil for a rollout from before rollout strategies, which
	// runs every cluster's work at once.
	sched *Scheduler
	// offline are the clusters whose agent had stopped heartbeating;
	// pickup is how long their work waits in their queue.
	offline map[string]bool
	pickup  time.Duration
	// live are the watches' last reports by deployment when vouched
	// deployments are settled without a deploy (nil: they are not).
	live       map[status.Key]*status.LiveReport
	superseded bool
	// holds say why uninstalls are held (Plan.Holds).
	holds []status.Wait
	// kept are what cleanups left in place on purpose (Report.Kept).
	kept []string
}

// Report is what one cluster's work reported: the rollout's own runner,
// or a batch by signal.
type Report struct {
	Cluster     string              `json:"cluster"`
	Deployments []status.Deployment `json:"deployments,omitempty"`
	// Final: the deployments will not change any more in this rollout
	// (Ready, failed, or the ready wait ended).
	Final bool `json:"final,omitempty"`
	// GaveUp: the cluster could not be reached; Bundles names the
	// deployments that were not made.
	GaveUp  bool     `json:"gaveUp,omitempty"`
	Bundles []string `json:"bundles,omitempty"`
	// Removed are cleaned releases ("<namespace>/<release>").
	Removed []string `json:"removed,omitempty"`
	// Kept say what a cleanup left in place on purpose (a release of
	// another owner, a namespace deleteNamespace kept), naming the
	// cluster.
	Kept    []string `json:"kept,omitempty"`
	Message string   `json:"message,omitempty"`
}

// NewState starts tracking plan p; backoff paces the retries of the
// failures it records.
func NewState(p Plan, backoff Backoff) *State {
	return &State{track: NewTracker(p, backoff), holds: p.Holds}
}

// Strategy says how the rollout's units are scheduled (Schedule).
type Strategy struct {
	Strategies []BundleStrategy
	// GateEveryStart: windows gate each unit's start, not only a
	// partition's (Scheduler.GateEveryStart).
	GateEveryStart bool
	// RetryUnreachable: units whose cluster was not reached start at once
	// (Scheduler.RetryUnreachable); Pickup is how long a cluster's work
	// waits to be taken up.
	RetryUnreachable bool
	Pickup           time.Duration
	// Approvals are those of the rollout this one replaces.
	Approvals []Approval
	// Offline are the clusters whose agent had stopped heartbeating.
	Offline []string
	// Vouch: deployments the clusters' watches vouch for are settled
	// without a deploy (Vouched), from the reports in Inventory.
	Vouch     bool
	Inventory []InventoryEntry
}

// Schedule sets up the scheduling of the plan's units under strategy at
// now, shows the units held back, and returns the approved partitions
// kept from the rollout this one replaces.
func (s *State) Schedule(p Plan, st Strategy, now time.Time) (kept []string) {
	s.sched = NewScheduler(p, st.Strategies, st.Inventory, now)
	if st.GateEveryStart {
		s.sched.GateEveryStart()
	}
	if st.RetryUnreachable {
		s.sched.RetryUnreachable()
	}
	s.pickup = st.Pickup
	kept = s.sched.Restore(st.Approvals)
	for _, h := range s.sched.Holds() {
		if h.Reason != "" {
			s.track.SetState(status.Key{Bundle: h.Bundle.Name, Cluster: h.Cluster}, status.OutOfSync, h.Reason)
		} else {
			s.track.Hold(h)
		}
	}
	s.offline = map[string]bool{}
	for _, c := range st.Offline {
		s.offline[c] = true
	}
	if st.Vouch {
		s.live = LiveReports(st.Inventory)
	}
	return kept
}

// Scheduled reports whether units are scheduled (Schedule ran).
func (s *State) Scheduled() bool { return s.sched != nil }

// Deployments and Inventory are the rollout's deployments and inventory
// as they stand.
func (s *State) Deployments() []status.Deployment { return s.track.Deployments }

// Inventory is every release the rollout knows of, as it stands.
func (s *State) Inventory() []InventoryEntry { return s.track.Inventory }

// Deployment returns the deployment of k.
func (s *State) Deployment(k status.Key) (status.Deployment, bool) { return s.track.Deployment(k) }

// Approvals are the approved partitions, for the rollout that replaces
// this one (nil before Schedule).
func (s *State) Approvals() []Approval {
	if s.sched == nil {
		return nil
	}
	return s.sched.Approvals()
}

// Kept says what the rollout's cleanups left in place on purpose, in
// the order reported.
func (s *State) Kept() []string { return s.kept }

// Supersede records that a newer change cut the rollout short: clusters
// it gives up on are not recorded as failures (the newer rollout deploys
// anew), and failures halt nothing.
func (s *State) Supersede() { s.superseded = true }

// Report takes a cluster's report at now and returns the bundles it
// halted (more failures than their failureThreshold).
func (s *State) Report(rep Report, now time.Time) []status.Halt {
	s.track.Record(rep.Deployments, now)
	s.track.Forget(rep.Cluster, rep.Removed)
	s.kept = append(s.kept, rep.Kept...)
	if s.sched == nil {
		return nil
	}
	for _, d := range rep.Deployments {
		if d.State == status.OutOfSync {
			continue // a rollback's report: deploys never report OutOfSync
		}
		s.sched.Finish(d, rep.Final)
	}
	if rep.GaveUp {
		if !s.superseded {
			// Not reached: retried on the failure backoff.
			s.track.GaveUp(rep.Cluster, rep.Bundles, rep.Message, now)
		}
		for _, b := range rep.Bundles {
			s.sched.GiveUp(b, rep.Cluster)
		}
	}
	if s.superseded {
		return nil
	}
	return s.sched.CheckFailures()
}

// Step is what to do next.
type Step struct {
	Decision
	// Start are the units to deploy now: those the scheduler released
	// that no watch vouches for.
	Start []Unit
	// Vouched: units were settled as the watches reported them, without
	// a deploy; later units may start now (decide again).
	Vouched bool
	// Halts are the halted bundles (before the vouched units settled);
	// Halted those the vouched units halted.
	Halts, Halted []status.Halt
}

// Next decides at now what starts: units outside their window show
// OutOfSync, and units the clusters' watches vouch for settle at once.
func (s *State) Next(now time.Time) Step {
	dec := s.sched.Next(now, s.track.StateOf)
	for _, o := range dec.Outside {
		s.track.SetState(o.Key, status.OutOfSync, o.Message)
	}
	dec.Waits = append(dec.Waits, s.holds...)
	step := Step{Decision: dec, Halts: s.Halts()}
	step.Start = dec.Start
	if s.live == nil {
		return step
	}
	step.Start = dec.Start[:0:0]
	var settled []status.Deployment
	for _, u := range dec.Start {
		key := status.Key{Bundle: u.Bundle.Name, Cluster: u.Cluster}
		prev, _ := s.track.Deployment(key)
		if d, ok := Vouched(u, s.live[key], prev); ok && !s.offline[u.Cluster] {
			settled = append(settled, d)
			continue
		}
		step.Start = append(step.Start, u)
	}
	for _, d := range settled {
		step.Halted = append(step.Halted, s.Report(Report{Cluster: d.Cluster, Deployments: []status.Deployment{d}, Final: true}, now)...)
	}
	step.Vouched = len(settled) > 0
	return step
}

// Start marks units as started (WaitApplied): a unit whose cluster's
// agent is offline says its deploy waits in the agent's queue. A unit
// that runs its deployment ID already is left as it is: its no-op deploy
// confirms its state.
func (s *State) Start(u Unit) {
	if u.PrevID == u.Bundle.DeploymentID {
		return
	}
	msg := ""
	if s.offline[u.Cluster] {
		msg = "cluster " + u.Cluster + ": agent offline; the deploy waits in task queue " + protocol.ClusterQueue(u.Cluster) + " until the agent is back"
		if s.pickup > 0 {
			msg = "cluster " + u.Cluster + ": agent offline; the deploy waits up to " + s.pickup.String() + " in task queue " +
				protocol.ClusterQueue(u.Cluster) + ", then is tried again when the agent is back"
		}
	}
	s.track.Starting(status.Key{Bundle: u.Bundle.Name, Cluster: u.Cluster}, msg)
}

// ReadyTimeout is how long bundle's clusters may take to become Ready.
func (s *State) ReadyTimeout(bundle string) time.Duration { return s.sched.ReadyTimeout(bundle) }

// Busy reports whether a unit is running.
func (s *State) Busy() bool { return s.sched.Busy() }

// Running reports whether bundle's unit on cluster is in flight.
func (s *State) Running(bundle, cluster string) bool {
	return s.sched != nil && s.sched.Running(bundle, cluster)
}

// Rollbacks are the rollbacks due at now (Scheduler.Rollbacks).
func (s *State) Rollbacks(now time.Time) []Unit { return s.sched.Rollbacks(now) }

// Halts are the halted bundles with what their rollbacks did.
func (s *State) Halts() []status.Halt { return s.sched.Halts(s.track.Deployment) }

// Approve releases partition (every bundle's, or only bundle's) that
// requires approval, approved by by at at; it returns the
// "bundle/partition" pairs released.
func (s *State) Approve(bundle, partition string, by protocol.Identity, at time.Time) []string {
	return s.sched.Approve(bundle, partition, by, at)
}

// HasPartition reports whether some bundle (or bundle, when set) has a
// partition named name that requires approval.
func (s *State) HasPartition(bundle, name string) bool { return s.sched.HasPartition(bundle, name) }

// PartitionClusters lists, sorted, the clusters of bundle's partition
// named partition.
func (s *State) PartitionClusters(bundle, partition string) []string {
	return s.sched.PartitionClusters(bundle, partition)
}

// Mark sets the state of cluster's deployments in flight (every bundle's,
// or those named).
func (s *State) Mark(cluster string, bundles []string, st status.State, class outcome.Class, msg string) {
	var running func(bundle, cluster string) bool
	if s.sched != nil {
		running = s.sched.Running
	}
	s.track.Mark(cluster, bundles, running, st, class, msg)
}
