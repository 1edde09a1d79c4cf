package tests

import (
	"context"

	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/flotilla-gitops/flotilla/internal/status"
	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

// The log lines of issue 15.
const (
	logCorrected     = "Corrected drift"
	logCorrectFailed = "Drift correction failed"
)

// driftWait bounds the waits for drift to show or be corrected: the goal
// is about 2 s; the machine is shared with other tests.
const driftWait = 15 * time.Second

// TestDrift checks that clusters keep matching Git (issue 15) on one
// fleet of two push-mode clusters whose Deployments become ready (Sim).
// Each scenario deploys its own GitRepo into its own namespace.
func TestDrift(t *testing.T) {
	start := time.Now()
	f := &failureFleet{fleet: startFleetWith(t, 2, 2, testenv.Options{Sim: true})}
	t.Run("Detection", func(t *testing.T) { testDriftDetection(t, f) })
	t.Run("Correction", func(t *testing.T) { testDriftCorrection(t, f) })
	t.Run("ComparePatches", func(t *testing.T) { testDriftComparePatches(t, f) })
	t.Run("FleetYAMLOverridesGitRepo", func(t *testing.T) { testDriftFleetYAMLOverride(t, f) })
	t.Run("ScalerAndForce", func(t *testing.T) { testDriftScalerAndForce(t, f) })
	t.Run("LiveReadiness", func(t *testing.T) { testDriftLiveReadiness(t, f) })
	t.Run("KillDuringCorrection", func(t *testing.T) { testDriftKillDuringCorrection(t, f) })
	t.Logf("TestDrift ran in %s", time.Since(start).Round(time.Second))
}

// kube returns a clientset of cluster and a context for one call.
func (f *failureFleet) kube(t testing.TB, cluster string) (kubernetes.Interface, context.Context) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return f.cluster(cluster).Clientset(t), ctx
}

// editConfigMap sets data[key] of ConfigMap ns/name on cluster by hand,
// as kubectl edit does.
func (f *failureFleet) editConfigMap(t testing.TB, cluster, ns, name, key, value string) {
	t.Helper()
	cs, ctx := f.kube(t, cluster)
	cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	cm.Data[key] = value
	_, err = cs.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{FieldManager: "kubectl-edit"})
	require.NoError(t, err)
}

// cmValue returns data[key] of ConfigMap ns/name on cluster ("" when the
// ConfigMap does not exist).
func (f *failureFleet) cmValue(t testing.TB, cluster, ns, name, key string) string {
	t.Helper()
	cm, ok := f.configMap(t, cluster, ns, name)
	if !ok {
		return ""
	}
	return cm.Data[key]
}

// patchJSON applies a JSON merge patch to an object on cluster by hand.
func (f *failureFleet) patch(t testing.TB, cluster, path, patch string) {
	t.Helper()
	cs, ctx := f.kube(t, cluster)
	err := cs.CoreV1().RESTClient().Patch(types.MergePatchType).AbsPath(path).
		Param("fieldManager", "kubectl-edit").Body([]byte(patch)).Do(ctx).Error()
	require.NoError(t, err, "patch %s", path)
}

// modifiedEntry returns the drift entry of object ("Kind ns/name") of a
// deployment.
func modifiedEntry(d status.Deployment, object string) (status.ModifiedStatus, bool) {
	for _, m := range d.ModifiedStatus {
		if m.Object() == object {
			return m, true
		}
	}
	return status.ModifiedStatus{}, false
}

// deployReady applies a GitRepo of the files and waits until bundle is
// Ready on cluster-1 and cluster-2; it returns the status.
func (f *failureFleet) deployReady(t testing.TB, name, spec string, files map[string]string, bundle string) status.GitRepo {
	t.Helper()
	repo := f.git.CreateRepo(t, name, files)
	f.apply(t, gitRepoDoc(name, repo.URL(), clusterTarget("cluster-1", "cluster-2")+spec))
	return f.waitFor(t, name, bundle+" Ready on both", func(st status.GitRepo) bool {
		return is(st, bundle, "cluster-1", status.Ready) && is(st, bundle, "cluster-2", status.Ready)
	})
}

// settle waits long enough for a cluster's watch to follow a rollout that
// just finished (it learns of the release after the rollout).
func settle() { time.Sleep(3 * time.Second) }

