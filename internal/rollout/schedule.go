package rollout

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/flotilla-gitops/flotilla/internal/outcome"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/status"
	"github.com/flotilla-gitops/flotilla/internal/strategy"
)

// The scheduler decides, from the rollout strategy of each bundle and the
// state of every (bundle, cluster) unit, which units may start now. It is
// pure: the rollout calls next after every state change (a deploy
// finished, an approval, a window opened), so the rollout waits on events,
// never on a fixed poll.
//
// A unit is unavailable while it was started and does not yet run the new
// deployment ID and Ready (Fleet's isUnavailable for promoted targets); a
// unit that has not started still runs its previous deployment and counts
// as available. Per bundle:
//
//   - partitions start in order; partition k starts only while at most
//     maxUnavailablePartitions of the partitions before it are unavailable
//     (have a unit that is not yet updated and Ready), only once approved
//     when it requires approval, and only inside a deployment window when
//     the strategy has windows;
//   - inside started partitions units start while fewer than
//     maxUnavailable units of the bundle, and fewer than the partition's
//     maxUnavailable units of the partition, are unavailable;
//   - a unit whose bundle depends on others starts once those are in an
//     accepted state on the same cluster;
//   - when more than failureThreshold units failed (ErrApplied, or not
//     Ready within the ready timeout) the bundle halts: nothing more starts.
//     Until then a failed unit counts against the threshold, not against
//     maxUnavailable (without a threshold it keeps its slot, as in Fleet).
//
// Units already at their deployment ID start at once (a no-op deploy that
// confirms readiness) and do not count against the limits.

// unitPhase is where a unit is in the rollout.
type unitPhase int

const (
	unitPending unitPhase = iota
	unitRunning
	unitDone
)

type unit struct {
	cluster string
	bundle  Bundle
	// part is the unit's partition in its bundle's plan.
	part int
	// prevID is the deployment ID the inventory recorded before this
	// rollout; upToDate is set when it is the one wanted.
	prevID   string
	upToDate bool
	// held says why the unit never starts in this rollout (paused).
	held  string
	phase unitPhase
	// ok: applied and Ready; failed: ErrApplied or not Ready in time.
	ok, failed bool
	// counted: the unit took a slot of the limits when it started.
	counted bool
	// retry is the failure whose backoff keeps the unit from starting.
	retry *Failure
}

func (u *unit) unavailable() bool { return u.phase != unitPending && u.counted && !u.ok }

// bundleSched is one bundle's strategy and progress.
type bundleSched struct {
	name    string
	plan    strategy.Plan
	windows []strategy.Interval
	deps    []Dependency
	// units index scheduler.units, by partition then cluster.
	units   []int
	started []bool
	halted  *status.Halt
	// rolledBack: the halted bundle's rollback was started.
	rolledBack bool
}

// Scheduler holds the units of one rollout and decides which start.
type Scheduler struct {
	units   []unit
	bundles []*bundleSched
	byKey   map[status.Key]int
	// approved holds the partitions released by an approval, each with
	// who approved it and when (Units unset).
	approved map[partitionKey]Approval
	// unitWindows: deployment windows gate every unit's start (and a
	// rollback), not only a partition's; set by GateEveryStart.
	unitWindows bool
}

// RetryUnreachable starts at once the units whose last attempt could not
// reach their cluster (a failure whose class's policy StartsAtOnce),
// instead of holding them until their retry: a cluster that is back (its
// agent online again, a cluster change) gets what it missed now. The
// failure backoff still paces the retries the GitRepo starts for them.
func (s *Scheduler) RetryUnreachable() {
	for i := range s.units {
		u := &s.units[i]
		if u.retry != nil && u.retry.Class.Policy().StartsAtOnce {
			u.retry, u.phase, u.failed, u.counted = nil, unitPending, false, false
		}
	}
}

// GateEveryStart makes deployment windows gate every unit's start and
// every rollback, not only a partition's start: a partition that started
// just before its window closed starts nothing more until it opens again.
// Rollouts recorded before this gated partitions only.
func (s *Scheduler) GateEveryStart() { s.unitWindows = true }

