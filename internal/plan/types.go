// Package plan says what rolling a GitRepo's commit out would do on each
// cluster it targets, before it happens: per release installed, upgraded,
// uninstalled or unchanged, with the object-level diff the API server's
// dry run shows (or the offline render's, for a cluster that cannot be
// reached). Secret values never appear in a plan.
package plan

import (
	"fmt"
	"slices"
	"strings"
)

// Action is what a rollout would do to one release on one cluster.
type Action string

const (
	Install   Action = "install"
	Upgrade   Action = "upgrade"
	Uninstall Action = "uninstall"
	Unchanged Action = "unchanged"
)

// Change is what happens to one object of a release.
type Change string

const (
	Create   Change = "create"
	Update   Change = "update"
	Delete   Change = "delete"
	NoChange Change = "unchanged"
)

// Object is one Kubernetes object of a release and its change.
type Object struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
	Change     Change `json:"change"`
	// Diff is a unified diff of the object's YAML (live or last deployed
	// before, dry-run or rendered after), Secret data redacted; empty for
	// NoChange.
	Diff string `json:"diff,omitempty"`
	// Error is the API server's answer when its dry run refused the
	// object (an immutable field, admission): the rollout would fail
	// there.
	Error string `json:"error,omitempty"`
}

// Release is one bundle's Helm release on one cluster.
type Release struct {
	Bundle    string `json:"bundle"`
	Release   string `json:"release"`
	Namespace string `json:"namespace"`
	Action    Action `json:"action"`
	// From and To are the deployment IDs the cluster runs and would run
	// (From empty: not installed; To empty: uninstalled).
	From    string   `json:"from,omitempty"`
	To      string   `json:"to,omitempty"`
	Objects []Object `json:"objects,omitempty"`
	// Error says why the release could not be planned (a template that
	// does not render with the cluster's values, a dry run refused).
	Error string `json:"error,omitempty"`
}

// Cluster is the plan of one cluster.
type Cluster struct {
	Name string `json:"name"`
	// Offline is set when the cluster could not be reached: the plan
	// compares the rendered change with what the GitRepo last deployed
	// there, without the API server's defaults, admission or immutable
	// field checks. Reason says why it was not reached.
	Offline  bool      `json:"offline,omitempty"`
	Reason   string    `json:"reason,omitempty"`
	Releases []Release `json:"releases"`
	// Error says why the cluster could not be planned at all.
	Error string `json:"error,omitempty"`
}

// Result is the plan of one GitRepo at one commit, clusters sorted by
// name and releases by bundle.
type Result struct {
	// GitRepo is "namespace/name".
	GitRepo string `json:"gitRepo"`
	// Commit is what the plan rolls out; Base what the GitRepo runs now.
	Commit string `json:"commit"`
	Base   string `json:"base,omitempty"`
	// Source says where Commit came from when not the GitRepo's branch:
	// "commit", "branch B", "path DIR", "pull request N".
	Source   string    `json:"source,omitempty"`
	Clusters []Cluster `json:"clusters"`
	// Warnings are what rendering the commit ignored or refused.
	Warnings []string `json:"warnings,omitempty"`
}

// Changes reports whether applying the plan would change anything: a
// release installed, upgraded or uninstalled, or a release or cluster
// that could not be planned (which the rollout would not leave alone).
func (r Result) Changes() bool {
	for _, c := range r.Clusters {
		if c.Error != "" {
			return true
		}
		for _, rel := range c.Releases {
			if rel.Action != Unchanged || rel.Error != "" {
				return true
			}
		}
	}
	return false
}

// Counts tallies the releases by action, and the failures to plan.
type Counts struct {
	Install   int `json:"install,omitempty"`
	Upgrade   int `json:"upgrade,omitempty"`
	Uninstall int `json:"uninstall,omitempty"`
	Unchanged int `json:"unchanged,omitempty"`
	Errors    int `json:"errors,omitempty"`
	// Offline counts the clusters planned offline.
	Offline int `json:"offline,omitempty"`
}

// Counts tallies r's releases.
func (r Result) Counts() Counts {
	var n Counts
	for _, c := range r.Clusters {
		if c.Offline {
			n.Offline++
		}
		if c.Error != "" {
			n.Errors++
		}
		for _, rel := range c.Releases {
			if rel.Error != "" {
				n.Errors++
			}
			switch rel.Action {
			case Install:
				n.Install++
			case Upgrade:
				n.Upgrade++
			case Uninstall:
				n.Uninstall++
			default:
				n.Unchanged++
			}
		}
	}
	return n
}

// String is the one-line summary: "3 install, 1 upgrade, 2 unchanged on
// 3 clusters (1 offline)".
func (n Counts) String() string {
	var parts []string
	for _, p := range []struct {
		n    int
		word string
	}{{n.Install, "install"}, {n.Upgrade, "upgrade"}, {n.Uninstall, "uninstall"}, {n.Unchanged, "unchanged"}, {n.Errors, "failed to plan"}} {
		if p.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", p.n, p.word))
		}
	}
	if len(parts) == 0 {
		return "nothing to do"
	}
	return strings.Join(parts, ", ")
}

// Summary is r's one-line summary, naming the clusters planned offline.
func (r Result) Summary() string {
	n := r.Counts()
	s := fmt.Sprintf("%s on %d cluster(s)", n, len(r.Clusters))
	if n.Offline > 0 {
		var off []string
		for _, c := range r.Clusters {
			if c.Offline {
				off = append(off, c.Name)
			}
		}
		s += fmt.Sprintf(" (offline: %s)", strings.Join(off, ", "))
	}
	return s
}

// Sort orders clusters by name and their releases by bundle, objects by
// kind, namespace and name.
func (r *Result) Sort() {
	slices.SortFunc(r.Clusters, func(a, b Cluster) int { return strings.Compare(a.Name, b.Name) })
	for i := range r.Clusters {
		rels := r.Clusters[i].Releases
		slices.SortFunc(rels, func(a, b Release) int { return strings.Compare(a.Bundle, b.Bundle) })
		for j := range rels {
			slices.SortFunc(rels[j].Objects, func(a, b Object) int {
				return strings.Compare(a.Kind+"/"+a.Namespace+"/"+a.Name, b.Kind+"/"+b.Namespace+"/"+b.Name)
			})
		}
	}
}

// Request asks for a plan of one GitRepo (the PlanWorkflow's input).
// At most one of Commit, Branch and Archive is set; none: the head of the
// GitRepo's own branch (or its revision).
type Request struct {
	// Namespace and Name name the GitRepo.
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Commit    string `json:"commit,omitempty"`
	Branch    string `json:"branch,omitempty"`
	// Ref is a Git ref to fetch the commit from when it is on no branch
	// ("refs/pull/7/head"); with Commit.
	Ref string `json:"ref,omitempty"`
	// Archive is a gzipped tar of a local directory (`--path DIR`),
	// rendered in place of the repository's tree; Path names it.
	Archive []byte `json:"archive,omitempty"`
	Path    string `json:"path,omitempty"`
	// Clusters, when set, restricts the plan to these clusters (an
	// approval's partition).
	Clusters []string `json:"clusters,omitempty"`
	// Source is copied to Result.Source.
	Source string `json:"source,omitempty"`
}

// WorkflowName is the name the PlanWorkflow is registered under;
// WorkflowIDPrefix starts its IDs ("plan/<namespace>/<name>/<unique>").
const (
	WorkflowName     = "PlanWorkflow"
	WorkflowIDPrefix = "plan/"
)
