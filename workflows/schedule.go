package workflows

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/flotilla-gitops/flotilla/activities"
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
	bundle  activities.Bundle
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
}

func (u *unit) unavailable() bool { return u.phase != unitPending && u.counted && !u.ok }

// bundleSched is one bundle's strategy and progress.
type bundleSched struct {
	name    string
	plan    strategy.Plan
	windows []strategy.Interval
	deps    []activities.Dependency
	// units index scheduler.units, by partition then cluster.
	units   []int
	started []bool
	halted  *status.Halt
	// rolledBack: the halted bundle's rollback was started.
	rolledBack bool
}

type scheduler struct {
	units   []unit
	bundles []*bundleSched
	byKey   map[string]int
	// approved holds "bundle/partition" pairs released by an approval.
	approved map[string]bool
}

// newScheduler builds the units of a plan. strategies without an entry
// for a bundle get the default strategy (everything at once).
func newScheduler(p plan, strategies []activities.BundleStrategy, inv []InventoryEntry) *scheduler {
	s := &scheduler{byKey: map[string]int{}, approved: map[string]bool{}}
	prev := map[string]string{}
	for _, e := range inv {
		prev[inventoryKey(e.key(), e.Namespace, e.Release)] = e.DeploymentID
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
			id := prev[inventoryKey(b.Name+"@"+w.Cluster, b.Namespace, b.Release)]
			u := unit{cluster: w.Cluster, bundle: b, part: partitionOf(bs.plan, w.Cluster), prevID: id,
				upToDate: id != "" && id == b.DeploymentID}
			if b.Paused && !u.upToDate {
				u.held = "bundle " + b.Name + " is paused"
			}
			s.byKey[b.Name+"@"+w.Cluster] = len(s.units)
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

// decision is what next found: units to start now, why others wait, and
// when to look again without an event (a window opening).
type decision struct {
	start      []int
	waits      []status.Wait
	partitions []status.PartitionStatus
	wake       time.Time
}

// next decides which pending units start. stateOf reports a deployment's
// current state (for dependsOn); now is workflow time.
func (s *scheduler) next(now time.Time, stateOf func(bundle, cluster string) (status.State, bool)) decision {
	var d decision
	for _, bs := range s.bundles {
		s.nextBundle(bs, now, stateOf, &d)
	}
	return d
}

func (s *scheduler) nextBundle(bs *bundleSched, now time.Time, stateOf func(bundle, cluster string) (status.State, bool), d *decision) {
	unavail := 0
	partUnavail := make([]int, len(bs.plan.Partitions))
	// tolerated counts failed units of a bundle with a failureThreshold:
	// unavailable, but bounded by the threshold instead of taking a slot
	// of the limits, so failures it tolerates do not stall the rollout.
	tolerated := make([]int, len(bs.plan.Partitions))
	partOpen := make([]bool, len(bs.plan.Partitions)) // every unit ok
	for i := range partOpen {
		partOpen[i] = true
	}
	for _, i := range bs.units {
		u := &s.units[i]
		switch {
		case u.unavailable() && u.failed && bs.plan.FailureThreshold >= 0:
			tolerated[u.part]++
		case u.unavailable():
			unavail++
			partUnavail[u.part]++
		}
		if !u.ok && u.held == "" && (!u.upToDate || u.phase == unitDone) {
			partOpen[u.part] = false
		}
	}
	limited := map[string][]string{} // wait kind → clusters
	blockedParts := 0
	stop := bs.halted != nil
	for p, part := range bs.plan.Partitions {
		ps := status.PartitionStatus{Bundle: bs.name, Name: part.Name, Index: p, Clusters: len(part.Clusters),
			Unavailable: partUnavail[p] + tolerated[p], MaxUnavailable: part.MaxUnavailable, Phase: "Pending"}
		if bs.started[p] {
			ps.Phase = "Rolling"
			if partOpen[p] {
				ps.Phase = "Done"
			}
		}
		if bs.halted != nil {
			ps.Phase = "Halted"
		}
		if !stop && !bs.started[p] {
			switch {
			case blockedParts > bs.plan.MaxUnavailablePartitions:
				d.waits = append(d.waits, status.Wait{Bundle: bs.name, Kind: status.WaitMaxUnavailablePartitions, Partition: part.Name,
					Message: fmt.Sprintf("bundle %s: partition %s waits: %d earlier partition(s) not yet updated and Ready (maxUnavailablePartitions %d)",
						bs.name, part.Name, blockedParts, bs.plan.MaxUnavailablePartitions)})
				stop = true
			case part.RequireApproval && !s.approved[bs.name+"/"+part.Name] && s.needsStart(bs, p):
				ps.Phase = "WaitingForApproval"
				d.waits = append(d.waits, status.Wait{Bundle: bs.name, Kind: status.WaitApproval, Partition: part.Name,
					Message: fmt.Sprintf("bundle %s: partition %s waits for approval", bs.name, part.Name)})
				stop = true
			case len(bs.windows) > 0 && s.needsStart(bs, p):
				open, next := inWindow(bs.windows, now)
				if !open {
					ps.Phase = "WaitingForWindow"
					w := status.Wait{Bundle: bs.name, Kind: status.WaitWindow, Partition: part.Name,
						Message: fmt.Sprintf("bundle %s: partition %s waits for a deployment window", bs.name, part.Name)}
					if !next.IsZero() {
						w.Until = next.UTC().Format(time.RFC3339)
						w.Message += " opening " + w.Until
						if d.wake.IsZero() || next.Before(d.wake) {
							d.wake = next
						}
					}
					d.waits = append(d.waits, w)
					stop = true
				}
			}
			if !stop {
				bs.started[p] = true
				ps.Phase = "Rolling"
			}
		}
		for _, i := range bs.units {
			u := &s.units[i]
			if u.part != p || u.phase != unitPending {
				continue
			}
			if u.held != "" {
				limited[status.WaitPaused] = append(limited[status.WaitPaused], u.cluster)
				continue
			}
			if u.upToDate {
				d.start = append(d.start, i) // no change; confirms readiness
				u.phase = unitRunning
				continue
			}
			if stop || !bs.started[p] {
				continue
			}
			if why := s.dependencyWait(bs, u, stateOf); why != "" {
				limited[status.WaitDependsOn+"\x00"+why] = append(limited[status.WaitDependsOn+"\x00"+why], u.cluster)
				continue
			}
			if unavail >= bs.plan.MaxUnavailable {
				limited[status.WaitMaxUnavailable] = append(limited[status.WaitMaxUnavailable], u.cluster)
				continue
			}
			if partUnavail[p] >= part.MaxUnavailable {
				k := status.WaitPartitionMaxUnavailable + "\x00" + part.Name
				limited[k] = append(limited[k], u.cluster)
				continue
			}
			u.phase, u.counted = unitRunning, true
			unavail++
			partUnavail[p]++
			ps.Unavailable++
			d.start = append(d.start, i)
		}
		if !partOpen[p] {
			blockedParts++
		}
		d.partitions = append(d.partitions, ps)
	}
	keys := make([]string, 0, len(limited))
	//workflowcheck:ignore deterministic: keys are sorted below
	for k := range limited {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		kind, detail, _ := strings.Cut(k, "\x00")
		w := status.Wait{Bundle: bs.name, Kind: kind}
		w.Clusters, w.More = status.LimitClusters(limited[k])
		list := status.JoinClusters(w.Clusters, w.More)
		switch kind {
		case status.WaitMaxUnavailable:
			w.Message = fmt.Sprintf("bundle %s: maxUnavailable %d reached; waiting: %s", bs.name, bs.plan.MaxUnavailable, list)
		case status.WaitPartitionMaxUnavailable:
			w.Partition = detail
			w.Message = fmt.Sprintf("bundle %s: partition %s maxUnavailable %d reached; waiting: %s", bs.name, detail,
				bs.plan.Partitions[partitionIndex(bs.plan, detail)].MaxUnavailable, list)
		case status.WaitPaused:
			w.Message = fmt.Sprintf("bundle %s is paused; holding at their current deployment: %s", bs.name, list)
		case status.WaitDependsOn:
			w.Message = fmt.Sprintf("bundle %s: %s; waiting: %s", bs.name, detail, list)
		}
		d.waits = append(d.waits, w)
	}
}

// needsStart reports whether partition p has units that would change.
func (s *scheduler) needsStart(bs *bundleSched, p int) bool {
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
func (s *scheduler) dependencyWait(bs *bundleSched, u *unit, stateOf func(bundle, cluster string) (status.State, bool)) string {
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

// finish records a unit's outcome: ok when the deployment is Ready at its
// ID; failed when it is in any other state and final. Only NotReady
// deployments are waited on after a deploy, so any other state is final
// (ErrApplied, or WaitApplied: the release runs another deployment).
func (s *scheduler) finish(d status.Deployment, final bool) {
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

// giveUp ends a unit whose cluster could not be reached in this rollout:
// it failed, and keeps its slot of the limits.
func (s *scheduler) giveUp(bundle, cluster string) {
	if i, ok := s.byKey[bundle+"@"+cluster]; ok && s.units[i].phase == unitRunning {
		u := &s.units[i]
		u.phase, u.failed = unitDone, true
	}
}

// checkFailures halts every bundle with more failed units than its
// failureThreshold and returns the bundles newly halted.
func (s *scheduler) checkFailures() []*bundleSched {
	var out []*bundleSched
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
		out = append(out, bs)
	}
	return out
}

// unitsToRollBack lists the units of bs that were deployed in this
// rollout and had a previous deployment to return to. Units that were
// new installs are left in place (nothing ran before them).
func (s *scheduler) unitsToRollBack(bs *bundleSched) []int {
	var out []int
	for _, i := range bs.units {
		u := &s.units[i]
		if u.counted && u.phase == unitDone && u.prevID != "" && u.prevID != u.bundle.DeploymentID {
			out = append(out, i)
		}
	}
	return out
}

// running reports whether bundle's unit on cluster is in flight.
func (s *scheduler) running(bundle, cluster string) bool {
	i, ok := s.byKey[bundle+"@"+cluster]
	return ok && s.units[i].phase == unitRunning
}

// readyTimeout is how long bundle's clusters may take to become Ready.
func (s *scheduler) readyTimeout(bundle string) time.Duration {
	for _, bs := range s.bundles {
		if bs.name == bundle {
			return bs.plan.ReadyTimeout
		}
	}
	return 0
}

// busy reports whether a unit is running.
func (s *scheduler) busy() bool {
	for i := range s.units {
		if s.units[i].phase == unitRunning {
			return true
		}
	}
	return false
}

// approve releases partition (every bundle's, or only bundle's) that
// requires approval; it returns the "bundle/partition" pairs released.
func (s *scheduler) approve(bundle, partition string) []string {
	var out []string
	for _, bs := range s.bundles {
		if bundle != "" && bs.name != bundle {
			continue
		}
		for p, part := range bs.plan.Partitions {
			if !part.RequireApproval || bs.started[p] || s.approved[bs.name+"/"+part.Name] {
				continue
			}
			if partition == "" && !s.waitingApproval(bs, p) {
				continue
			}
			if partition != "" && part.Name != partition {
				continue
			}
			s.approved[bs.name+"/"+part.Name] = true
			out = append(out, bs.name+"/"+part.Name)
		}
	}
	return out
}

// waitingApproval reports whether partition p of bs is the one its
// bundle waits on: the first not started.
func (s *scheduler) waitingApproval(bs *bundleSched, p int) bool {
	for q := range bs.plan.Partitions {
		if !bs.started[q] {
			return q == p
		}
	}
	return false
}

// hasPartition reports whether some bundle (or bundle, when set) has a
// partition named name that requires approval.
func (s *scheduler) hasPartition(bundle, name string) bool {
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