// partitionKey names one partition of one bundle.
type partitionKey struct{ bundle, partition string }

func (k partitionKey) String() string { return k.bundle + "/" + k.partition }

// StateOf reports a deployment's current state in the rollout.
type StateOf func(bundle, cluster string) (status.State, bool)

// NewScheduler builds the units of a plan. strategies without an entry
// for a bundle get the default strategy (everything at once). A unit whose
// inventory entry records failures of the same deployment ID waits for
// its retry until now reaches the entry's next retry: it does not start in
// this rollout and counts as failed.
func NewScheduler(p Plan, strategies []BundleStrategy, inv []InventoryEntry, now time.Time) *Scheduler {
	s := &Scheduler{byKey: map[status.Key]int{}, approved: map[partitionKey]Approval{}}
	prev := map[ReleaseRef]InventoryEntry{}
	for _, e := range inv {
		prev[e.Ref()] = e
	}
	byName := map[string]*bundleSched{}
	for _, st := range strategies {
		b := &bundleSched{name: st.Bundle, plan: st.Plan, windows: st.Windows, deps: st.DependsOn}
		byName[st.Bundle] = b
		s.bundles = append(s.bundles, b)
	}
	for _, w := range p.Work {
		for _, b := range w.Deploy {
			bs := byName[b.Name]
			if bs == nil {
				bs = &bundleSched{name: b.Name, plan: strategy.Plan{MaxUnavailable: 1 << 30, FailureThreshold: -1,
					Partitions: []strategy.Partition{{Name: "all", MaxUnavailable: 1 << 30}}}}
				byName[b.Name] = bs
				s.bundles = append(s.bundles, bs)
			}
			key := status.Key{Bundle: b.Name, Cluster: w.Cluster}
			e := prev[ReleaseRef{Key: key, Namespace: b.Namespace, Release: b.Release}]
			u := unit{cluster: w.Cluster, bundle: b, part: partitionOf(bs.plan, w.Cluster), prevID: e.DeploymentID,
				upToDate: e.DeploymentID != "" && e.DeploymentID == b.DeploymentID}
			if b.Paused && !u.upToDate {
				u.held = "bundle " + b.Name + " is paused"
			}
			if f := e.Failure; f != nil && f.DeploymentID == b.DeploymentID && now.Before(f.Next) && !u.upToDate {
				u.retry = f
				u.phase, u.failed, u.counted = unitDone, true, true
			}
			s.byKey[key] = len(s.units)
			s.units = append(s.units, u)
		}
	}
	sort.Slice(s.bundles, func(i, j int) bool { return s.bundles[i].name < s.bundles[j].name })
	for i := range s.units {
		bs := byName[s.units[i].bundle.Name]
		bs.units = append(bs.units, i)
	}
	for _, bs := range s.bundles {
		sort.SliceStable(bs.units, func(i, j int) bool {
			a, b := s.units[bs.units[i]], s.units[bs.units[j]]
			if a.part != b.part {
				return a.part < b.part
			}
			return a.cluster < b.cluster
		})
		bs.started = make([]bool, len(bs.plan.Partitions))
	}
	return s
}

// Unit is one bundle on one cluster, as the scheduler hands it out.
type Unit struct {
	Cluster string
	Bundle  Bundle
	// PrevID is the deployment ID the cluster ran before the rollout.
	PrevID string
}

func (u *unit) view() Unit { return Unit{Cluster: u.cluster, Bundle: u.bundle, PrevID: u.prevID} }

// Hold is a unit that does not start in this rollout, and why.
type Hold struct {
	Unit
	// Reason is why (a paused bundle); Retry, when set, is the failure
	// whose backoff is not over.
	Reason string
	Retry  *Failure
}

// Holds lists the units that never start in this rollout.
func (s *Scheduler) Holds() []Hold {
	var out []Hold
	for i := range s.units {
		u := &s.units[i]
		if u.held != "" || u.retry != nil {
			out = append(out, Hold{Unit: u.view(), Reason: u.held, Retry: u.retry})
		}
	}
	return out
}