func testDriftDetection(t *testing.T, f *failureFleet) {
	const ns, name = "drift-detect", "detect"
	bundle := name + "-app"
	f.deployReady(t, name, "", map[string]string{"app/fleet.yaml": fleetYAML(ns),
		"app/cm.yaml": configMapDoc("edited", "v1") + "---\n" + configMapDoc("deleted", "v1")}, bundle)
	settle()

	edited := time.Now()
	f.editConfigMap(t, "cluster-1", ns, "edited", "value", "by-hand")
	st := f.waitForWithin(t, name, "Modified on cluster-1", driftWait, func(st status.GitRepo) bool {
		return is(st, bundle, "cluster-1", status.Modified)
	})
	t.Logf("edit to Modified: %s", time.Since(edited).Round(time.Millisecond))
	d := dep(t, st, bundle, "cluster-1")
	if m, ok := modifiedEntry(d, "ConfigMap "+ns+"/edited"); assert.True(t, ok, "%+v", d.ModifiedStatus) {
		assert.JSONEq(t, `{"data":{"value":"v1"}}`, m.Patch, "the patch restores Git's value")
	}
	assert.Contains(t, d.Message, "cluster cluster-1")
	assert.Equal(t, 1, st.ResourceCounts.Modified)
	assert.Equal(t, 1, st.PerClusterResourceCounts["cluster-1"].Modified)
	assert.True(t, is(st, bundle, "cluster-2", status.Ready), "cluster-2 untouched")
	assert.Equal(t, "by-hand", f.cmValue(t, "cluster-1", ns, "edited", "value"), "nothing corrects without correctDrift")

	cs, ctx := f.kube(t, "cluster-1")
	require.NoError(t, cs.CoreV1().ConfigMaps(ns).Delete(ctx, "deleted", metav1.DeleteOptions{}))
	orphan := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "extra", Namespace: ns,
		Labels: map[string]string{"flotilla.dev/bundle": bundle}}, Data: map[string]string{"a": "b"}}
	_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, orphan, metav1.CreateOptions{})
	require.NoError(t, err)
	st = f.waitForWithin(t, name, "missing and orphaned on cluster-1", driftWait, func(st status.GitRepo) bool {
		d, _ := deploymentOn(st, bundle, "cluster-1")
		return d.Missing == 1 && d.Orphaned == 1 && d.Modified == 1
	})
	d = dep(t, st, bundle, "cluster-1")
	m, _ := modifiedEntry(d, "ConfigMap "+ns+"/deleted")
	assert.True(t, m.Missing, "deleted ConfigMap is missing: %+v", d.ModifiedStatus)
	m, _ = modifiedEntry(d, "ConfigMap "+ns+"/extra")
	assert.True(t, m.Delete, "the added ConfigMap is orphaned: %+v", d.ModifiedStatus)
	rc := st.ResourceCounts
	assert.Equal(t, [3]int{1, 1, 1}, [3]int{rc.Modified, rc.Missing, rc.Orphaned}, "modified, missing, orphaned")

	out := f.cli(t, "diff", name, "--cluster", "cluster-1")
	assert.Contains(t, out, "ConfigMap "+ns+"/edited")
	assert.Contains(t, out, "missing")

	// flotilla sync makes the cluster match Git again without a deploy
	// (same deployment ID): the deleted object is back and the edit
	// undone; the orphan, which Helm does not own, stays reported.
	id := dep(t, st, bundle, "cluster-1").DeploymentID
	mark := f.mark()
	f.sync(t, name)
	_, ok := f.configMap(t, "cluster-1", ns, "deleted")
	assert.True(t, ok, "sync restores the deleted object")
	assert.Equal(t, "v1", f.cmValue(t, "cluster-1", ns, "edited", "value"), "sync restores the edit")
	st = f.waitForWithin(t, name, "only the orphan left after sync", driftWait, func(st status.GitRepo) bool {
		d, _ := deploymentOn(st, bundle, "cluster-1")
		return st.Settled && d.State == status.Modified && d.Missing == 0 && d.Modified == 0 && d.Orphaned == 1
	})
	d = dep(t, st, bundle, "cluster-1")
	assert.Equal(t, id, d.AppliedDeploymentID, "the deployment ID does not change")
	lines := f.since(mark, logCorrected, "bundle", bundle)
	if assert.Len(t, lines, 1, "one %q line for the sync's repair", logCorrected) {
		assert.Equal(t, "cluster-1", lines[0].str("cluster"))
		assert.Equal(t, "sync", lines[0].str("reason"))
	}
	assert.Empty(t, f.since(mark, logDeployed, "bundle", bundle), "a sync of an unchanged commit deploys nothing")
	assert.True(t, is(st, bundle, "cluster-2", status.Ready), "cluster-2 untouched")
}

