package activities

import (
	"strings"
	"time"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/outcome"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/rollout"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

// GitRepoRef names a GitRepo, or a HelmOp (Kind api.KindHelmOp), which
// rolls out as a GitRepo whose bundle comes from a chart, not from Git.
type GitRepoRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Kind is "" for a GitRepo and api.KindHelmOp for a HelmOp.
	Kind string `json:"kind,omitempty"`
}

// helmOpPrefix starts the string form of a HelmOp's ref; a namespace
// cannot contain "/", so "helmop/ns/name" never reads as a GitRepo.
const helmOpPrefix = "helmop/"

// String is "namespace/name" for a GitRepo and "helmop/namespace/name"
// for a HelmOp: the form releases are annotated with and drift reports
// name. ParseGitRepoRef reads it back.
func (r GitRepoRef) String() string {
	if r.Kind == api.KindHelmOp {
		return helmOpPrefix + r.Namespace + "/" + r.Name
	}
	return r.Namespace + "/" + r.Name
}

// Title names the entity in messages: "GitRepo ns/name" or "HelmOp ns/name".
func (r GitRepoRef) Title() string {
	if r.Kind == api.KindHelmOp {
		return "HelmOp " + r.Namespace + "/" + r.Name
	}
	return "GitRepo " + r.Namespace + "/" + r.Name
}

// WorkflowID is the ID of the entity workflow.
func (r GitRepoRef) WorkflowID() string {
	if r.Kind == api.KindHelmOp {
		return protocol.HelmOpID(r.Namespace, r.Name)
	}
	return protocol.GitRepoID(r.Namespace, r.Name)
}

// ParseGitRepoRef reads a GitRepoRef's String.
func ParseGitRepoRef(s string) GitRepoRef {
	var r GitRepoRef
	if rest, ok := strings.CutPrefix(s, helmOpPrefix); ok && strings.Count(rest, "/") == 1 {
		r.Kind, s = api.KindHelmOp, rest
	}
	r.Namespace, r.Name, _ = strings.Cut(s, "/")
	return r
}

// ResolveInput asks which commit a GitRepo's branch or revision is at.
type ResolveInput struct {
	GitRepo GitRepoRef      `json:"gitRepo"`
	Spec    api.GitRepoSpec `json:"spec"`
	// Since is the commit the GitRepo's deployments were last rendered
	// from with this spec, when nothing else is due: a new commit is then
	// compared with it (ResolveResult.Unchanged). Empty: no comparison.
	Since string `json:"since,omitempty"`
	// MaxAge is how old an answer another GitRepo of the same remote and
	// credentials got may be to be reused (polls pass their interval);
	// zero always asks the remote (webhooks, syncs, applies).
	MaxAge time.Duration `json:"maxAge,omitempty"`
}

// ResolveResult is the resolved commit.
type ResolveResult struct {
	// Ref is the full ref name followed (refs/heads/main) or the revision.
	Ref    string `json:"ref"`
	Commit string `json:"commit"`
	// Unchanged: Commit differs from ResolveInput.Since but changes
	// nothing the GitRepo reads (nothing under its paths or bundles, nor
	// any file they reference): no render or rollout is needed.
	Unchanged bool `json:"unchanged,omitempty"`
	// Rejected is set when spec.verify refused Commit (or its tag): it is
	// not to be deployed.
	Rejected *Rejection `json:"rejected,omitempty"`
	// Verified names the key that signed Commit (and its tag) when
	// spec.verify is set and they passed.
	Verified string `json:"verified,omitempty"`
	// Warnings are what the check of the remote wants the user to know
	// (host keys not checked).
	Warnings []string `json:"warnings,omitempty"`
}

// Rejection is a commit spec.verify refused.
type Rejection struct {
	Commit string `json:"commit"`
	// Tag is the tag checked, for Tag and TagAndHEAD.
	Tag string `json:"tag,omitempty"`
	// Key is the signing key's ID or fingerprint, when there is a
	// signature.
	Key string `json:"key,omitempty"`
	// Reason: "not signed", "signed by a key that is not in Secret
	// ns/name", "bad signature: ...", "tag v1 is lightweight (not
	// signed)", "verify.mode Tag needs revision to name a tag, and ...
	// is not one", or an X.509 signature, which is not checked.
	Reason string `json:"reason"`
}

