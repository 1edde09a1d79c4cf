package fleetstatus

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/status"
)

// TestBound_1000ClustersX50Resources: a GitRepo with 50 bundles on 1,000
// clusters, each with drifted objects, projects to a status far over the
// limit; Bound cuts it to at most MaxStatusSize, deterministically, and
// says so in display.message.
func TestBound_1000ClustersX50Resources(t *testing.T) {
	var deps []status.Deployment
	for c := range 1000 {
		for b := range 50 {
			d := dep(fmt.Sprintf("demo-bundle-%02d", b), fmt.Sprintf("cluster-with-a-long-name-%04d", c), status.Modified)
			d.Modified = 1
			d.ModifiedStatus = []status.ModifiedStatus{{APIVersion: "v1", Kind: "ConfigMap", Namespace: fmt.Sprintf("ns-%02d", b),
				Name: fmt.Sprintf("config-%02d-%04d", b, c%20), Patch: `{"data":{"value":"changed by hand"}}`}}
			deps = append(deps, d)
		}
	}
	st := gitRepo(nil, deps...)
	proj := ProjectGitRepo(GitRepoInput{Status: st, Generation: 1, SpecGeneration: 3})
	require.Greater(t, size(proj), MaxStatusSize, "the test must start over the limit")

	got := Bound(proj, MaxStatusSize)
	b, err := json.Marshal(got)
	require.NoError(t, err)
	assert.LessOrEqual(t, len(b), MaxStatusSize)
	assert.Contains(t, got.Display.Message, "status truncated to 512 KiB")
	assert.Less(t, len(got.Resources)+len(got.PerClusterResourceCounts), len(proj.Resources)+len(proj.PerClusterResourceCounts))
	// What is kept is a prefix of each sorted list: the same input always
	// gives the same output.
	again, err := json.Marshal(Bound(ProjectGitRepo(GitRepoInput{Status: st, Generation: 1, SpecGeneration: 3}), MaxStatusSize))
	require.NoError(t, err)
	assert.Equal(t, string(b), string(again))
	for i, r := range got.Resources {
		assert.Equal(t, proj.Resources[i].ID, r.ID)
	}
	// Counts and the summary are never cut.
	assert.Equal(t, proj.ResourceCounts, got.ResourceCounts)
	assert.Equal(t, 50000, got.Summary.DesiredReady)
}

func TestBound_SmallStatusUnchanged(t *testing.T) {
	proj := ProjectGitRepo(GitRepoInput{Status: gitRepo(nil, dep("a", "c1", status.Ready)), Generation: 1, SpecGeneration: 3})
	assert.Equal(t, proj, Bound(proj, MaxStatusSize))
}

func TestResources_BoundedPerState(t *testing.T) {
	var deps []status.Deployment
	for c := range maxClustersPerState + 5 {
		d := dep("a", fmt.Sprintf("c%03d", c), status.Modified)
		d.ModifiedStatus = []status.ModifiedStatus{{APIVersion: "v1", Kind: "ConfigMap", Namespace: "n", Name: "x", Missing: true}}
		deps = append(deps, d)
	}
	got := resources(deps)
	require.Len(t, got, 1)
	assert.Len(t, got[0].PerClusterState.Missing, maxClustersPerState)
	assert.True(t, got[0].IncompleteState)
	assert.Equal(t, "Missing", got[0].State)
	assert.Equal(t, "configmap", got[0].Type)
}
