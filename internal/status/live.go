package status

import (
	"fmt"
	"strings"
)

// ModifiedStatus is one object of a deployment that does not match Git:
// Fleet's modifiedStatus entry. Exactly one of Missing, Delete and Patch
// says how it differs.
type ModifiedStatus struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
	// Missing: a desired object is absent from the cluster.
	Missing bool `json:"missing,omitempty"`
	// Delete: the object is orphaned, labelled as the release's but no
	// longer in it (Fleet's name for the field).
	Delete bool `json:"delete,omitempty"`
	// Patch is a JSON merge patch that shows what a correction restores.
	Patch string `json:"patch,omitempty"`
	// Conflict names the field manager that keeps changing the object
	// back, and the field; correctDrift stopped correcting it.
	Conflict string `json:"conflict,omitempty"`
}

// Object names the object: "ConfigMap ns/name" (or "Kind name").
func (m ModifiedStatus) Object() string {
	if m.Namespace == "" {
		return m.Kind + " " + m.Name
	}
	return m.Kind + " " + m.Namespace + "/" + m.Name
}

// String says how the object differs: "ConfigMap ns/app: missing",
// "... orphaned", or "... modified {patch}".
func (m ModifiedStatus) String() string {
	var s string
	switch {
	case m.Missing:
		s = m.Object() + ": missing"
	case m.Delete:
		s = m.Object() + ": orphaned"
	default:
		s = m.Object() + ": modified " + m.Patch
	}
	if m.Conflict != "" {
		s += " (conflict: " + m.Conflict + ")"
	}
	return s
}

// LiveReport is what the watch of a cluster saw of one release at one
// deployment ID: readiness and drift of its objects. Every desired object
// counts in exactly one of Ready, NotReady, Unknown, Missing and Modified
// (drift wins over readiness); Orphaned objects are extra.
type LiveReport struct {
	Bundle       string `json:"bundle"`
	Release      string `json:"release"`
	Namespace    string `json:"namespace"`
	DeploymentID string `json:"deploymentID"`
	Resources    int    `json:"resources"`
	Ready        int    `json:"ready"`
	NotReady     int    `json:"notReady,omitempty"`
	Unknown      int    `json:"unknown,omitempty"`
	Missing      int    `json:"missing,omitempty"`
	Modified     int    `json:"modified,omitempty"`
	Orphaned     int    `json:"orphaned,omitempty"`
	// NotReadyStatus describes objects that are not ready ("Deployment
	// ns/web: Available: 0/1"), sorted, at most MaxListed.
	NotReadyStatus []string `json:"nonReadyStatus,omitempty"`
	// ModifiedStatus lists drifted objects, sorted, at most MaxListed.
	ModifiedStatus []ModifiedStatus `json:"modifiedStatus,omitempty"`
	// Incomplete: a list was cut at MaxListed.
	Incomplete bool `json:"incomplete,omitempty"`
	// Error says why drift could not be corrected (the last correction's
	// error, retried with backoff), or why the release could not be read.
	Error string `json:"error,omitempty"`
	// Corrections counts the drift corrections made at this deployment
	// ID since the watch started.
	Corrections int `json:"corrections,omitempty"`
	// Seq orders the reports a GitRepo took: it stamps each with its count
	// of reports so far (0: before it counted).
	Seq int64 `json:"seq,omitempty"`
}

// MaxListed bounds LiveReport's lists, as Fleet bounds its
// modifiedStatus and nonReadyStatus.
const MaxListed = 10

// Drifted reports whether any object is missing, modified or orphaned.
func (r LiveReport) Drifted() bool { return r.Missing+r.Modified+r.Orphaned > 0 }

// LiveSignal carries a cluster's live reports to a GitRepo.
type LiveSignal struct {
	Cluster string       `json:"cluster"`
	Reports []LiveReport `json:"reports"`
	// More are other clusters' reports, delivered with this one: a
	// controller's watches batch what they tell one GitRepo.
	More []LiveSignal `json:"more,omitempty"`
	// Contact, sent by the cluster's workflow, says the cluster lost or
	// regained contact.
	Contact *ClusterContact `json:"contact,omitempty"`
}

// Each returns the signal's reports per cluster: its own, then More's.
func (s LiveSignal) Each() []LiveSignal {
	own := s
	own.More = nil
	return append([]LiveSignal{own}, s.More...)
}

// WithLive returns d updated with what the cluster's watch reported, when
// r is about the deployment ID d is applied at and d's state is a live
// one (Ready, NotReady, Modified): objects that are not ready make it
// NotReady, drift makes it Modified, and otherwise it is Ready. A report
// about another deployment ID, or a deployment that waits, failed or is
// held back, leaves d as it is.
func (d Deployment) WithLive(r LiveReport) Deployment {
	if r.DeploymentID != d.DeploymentID || r.DeploymentID == "" || d.AppliedDeploymentID != d.DeploymentID {
		return d
	}
	switch d.State {
	case Ready, NotReady, Modified:
	default:
		return d
	}
	d.Resources, d.ReadyResources = r.Resources, r.Ready
	d.NotReadyResources, d.Unknown, d.Missing = r.NotReady, r.Unknown, r.Missing
	d.Modified, d.Orphaned = r.Modified, r.Orphaned
	d.ModifiedStatus, d.Incomplete = r.ModifiedStatus, r.Incomplete
	d.Corrections = r.Corrections
	var parts []string
	switch {
	case r.NotReady+r.Unknown > 0:
		d.State = NotReady
		parts = r.NotReadyStatus
	case r.Drifted():
		d.State = Modified
		for _, m := range r.ModifiedStatus {
			parts = append(parts, m.String())
		}
	default:
		d.State = Ready
	}
	if r.Incomplete {
		parts = append(parts, "...")
	}
	if r.Error != "" {
		parts = append(parts, r.Error)
	}
	d.Message = ""
	if len(parts) > 0 {
		d.Message = fmt.Sprintf("cluster %s: %s", d.Cluster, strings.Join(parts, "; "))
	}
	return d
}