func testDriftCorrection(t *testing.T, f *failureFleet) {
	const ns, name = "drift-correct", "correct"
	bundle := name + "-app"
	st := f.deployReady(t, name, "  correctDrift:\n    enabled: true\n", map[string]string{
		"app/fleet.yaml": fleetYAML(ns) + "helm:\n  maxHistory: 3\n",
		"app/cm.yaml":    configMapDoc("kept", "v1") + "---\n" + configMapDoc("gone", "v1")}, bundle)
	id := dep(t, st, bundle, "cluster-1").DeploymentID
	settle()
	before := helmRecordCount(t, f.cluster("cluster-1"), ns, bundle)
	mark := f.mark()

	edited := time.Now()
	f.editConfigMap(t, "cluster-1", ns, "kept", "value", "by-hand")
	waitUntil(t, driftWait, "edit corrected", func() bool { return f.cmValue(t, "cluster-1", ns, "kept", "value") == "v1" })
	t.Logf("edit to restored: %s", time.Since(edited).Round(time.Millisecond))
	// The line follows Helm's last write.
	waitUntil(t, 5*time.Second, "the correction logged", func() bool { return len(f.since(mark, logCorrected, "bundle", bundle)) > 0 })
	lines := f.since(mark, logCorrected, "bundle", bundle, "cluster", "cluster-1")
	if assert.Len(t, lines, 1, "one %q line", logCorrected) {
		l := lines[0]
		assert.Equal(t, ns+"/"+bundle, l.str("release"))
		assert.Equal(t, id, l.str("deploymentID"))
		assert.Contains(t, fmt.Sprint(l["objects"]), "ConfigMap "+ns+"/kept")
	}
	assert.Equal(t, before+1, helmRecordCount(t, f.cluster("cluster-1"), ns, bundle), "one Helm record per correction")

	cs, ctx := f.kube(t, "cluster-1")
	require.NoError(t, cs.CoreV1().ConfigMaps(ns).Delete(ctx, "gone", metav1.DeleteOptions{}))
	waitUntil(t, driftWait, "deleted object restored", func() bool { _, ok := f.configMap(t, "cluster-1", ns, "gone"); return ok })
	// Edits a person makes now and then are corrected each time; only a
	// change back within seconds of each correction is a conflict.
	for i := range 3 {
		time.Sleep(6 * time.Second)
		f.editConfigMap(t, "cluster-1", ns, "kept", "value", fmt.Sprintf("again-%d", i))
		waitUntil(t, driftWait, "edit corrected", func() bool { return f.cmValue(t, "cluster-1", ns, "kept", "value") == "v1" })
	}
	st = f.waitForWithin(t, name, "Ready after corrections", driftWait, func(st status.GitRepo) bool {
		return is(st, bundle, "cluster-1", status.Ready)
	})
	d := dep(t, st, bundle, "cluster-1")
	assert.Equal(t, id, d.AppliedDeploymentID, "the deployment ID does not change")
	assert.LessOrEqual(t, helmRecordCount(t, f.cluster("cluster-1"), ns, bundle), 3, "helm.maxHistory bounds the records")
	// Each line follows its correction's last Helm write, which the
	// restored value can show first.
	corrected := func() int { return len(f.since(mark, logCorrected, "bundle", bundle, "cluster", "cluster-1")) }
	waitUntil(t, 5*time.Second, "five corrections logged", func() bool { return corrected() >= 5 })
	time.Sleep(time.Second)
	assert.Equal(t, 5, corrected(), "one line per correction")
	assert.Empty(t, f.since(mark, logDeployed, "bundle", bundle), "a correction is not a deploy")
}

