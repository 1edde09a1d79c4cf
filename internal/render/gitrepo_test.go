package render_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/bundle"
	"github.com/flotilla-gitops/flotilla/internal/deployer"
	"github.com/flotilla-gitops/flotilla/internal/render"
	"github.com/flotilla-gitops/flotilla/internal/target"
)

func TestGitRepoOptions(t *testing.T) {
	drift := &bundle.CorrectDrift{Enabled: false}
	tests := []struct {
		name string
		opts bundle.Options
		spec api.GitRepoSpec
		want bundle.Options
	}{
		{"nothing set", bundle.Options{DefaultNamespace: "d"}, api.GitRepoSpec{}, bundle.Options{DefaultNamespace: "d"}},
		{"targetNamespace replaces namespace", bundle.Options{TargetNamespace: "a"}, api.GitRepoSpec{TargetNamespace: "b"},
			bundle.Options{TargetNamespace: "b"}},
		{"serviceAccount when fleet.yaml names none", bundle.Options{}, api.GitRepoSpec{ServiceAccount: "deployer"},
			bundle.Options{ServiceAccount: "deployer"}},
		{"fleet.yaml's other serviceAccount is kept, for targeting to refuse", bundle.Options{ServiceAccount: "admin"},
			api.GitRepoSpec{ServiceAccount: "deployer"}, bundle.Options{ServiceAccount: "admin"}},
		{"booleans are OR-ed", bundle.Options{KeepResources: true}, api.GitRepoSpec{DeleteNamespace: true},
			bundle.Options{KeepResources: true, DeleteNamespace: true}},
		{"a false GitRepo boolean keeps the bundle's", bundle.Options{DeleteNamespace: true}, api.GitRepoSpec{},
			bundle.Options{DeleteNamespace: true}},
		{"forceSyncGeneration replaces when set", bundle.Options{ForceSyncGeneration: 1}, api.GitRepoSpec{ForceSyncGeneration: 3},
			bundle.Options{ForceSyncGeneration: 3}},
		{"forceSyncGeneration 0 keeps the bundle's", bundle.Options{ForceSyncGeneration: 1}, api.GitRepoSpec{},
			bundle.Options{ForceSyncGeneration: 1}},
		{"correctDrift when fleet.yaml has none", bundle.Options{}, api.GitRepoSpec{CorrectDrift: &api.CorrectDrift{Enabled: true, Force: true}},
			bundle.Options{CorrectDrift: &bundle.CorrectDrift{Enabled: true, Force: true}}},
		{"fleet.yaml's correctDrift wins, even disabled", bundle.Options{CorrectDrift: drift},
			api.GitRepoSpec{CorrectDrift: &api.CorrectDrift{Enabled: true}}, bundle.Options{CorrectDrift: drift}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.opts
			assert.Equal(t, tt.want, render.GitRepoOptions(tt.opts, tt.spec))
			assert.Equal(t, before, tt.opts, "the input is not modified")
		})
	}
}

