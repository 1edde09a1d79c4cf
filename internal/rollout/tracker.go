package rollout

import (
	"strings"
	"time"

	"github.com/flotilla-gitops/flotilla/internal/outcome"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

// Backoff is how long a deployment that failed waits before its next
// attempt: Initial after the first failure, doubling up to Max, then
// every Max.
type Backoff struct {
	Initial time.Duration `json:"initial,omitempty"`
	Max     time.Duration `json:"max,omitempty"`
}

// Default failure backoff: 30 s doubling up to 10 min.
const (
	DefaultBackoffInitial = 30 * time.Second
	DefaultBackoffMax     = 10 * time.Minute
)

// Delay is the wait after the attempts-th failure in a row (1-based).
func (b Backoff) Delay(attempts int) time.Duration {
	initial, limit := b.Initial, b.Max
	if initial <= 0 {
		initial = DefaultBackoffInitial
	}
	if limit <= 0 {
		limit = DefaultBackoffMax
	}
	d := initial
	for i := 1; i < attempts && d < limit; i++ {
		if d > limit/2 {
			d = limit // doubling would pass the limit, or overflow
			break
		}
		d *= 2
	}
	return min(d, limit)
}

// Tracker folds the outcomes a rollout receives into its deployments'
// status and its inventory.
type Tracker struct {
	Deployments []status.Deployment
	Inventory   []InventoryEntry
	backoff     Backoff
	byKey       map[status.Key]int
	invAt       map[ReleaseRef]int
}

// NewTracker tracks the deployments and inventory of a plan.
func NewTracker(p Plan, backoff Backoff) *Tracker {
	t := &Tracker{Deployments: p.Deployments, Inventory: p.Inventory, backoff: backoff}
	t.byKey = make(map[status.Key]int, len(t.Deployments))
	for i, d := range t.Deployments {
		t.byKey[d.Key()] = i
	}
	t.indexInventory()
	return t
}

func (t *Tracker) indexInventory() {
	t.invAt = make(map[ReleaseRef]int, len(t.Inventory))
	for i, e := range t.Inventory {
		t.invAt[e.Ref()] = i
	}
}

// Deployment returns the deployment of a bundle on a cluster.
func (t *Tracker) Deployment(k status.Key) (status.Deployment, bool) {
	i, ok := t.byKey[k]
	if !ok {
		return status.Deployment{}, false
	}
	return t.Deployments[i], true
}

// StateOf is a deployment's current state.
func (t *Tracker) StateOf(bundle, cluster string) (status.State, bool) {
	d, ok := t.Deployment(status.Key{Bundle: bundle, Cluster: cluster})
	return d.State, ok
}

// SetState sets one deployment's state and message.
func (t *Tracker) SetState(k status.Key, st status.State, msg string) {
	if i, ok := t.byKey[k]; ok {
		t.Deployments[i].State, t.Deployments[i].Message = st, msg
	}
}

// Starting shows a deployment whose deploy starts: WaitApplied with msg,
// unless it shows a failure of the same deployment ID, which it keeps
// (state and message) until the attempt's outcome is known, saying that
// an attempt runs: status does not flap from ErrApplied to WaitApplied
// and back with each retry.
func (t *Tracker) Starting(k status.Key, msg string) {
	i, ok := t.byKey[k]
	if !ok {
		return
	}
	d := &t.Deployments[i]
	if retrying(*d) {
		d.Message = retryMessage(d.Message)
		return
	}
	d.State, d.Message = status.WaitApplied, msg
}

// retrying reports whether d shows a failure (of the deployment ID it
// wants) that a new attempt retries: one its class records.
func retrying(d status.Deployment) bool {
	return d.Outcome.Policy().Retry == outcome.RetryAfterBackoff
}

// retryingNote is what a failed deployment's message says while it is
// retried.
const retryingNote = " (retrying now)"

func retryMessage(msg string) string {
	if strings.HasSuffix(msg, retryingNote) {
		return msg
	}
	return msg + retryingNote
}

// Hold shows a unit that waits for the retry of its failure.
func (t *Tracker) Hold(h Hold) {
	i, ok := t.byKey[status.Key{Bundle: h.Bundle.Name, Cluster: h.Cluster}]
	if !ok || h.Retry == nil {
		return
	}
	d := &t.Deployments[i]
	f := h.Retry
	d.State, d.Message, d.Outcome = f.State, f.Message, f.Class
	d.Attempts, d.NextRetry = f.Attempts, f.Next.UTC().Format(time.RFC3339)
	d.AppliedDeploymentID = h.PrevID
}

// Record stores outcomes: each deployment's status, the deployment ID the
// inventory records as applied and, for failures, the run of failed
// attempts and when the next is due (now plus the backoff). A deployment
// applied at its ID clears its failures.
func (t *Tracker) Record(results []status.Deployment, now time.Time) {
	for _, res := range results {
		inv, hasInv := t.invAt[ReleaseRef{Key: res.Key(), Namespace: res.Namespace, Release: res.Release}]
		if hasInv {
			e := &t.Inventory[inv]
			if res.AppliedDeploymentID != "" {
				e.DeploymentID = res.AppliedDeploymentID
			}
			t.failure(e, &res, now)
		}
		if i, ok := t.byKey[res.Key()]; ok {
			t.Deployments[i] = res
		}
	}
}

// GaveUp records that a rollout gave up deploying bundles to a cluster it
// could not reach: each stays WaitApplied, and its inventory entry
// records the failure, so the GitRepo retries it when the backoff is over
// rather than waiting for a change.
func (t *Tracker) GaveUp(cluster string, bundles []string, msg string, now time.Time) {
	if msg == "" {
		msg = "cluster " + cluster + ": not reached"
	}
	for _, b := range bundles {
		i, ok := t.byKey[status.Key{Bundle: b, Cluster: cluster}]
		if !ok {
			continue
		}
		d := t.Deployments[i]
		if applied(d) {
			continue // the cluster runs it already
		}
		d.State, d.Outcome, d.Message = status.StateOf(outcome.Unreachable), outcome.Unreachable, msg
		if inv, ok := t.invAt[ReleaseRef{Key: d.Key(), Namespace: d.Namespace, Release: d.Release}]; ok {
			e := &t.Inventory[inv]
			attempts := 1
			if f := e.Failure; f != nil && f.DeploymentID == d.DeploymentID {
				attempts = f.Attempts + 1
			}
			next := now.Add(t.backoff.Delay(attempts))
			e.Failure = &Failure{DeploymentID: d.DeploymentID, Class: outcome.Unreachable, Attempts: attempts, Next: next,
				Message: msg, State: d.State}
			d.Attempts, d.NextRetry = attempts, next.UTC().Format(time.RFC3339)
		}
		t.Deployments[i] = d
	}
}

// failure updates an entry's run of failures from a result, and shows it
// on the result.
func (t *Tracker) failure(e *InventoryEntry, res *status.Deployment, now time.Time) {
	switch {
	case res.Outcome.Policy().Retry == outcome.RetryAfterBackoff:
		attempts := 1
		if f := e.Failure; f != nil && f.DeploymentID == res.DeploymentID {
			attempts = f.Attempts + 1
		}
		next := now.Add(t.backoff.Delay(attempts))
		e.Failure = &Failure{DeploymentID: res.DeploymentID, Class: res.Outcome, Attempts: attempts, Next: next,
			Message: res.Message, State: res.State}
		res.Attempts, res.NextRetry = attempts, next.UTC().Format(time.RFC3339)
	case res.Rollback != "":
		// A rollback changes what runs, not whether the ID failed.
	case res.State == status.Ready || res.State == status.NotReady:
		e.Failure, e.State = nil, res.State
	}
}

// Forget drops cleaned releases ("<namespace>/<release>") of a cluster
// from the inventory, unless the rollout deploys the same release.
func (t *Tracker) Forget(cluster string, removed []string) {
	if len(removed) == 0 {
		return
	}
	gone := map[string]bool{}
	for _, rel := range removed {
		gone[rel] = true
	}
	kept := t.Inventory[:0]
	for _, e := range t.Inventory {
		if e.Cluster == cluster && gone[e.Namespace+"/"+e.Release] && !t.wanted(e) {
			continue
		}
		kept = append(kept, e)
	}
	t.Inventory = kept
	t.indexInventory()
}

// wanted reports whether the rollout deploys e (so a cleanup of an older
// entry with the same release must not drop it).
func (t *Tracker) wanted(e InventoryEntry) bool {
	d, ok := t.Deployment(e.Key())
	return ok && d.Release == e.Release && d.Namespace == e.Namespace
}

// Mark sets the state, outcome and message of cluster's deployments that
// are in flight (every bundle, or only those named) and not OutOfSync. A
// deployment known to run its ID (a no-op deploy confirms it) is never
// marked WaitApplied.
func (t *Tracker) Mark(cluster string, bundles []string, running func(bundle, cluster string) bool,
	st status.State, class outcome.Class, msg string) {
	names := map[string]bool{}
	for _, b := range bundles {
		names[b] = true
	}
	for i := range t.Deployments {
		d := &t.Deployments[i]
		if d.Cluster != cluster || d.State == status.OutOfSync || (len(names) > 0 && !names[d.Bundle]) {
			continue
		}
		if st == status.WaitApplied && applied(*d) {
			continue
		}
		if st == status.WaitApplied && class == outcome.OK && retrying(*d) {
			d.Message = retryMessage(d.Message) // an attempt starts: the failure shows until it ends
			continue
		}
		if running == nil || running(d.Bundle, cluster) {
			d.State, d.Outcome, d.Message = st, class, msg
		}
	}
}

// applied reports whether the deployment is known to run its deployment
// ID (Ready or NotReady there).
func applied(d status.Deployment) bool {
	return d.DeploymentID != "" && d.AppliedDeploymentID == d.DeploymentID &&
		(d.State == status.Ready || d.State == status.NotReady)
}
