package tests

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/status"
	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

// TestHelmOp deploys charts straight from a Helm repository and an OCI
// registry (issue 17), on one fleet of two push-mode clusters.
func TestHelmOp(t *testing.T) {
	start := time.Now()
	reg := newOCIRegistry(t)
	f := &failureFleet{fleet: startFleetArgs(t, 2, 2, testenv.Options{}, reg.mirrorFlag()...)}
	t.Run("RepositoryConstraint", func(t *testing.T) { testHelmOpRepository(t, f) })
	t.Run("OCIRegistry", func(t *testing.T) { testHelmOpOCI(t, f, reg) })
	t.Run("BadConstraint", func(t *testing.T) { testHelmOpBadConstraint(t, f) })
	t.Run("WrongCredentials", func(t *testing.T) { testHelmOpWrongCredentials(t, f) })
	t.Logf("TestHelmOp ran in %s", time.Since(start).Round(time.Second))
}

// helmOpAt reports whether the HelmOp settled at version on want clusters.
func helmOpAt(version string, want int) func(status.GitRepo) bool {
	return func(st status.GitRepo) bool {
		return st.Kind == api.KindHelmOp && st.Version == version && settledAt(version, want)(st)
	}
}

// Publish 1.0.0 and it is deployed; publish 1.1.0 under ~1 and the next
// poll upgrades; publish 2.0.0 and nothing changes.
func testHelmOpRepository(t *testing.T, f *failureFleet) {
	repo := newChartRepo(t, "web", "helm", "s3cret")
	repo.publish(t, "1.0.0")
	f.apply(t, basicAuthSecret("web-helm", "helm", "s3cret"))
	out := f.apply(t, helmOpDoc("web", repo.URL, "web", "~1", "helmop-web", "  helmSecretName: web-helm\n"))
	assert.Contains(t, out, "helmop/fleet-default/web created")

	st := f.waitFor(t, "helmop/web", "1.0.0 deployed", helmOpAt("1.0.0", 2))
	assert.Equal(t, repo.URL+"/web", st.Repo)
	for _, c := range []string{"cluster-1", "cluster-2"} {
		assert.Equal(t, "1.0.0", f.cmValue(t, c, "helmop-web", "web", "version"), c)
		assert.Equal(t, "hello", f.cmValue(t, c, "helmop-web", "web", "greeting"), c)
	}

	repo.publish(t, "1.1.0")
	f.waitForWithin(t, "helmop/web", "the next poll upgrades to 1.1.0", 30*time.Second, helmOpAt("1.1.0", 2))
	for _, c := range []string{"cluster-1", "cluster-2"} {
		assert.Equal(t, "1.1.0", f.cmValue(t, c, "helmop-web", "web", "version"), c)
		assert.Equal(t, 2, f.releaseRevisions(t, c, "helmop-web", "web"), c)
	}
	listed := f.cli(t, "get", "helmops")
	assert.Regexp(t, `fleet-default\s+web\s+`+repo.URL+`/web\s+1\.1\.0`, listed)
	assert.Contains(t, f.cli(t, "status", "helmop/web"), "Version:  1.1.0")

	repo.publish(t, "2.0.0")
	polled := repo.hits()
	require.Eventually(t, func() bool { return repo.hits() >= polled+3 }, 30*time.Second, 200*time.Millisecond, "three more polls")
	st = f.status(t, "helmop/web")
	assert.Equal(t, "1.1.0", st.Version, "2.0.0 does not match ~1")
	assert.Equal(t, "1.1.0", st.LatestCommit)
	for _, c := range []string{"cluster-1", "cluster-2"} {
		assert.Equal(t, 2, f.releaseRevisions(t, c, "helmop-web", "web"), c)
	}

	out = f.cli(t, "delete", "helmop/web", "--timeout", "3m")
	assert.Contains(t, out, "helmop/fleet-default/web deleted")
	_, found := f.configMap(t, "cluster-1", "helmop-web", "web")
	assert.False(t, found, "delete uninstalls the release")
}

func (r *chartRepo) hits() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.indexHits
}

// A constraint resolves against the registry's tags.
func testHelmOpOCI(t *testing.T, f *failureFleet, reg *ociRegistry) {
	reg.push(t, "api", "1.0.0", "1.2.0", "2.0.0")
	f.apply(t, helmOpDoc("api", "", "oci://"+reg.host+"/charts/api", "^1", "helmop-api", ""))
	f.waitFor(t, "helmop/api", "1.2.0 deployed", helmOpAt("1.2.0", 2))
	assert.Equal(t, "1.2.0", f.cmValue(t, "cluster-2", "helmop-api", "api", "version"))
}

func testHelmOpBadConstraint(t *testing.T, f *failureFleet) {
	_, stderr, err := f.cliErr(t, "apply", "-f", writeTemp(t, "bad.yaml", helmOpDoc("bad", "https://charts.example", "app", ">>1", "x", "")))
	require.Error(t, err)
	assert.Contains(t, stderr, "HelmOp fleet-default/bad")
	assert.Contains(t, stderr, "spec.helm.version")
	_, err = f.statusErr(t, "helmop/bad")
	assert.Error(t, err, "nothing was created")
}

// A repository that requires auth rejects wrong credentials; the status
// names the HelmOp and never the password.
func testHelmOpWrongCredentials(t *testing.T, f *failureFleet) {
	repo := newChartRepo(t, "locked", "helm", "right")
	repo.publish(t, "1.0.0")
	f.apply(t, basicAuthSecret("locked-helm", "helm", "wrong-password"))
	f.apply(t, helmOpDoc("locked", repo.URL, "locked", "~1", "helmop-locked", "  helmSecretName: locked-helm\n"))
	st := f.waitFor(t, "helmop/locked", "an authentication error", func(st status.GitRepo) bool { return st.Error != "" })
	assert.Contains(t, st.Error, "HelmOp fleet-default/locked")
	assert.Contains(t, strings.ToLower(st.Error), "access denied")
	assert.NotContains(t, st.Error, "wrong-password")
	assert.Empty(t, st.Deployments)
}
