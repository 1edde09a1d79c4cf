package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/flotilla-gitops/flotilla/internal/crds"
	"github.com/flotilla-gitops/flotilla/internal/kubenative"
	"github.com/flotilla-gitops/flotilla/internal/status"
	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

// mgmtFleet is a fleet (dev worker, two downstream clusters registered
// with env=dev, a Git server) plus a management cluster with Fleet's CRDs
// served by two controller replicas started with --management-kubeconfig.
type mgmtFleet struct {
	*fleet
	mgmt     *testenv.Cluster
	k        crdKubectl
	dyn      dynamic.Interface
	keys     string
	replicas [2]*testenv.Process
	// authGit serves repositories behind basic auth (mgmtPassword).
	authGit *testenv.GitServer
}

const (
	mgmtPassword  = "mgmt-Git-Pa55word-8d2e"
	mgmtWrongPass = "mgmt-Wrong-Pa55word-11f0"
)

func startMgmtFleet(t *testing.T) *mgmtFleet {
	f := &mgmtFleet{fleet: startFleetWith(t, 2, 2, testenv.Options{Sim: true})}
	f.mgmt = testenv.StartClusters(t, 1, testenv.Options{})[0]
	f.authGit = testenv.NewGitServer(t, testenv.GitServerOptions{Username: "bot", Password: mgmtPassword})
	require.NoError(t, crds.Install(t.Context(), f.mgmt.RESTConfig()))
	for _, ns := range []string{"fleet-default", "fleet-local", "flotilla-system", "burst"} {
		_, err := f.mgmt.Clientset(t).CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	dyn, err := dynamic.NewForConfig(f.mgmt.RESTConfig())
	require.NoError(t, err)
	f.dyn = dyn
	f.k = crdKubectl{bin: filepath.Join(testenv.Binaries(t), "kubectl"), kubeconfig: f.mgmt.KubeconfigPath, cacheDir: t.TempDir()}
	f.keys = filepath.Join(f.stateDir, "seal-keys") // the dev worker's: every controller opens what another sealed
	for i := range f.replicas {
		f.startReplica(t, i)
	}
	return f
}

// startReplica starts controller replica i serving the management cluster.
func (f *mgmtFleet) startReplica(t *testing.T, i int) {
	t.Helper()
	p := testenv.StartProcess(f.t, testenv.ProcessOptions{Name: fmt.Sprintf("flotilla-management-%d", i), Path: bins.worker,
		Args: []string{"--temporal-address", f.w.frontend, "--state-dir", f.t.TempDir(), "--seal-keys", f.keys,
			"--webhook-listen", "127.0.0.1:0", "--management-kubeconfig", f.mgmt.KubeconfigPath,
			"--management-namespace", "flotilla-system", "--management-lease-duration", "3s"}})
	f.replicas[i] = p
	f.logs = append(f.logs, p.LogPath())
	waitLog(t, p, `"msg":"Worker started"`, time.Minute)
}

// leader returns the index of the replica holding the Lease.
func (f *mgmtFleet) leader(t *testing.T) int {
	t.Helper()
	var holder string
	require.Eventually(t, func() bool {
		l, err := f.mgmt.Clientset(t).CoordinationV1().Leases("flotilla-system").Get(t.Context(), kubenative.LeaseName, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return false
		}
		holder = *l.Spec.HolderIdentity
		return holder != ""
	}, 30*time.Second, 100*time.Millisecond, "a replica holds the Lease")
	for i, p := range f.replicas {
		if strings.HasSuffix(holder, fmt.Sprintf("_%d", p.PID())) {
			return i
		}
	}
	t.Fatalf("the Lease holder %q is no replica", holder)
	return -1
}

// statusIn is `flotilla -n NS status NAME -o json`.
func (f *mgmtFleet) statusIn(t *testing.T, ns, name string) (status.GitRepo, error) {
	var st status.GitRepo
	stdout, stderr, err := f.cliErr(t, "-n", ns, "status", name, "-o", "json")
	if err != nil {
		return st, fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr))
	}
	return st, json.Unmarshal([]byte(stdout), &st)
}

