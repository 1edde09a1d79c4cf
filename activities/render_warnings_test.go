package activities_test

import (
	"context"
	"encoding/base64"
	"os"
	"path"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	"go.uber.org/zap/zaptest"

	"github.com/flotilla-gitops/flotilla/activities"
	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/chartfetch"
	"github.com/flotilla-gitops/flotilla/internal/cluster"
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
	spec := api.GitRepoSpec{Repo: repo.URL(), TargetNamespace: "forced", KeepResources: true}
	bundles := renderBundles(t, a, activities.RenderInput{GitRepo: f.ref, Spec: spec, Commit: f.commit})
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

// pathSecret is a SecretSource holding one helmSecretNameForPaths Secret.
type pathSecret struct{ name, yaml string }

func (s pathSecret) Load(string, string) (string, string, error) { return "", "", cluster.ErrNotFound }

func (s pathSecret) SecretData(_ context.Context, _, name string) (string, map[string][]byte, error) {
	if name != s.name {
		return "", nil, cluster.ErrNotFound
	}
	return "Opaque", map[string][]byte{api.HelmPathCredentialsKey: []byte(s.yaml)}, nil
}

// Render warns, once per render, of each helmSecretNameForPaths entry
// whose sshPrivateKey or sshKnownHosts it does not use (no chart is
// fetched from Git), on the entry's first bundle, naming the Secret and
// the entry, never the content.
func TestRender_UnusedHelmPathSSHCredentials(t *testing.T) {
	files := map[string]string{}
	for _, dir := range []string{"apps/a", "apps/b1", "apps/b2", "apps/c"} {
		files[dir+"/fleet.yaml"] = "defaultNamespace: ns\n"
		files[dir+"/cm.yaml"] = configMapYAML(path.Base(dir), "v")
	}
	repo := testenv.NewGitServer(t, testenv.GitServerOptions{}).CreateRepo(t, "app", files)
	f := &refillFixture{ref: activities.GitRepoRef{Namespace: "fleet-default", Name: "repo"}, commit: repo.Head(t),
		temporal: &fakeTemporal{}}
	a := f.controller(t, t.TempDir(), zaptest.NewLogger(t))
	a.Charts = &chartfetch.Fetcher{}
	// The []byte fields are base64, as in Fleet.
	key, hosts := b64("S3CRET-KEY"), b64("S3CRET-HOSTS")
	a.Secrets = pathSecret{name: "by-path", yaml: "apps/a:\n  sshPrivateKey: " + key + "\n  sshKnownHosts: " + hosts + "\n" +
		"apps/b*:\n  sshPrivateKey: " + key + "\n" +
		"apps/c:\n  username: u\n  password: S3CRET-PASS\n"}
	spec := api.GitRepoSpec{Repo: repo.URL(), HelmSecretNameForPaths: "by-path", HelmRepoURLRegex: `https://charts\.example/.*`}
	bundles := renderBundles(t, a, activities.RenderInput{GitRepo: f.ref, Spec: spec, Commit: f.commit})
	require.Len(t, bundles, 4)
	const tail = " not used: Flotilla fetches charts over HTTP(S) and OCI only"
	assert.Equal(t, []string{`helmSecretNameForPaths fleet-default/by-path entry "apps/a": sshPrivateKey and sshKnownHosts are` + tail},
		bundles["apps/a"].Warnings)
	b1, b2 := bundles["apps/b1"].Warnings, bundles["apps/b2"].Warnings
	assert.Equal(t, []string{`helmSecretNameForPaths fleet-default/by-path entry "apps/b*": sshPrivateKey is` + tail}, append(b1, b2...),
		"one warning for the entry, not one per bundle")
	assert.Empty(t, bundles["apps/c"].Warnings)
	for _, b := range bundles {
		for _, w := range b.Warnings {
			for _, secret := range []string{"S3CRET", key, hosts} {
				assert.NotContains(t, w, secret)
			}
		}
	}
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// renderBundles runs the Render activity and returns its bundles by path.
func renderBundles(t *testing.T, a *activities.Activities, in activities.RenderInput) map[string]activities.Bundle {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(a)
	val, err := env.ExecuteActivity(a.Render, in)
	require.NoError(t, err)
	var rendered activities.RenderResult
	require.NoError(t, val.Get(&rendered))
	return byPath(rendered.Bundles)
}

// Render releases its checkout, whether it succeeds or the repository is
// invalid: with a cache keeping one unused worktree, each render's prune
// removes the previous commit's tree, and a prune after the failed render
// removes its tree too. A render holding on to its checkout would keep
// every commit's tree on disk.
func TestRender_ReleasesCheckout(t *testing.T) {
	repo := testenv.NewGitServer(t, testenv.GitServerOptions{}).CreateRepo(t, "app", map[string]string{
		"app/fleet.yaml": "defaultNamespace: app-ns\n", "app/cm.yaml": configMapYAML("app", "1"),
	})
	f := &refillFixture{ref: activities.GitRepoRef{Namespace: "fleet-default", Name: "repo"}, temporal: &fakeTemporal{}}
	f.temporal.gitRepo = protocol.GitRepoID(f.ref.Namespace, f.ref.Name)
	dir := t.TempDir()
	a := f.controller(t, dir, zaptest.NewLogger(t))
	a.Git.MaxWorktrees = 1
	worktrees := func() []string {
		t.Helper()
		entries, err := os.ReadDir(filepath.Join(dir, "git", "worktrees"))
		require.NoError(t, err)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		return names
	}
	spec := api.GitRepoSpec{Repo: repo.URL()}
	first := repo.Head(t)
	renderBundles(t, a, activities.RenderInput{GitRepo: f.ref, Spec: spec, Commit: first})
	second := repo.Commit(t, map[string]string{"app/cm.yaml": configMapYAML("app", "2")}, "2")
	renderBundles(t, a, activities.RenderInput{GitRepo: f.ref, Spec: spec, Commit: second})
	assert.Equal(t, []string{second}, worktrees(), "the first render released its tree")

	third := repo.Commit(t, map[string]string{"app/cm.yaml": configMapYAML("app", "3")}, "3")
	bad := spec
	bad.Bundles = []api.BundlePath{{Base: "missing"}}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(a)
	_, err := env.ExecuteActivity(a.Render, activities.RenderInput{GitRepo: f.ref, Spec: bad, Commit: third})
	require.ErrorContains(t, err, "missing")
	assert.Equal(t, []string{third}, worktrees(), "the second render released its tree")
	require.NoError(t, a.Git.Prune(0))
	assert.Empty(t, worktrees(), "the failed render released its tree")
}