// partitionOf is the index of the cluster's partition; clusters the plan
// does not list (it was computed without them) go to the last one.
func partitionOf(p strategy.Plan, cluster string) int {
	for i, part := range p.Partitions {
		j := sort.SearchStrings(part.Clusters, cluster)
		if j < len(part.Clusters) && part.Clusters[j] == cluster {
			return i
		}
	}
	return max(len(p.Partitions)-1, 0)
}

// Decision is what Next found: units to start now, why others wait, and
// when to look again without an event (a window opening).
type Decision struct {
	Start      []Unit
	Waits      []status.Wait
	Partitions []status.PartitionStatus
	// Wake is when to decide again without an event (zero: never).
	Wake time.Time
	// Outside are the units that would start but for their bundle's
	// deployment windows (GateEveryStart), each with why.
	Outside []Outside

	start []int
}

// Outside is a unit held back because its bundle's deployment windows
// are closed.
type Outside struct {
	Key     status.Key
	Message string
}

// Next decides which pending units start. stateOf reports a deployment's
// current state (for dependsOn); now is workflow time.
func (s *Scheduler) Next(now time.Time, stateOf StateOf) Decision {
	var d Decision
	for _, bs := range s.bundles {
		s.nextBundle(bs, now, stateOf, &d)
	}
	for _, i := range d.start {
		d.Start = append(d.Start, s.units[i].view())
	}
	return d
}

func (s *Scheduler) nextBundle(bs *bundleSched, now time.Time, stateOf StateOf, d *Decision) {
	t := s.tally(bs)
	limited := map[waitKey][]string{}
	blockedParts := 0
	stop := bs.halted != nil
	for p, part := range bs.plan.Partitions {
		ps := status.PartitionStatus{Bundle: bs.name, Name: part.Name, Index: p, Clusters: len(part.Clusters),
			Unavailable: t.partUnavail[p] + t.tolerated[p], MaxUnavailable: part.MaxUnavailable, Phase: "Pending"}
		if bs.started[p] {
			ps.Phase = "Rolling"
			if t.partOpen[p] {
				ps.Phase = "Done"
			}
		}
		if bs.halted != nil {
			ps.Phase = "Halted"
		}
		if !stop && !bs.started[p] {
			stop = s.gate(bs, p, blockedParts, now, &ps, d)
		}
		s.startUnits(bs, p, stop, now, stateOf, &t, &ps, limited, d)
		if !t.partOpen[p] {
			blockedParts++
		}
		d.Partitions = append(d.Partitions, ps)
	}
	d.Waits = append(d.Waits, limitWaits(bs, limited)...)
	if bs.halted != nil && bs.plan.RollbackOnFailure && !bs.rolledBack {
		if closed, next := s.windowClosed(bs, now); closed {
			w := status.Wait{Bundle: bs.name, Kind: status.WaitWindow, Until: formatTime(next),
				Message: fmt.Sprintf("bundle %s: its rollback waits for a deployment window", bs.name)}
			if !next.IsZero() {
				w.Message += " opening " + w.Until
				if d.Wake.IsZero() || next.Before(d.Wake) {
					d.Wake = next
				}
			}
			d.Waits = append(d.Waits, w)
		}
	}
}

// tally counts a bundle's unavailable units, per partition and in all.
type tally struct {
	unavail     int
	partUnavail []int
	// tolerated counts failed units of a bundle with a failureThreshold:
	// unavailable, but bounded by the threshold instead of taking a slot
	// of the limits, so failures it tolerates do not stall the rollout.
	tolerated []int
	// partOpen: every unit of the partition is ok.
	partOpen []bool
}

