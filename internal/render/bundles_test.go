package render_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/bundle"
	"github.com/flotilla-gitops/flotilla/internal/deployer"
	"github.com/flotilla-gitops/flotilla/internal/render"
)

// TestDirWithGitRepoBundles: a GitRepo's bundles entries are the bundles
// rendered (its paths are not scanned), each with its options file; a
// raw YAML List reaches the cluster as its items.
func TestDirWithGitRepoBundles(t *testing.T) {
	const list = "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: one}}\n" +
		"- {apiVersion: v1, kind: ConfigMap, metadata: {name: two}}\n"
	root := writeBundle(t, "namespace: from-app\n", map[string]string{
		"raw/list.yaml": list, "raw/dev.yaml": "namespace: dev\n", "raw/prod.yaml": "namespace: prod\n",
	})
	spec := &api.GitRepoSpec{Paths: []string{"app"}, Bundles: []api.BundlePath{{Base: "raw", Options: "dev.yaml"}, {Base: "raw", Options: "prod.yaml"}},
		Targets: []api.TargetSelector{{ClusterSelector: &metav1.LabelSelector{}}}}
	results, err := render.Dir(context.Background(), render.DirOptions{Root: root, RepoName: "repo", GitRepo: spec,
		Deployer: deployer.New(deployer.Options{}), Cluster: bundle.Cluster{Name: "c1", Namespace: "apps"}})
	require.NoError(t, err)
	require.Len(t, results, 2, "the bundles entries, not the paths")
	for i, want := range []string{"dev", "prod"} {
		r := results[i]
		assert.Equal(t, "repo-raw-"+want, r.Bundle.Name)
		assert.Equal(t, want, r.Deployment.Namespace)
		objects := string(r.Objects)
		assert.NotContains(t, objects, "kind: List")
		assert.Contains(t, objects, "name: one")
		assert.Contains(t, objects, "name: two")
		assert.Equal(t, 2, strings.Count(objects, "kind: ConfigMap"), "the options files are not objects")
	}
}