// waitIn polls the status of GitRepo ns/name until cond holds.
func (f *mgmtFleet) waitIn(t *testing.T, ns, name, what string, timeout time.Duration, cond func(status.GitRepo) bool) status.GitRepo {
	t.Helper()
	var last status.GitRepo
	var lastErr error
	ok := assert.Eventually(t, func() bool {
		last, lastErr = f.statusIn(t, ns, name)
		return lastErr == nil && cond(last)
	}, timeout, 250*time.Millisecond)
	if !ok {
		out, _ := json.MarshalIndent(last, "", "  ")
		t.Fatalf("GitRepo %s/%s: %s: not within %s (last error %v)\nstatus: %s", ns, name, what, timeout, lastErr, out)
	}
	return last
}

// settledReady: the GitRepo rolled out its newest spec and commit and
// every one of want deployments is Ready.
func settledReady(want int) func(status.GitRepo) bool {
	return func(st status.GitRepo) bool {
		return st.Settled && st.Error == "" && st.Commit != "" && st.Commit == st.LatestCommit && st.ObservedGeneration == st.Generation &&
			st.Summary.State == status.Ready && st.Summary.Ready == want && st.Summary.Desired == want
	}
}

// configMapValue reads data.value of a ConfigMap of a downstream cluster
// ("" when absent).
func configMapValue(t *testing.T, c *testenv.Cluster, ns, name string) string {
	t.Helper()
	cm, err := c.Clientset(t).CoreV1().ConfigMaps(ns).Get(t.Context(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return ""
	}
	require.NoError(t, err)
	return cm.Data["value"]
}

// fleetExampleRepo serves fleet-examples' single-cluster/manifests as it
// is, and returns its README's GitRepo document with repo pointed at it.
func (f *mgmtFleet) fleetExampleRepo(t *testing.T) string {
	root := testenv.SharedDir(t, "fleet-examples")
	files := map[string]string{}
	dir := filepath.Join(root, "single-cluster", "manifests")
	require.NoError(t, filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		rel, _ := filepath.Rel(root, p) // p is under root
		files[filepath.ToSlash(rel)] = string(data)
		return err
	}))
	repo := f.git.CreateRepo(t, "fleet-examples", files)
	readme := files["single-cluster/manifests/README.md"]
	doc := readme[strings.Index(readme, "```yaml\n")+len("```yaml\n"):]
	doc = doc[:strings.Index(doc, "```")]
	require.Contains(t, doc, "repo: https://github.com/rancher/fleet-examples")
	return strings.Replace(doc, "https://github.com/rancher/fleet-examples", repo.URL(), 1)
}

var mgmtGitRepos = schema.GroupVersionResource{Group: crds.Group, Version: crds.Version, Resource: "gitrepos"}