func testDriftComparePatches(t *testing.T, f *failureFleet) {
	const ns, name = "drift-ignore", "ignore"
	bundle := name + "-app"
	fy := fleetYAML(ns) + "correctDrift:\n  enabled: true\ndiff:\n  comparePatches:\n  - apiVersion: v1\n    kind: ConfigMap\n" +
		"    name: ign.*\n    namespace: " + ns + "\n    operations:\n    - {op: remove, path: /data/value}\n"
	f.deployReady(t, name, "", map[string]string{"app/fleet.yaml": fy, "app/cm.yaml": configMapDoc("ignored", "v1")}, bundle)
	settle()
	f.editConfigMap(t, "cluster-1", ns, "ignored", "value", "by-hand")
	time.Sleep(4 * time.Second)
	st := f.status(t, name)
	assert.True(t, is(st, bundle, "cluster-1", status.Ready), "an ignored field is not drift: %+v", dep(t, st, bundle, "cluster-1"))
	assert.Equal(t, "by-hand", f.cmValue(t, "cluster-1", ns, "ignored", "value"), "an ignored field is not corrected")
}

func testDriftFleetYAMLOverride(t *testing.T, f *failureFleet) {
	const ns, name = "drift-off", "override"
	bundle := name + "-app"
	f.deployReady(t, name, "  correctDrift:\n    enabled: true\n", map[string]string{
		"app/fleet.yaml": fleetYAML(ns) + "correctDrift:\n  enabled: false\n", "app/cm.yaml": configMapDoc("cm", "v1")}, bundle)
	settle()
	f.editConfigMap(t, "cluster-1", ns, "cm", "value", "by-hand")
	f.waitForWithin(t, name, "Modified on cluster-1", driftWait, func(st status.GitRepo) bool {
		return is(st, bundle, "cluster-1", status.Modified)
	})
	time.Sleep(3 * time.Second)
	assert.Equal(t, "by-hand", f.cmValue(t, "cluster-1", ns, "cm", "value"), "fleet.yaml's enabled: false beats the GitRepo's true")
}

// serviceDoc is Service name with one port 80 named http.
func serviceDoc(name string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: Service\nmetadata:\n  name: %s\nspec:\n  selector:\n    app: web\n"+
		"  ports:\n  - name: http\n    port: 80\n    targetPort: 80\n", name)
}

// webDoc is Deployment web (one replica) and an HPA for it (1 to 5).
const webDoc = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: nginx
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: web
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  minReplicas: 1
  maxReplicas: 5
  metrics:
  - type: Resource
    resource: {name: cpu, target: {type: Utilization, averageUtilization: 80}}