func (s *Scheduler) tally(bs *bundleSched) tally {
	n := len(bs.plan.Partitions)
	t := tally{partUnavail: make([]int, n), tolerated: make([]int, n), partOpen: make([]bool, n)}
	for i := range t.partOpen {
		t.partOpen[i] = true
	}
	for _, i := range bs.units {
		u := &s.units[i]
		switch {
		case u.unavailable() && u.failed && bs.plan.FailureThreshold >= 0:
			t.tolerated[u.part]++
		case u.unavailable():
			t.unavail++
			t.partUnavail[u.part]++
		}
		if !u.ok && u.held == "" && (!u.upToDate || u.phase == unitDone) {
			t.partOpen[u.part] = false
		}
	}
	return t
}

// gate decides whether partition p, not started yet, starts now: it
// reports true (stop) when it must wait, and why in d.Waits.
func (s *Scheduler) gate(bs *bundleSched, p, blockedParts int, now time.Time, ps *status.PartitionStatus, d *Decision) bool {
	part := bs.plan.Partitions[p]
	switch {
	case blockedParts > bs.plan.MaxUnavailablePartitions:
		d.Waits = append(d.Waits, status.Wait{Bundle: bs.name, Kind: status.WaitMaxUnavailablePartitions, Partition: part.Name,
			Message: fmt.Sprintf("bundle %s: partition %s waits: %d earlier partition(s) not yet updated and Ready (maxUnavailablePartitions %d)",
				bs.name, part.Name, blockedParts, bs.plan.MaxUnavailablePartitions)})
		return true
	case part.RequireApproval && !s.isApproved(partitionKey{bs.name, part.Name}) && s.needsStart(bs, p):
		ps.Phase = "WaitingForApproval"
		d.Waits = append(d.Waits, status.Wait{Bundle: bs.name, Kind: status.WaitApproval, Partition: part.Name,
			Message: fmt.Sprintf("bundle %s: partition %s waits for approval", bs.name, part.Name)})
		return true
	case len(bs.windows) > 0 && s.needsStart(bs, p):
		open, next := inWindow(bs.windows, now)
		if open {
			break
		}
		ps.Phase = "WaitingForWindow"
		w := status.Wait{Bundle: bs.name, Kind: status.WaitWindow, Partition: part.Name,
			Message: fmt.Sprintf("bundle %s: partition %s waits for a deployment window", bs.name, part.Name)}
		if !next.IsZero() {
			w.Until = next.UTC().Format(time.RFC3339)
			w.Message += " opening " + w.Until
			if d.Wake.IsZero() || next.Before(d.Wake) {
				d.Wake = next
			}
		}
		d.Waits = append(d.Waits, w)
		return true
	}
	bs.started[p] = true
	ps.Phase = "Rolling"
	return false
}

// startUnits starts the pending units of partition p that the limits
// allow, and records in limited why the others wait.
func (s *Scheduler) startUnits(bs *bundleSched, p int, stop bool, now time.Time, stateOf StateOf, t *tally, ps *status.PartitionStatus,
	limited map[waitKey][]string, d *Decision) {
	part := bs.plan.Partitions[p]
	closed, next := s.windowClosed(bs, now)
	for _, i := range bs.units {
		u := &s.units[i]
		if u.part != p || u.phase != unitPending {
			continue
		}
		var why waitKey
		switch {
		case u.held != "":
			why = waitKey{kind: status.WaitPaused}
		case u.upToDate:
			d.start = append(d.start, i) // no change; confirms readiness
			u.phase = unitRunning
			continue
		case stop || !bs.started[p]:
			continue
		case closed:
			why = waitKey{kind: status.WaitWindow, detail: formatTime(next)}
			if !next.IsZero() && (d.Wake.IsZero() || next.Before(d.Wake)) {
				d.Wake = next
			}
			msg := "cluster " + u.cluster + ": bundle " + bs.name + " is outside its deployment window"
			if !next.IsZero() {
				msg += "; it opens " + formatTime(next)
			}
			d.Outside = append(d.Outside, Outside{Key: status.Key{Bundle: bs.name, Cluster: u.cluster}, Message: msg})
		default:
			if dep := s.dependencyWait(bs, u, stateOf); dep != "" {
				why = waitKey{kind: status.WaitDependsOn, detail: dep}
			} else if t.unavail >= bs.plan.MaxUnavailable {
				why = waitKey{kind: status.WaitMaxUnavailable}
			} else if t.partUnavail[p] >= part.MaxUnavailable {
				why = waitKey{kind: status.WaitPartitionMaxUnavailable, detail: part.Name}
			}
		}
		if why.kind != "" {
			limited[why] = append(limited[why], u.cluster)
			continue
		}
		u.phase, u.counted = unitRunning, true
		t.unavail++
		t.partUnavail[p]++
		ps.Unavailable++
		d.start = append(d.start, i)
	}
}

