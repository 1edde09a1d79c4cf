package tests

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/status"
	"github.com/flotilla-gitops/flotilla/internal/temporalx"
	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

// downstreamFleet is a fleet whose dev worker pushes rendered content to
// an OCI registry, so that an agent (pull mode) can serve cluster-2 next
// to the push-mode cluster-1.
type downstreamFleet struct {
	*fleet
	registry string
	// secrets are the plaintext Secret values applied: none may reach a
	// history or a log.
	secrets map[string]string
}

// TestDownstreamResources: fleet.yaml downstreamResources copies Secrets
// and ConfigMaps applied with `flotilla apply` in the GitRepo's namespace
// into the bundle's namespace on each cluster before it deploys (issue
// 17): in push mode and through an agent, updated when a source changes,
// removed with the bundle, failing the bundle by name when a source is
// missing, and never putting a Secret's value into Temporal or a log.
func TestDownstreamResources(t *testing.T) {
	start := time.Now()
	f := startDownstreamFleet(t)
	t.Run("PushMode", func(t *testing.T) { testDownstreamPush(t, f) })
	t.Run("MissingSource", func(t *testing.T) { testDownstreamMissing(t, f) })
	t.Run("PullMode", func(t *testing.T) { testDownstreamPull(t, f) })
	t.Run("NoPlaintext", func(t *testing.T) { testDownstreamNoPlaintext(t, f) })
	t.Logf("TestDownstreamResources ran in %s", time.Since(start).Round(time.Second))
}

// startDownstreamFleet starts two clusters, a registry, a Git server and
// the dev worker; cluster-1 is added in push mode, cluster-2 waits for
// its agent.
func startDownstreamFleet(t *testing.T) *downstreamFleet {
	t.Helper()
	if testing.Short() {
		t.Skip("starts kube-apiservers, a Temporal dev server, a registry and a Git server")
	}
	start := time.Now()
	reg := httptest.NewServer(ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(reg.Close)
	f := &downstreamFleet{fleet: &fleet{t: t, stateDir: t.TempDir()}, secrets: map[string]string{},
		registry: "oci://" + strings.TrimPrefix(reg.URL, "http://") + "/flotilla/content"}
	f.clusters = testenv.StartClusters(t, 2, testenv.Options{})
	f.git = testenv.NewGitServer(t, testenv.GitServerOptions{})
	f.w = startDevWorker(t, f.stateDir, "--content-registry", f.registry, "--content-registry-plain-http")
	f.logs = append(f.logs, f.w.proc.LogPath())
	out := f.cli(t, "cluster", "add", "cluster-1", "--kubeconfig", f.clusters[0].KubeconfigPath, "--label", "env=dev")
	require.Contains(t, out, "cluster/cluster-1 created")
	t.Logf("fleet ready in %s", time.Since(start).Round(time.Millisecond))
	return f
}

// secretValue returns a new random value, remembered for the audit.
func (f *downstreamFleet) secretValue(what string) string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	v := "pw-" + hex.EncodeToString(b)
	f.secrets[what] = v
	return v
}

func secretDoc(name, password string) string {
	return "apiVersion: v1\nkind: Secret\nmetadata:\n  name: " + name + "\ntype: Opaque\nstringData:\n  username: app\n  password: " + password + "\n"
}

func sourceConfigMapDoc(name, mode string) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\ndata:\n  mode: " + mode + "\n"
}

// downstreamFleetYAML puts a bundle into namespace ns and copies the
// given "Kind/name" sources.
func downstreamFleetYAML(ns string, sources ...string) string {
	s := "namespace: " + ns + "\ndownstreamResources:\n"
	for _, src := range sources {
		kind, name, _ := strings.Cut(src, "/")
		s += "- kind: " + kind + "\n  name: " + name + "\n"
	}
	return s
}

// copiedSecret returns Secret ns/name on cluster, or nil.
func copiedSecret(t testing.TB, c *testenv.Cluster, ns, name string) *corev1.Secret {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := c.Clientset(t).CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(t, err)
	return s
}

func copiedConfigMap(t testing.TB, c *testenv.Cluster, ns, name string) *corev1.ConfigMap {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := c.Clientset(t).CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(t, err)
	return m
}

