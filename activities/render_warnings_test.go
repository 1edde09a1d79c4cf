package activities_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	"go.uber.org/zap/zaptest"

	"github.com/flotilla-gitops/flotilla/activities"
	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

// Render carries each bundle's warnings (unknown fleet.yaml keys, skipped
// raw YAML files) to the rollout, and stores the bundle with the
// GitRepo's options applied as `flotilla render --gitrepo` applies them.
func TestRender_WarningsAndGitRepoOptions(t *testing.T) {
	repo := testenv.NewGitServer(t, testenv.GitServerOptions{}).CreateRepo(t, "app", map[string]string{
		"app/fleet.yaml": "defaultNamespace: app-ns\nhelm:\n  chrat: x\nannotations: {owner: web}\n",
		"app/cm.yaml":    configMapYAML("app", "one"),
		"app/bad.yaml":   configMapYAML("bad", "two") + "---\napiVersion: v1\n",
		"web/fleet.yaml": "defaultNamespace: web-ns\n",
		"web/cm.yaml":    configMapYAML("web", "three"),
	})
	f := &refillFixture{ref: activities.GitRepoRef{Namespace: "fleet-default", Name: "repo"}, commit: repo.Head(t),
		temporal: &fakeTemporal{}}
	f.temporal.gitRepo = protocol.GitRepoID(f.ref.Namespace, f.ref.Name)
	a := f.controller(t, t.TempDir(), zaptest.NewLogger(t))
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(a)
	spec := api.GitRepoSpec{Repo: repo.URL(), TargetNamespace: "forced", KeepResources: true}
	val, err := env.ExecuteActivity(a.Render, activities.RenderInput{GitRepo: f.ref, Spec: spec, Commit: f.commit})
	require.NoError(t, err)
	var rendered activities.RenderResult
	require.NoError(t, val.Get(&rendered))
	bundles := byPath(rendered.Bundles)
	require.Len(t, bundles, 2)
	assert.Equal(t, []string{
		`app/fleet.yaml: unknown field "helm.chrat" (ignored)`,
		"app/bad.yaml: document 2 has no kind; the file is skipped, as Fleet skips it",
	}, bundles["app"].Warnings)
	assert.Empty(t, bundles["web"].Warnings)
	for _, b := range bundles {
		assert.Equal(t, "forced", b.Namespace, "the GitRepo's targetNamespace")
		assert.True(t, b.KeepResources, "the GitRepo's keepResources")
	}
	stored, err := a.Content.GetBundle(bundles["app"].BundleKey)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"owner": "web"}, stored.Annotations)
	assert.Equal(t, "forced", stored.Options.TargetNamespace)
}
