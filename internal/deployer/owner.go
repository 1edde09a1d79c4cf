package deployer

import (
	"fmt"

	"helm.sh/helm/v3/pkg/release"
)

// OwnerAnnotation is the chart annotation, stored with every release
// revision Flotilla writes (as DeploymentIDAnnotation is), that records
// the Owner of the release.
const OwnerAnnotation = "flotilla.dev/owner"

// OwnerBundleAnnotation records, next to the owner, the bundle of the
// owner that wrote the revision (Release.OwnerBundle). It is shown, not
// compared: a GitRepo's bundle renamed with its releaseName kept deploys
// the release it took over.
const OwnerBundleAnnotation = "flotilla.dev/owner-bundle"

// Owner names who deploys a release: for a bundle, its GitRepo (or
// HelmOp), such as "GitRepo fleet-local/app" (the bundle is recorded
// beside it, OwnerBundleAnnotation).
// It is shown in errors and in helm history, so it holds names only, never
// credentials. Two owners are the same when their strings are equal.
//
// A release records its owner on every revision. Deploy, Correct and
// Rollback of a release whose newest record names another owner fail with
// an *OwnedError and change nothing; Uninstall and Forget of it remove
// nothing and return an *OwnedError too. A release without the record
// (written by a Flotilla that did not record owners, or by hand) is
// adopted by the first Deploy that names an owner. The zero Owner checks
// nothing and records nothing: callers that predate owners keep their
// behaviour.
type Owner string

// OwnedError is returned by a call that would have changed a release of
// another owner. Nothing was changed.
type OwnedError struct {
	// Namespace and Name are the release's.
	Namespace, Name string
	// Owner is who the release belongs to; Caller is who asked.
	Owner, Caller Owner
	// OwnerBundle is the owner's bundle that wrote the release, when
	// recorded.
	OwnerBundle string
}

func (e *OwnedError) Error() string {
	owner := string(e.Owner)
	if e.OwnerBundle != "" {
		owner += " (bundle " + e.OwnerBundle + ")"
	}
	return fmt.Sprintf("release %s/%s belongs to %s, not to %s", e.Namespace, e.Name, owner, e.Caller)
}

// OwnerOf returns the owner recorded on a release revision, "" when none is.
func OwnerOf(rel *release.Release) Owner {
	if rel == nil || rel.Chart == nil || rel.Chart.Metadata == nil {
		return ""
	}
	return Owner(rel.Chart.Metadata.Annotations[OwnerAnnotation])
}

// ownedByAnother reports whether rec, a record of the release, names an
// owner other than caller. A record without an owner belongs to whoever
// deploys it next; a caller without one claims nothing.
func ownedByAnother(rec *release.Release, caller Owner) bool {
	owner := OwnerOf(rec)
	return caller != "" && owner != "" && owner != caller
}

// checkOwner returns an *OwnedError when last, the release's newest record
// (nil when there is none), belongs to another owner than caller.
func checkOwner(last *release.Release, namespace, name string, caller Owner) error {
	if last == nil || !ownedByAnother(last, caller) {
		return nil
	}
	return &OwnedError{Namespace: namespace, Name: name, Owner: OwnerOf(last), Caller: caller,
		OwnerBundle: last.Chart.Metadata.Annotations[OwnerBundleAnnotation]}
}