`

func testDriftScalerAndForce(t *testing.T, f *failureFleet) {
	const ns, name = "drift-force", "force"
	web, plain, forced := name+"-web", name+"-plain", name+"-forced"
	correct := "correctDrift:\n  enabled: true\n"
	files := map[string]string{
		"web/fleet.yaml": fleetYAML(ns), "web/web.yaml": webDoc,
		"plain/fleet.yaml": fleetYAML(ns) + correct, "plain/svc.yaml": serviceDoc("plain"),
		"forced/fleet.yaml": fleetYAML(ns) + correct + "  force: true\n", "forced/svc.yaml": serviceDoc("forced"),
	}
	repo := f.git.CreateRepo(t, name, files)
	f.apply(t, gitRepoDoc(name, repo.URL(), clusterTarget("cluster-1")))
	f.waitFor(t, name, "all Ready", func(st status.GitRepo) bool {
		return is(st, web, "cluster-1", status.Ready) && is(st, plain, "cluster-1", status.Ready) && is(st, forced, "cluster-1", status.Ready)
	})
	settle()
	mark := f.mark()
	f.patch(t, "cluster-1", "/apis/apps/v1/namespaces/"+ns+"/deployments/web", `{"spec":{"replicas":3}}`)
	for _, svc := range []string{"plain", "forced"} {
		f.patch(t, "cluster-1", "/api/v1/namespaces/"+ns+"/services/"+svc, `{"spec":{"ports":[{"name":"http","port":8080,"targetPort":80}]}}`)
	}
	port := func(svc string) int32 {
		cs, ctx := f.kube(t, "cluster-1")
		s, err := cs.CoreV1().Services(ns).Get(ctx, svc, metav1.GetOptions{})
		require.NoError(t, err)
		return s.Spec.Ports[0].Port
	}
	waitUntil(t, driftWait, "forced Service port corrected", func() bool { return port("forced") == 80 })
	st := f.waitForWithin(t, name, "plain Modified with the correction's error", driftWait, func(st status.GitRepo) bool {
		d, _ := deploymentOn(st, plain, "cluster-1")
		return d.State == status.Modified && strings.Contains(d.Message, "drift correction failed")
	})
	t.Logf("plain: %s", dep(t, st, plain, "cluster-1").Message)
	assert.Equal(t, int32(8080), port("plain"), "a port change is not corrected without force")
	assert.NotEmpty(t, f.since(mark, logCorrectFailed, "bundle", plain), "the failure is logged")
	assert.True(t, is(st, web, "cluster-1", status.Ready), "replicas within the HPA's bounds are not drift: %+v", dep(t, st, web, "cluster-1"))
	// The failure is retried with backoff (2 s, 4 s, ...), not in a hot loop.
	time.Sleep(5 * time.Second)
	n := len(f.since(mark, logCorrectFailed, "bundle", plain))
	assert.LessOrEqual(t, n, 4, "failed corrections in about 8 s")
}

func testDriftLiveReadiness(t *testing.T, f *failureFleet) {
	const ns, name = "drift-ready", "ready"
	bundle := name + "-web"
	web := strings.Split(webDoc, "---\n")[0]
	f.deployReady(t, name, "", map[string]string{"web/fleet.yaml": fleetYAML(ns), "web/web.yaml": web}, bundle)
	settle()
	path := "/apis/apps/v1/namespaces/" + ns + "/deployments/web"
	f.patch(t, "cluster-1", path, `{"spec":{"template":{"spec":{"nodeSelector":{"no-such":"node"}}}}}`)
	st := f.waitForWithin(t, name, "NotReady on cluster-1", driftWait, func(st status.GitRepo) bool {
		return is(st, bundle, "cluster-1", status.NotReady)
	})
	t.Logf("%s", dep(t, st, bundle, "cluster-1").Message)
	f.patch(t, "cluster-1", path, `{"spec":{"template":{"spec":{"nodeSelector":null}}}}`)
	f.waitForWithin(t, name, "Ready again on cluster-1", 30*time.Second, func(st status.GitRepo) bool {
		return is(st, bundle, "cluster-1", status.Ready)
	})
}

func testDriftKillDuringCorrection(t *testing.T, f *failureFleet) {
	const ns, name = "drift-kill", "kill"
	bundle := name + "-app"
	st := f.deployReady(t, name, "  correctDrift:\n    enabled: true\n", map[string]string{
		"app/fleet.yaml": fleetYAML(ns), "app/cm.yaml": configMapDoc("cm", "v1")}, bundle)
	id := dep(t, st, bundle, "cluster-1").DeploymentID
	settle()
	before := helmRecordCount(t, f.cluster("cluster-1"), ns, bundle)
	mark := f.mark()
	got := f.killOnRevision(t, "cluster-1", ns, bundle, before+1, func() {
		f.editConfigMap(t, "cluster-1", ns, "cm", "value", "by-hand")
	})
	t.Logf("killed with correction record %s", got)
	f.restart(t)
	waitUntil(t, 90*time.Second, "edit corrected after the restart", func() bool {
		return f.cmValue(t, "cluster-1", ns, "cm", "value") == "v1"
	})
	f.waitForWithin(t, name, "Ready at the same deployment ID", 60*time.Second, func(st status.GitRepo) bool {
		return readyAt(st, bundle, "cluster-1", id)
	})
	// The killed rollback may have restored the value before it died; its
	// record is settled by the watch that takes over (after the dead
	// one's heartbeat times out).
	waitUntil(t, 90*time.Second, "the interrupted correction settled", func() bool {
		for _, st := range f.helmRecords(t, "cluster-1", ns, bundle) {
			if strings.HasPrefix(st, "pending") {
				return false
			}
		}
		return true
	})
	recs := f.helmRecords(t, "cluster-1", ns, bundle)
	assert.Len(t, recs, before+1, "exactly one correction: %v", recs)
	assert.Equal(t, "deployed", recs[fmt.Sprint(before+1)], "%v", recs)
	assert.LessOrEqual(t, len(f.since(mark, logCorrected, "bundle", bundle)), 1, "at most one %q line", logCorrected)
	assert.Empty(t, f.since(mark, logDeployed, "bundle", bundle), "no redeploy")
}

// waitUntil polls cond every 100 ms until it holds or timeout passes.
func waitUntil(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
