package fleetstatus

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/fleetyaml"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

func TestMirrorName(t *testing.T) {
	tests := []struct{ bundle, want string }{
		// Flotilla's bundle names are Fleet's (fleetyaml.ReleaseName of
		// "<gitrepo>/<path>"), and the mirror keeps them.
		{bundle: fleetyaml.ReleaseName("demo/guestbook"), want: "demo-guestbook"},
		{bundle: fleetyaml.ReleaseName("simple/multi-cluster/helm"), want: "simple-multi-cluster-helm"},
		{bundle: fleetyaml.ReleaseName("a-gitrepo-with-a-long-name/and/a/very/deep/path/to/the/bundle"),
			want: "a-gitrepo-with-a-long-name-and-a-very-deep-path-24c4b"}, // Fleet: first 47, "-", md5[:5]
		{bundle: "Has_Upper", want: fleetyaml.ReleaseName("Has_Upper")},
	}
	for _, tt := range tests {
		t.Run(tt.bundle, func(t *testing.T) {
			got := MirrorName(tt.bundle)
			assert.Equal(t, tt.want, got)
			assert.LessOrEqual(t, len(got), 63)
		})
	}
}

func TestMirrors(t *testing.T) {
	owner := Ref{Kind: KindGitRepo, Namespace: "team-a", Name: "demo", UID: "u-1"}
	st := gitRepo(nil, dep("demo-a", "c1", status.Ready), dep("demo-b", "c1", status.NotReady), dep("demo-b", "c2", status.Ready))
	got := Mirrors(owner, st)
	require.Len(t, got, 2)
	b := got[1]
	assert.Equal(t, "demo-b", b.Object.GetName())
	assert.Equal(t, "team-a", b.Object.GetNamespace())
	assert.Equal(t, map[string]string{LabelRepoName: "demo", LabelCommit: "c1", MirrorKey: MirrorReadOnly}, b.Object.GetLabels())
	assert.Equal(t, MirrorReadOnly, b.Object.GetAnnotations()[MirrorKey])
	refs := b.Object.GetOwnerReferences()
	require.Len(t, refs, 1)
	assert.Equal(t, "GitRepo", refs[0].Kind)
	assert.Equal(t, "u-1", string(refs[0].UID))
	assert.Equal(t, BundleDisplay{ReadyClusters: "1/2", State: "NotReady"}, b.Status.Display)
	assert.Equal(t, "False", b.Status.Conditions[0].Status)
	assert.Equal(t, 1, b.Status.Summary.NotReady)
	assert.Equal(t, 2, b.Status.Summary.DesiredReady)
	assert.Equal(t, "True", got[0].Status.Conditions[0].Status)
	assert.Equal(t, "fleet.cattle.io/repo-name=demo,flotilla.dev/mirror=read-only", mirrorSelector(owner))

	helm := Mirrors(Ref{Kind: KindHelmOp, Namespace: "n", Name: "h"}, st)
	assert.Equal(t, "h", helm[0].Object.GetLabels()[LabelHelmOpName])
}
