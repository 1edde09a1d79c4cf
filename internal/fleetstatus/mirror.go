package fleetstatus

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/flotilla-gitops/flotilla/internal/fleetyaml"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

// Labels and annotations of Bundle mirrors.
const (
	// LabelRepoName is Fleet's label naming a bundle's GitRepo, and
	// LabelHelmOpName the one naming its HelmOp.
	LabelRepoName   = "fleet.cattle.io/repo-name"
	LabelHelmOpName = "fleet.cattle.io/fleet-helm-name"
	// LabelCommit is Fleet's label of a bundle's commit.
	LabelCommit = "fleet.cattle.io/commit"
	// MirrorKey, as a label and an annotation with value MirrorReadOnly,
	// marks a Bundle as Flotilla's read-only mirror: Flotilla deploys from
	// its GitRepo, never from the Bundle, and reverts edits to it.
	MirrorKey      = "flotilla.dev/mirror"
	MirrorReadOnly = "read-only"
	// NoteKey explains the mirror to whoever reads it.
	NoteKey = "flotilla.dev/note"
)

const mirrorNote = "Read-only mirror of a bundle Flotilla deploys from its GitRepo or HelmOp; " +
	"edits are reverted, and per-cluster BundleDeployments are not written"

// MirrorName is the name of the Bundle mirroring bundle: the bundle's own
// name, which Flotilla derives as Fleet does (fleetyaml.ReleaseName of
// "<gitrepo>/<path>": "/" → "-", shortened to 53 characters with a hash),
// or ReleaseName of it when it is not a valid object name.
func MirrorName(bundle string) string {
	if len(bundle) <= validation.DNS1123LabelMaxLength && len(validation.IsDNS1123Subdomain(bundle)) == 0 {
		return bundle
	}
	return fleetyaml.ReleaseName(bundle)
}

// mirrorSelector selects the mirrors of owner.
func mirrorSelector(owner Ref) string {
	return ownerLabel(owner.Kind) + "=" + owner.Name + "," + MirrorKey + "=" + MirrorReadOnly
}

func ownerLabel(kind string) string {
	if kind == KindHelmOp {
		return LabelHelmOpName
	}
	return LabelRepoName
}

// Mirror is one Bundle mirror: its object (metadata and spec) and its
// status.
type Mirror struct {
	Object *unstructured.Unstructured
	Status BundleStatus
}

// Mirrors returns the Bundle mirrors of owner's bundles (st.Bundles), in
// owner's namespace, owned by it (so the garbage collector deletes them
// with it), labelled as Fleet labels bundles. Statuses carry no
// timestamps (Stamp adds them). It is pure.
func Mirrors(owner Ref, st status.GitRepo) []Mirror {
	out := make([]Mirror, 0, len(st.Bundles))
	for _, b := range st.Bundles {
		labels := map[string]any{ownerLabel(owner.Kind): owner.Name, MirrorKey: MirrorReadOnly}
		if len(validation.IsValidLabelValue(st.Commit)) == 0 && st.Commit != "" {
			labels[LabelCommit] = st.Commit
		}
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": APIVersion, "kind": KindBundle,
			"metadata": map[string]any{
				"name": MirrorName(b.Name), "namespace": owner.Namespace, "labels": labels,
				"annotations": map[string]any{MirrorKey: MirrorReadOnly, NoteKey: mirrorNote},
			},
			"spec": map[string]any{},
		}}
		if owner.UID != "" {
			obj.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: APIVersion, Kind: owner.Kind, Name: owner.Name,
				UID: owner.UID, Controller: ptr(true)}})
		}
		out = append(out, Mirror{Object: obj, Status: bundleStatus(b, st.Deployments)})
	}
	return out
}

func bundleStatus(b status.BundleStatus, deps []status.Deployment) BundleStatus {
	var mine []status.Deployment
	for _, d := range deps {
		if d.Bundle == b.Name {
			mine = append(mine, d)
		}
	}
	ready := Condition{Type: status.ConditionReady, Status: status.ConditionTrue}
	if b.State != status.Ready {
		ready = Condition{Type: status.ConditionReady, Status: status.ConditionFalse, Reason: string(b.State),
			Message: firstNonEmpty(b.Message, fmt.Sprintf("%s(%d)", b.State, len(mine)))}
	}
	return BundleStatus{
		Conditions: []Condition{ready},
		Summary:    bundleSummary(mine, []status.BundleStatus{b}),
		Display:    BundleDisplay{ReadyClusters: b.ReadyClusters, State: string(b.State)},
	}
}

func ptr[T any](v T) *T { return &v }