// RenderInput asks for the bundles of a GitRepo at a commit.
type RenderInput struct {
	GitRepo GitRepoRef      `json:"gitRepo"`
	Spec    api.GitRepoSpec `json:"spec"`
	Commit  string          `json:"commit"`
}

// The rollout's own types, shared by the activities that produce them and
// the pure planner in internal/rollout.
type (
	Bundle          = rollout.Bundle
	TargetCluster   = rollout.TargetCluster
	TargetsResult   = rollout.Targets
	BundleStrategy  = rollout.BundleStrategy
	Dependency      = rollout.Dependency
	RollbackRelease = rollout.RollbackRelease
	Release         = rollout.Release
)

// RenderResult lists the bundles, sorted by name.
type RenderResult struct {
	Bundles []Bundle `json:"bundles"`
}

// TargetsInput asks which registered clusters a GitRepo's targets select.
type TargetsInput struct {
	Targets []api.TargetSelector `json:"targets"`
}

// BundleTargetsInput asks where each rendered bundle of a GitRepo goes,
// and with which options.
type BundleTargetsInput struct {
	GitRepo GitRepoRef      `json:"gitRepo"`
	Spec    api.GitRepoSpec `json:"spec"`
	// Commit the bundles were rendered from, to render them again when
	// this controller's store misses them. Empty in rollouts scheduled
	// before it was added: the GitRepo's commits are tried.
	Commit  string   `json:"commit,omitempty"`
	Bundles []Bundle `json:"bundles"`
}

// NotifyInput asks to signal every GitRepo that clusters changed. When
// WaitFor is set, the notification waits until that workflow is listed as
// running, so the GitRepos that react see it.
type NotifyInput struct {
	WaitFor string `json:"waitFor,omitempty"`
	// Generation, when set, is the record generation visibility must show
	// in WaitFor's targeting memo (protocol.MemoTargeting) before the
	// GitRepos are told; Removed: or no longer list it as running.
	Generation int64  `json:"generation,omitempty"`
	Removed    bool   `json:"removed,omitempty"`
	Reason     string `json:"reason"`
}

// DeployInput deploys bundles of one GitRepo to the cluster whose queue
// runs the activity.
type DeployInput struct {
	Cluster    string     `json:"cluster"`
	GitRepo    GitRepoRef `json:"gitRepo"`
	Commit     string     `json:"commit"`
	WorkflowID string     `json:"workflowID"`
	Bundles    []Bundle   `json:"bundles"`
}

// WaitReadyInput waits for bundles of a cluster to be Ready, for at most
// Timeout (the longest ready timeout of their strategies).
type WaitReadyInput struct {
	DeployInput
	Timeout time.Duration `json:"timeout,omitempty"`
}

// RollbackInput returns releases of a cluster to the deployment IDs they
// ran before a halted rollout.
type RollbackInput struct {
	Cluster    string            `json:"cluster"`
	GitRepo    GitRepoRef        `json:"gitRepo"`
	WorkflowID string            `json:"workflowID"`
	Releases   []RollbackRelease `json:"releases"`
}

// DeployResult reports every bundle's deployment, each with its outcome.
// Retry is set when the cluster could not be reached (Class Unreachable):
// nothing was tried, and the rollout tries again shortly. A cluster that
// refused the credentials has Class Unauthorized and reports every bundle
// WaitApplied with that outcome.
type DeployResult struct {
	Deployments []status.Deployment `json:"deployments"`
	Retry       bool                `json:"retry,omitempty"`
	Class       outcome.Class       `json:"class,omitempty"`
	Message     string              `json:"message,omitempty"`
}

// CleanupInput removes releases a GitRepo no longer wants on a cluster.
type CleanupInput struct {
	Cluster    string     `json:"cluster"`
	GitRepo    GitRepoRef `json:"gitRepo"`
	WorkflowID string     `json:"workflowID"`
	Releases   []Release  `json:"releases"`
}

// CleanupResult lists the releases removed; Retry and Message as in
// DeployResult for those that were not.
type CleanupResult struct {
	Removed []string `json:"removed"`
	// Kept says what a cleanup left in place on purpose, naming the
	// cluster: a release another GitRepo owns, a namespace deleteNamespace
	// kept and why. It is shown with the GitRepo's warnings.
	Kept    []string      `json:"kept,omitempty"`
	Retry   bool          `json:"retry,omitempty"`
	Class   outcome.Class `json:"class,omitempty"`
	Message string        `json:"message,omitempty"`
}