// Dir with a GitRepo renders as its rollout would: the GitRepo's targets
// select the cluster, its paths are scanned and its options apply.
func TestDirWithGitRepo(t *testing.T) {
	root := writeBundle(t, "helm:\n  values: {replicas: 2, env: x}\n", map[string]string{
		"other/fleet.yaml": "", "other/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: other}\n",
	})
	prod := bundle.Cluster{Name: "c1", Namespace: "apps", Labels: map[string]string{"env": "prod"}}
	spec := &api.GitRepoSpec{Paths: []string{"app"}, TargetNamespace: "forced", KeepResources: true,
		Targets: []api.TargetSelector{{ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}}}}
	d := deployer.New(deployer.Options{})
	opts := render.DirOptions{Root: root, RepoName: "repo", Deployer: d, Cluster: prod, GitRepo: spec}

	results, err := render.Dir(context.Background(), opts)
	require.NoError(t, err)
	require.Len(t, results, 1, "only the GitRepo's paths are scanned")
	r := results[0]
	require.True(t, r.Deployment.Deploy, "the GitRepo's target selects the cluster")
	assert.Equal(t, "forced", r.Deployment.Namespace)
	assert.True(t, r.Deployment.Options.KeepResources)
	assert.Contains(t, string(r.Objects), "namespace: forced")

	// The rollout's deployment ID: options with the GitRepo's applied.
	b, m, err := bundle.Read(root, "app", "repo")
	require.NoError(t, err)
	b.Options = render.GitRepoOptions(b.Options, *spec)
	dep, err := render.ForCluster(b, m.ID(), prod, spec.EffectiveTargets())
	require.NoError(t, err)
	assert.Equal(t, dep.DeploymentID, r.Deployment.DeploymentID)

	// Without the GitRepo the bundle has no targets and goes to group
	// default only.
	opts.GitRepo, opts.Paths = nil, []string{"app"}
	results, err = render.Dir(context.Background(), opts)
	require.NoError(t, err)
	assert.False(t, results[0].Deployment.Deploy)

	// A GitRepo without targets targets clusterGroup default.
	opts.GitRepo, opts.Paths = &api.GitRepoSpec{}, nil
	results, err = render.Dir(context.Background(), opts)
	require.NoError(t, err)
	assert.Len(t, results, 2, "default path .")
	for _, r := range results {
		assert.False(t, r.Deployment.Deploy, "c1 is not in group default")
	}
}

// A customization's values files reach the cluster: file values over the
// customization's inline values, all deep-merged over the bundle's.
func TestTemplateCustomizationValuesFiles(t *testing.T) {
	root := writeBundle(t, "helm:\n  values: {replicas: 2, env: base}\n"+
		"targetCustomizations:\n- name: prod\n  clusterSelector: {matchLabels: {env: prod}}\n"+
		"  helm:\n    values: {env: inline}\n    valuesFiles: [prod-values.yaml]\n",
		map[string]string{"app/prod-values.yaml": "replicas: 7\n"})
	b, m, err := bundle.Read(root, "app", "repo")
	require.NoError(t, err)
	_, out, err := render.Template(context.Background(), deployer.New(deployer.Options{}), b, m, prodCluster,
		[]api.TargetSelector{{ClusterGroup: "default"}}, "")
	require.NoError(t, err)
	assert.Contains(t, string(out), `replicas: "7"`, "from the customization's values file")
	assert.Contains(t, string(out), `env: "inline"`, "the customization's inline value over the bundle's")
}

// Dir with a GitRepo refuses what leaves its bounds, as targeting does:
// `flotilla render --gitrepo` shows the refusal a rollout would make.
func TestDirWithGitRepoBounds(t *testing.T) {
	root := writeBundle(t, "targetCustomizations:\n- name: prod\n  clusterSelector: {matchLabels: {env: prod}}\n  namespace: kube-system\n", nil)
	prod := bundle.Cluster{Name: "c1", Labels: map[string]string{"env": "prod"}}
	spec := &api.GitRepoSpec{TargetNamespace: "apps", Targets: []api.TargetSelector{{ClusterName: "c1"}}}
	opts := render.DirOptions{Root: root, RepoName: "repo", Deployer: deployer.New(deployer.Options{}), Cluster: prod, GitRepo: spec}
	_, err := render.Dir(context.Background(), opts)
	var be *target.BoundsError
	require.ErrorAs(t, err, &be)
	assert.Equal(t, "targetCustomizations[0].namespace", be.Field)
	assert.Equal(t, "app/fleet.yaml", be.File)
	assert.Contains(t, err.Error(), "bundle repo-app: cluster c1: app/fleet.yaml: targetCustomizations[0].namespace")

	// The same customization with the GitRepo's own namespace renders.
	spec.TargetNamespace = "kube-system"
	results, err := render.Dir(context.Background(), opts)
	require.NoError(t, err)
	assert.Equal(t, "kube-system", results[0].Deployment.Namespace)
}