// waitKey groups waiting units: the wait's kind and what it names (a
// dependency, a partition).
type waitKey struct{ kind, detail string }

// limitWaits turns the waiting units of a bundle into status waits, in a
// stable order.
func limitWaits(bs *bundleSched, limited map[waitKey][]string) []status.Wait {
	keys := make([]waitKey, 0, len(limited))
	//workflowcheck:ignore deterministic: keys are sorted below
	for k := range limited {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].kind != keys[j].kind {
			return keys[i].kind < keys[j].kind
		}
		return keys[i].detail < keys[j].detail
	})
	var out []status.Wait
	for _, k := range keys {
		w := status.Wait{Bundle: bs.name, Kind: k.kind}
		w.Clusters, w.More = status.LimitClusters(limited[k])
		list := status.JoinClusters(w.Clusters, w.More)
		switch k.kind {
		case status.WaitMaxUnavailable:
			w.Message = fmt.Sprintf("bundle %s: maxUnavailable %d reached; waiting: %s", bs.name, bs.plan.MaxUnavailable, list)
		case status.WaitPartitionMaxUnavailable:
			w.Partition = k.detail
			w.Message = fmt.Sprintf("bundle %s: partition %s maxUnavailable %d reached; waiting: %s", bs.name, k.detail,
				bs.plan.Partitions[partitionIndex(bs.plan, k.detail)].MaxUnavailable, list)
		case status.WaitPaused:
			w.Message = fmt.Sprintf("bundle %s is paused; holding at their current deployment: %s", bs.name, list)
		case status.WaitDependsOn:
			w.Message = fmt.Sprintf("bundle %s: %s; waiting: %s", bs.name, k.detail, list)
		case status.WaitWindow:
			w.Until = k.detail
			w.Message = fmt.Sprintf("bundle %s: outside its deployment window", bs.name)
			if k.detail != "" {
				w.Message += " (next opening " + k.detail + ")"
			}
			w.Message += "; waiting: " + list
		}
		out = append(out, w)
	}
	return out
}

// needsStart reports whether partition p has units that would change.
func (s *Scheduler) needsStart(bs *bundleSched, p int) bool {
	for _, i := range bs.units {
		u := &s.units[i]
		if u.part == p && u.phase == unitPending && u.held == "" && !u.upToDate {
			return true
		}
	}
	return false
}

func partitionIndex(p strategy.Plan, name string) int {
	for i, part := range p.Partitions {
		if part.Name == name {
			return i
		}
	}
	return 0
}

// dependencyWait says which dependency of u's bundle is not yet in an
// accepted state on u's cluster ("" when none).
func (s *Scheduler) dependencyWait(bs *bundleSched, u *unit, stateOf StateOf) string {
	for _, dep := range bs.deps {
		accepted := dep.AcceptedStates
		if len(accepted) == 0 {
			accepted = []status.State{status.Ready}
		}
		for _, name := range dep.Bundles {
			st, ok := stateOf(name, u.cluster)
			if !ok {
				return "dependency " + name + " is not deployed to the cluster"
			}
			if !containsState(accepted, st) {
				return "waiting for dependency " + name + " to be " + joinStates(accepted)
			}
		}
		if len(dep.Bundles) == 0 {
			return "dependency " + dep.Describe + " matches no bundle"
		}
	}
	return ""
}

func containsState(states []status.State, st status.State) bool {
	for _, s := range states {
		if s == st {
			return true
		}
	}
	return false
}