// TestKubeNative: GitRepos applied with kubectl to a management cluster
// deploy, change, pause, redeploy and delete as Fleet's do, their
// Secrets reach Temporal only sealed, the CLI may not change them, and
// two controller replicas, one killed during a burst, deploy every
// GitRepo once.
func TestKubeNative(t *testing.T) {
	f := startMgmtFleet(t)
	down := f.clusters[:2]
	// The default group Fleet's examples target (they name no targets).
	f.k.run(t, "apiVersion: fleet.cattle.io/v1alpha1\nkind: ClusterGroup\nmetadata: {name: default, namespace: fleet-local}\n"+
		"spec: {selector: {matchLabels: {env: dev}}}\n", "apply", "-f", "-")

	t.Run("FleetExampleDeploys", func(t *testing.T) {
		doc := f.fleetExampleRepo(t)
		f.k.run(t, doc, "apply", "-f", "-")
		st := f.waitIn(t, "fleet-local", "manifests", "deployed from kubectl apply", 2*time.Minute, settledReady(2))
		assert.Equal(t, "kubernetes", st.ManagedBy)
		for _, c := range down {
			_, err := c.Clientset(t).AppsV1().Deployments("fleet-manifest-example").Get(t.Context(), "frontend", metav1.GetOptions{})
			assert.NoError(t, err, "the guestbook's frontend on %s", c.Name)
		}
		obj, err := f.dyn.Resource(mgmtGitRepos).Namespace("fleet-local").Get(t.Context(), "manifests", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Contains(t, obj.GetFinalizers(), kubenative.FinalizerGitRepo)
		f.k.run(t, "", "wait", "--for=condition=Ready", "gitrepo/manifests", "-n", "fleet-local", "--timeout=60s")

		// The CLI reads it and syncs it, but may not change it.
		_, stderr, err := f.cliErr(t, "apply", "-f", writeTemp(t, "manifests.yaml", doc))
		require.Error(t, err)
		assert.Contains(t, stderr, "GitRepo fleet-local/manifests is managed from the management cluster (kubectl): change it there, or delete it there first")
		for _, verb := range []string{"pause", "resume", "delete"} {
			_, stderr, err := f.cliErr(t, "-n", "fleet-local", verb, "manifests")
			require.Error(t, err, verb)
			assert.Contains(t, stderr, "is managed from the management cluster (kubectl)", verb)
		}
		f.cli(t, "-n", "fleet-local", "sync", "manifests")
	})

	repo := f.git.CreateRepo(t, "kn-app", map[string]string{
		"a/fleet.yaml": fleetYAML("kn-app"), "a/cm.yaml": configMapDoc("kn-a", "v1"),
		"b/fleet.yaml": fleetYAML("kn-app"), "b/cm.yaml": configMapDoc("kn-b", "v1"),
	})
	appDoc := func(spec string) string {
		return "apiVersion: fleet.cattle.io/v1alpha1\nkind: GitRepo\nmetadata: {name: kn-app, namespace: fleet-default}\nspec:\n  repo: " +
			repo.URL() + "\n  pollingInterval: 1s\n" + selectorTarget("env", "dev") + spec
	}
	t.Run("PathsEditRollsOut", func(t *testing.T) {
		f.k.run(t, appDoc("  paths: [a]\n"), "apply", "-f", "-")
		f.waitIn(t, "fleet-default", "kn-app", "path a deployed", time.Minute, settledReady(2))
		assert.Empty(t, configMapValue(t, down[0], "kn-app", "kn-b"))
		f.k.run(t, appDoc("  paths: [a, b]\n"), "apply", "-f", "-")
		f.waitIn(t, "fleet-default", "kn-app", "paths a and b deployed", time.Minute, settledReady(4))
		for _, c := range down {
			assert.Equal(t, "v1", configMapValue(t, c, "kn-app", "kn-b"), c.Name)
		}
	})

	t.Run("ForceSyncGenerationRedeploys", func(t *testing.T) {
		before := helmRevisions(t, down[0], "kn-app", "kn-app-a")
		require.Positive(t, before)
		gen := f.waitIn(t, "fleet-default", "kn-app", "settled", time.Minute, settledReady(4)).Generation
		f.k.run(t, appDoc("  paths: [a, b]\n  forceSyncGeneration: 1\n"), "apply", "-f", "-")
		f.waitIn(t, "fleet-default", "kn-app", "redeployed", time.Minute, func(st status.GitRepo) bool {
			return st.Generation == gen+1 && settledReady(4)(st)
		})
		for _, c := range down {
			assert.Equal(t, before+1, helmRevisions(t, c, "kn-app", "kn-app-a"), c.Name)
		}
	})

	t.Run("PausedHolds", func(t *testing.T) {
		f.k.run(t, appDoc("  paths: [a, b]\n  forceSyncGeneration: 1\n  paused: true\n"), "apply", "-f", "-")
		f.waitIn(t, "fleet-default", "kn-app", "paused", time.Minute, func(st status.GitRepo) bool { return st.Paused })
		held := repo.Push(t, map[string]string{"a/cm.yaml": configMapDoc("kn-a", "v2")}, "v2")
		st := f.waitIn(t, "fleet-default", "kn-app", "the new commit seen", time.Minute, func(st status.GitRepo) bool { return st.LatestCommit == held })
		assert.NotEqual(t, held, st.Commit, "a paused GitRepo rolls nothing out")
		assert.Never(t, func() bool { return configMapValue(t, down[0], "kn-app", "kn-a") != "v1" }, 3*time.Second, 250*time.Millisecond,
			"a paused GitRepo deploys nothing")
		f.k.run(t, appDoc("  paths: [a, b]\n  forceSyncGeneration: 1\n"), "apply", "-f", "-")
		f.waitIn(t, "fleet-default", "kn-app", "resumed", time.Minute, func(st status.GitRepo) bool { return st.Commit == held && settledReady(4)(st) })
		assert.Equal(t, "v2", configMapValue(t, down[0], "kn-app", "kn-a"))
	})

	t.Run("ClientSecretChanged", func(t *testing.T) {
		private := f.authGit.CreateRepo(t, "private", map[string]string{"fleet.yaml": fleetYAML("kn-private"), "cm.yaml": configMapDoc("private", "v1")})
		secret := func(password string) string {
			return "apiVersion: v1\nkind: Secret\nmetadata: {name: git-creds, namespace: fleet-default}\ntype: kubernetes.io/basic-auth\n" +
				"stringData: {username: bot, password: " + password + "}\n"
		}
		f.k.run(t, secret(mgmtWrongPass), "apply", "-f", "-")
		f.k.run(t, "apiVersion: fleet.cattle.io/v1alpha1\nkind: GitRepo\nmetadata: {name: private, namespace: fleet-default}\nspec:\n  repo: "+
			private.URL()+"\n  clientSecretName: git-creds\n  pollingInterval: 1s\n"+selectorTarget("env", "dev"), "apply", "-f", "-")
		f.waitIn(t, "fleet-default", "private", "the wrong password refused", time.Minute, func(st status.GitRepo) bool { return st.Error != "" })
		f.k.run(t, secret(mgmtPassword), "apply", "-f", "-")
		f.waitIn(t, "fleet-default", "private", "fetched with the changed Secret", time.Minute, settledReady(2))
		assert.Equal(t, "v1", configMapValue(t, down[1], "kn-private", "private"))
		n, found := auditHistories(t.Context(), t, f.w.client(t), map[string]string{"git password": mgmtPassword, "wrong git password": mgmtWrongPass})
		assert.Positive(t, n)
		assert.Empty(t, found, "a Secret's plaintext in a history")
	})

	t.Run("DownstreamResourcesLabelled", func(t *testing.T) {
		const token = "mgmt-downstream-t0ken-5ab1"
		f.k.run(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: fleet-default, labels: {flotilla.dev/downstream: \"true\"}}\n"+
			"data: {mode: one}\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: api-token, namespace: fleet-default, labels: {flotilla.dev/downstream: \"true\"}}\n"+
			"stringData: {token: "+token+"}\n", "apply", "-f", "-")
		ds := f.git.CreateRepo(t, "kn-downstream", map[string]string{
			"fleet.yaml": downstreamFleetYAML("kn-downstream", "ConfigMap/settings", "Secret/api-token"), "cm.yaml": configMapDoc("ds", "v1")})
		f.k.run(t, "apiVersion: fleet.cattle.io/v1alpha1\nkind: GitRepo\nmetadata: {name: kn-downstream, namespace: fleet-default}\nspec:\n  repo: "+
			ds.URL()+"\n"+selectorTarget("env", "dev"), "apply", "-f", "-")
		f.waitIn(t, "fleet-default", "kn-downstream", "deployed with its downstream resources", time.Minute, settledReady(2))
		for _, c := range down {
			sec := copiedSecret(t, c, "kn-downstream", "api-token")
			require.NotNil(t, sec, c.Name)
			assert.Equal(t, token, string(sec.Data["token"]))
			cm, err := c.Clientset(t).CoreV1().ConfigMaps("kn-downstream").Get(t.Context(), "settings", metav1.GetOptions{})
			require.NoError(t, err)
			assert.Equal(t, "one", cm.Data["mode"])
		}
		f.k.run(t, "", "patch", "configmap", "settings", "-n", "fleet-default", "--type=merge", "-p", `{"data":{"mode":"two"}}`)
		require.Eventually(t, func() bool {
			cm, err := down[0].Clientset(t).CoreV1().ConfigMaps("kn-downstream").Get(t.Context(), "settings", metav1.GetOptions{})
			return err == nil && cm.Data["mode"] == "two"
		}, time.Minute, 250*time.Millisecond, "a changed ConfigMap is copied again")
		_, found := auditHistories(t.Context(), t, f.w.client(t), map[string]string{"downstream token": token})
		assert.Empty(t, found, "a downstream Secret's plaintext in a history")
		f.k.run(t, "", "delete", "gitrepo", "kn-downstream", "-n", "fleet-default", "--timeout=90s")
	})

	t.Run("HelmOpWithSecret", func(t *testing.T) {
		charts := newChartRepo(t, "kn-web", "helm", mgmtPassword)
		charts.publish(t, "1.0.0")
		f.k.run(t, basicAuthSecret("kn-web-helm", "helm", mgmtPassword), "apply", "-n", "fleet-default", "-f", "-")
		f.k.run(t, helmOpDoc("kn-web", charts.URL, "kn-web", "~1", "kn-helmop", "  helmSecretName: kn-web-helm\n"), "apply", "-n", "fleet-default", "-f", "-")
		f.waitIn(t, "fleet-default", "helmop/kn-web", "the chart deployed", time.Minute, func(st status.GitRepo) bool {
			return st.Version == "1.0.0" && st.ManagedBy == "kubernetes" && settledReady(2)(st)
		})
		for _, c := range down {
			cm, err := c.Clientset(t).CoreV1().ConfigMaps("kn-helmop").Get(t.Context(), "kn-web", metav1.GetOptions{})
			require.NoError(t, err, c.Name)
			assert.Equal(t, "1.0.0", cm.Data["version"])
		}
		f.k.run(t, "", "delete", "helmop", "kn-web", "-n", "fleet-default", "--timeout=90s")
		for _, c := range down {
			_, err := c.Clientset(t).CoreV1().ConfigMaps("kn-helmop").Get(t.Context(), "kn-web", metav1.GetOptions{})
			assert.True(t, apierrors.IsNotFound(err), "the HelmOp's deletion uninstalled it from %s", c.Name)
		}
	})

	t.Run("DeleteKeepsOrRemoves", func(t *testing.T) {
		f.k.run(t, "", "patch", "gitrepo", "private", "-n", "fleet-default", "--type=merge", "-p", `{"spec":{"keepResources":true}}`)
		f.waitIn(t, "fleet-default", "private", "keepResources applied", time.Minute, settledReady(2))
		f.k.run(t, "", "delete", "gitrepo", "private", "-n", "fleet-default", "--timeout=90s")
		f.k.run(t, "", "delete", "gitrepo", "kn-app", "-n", "fleet-default", "--timeout=90s")
		for _, c := range down {
			assert.Equal(t, "v1", configMapValue(t, c, "kn-private", "private"), "keepResources keeps %s's objects", c.Name)
			assert.Empty(t, configMapValue(t, c, "kn-app", "kn-a"), "deletion removes %s's objects", c.Name)
			assert.Zero(t, helmRevisions(t, c, "kn-app", "kn-app-a"))
		}
		for _, id := range []string{"gitrepo/fleet-default/kn-app", "gitrepo/fleet-default/private"} {
			d, err := f.w.client(t).DescribeWorkflowExecution(t.Context(), id, "")
			require.NoError(t, err)
			assert.Equal(t, enums.WORKFLOW_EXECUTION_STATUS_COMPLETED, d.GetWorkflowExecutionInfo().GetStatus(), "%s ended", id)
		}
		for _, name := range []string{"private", "kn-app"} {
			_, err := f.dyn.Resource(mgmtGitRepos).Namespace("fleet-default").Get(t.Context(), name, metav1.GetOptions{})
			assert.True(t, apierrors.IsNotFound(err), "the finalizer of %s was removed", name)
		}
	})

	t.Run("TeamPolicy", func(t *testing.T) { testTeamPolicy(t, f) })

	t.Run("LeaderKilledDuringBurst", func(t *testing.T) {
		const n = 20
		files := map[string]string{}
		var docs []string
		for i := range n {
			files[fmt.Sprintf("d%02d/fleet.yaml", i)] = fleetYAML("burst")
			files[fmt.Sprintf("d%02d/cm.yaml", i)] = configMapDoc(fmt.Sprintf("burst-%02d", i), "v1")
			docs = append(docs, fmt.Sprintf("apiVersion: fleet.cattle.io/v1alpha1\nkind: GitRepo\nmetadata: {name: b%02d, namespace: burst}\n"+
				"spec:\n  repo: %s\n  paths: [d%02d]\n%s", i, "%s", i, selectorTarget("env", "dev")))
		}
		burst := f.git.CreateRepo(t, "burst", files)
		for i := range docs {
			docs[i] = fmt.Sprintf(docs[i], burst.URL())
		}
		lead := f.leader(t)
		f.k.run(t, strings.Join(docs, "---\n"), "apply", "-f", "-")
		waitLog(t, f.replicas[lead], `"namespace":"burst"`, 30*time.Second)
		kill9(t, f.replicas[lead])
		for i := range n {
			f.waitIn(t, "burst", fmt.Sprintf("b%02d", i), "deployed after the leader was killed", 2*time.Minute, settledReady(2))
		}
		for i := range n {
			for _, c := range down {
				assert.Equal(t, 1, helmRevisions(t, c, "burst", fmt.Sprintf("b%02d-d%02d", i, i)), "b%02d on %s deployed once", i, c.Name)
			}
		}
		assert.Equal(t, 1-lead, f.leader(t), "the other replica leads")
	})
}