func testDownstreamPush(t *testing.T, f *downstreamFleet) {
	const name, ns = "ds-push", "ds-push"
	bundle := name + "-app"
	v1 := f.secretValue("db-creds v1")
	f.apply(t, secretDoc("db-creds", v1)+"---\n"+sourceConfigMapDoc("settings", "fast"))
	repo := f.git.CreateRepo(t, name, map[string]string{
		"app/fleet.yaml": downstreamFleetYAML(ns, "Secret/db-creds", "ConfigMap/settings"),
		"app/cm.yaml":    configMapDoc("app", "uses db-creds"),
	})
	f.apply(t, gitRepoDoc(name, repo.URL(), clusterTarget("cluster-1")))
	st := f.waitFor(t, name, "Ready on cluster-1", func(st status.GitRepo) bool { return is(st, bundle, "cluster-1", status.Ready) })
	first := dep(t, st, bundle, "cluster-1").DeploymentID

	c1 := f.cluster("cluster-1")
	sec := copiedSecret(t, c1, ns, "db-creds")
	require.NotNil(t, sec, "the Secret is copied into the bundle's namespace")
	assert.Equal(t, v1, string(sec.Data["password"]))
	assert.Equal(t, "app", string(sec.Data["username"]))
	assert.Equal(t, corev1.SecretTypeOpaque, sec.Type)
	assert.Equal(t, "true", sec.Labels["flotilla.dev/downstream-copy"])
	assert.Equal(t, "flotilla", sec.Labels["app.kubernetes.io/managed-by"])
	assert.Equal(t, bundle, sec.Labels["downstream.flotilla.dev/"+bundle], "labelled with the bundle of the release that copies it")
	assert.Equal(t, "Secret fleet-default/db-creds", sec.Annotations["flotilla.dev/downstream-source"])
	assert.Empty(t, sec.Labels["flotilla.dev/bundle"], "not an object of the release: drift does not see it as orphaned")
	cm := copiedConfigMap(t, c1, ns, "settings")
	require.NotNil(t, cm)
	assert.Equal(t, map[string]string{"mode": "fast"}, cm.Data)
	require.NotNil(t, copiedConfigMap(t, c1, ns, "app"), "the bundle itself deployed")

	// A changed Secret is a new deployment ID: the bundle redeploys and
	// the copy follows. (Applying it already tells the GitRepos of the
	// namespace; the sync makes sure and waits for it.)
	v2 := f.secretValue("db-creds v2")
	f.apply(t, secretDoc("db-creds", v2))
	f.sync(t, name)
	st = f.waitFor(t, name, "redeployed with the new Secret", func(st status.GitRepo) bool {
		d, ok := deploymentOn(st, bundle, "cluster-1")
		return ok && d.State == status.Ready && d.DeploymentID != first && d.AppliedDeploymentID == d.DeploymentID
	})
	assert.Equal(t, v2, string(copiedSecret(t, c1, ns, "db-creds").Data["password"]))
	second := dep(t, st, bundle, "cluster-1").DeploymentID
	assert.Equal(t, strings.Split(first, ":")[0], strings.Split(second, ":")[0], "same manifest, new options")

	// A copy edited on the cluster is restored by the next deploy.
	cs := c1.Clientset(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cm.Data["mode"] = "by-hand"
	_, err := cs.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
	require.NoError(t, err)
	f.sync(t, name)
	assert.Equal(t, "fast", copiedConfigMap(t, c1, ns, "settings").Data["mode"])

	// Removing the GitRepo removes the copies with the release.
	f.remove(t, name)
	assert.Nil(t, copiedSecret(t, c1, ns, "db-creds"), "the copy goes with the bundle")
	assert.Nil(t, copiedConfigMap(t, c1, ns, "settings"))
}

func testDownstreamMissing(t *testing.T, f *downstreamFleet) {
	const name, ns = "ds-missing", "ds-missing"
	bundle := name + "-app"
	repo := f.git.CreateRepo(t, name, map[string]string{
		"app/fleet.yaml": downstreamFleetYAML(ns, "Secret/not-there"),
		"app/cm.yaml":    configMapDoc("app", "x"),
	})
	f.apply(t, gitRepoDoc(name, repo.URL(), clusterTarget("cluster-1")))
	st := f.waitFor(t, name, "ErrApplied on cluster-1", func(st status.GitRepo) bool {
		return is(st, bundle, "cluster-1", status.ErrApplied)
	})
	d := dep(t, st, bundle, "cluster-1")
	assert.Equal(t, "Invalid", string(d.Outcome))
	for _, want := range []string{"Secret not-there", "namespace fleet-default", "bundle " + bundle, "cluster cluster-1"} {
		assert.Contains(t, d.Message, want)
	}
	assert.Nil(t, copiedConfigMap(t, f.cluster("cluster-1"), ns, "app"), "nothing deployed")

	// No hot loop: nothing runs again until something changes.
	c := f.w.client(t)
	rollouts := countRollouts(t, c, name)
	time.Sleep(5 * time.Second)
	assert.Equal(t, rollouts, countRollouts(t, c, name), "no rollout while nothing changed")

	// Applying the Secret tells the namespace's GitRepos: the bundle
	// deploys without a sync.
	f.apply(t, secretDoc("not-there", f.secretValue("not-there")))
	f.waitFor(t, name, "Ready once the Secret exists", func(st status.GitRepo) bool { return is(st, bundle, "cluster-1", status.Ready) })
	require.NotNil(t, copiedSecret(t, f.cluster("cluster-1"), ns, "not-there"))
	f.remove(t, name)
}

// countRollouts counts the rollout runs of GitRepo name.
func countRollouts(t testing.TB, c client.Client, name string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n := 0
	q := "WorkflowType = '" + protocol.RolloutWorkflow + "' AND " + temporalx.KeyGitRepo.GetName() + " = 'fleet-default/" + name + "'"
	require.NoError(t, temporalx.EachWorkflow(ctx, c, q, func(string) error { n++; return nil }))
	return n
}

func testDownstreamPull(t *testing.T, f *downstreamFleet) {
	const name, ns = "ds-pull", "ds-pull"
	bundle := name + "-app"
	var tok struct {
		Token string `json:"token"`
	}
	out := f.cli(t, "cluster", "token", "create", "--ttl", "10m", "-o", "json")
	require.NoError(t, json.Unmarshal([]byte(out), &tok), out)
	c2 := f.clusters[1]
	// The fleet's test owns the agent: its log outlives this subtest for
	// the audit.
	agent := testenv.StartProcess(f.t, testenv.ProcessOptions{Name: "flotilla-agent-cluster-2", Path: bins.worker,
		Args: []string{"agent", "--cluster", "cluster-2", "--kubeconfig", c2.KubeconfigPath, "--temporal-address", f.w.frontend,
			"--state-dir", f.t.TempDir(), "--heartbeat-interval", "1s", "--http-listen", "127.0.0.1:0",
			"--content-registry", f.registry, "--content-registry-plain-http"},
		Env: []string{"FLOTILLA_REGISTRATION_TOKEN=" + tok.Token}})
	f.logs = append(f.logs, agent.LogPath())
	waitLog(t, agent, `"msg":"Agent started"`, time.Minute)

	v := f.secretValue("pull-creds")
	f.apply(t, secretDoc("pull-creds", v))
	repo := f.git.CreateRepo(t, name, map[string]string{
		"app/fleet.yaml": downstreamFleetYAML(ns, "Secret/pull-creds", "ConfigMap/settings"),
		"app/cm.yaml":    configMapDoc("app", "pulled"),
	})
	f.apply(t, gitRepoDoc(name, repo.URL(), clusterTarget("cluster-2")))
	f.waitFor(t, name, "Ready on cluster-2 (agent)", func(st status.GitRepo) bool { return is(st, bundle, "cluster-2", status.Ready) })
	sec := copiedSecret(t, c2, ns, "pull-creds")
	require.NotNil(t, sec, "the agent copied the Secret")
	assert.Equal(t, v, string(sec.Data["password"]))
	assert.Equal(t, map[string]string{"mode": "fast"}, copiedConfigMap(t, c2, ns, "settings").Data)
	data, err := os.ReadFile(f.w.proc.LogPath())
	require.NoError(t, err)
	assert.Contains(t, string(data), "Sealed downstream resources for an agent", "the controller sealed them to the agent's key")
}

func testDownstreamNoPlaintext(t *testing.T, f *downstreamFleet) {
	require.NotEmpty(t, f.secrets)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n, found := auditHistories(ctx, t, f.w.client(t), f.secrets)
	assert.Empty(t, found, "plaintext Secret values in workflow histories")
	assert.Positive(t, n)
	for _, p := range f.logs {
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		for what, v := range f.secrets {
			assert.NotContains(t, string(data), v, "%s in log %s", what, p)
		}
	}
	t.Logf("audited %d runs and %d logs", n, len(f.logs))
}
