package status

import (
	"slices"
	"strings"
	"time"
)

// ClusterContact is what a cluster's workflow tells the GitRepos that run
// releases there when it loses contact with the cluster (its agent
// stopped heartbeating, or its drift watch cannot reach the API server)
// and when it regains it.
type ClusterContact struct {
	Cluster string `json:"cluster"`
	// Lost: nothing is known of the cluster's releases since LastSeen.
	Lost bool `json:"lost"`
	// LastSeen is the last contact known (zero: none).
	LastSeen time.Time `json:"lastSeen,omitempty"`
	// Reason says how contact was lost, without credentials.
	Reason string `json:"reason,omitempty"`
}

// Describe says, for a deployment's message, that the cluster is out of
// contact and since when.
func (c ClusterContact) Describe() string {
	var b strings.Builder
	b.WriteString("cluster " + c.Cluster + " is out of contact")
	if !c.LastSeen.IsZero() {
		b.WriteString(" (last seen " + c.LastSeen.UTC().Format(time.RFC3339) + ")")
	}
	if c.Reason != "" {
		b.WriteString(": " + c.Reason)
	}
	return b.String()
}

// OutOfContact returns d as shown while its cluster is out of contact
// (Fleet's fleet#594): a deployment last known applied (Ready, NotReady,
// Modified) is not known to be so any more and shows WaitApplied, with a
// message naming the cluster, its last-seen time and its last known
// state. A deployment waiting to be applied says so too, and so does one
// not started yet (Pending): it waits for the cluster now, as a retry
// rollout queued for an offline agent does. One that failed or is held
// keeps its state and message: what it says is still true. Contact
// regained shows d as it was.
func (d Deployment) OutOfContact(c ClusterContact) Deployment {
	switch d.State {
	case Ready, NotReady, Modified:
	case WaitApplied, Pending:
		// Waiting for the cluster: say since when it is away.
		d.State = WaitApplied
		d.Message = strings.TrimPrefix(d.Message+"; "+c.Describe(), "; ")
		return d
	default:
		return d
	}
	last := string(d.State)
	d.State, d.Message = WaitApplied, c.Describe()+"; last known "+last
	return d
}

// WithContacts returns deps as shown while the clusters in lost are out
// of contact (see OutOfContact). deps itself is returned when none is.
func WithContacts(deps []Deployment, lost []ClusterContact) []Deployment {
	if len(lost) == 0 {
		return deps
	}
	out := slices.Clone(deps)
	for i, d := range out {
		if j, ok := slices.BinarySearchFunc(lost, d.Cluster, compareContact); ok {
			out[i] = d.OutOfContact(lost[j])
		}
	}
	return out
}

// SetContact records c in lost (sorted by cluster): a lost contact is
// added or updated, a regained one removed. It reports whether lost
// changed.
func SetContact(lost []ClusterContact, c ClusterContact) ([]ClusterContact, bool) {
	i, found := slices.BinarySearchFunc(lost, c.Cluster, compareContact)
	switch {
	case !c.Lost && found:
		return slices.Delete(lost, i, i+1), true
	case !c.Lost:
		return lost, false
	case found && lost[i] == c:
		return lost, false
	case found:
		lost[i] = c
		return lost, true
	}
	return slices.Insert(lost, i, c), true
}

func compareContact(c ClusterContact, cluster string) int { return strings.Compare(c.Cluster, cluster) }