func joinStates(states []status.State) string {
	parts := make([]string, len(states))
	for i, s := range states {
		parts[i] = string(s)
	}
	return strings.Join(parts, " or ")
}

// inWindow reports whether now is inside one of the windows, and when
// not, when the next one opens (zero when none is known).
func inWindow(ws []strategy.Interval, now time.Time) (bool, time.Time) {
	for _, w := range ws {
		if !now.Before(w.Start) && now.Before(w.End) {
			return true, time.Time{}
		}
		if w.Start.After(now) {
			return false, w.Start
		}
	}
	return false, time.Time{}
}

// windowClosed reports whether bs has deployment windows that gate every
// start (GateEveryStart) and none is open at now, and when the next opens
// (zero: none known).
func (s *Scheduler) windowClosed(bs *bundleSched, now time.Time) (bool, time.Time) {
	if !s.unitWindows || len(bs.windows) == 0 {
		return false, time.Time{}
	}
	open, next := inWindow(bs.windows, now)
	return !open, next
}

// WindowClosed reports, for bundle, what windowClosed does: whether its
// windows gate starts now and are all closed, and when the next opens.
func (s *Scheduler) WindowClosed(bundle string, now time.Time) (bool, time.Time) {
	for _, bs := range s.bundles {
		if bs.name == bundle {
			return s.windowClosed(bs, now)
		}
	}
	return false, time.Time{}
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// Finish records a unit's outcome: ok when the deployment is Ready at its
// ID; failed when it is in any other state and final. Only NotReady
// deployments are waited on after a deploy, so any other state is final
// (ErrApplied, or WaitApplied: the release runs another deployment).
func (s *Scheduler) Finish(d status.Deployment, final bool) {
	i, ok := s.byKey[d.Key()]
	if !ok {
		return
	}
	u := &s.units[i]
	final = final || d.State != status.NotReady
	u.ok = d.State == status.Ready
	u.failed = final && !u.ok
	if final {
		u.phase = unitDone
	}
	if u.ok {
		u.upToDate = true
	}
}

// GiveUp ends a unit whose cluster could not be reached in this rollout:
// it failed: it counts against a failureThreshold, or keeps its slot of
// the limits when the bundle has none.
func (s *Scheduler) GiveUp(bundle, cluster string) {
	if i, ok := s.byKey[status.Key{Bundle: bundle, Cluster: cluster}]; ok && s.units[i].phase == unitRunning {
		u := &s.units[i]
		u.phase, u.failed = unitDone, true
	}
}

// CheckFailures halts every bundle with more failed units than its
// failureThreshold and returns the halts it made.
func (s *Scheduler) CheckFailures() []status.Halt {
	var out []status.Halt
	for _, bs := range s.bundles {
		if bs.halted != nil || bs.plan.FailureThreshold < 0 {
			continue
		}
		var failed []string
		for _, i := range bs.units {
			if s.units[i].failed {
				failed = append(failed, s.units[i].cluster)
			}
		}
		if len(failed) <= bs.plan.FailureThreshold {
			continue
		}
		h := &status.Halt{Bundle: bs.name, Threshold: bs.plan.FailureThreshold}
		h.Failed, _ = status.LimitClusters(failed)
		h.Message = fmt.Sprintf("bundle %s: rollout halted: %d cluster(s) failed (failureThreshold %d): %s",
			bs.name, len(failed), bs.plan.FailureThreshold, strings.Join(h.Failed, ", "))
		bs.halted = h
		out = append(out, *h)
	}
	return out
}

// unitsToRollBack lists the units of bs that were deployed in this
// rollout and had a previous deployment to return to. Units that were
// new installs are left in place (nothing ran before them).
func (s *Scheduler) unitsToRollBack(bs *bundleSched) []int {
	var out []int
	for _, i := range bs.units {
		u := &s.units[i]
		if u.counted && u.phase == unitDone && u.retry == nil && u.prevID != "" && u.prevID != u.bundle.DeploymentID {
			out = append(out, i)
		}
	}
	return out
}

// Running reports whether bundle's unit on cluster is in flight.
func (s *Scheduler) Running(bundle, cluster string) bool {
	i, ok := s.byKey[status.Key{Bundle: bundle, Cluster: cluster}]
	return ok && s.units[i].phase == unitRunning
}

// ReadyTimeout is how long bundle's clusters may take to become Ready.
func (s *Scheduler) ReadyTimeout(bundle string) time.Duration {
	for _, bs := range s.bundles {
		if bs.name == bundle {
			return bs.plan.ReadyTimeout
		}
	}
	return 0
}

// Busy reports whether a unit is running.
func (s *Scheduler) Busy() bool {
	for i := range s.units {
		if s.units[i].phase == unitRunning {
			return true
		}
	}
	return false
}

// Approve releases partition (every bundle's, or only bundle's) that
// requires approval, recording by and at (workflow time) as who approved
// it and when; it returns the "bundle/partition" pairs released.
func (s *Scheduler) Approve(bundle, partition string, by protocol.Identity, at time.Time) []string {
	var out []string
	for _, bs := range s.bundles {
		if bundle != "" && bs.name != bundle {
			continue
		}
		for p, part := range bs.plan.Partitions {
			k := partitionKey{bs.name, part.Name}
			if !part.RequireApproval || bs.started[p] || s.isApproved(k) {
				continue
			}
			if partition == "" && !s.waitingApproval(bs, p) {
				continue
			}
			if partition != "" && part.Name != partition {
				continue
			}
			s.approved[k] = Approval{Bundle: k.bundle, Partition: k.partition, By: by, At: at}
			out = append(out, k.String())
		}
	}
	return out
}

// waitingApproval reports whether partition p of bs is the one its
// bundle waits on: the first not started.
func (s *Scheduler) waitingApproval(bs *bundleSched, p int) bool {
	for q := range bs.plan.Partitions {
		if !bs.started[q] {
			return q == p
		}
	}
	return false
}

// HasPartition reports whether some bundle (or bundle, when set) has a
// partition named name that requires approval.
func (s *Scheduler) HasPartition(bundle, name string) bool {
	for _, bs := range s.bundles {
		if bundle != "" && bs.name != bundle {
			continue
		}
		for _, part := range bs.plan.Partitions {
			if part.RequireApproval && (name == "" || part.Name == name) {
				return true
			}
		}
	}
	return false
}

// Rollbacks marks every halted bundle that asked for a rollback and was
// not rolled back yet, and returns the units to roll back: those deployed
// in this rollout that ran something before.
func (s *Scheduler) Rollbacks(now time.Time) []Unit {
	var out []Unit
	for _, bs := range s.bundles {
		if closed, _ := s.windowClosed(bs, now); closed {
			continue // rolled back once a window opens
		}
		if bs.halted != nil && bs.plan.RollbackOnFailure && !bs.rolledBack {
			bs.rolledBack = true
			for _, i := range s.unitsToRollBack(bs) {
				out = append(out, s.units[i].view())
			}
		}
	}
	return out
}

// Halts reports the halted bundles with what their rollback did, as
// found by deployment (the deployment of a bundle on a cluster).
func (s *Scheduler) Halts(deployment func(status.Key) (status.Deployment, bool)) []status.Halt {
	var out []status.Halt
	for _, bs := range s.bundles {
		if bs.halted == nil {
			continue
		}
		h := *bs.halted
		h.RolledBack, h.RollbackErrors = nil, nil
		for _, i := range bs.units {
			d, ok := deployment(status.Key{Bundle: bs.name, Cluster: s.units[i].cluster})
			switch {
			case !ok:
			case d.Rollback == outcome.RolledBack:
				h.RolledBack = append(h.RolledBack, d.Cluster)
			case d.Rollback == outcome.RollbackFailed:
				h.RollbackErrors = append(h.RollbackErrors, d.Message)
			}
		}
		out = append(out, h)
	}
	return out
}
