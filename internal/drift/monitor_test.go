package drift_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"helm.sh/helm/v3/pkg/chart"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"

	"github.com/flotilla-gitops/flotilla/internal/bundle"
	"github.com/flotilla-gitops/flotilla/internal/deployer"
	"github.com/flotilla-gitops/flotilla/internal/drift"
	"github.com/flotilla-gitops/flotilla/internal/status"
	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

var (
	monConfigMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	monServices   = schema.GroupVersionResource{Version: "v1", Resource: "services"}
	monSecrets    = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
)

const (
	// monGitRepo is the GitRepo every target belongs to.
	monGitRepo = "fleet-default/repo"
	// monRelease and monDeploymentID name the release each subtest deploys.
	monRelease      = "app"
	monDeploymentID = "id-1"
	// monGitPatch is the patch that restores Git's value of data.key.
	monGitPatch = `{"data":{"key":"from-git"}}`
	// detectWithin bounds how long drift takes to be reported: a debounce
	// of 1s, a dry run per object and the send, with slack for a busy
	// machine.
	detectWithin = 6 * time.Second
	// correctWithin bounds how long a correction takes to show: detection,
	// the Helm rollback, and the re-diff one debounce later.
	correctWithin = 12 * time.Second
)

// monConfigMapTemplate renders ConfigMap name as Git wants it. It has no
// namespace: Helm places it in the release namespace.
func monConfigMapTemplate(name string) string {
	return `apiVersion: v1
kind: ConfigMap
metadata:
  name: ` + name + `
data:
  key: from-git
  other: kept
`
}

// monServiceTemplate renders Service name with one named port, 80.
const monServiceTemplate = `apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  selector: {app: web}
  ports: [{name: http, port: 80}]
`

// monitorEnv is one API server, shared by the subtests, and what they need
// to deploy releases and drive objects on it.
type monitorEnv struct {
	dyn      dynamic.Interface
	base     *deployer.RESTClientGetter
	deployer *deployer.Deployer
}

// getter returns the cluster's getter for namespace, as cluster.Conn does.
func (e *monitorEnv) getter(namespace string) (genericclioptions.RESTClientGetter, error) {
	return e.base.ForNamespace(namespace), nil
}

// ctx returns a context bounding one step of a subtest.
func (e *monitorEnv) ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// deploy installs release monRelease at monDeploymentID in namespace with
// the real deployer, as the deploy activity does: every object carries
// the bundle label.
func (e *monitorEnv) deploy(t *testing.T, namespace, bundleName string, templates ...string) {
	t.Helper()
	c := &chart.Chart{Metadata: &chart.Metadata{APIVersion: chart.APIVersionV2, Name: "drift", Version: "0.1.0"}}
	for i, tpl := range templates {
		c.Templates = append(c.Templates, &chart.File{Name: fmt.Sprintf("templates/object-%d.yaml", i), Data: []byte(tpl)})
	}
	res, err := e.deployer.Deploy(e.ctx(t), e.base.ForNamespace(namespace), deployer.Release{
		Name: monRelease, Namespace: namespace, Chart: c, DeploymentID: monDeploymentID,
		Labels: map[string]string{drift.BundleLabel: bundleName},
	})
	require.NoError(t, err)
	require.Equal(t, 1, res.Revision)
}

// get returns the live object, nil when it does not exist.
func (e *monitorEnv) get(t *testing.T, gvr schema.GroupVersionResource, namespace, name string) *unstructured.Unstructured {
	t.Helper()
	u, err := e.dyn.Resource(gvr).Namespace(namespace).Get(e.ctx(t), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(t, err)
	return u
}

// dataKey returns data.key of ConfigMap namespace/name, "<missing>" when
// the ConfigMap does not exist.
func (e *monitorEnv) dataKey(t *testing.T, namespace, name string) string {
	t.Helper()
	u := e.get(t, monConfigMaps, namespace, name)
	if u == nil {
		return "<missing>"
	}
	v, _, _ := unstructured.NestedString(u.Object, "data", "key")
	return v
}

// update changes the live object with an Update by fieldManager, as
// kubectl edit or a controller does.
func (e *monitorEnv) update(t *testing.T, gvr schema.GroupVersionResource, namespace, name, fieldManager string, change func(obj map[string]any)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		live, err := e.dyn.Resource(gvr).Namespace(namespace).Get(e.ctx(t), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(live.Object)
		_, err = e.dyn.Resource(gvr).Namespace(namespace).Update(e.ctx(t), live, metav1.UpdateOptions{FieldManager: fieldManager})
		return err
	})
	require.NoError(t, err)
}

// setKey sets a ConfigMap's data.key.
func setKey(value string) func(obj map[string]any) {
	return func(obj map[string]any) { _ = unstructured.SetNestedField(obj, value, "data", "key") }
}

// helmRecords counts the release's Helm records (Secrets).
func (e *monitorEnv) helmRecords(t *testing.T, namespace string) int {
	t.Helper()
	list, err := e.dyn.Resource(monSecrets).Namespace(namespace).List(e.ctx(t),
		metav1.ListOptions{LabelSelector: "owner=helm,name=" + monRelease})
	require.NoError(t, err)
	return len(list.Items)
}

// assertCurrent asserts that the release still runs monDeploymentID, at
// revision.
func (e *monitorEnv) assertCurrent(t *testing.T, namespace string, revision int) {
	t.Helper()
	id, rev, err := e.deployer.Current(e.base.ForNamespace(namespace), namespace, monRelease)
	require.NoError(t, err)
	assert.Equal(t, monDeploymentID, id, "deployment ID")
	assert.Equal(t, revision, rev, "revision")
}

// monTarget is the target of release monRelease in namespace.
func monTarget(namespace, bundleName string) drift.Target {
	return drift.Target{GitRepo: monGitRepo, Bundle: bundleName, Release: monRelease, Namespace: namespace,
		DeploymentID: monDeploymentID}
}

// reportLog records the reports a monitor delivers.
type reportLog struct {
	mu      sync.Mutex
	reports []status.LiveReport
	repos   []string
}

func (r *reportLog) report(_ context.Context, gitRepo string, reports []status.LiveReport) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.repos = append(r.repos, gitRepo)
	r.reports = append(r.reports, reports...)
	return nil
}

// mark returns how many reports were received so far.
func (r *reportLog) mark() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.reports)
}

// all returns the reports received so far and the GitRepo of each call.
func (r *reportLog) all() ([]status.LiveReport, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]status.LiveReport(nil), r.reports...), append([]string(nil), r.repos...)
}

// waitFor returns the first report after the first from ones that ok
// accepts, failing the test if none arrives within d.
func (r *reportLog) waitFor(t *testing.T, from int, d time.Duration, what string, ok func(status.LiveReport) bool) status.LiveReport {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		reports, _ := r.all()
		for _, rep := range reports[min(from, len(reports)):] {
			if ok(rep) {
				return rep
			}
		}
		if time.Now().After(deadline) {
			require.FailNowf(t, "no report "+what, "within %s; reports since: %+v", d, reports[min(from, len(reports)):])
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// settle waits for the evaluations that the start of a Monitor set off
// (the first list of each new watch is a burst of events) to be done, so
// that a later change is found by its own event.
func settle() { time.Sleep(1500 * time.Millisecond) }

// normal returns r with empty lists as nil, as they encode.
func normal(r status.LiveReport) status.LiveReport {
	if len(r.ModifiedStatus) == 0 {
		r.ModifiedStatus = nil
	}
	if len(r.NotReadyStatus) == 0 {
		r.NotReadyStatus = nil
	}
	return r
}

// monitorRun is a running Monitor and what it said.
type monitorRun struct {
	logs    *observer.ObservedLogs
	reports *reportLog
	mu      sync.Mutex
	results map[string]int // Config.Corrected calls by result
}

// count returns how many lines msg was logged.
func (r *monitorRun) count(msg string) int { return r.logs.FilterMessage(msg).Len() }

// corrected returns how often Config.Corrected was called with result.
func (r *monitorRun) corrected(result string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.results[result]
}

// start runs a Monitor with cfg (its cluster, deployer, logger, report and
// corrected hooks filled in) on targets until the subtest ends. Reports
// are not rate limited.
func (e *monitorEnv) start(t *testing.T, cfg drift.Config, targets ...drift.Target) *monitorRun {
	t.Helper()
	core, logs := observer.New(zapcore.DebugLevel)
	run := &monitorRun{logs: logs, reports: &reportLog{}, results: map[string]int{}}
	cfg.Cluster = "cluster-1"
	cfg.Getter = e.getter
	cfg.Deployer = e.deployer
	cfg.Logger = zap.New(core)
	cfg.Report = run.reports.report
	cfg.Corrected = func(result string) {
		run.mu.Lock()
		defer run.mu.Unlock()
		run.results[result]++
	}
	cfg.ReportBurst, cfg.ReportInterval = 1000, 10*time.Millisecond
	m, err := drift.New(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx, targets) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			assert.ErrorIs(t, err, context.Canceled, "Run's error")
		case <-time.After(30 * time.Second):
			t.Error("Run did not return after its context ended")
		}
		if t.Failed() {
			for _, e := range logs.All() {
				t.Logf("log: %s %s %s %v", e.Time.Format("15:04:05.000"), e.Level, e.Message, e.ContextMap())
			}
			reports, _ := run.reports.all()
			for _, r := range reports {
				t.Logf("report: %+v", r)
			}
		}
	})
	return run
}

// TestMonitor_Cluster runs Monitors on releases deployed by the real
// deployer to a real API server, one namespace and Monitor per subtest,
// and changes the releases' objects as users and controllers do.
func TestMonitor_Cluster(t *testing.T) {
	cluster := testenv.StartClusters(t, 1, testenv.Options{})[0]
	dyn, err := dynamic.NewForConfig(cluster.RESTConfig())
	require.NoError(t, err)
	base, err := deployer.NewRESTClientGetter(cluster.RESTConfig(), metav1.NamespaceDefault)
	require.NoError(t, err)
	e := &monitorEnv{dyn: dyn, base: base, deployer: deployer.New(deployer.Options{Timeout: time.Minute})}

	for _, tc := range []struct {
		name string
		run  func(*testing.T, *monitorEnv)
	}{
		{"detects modified, missing and orphaned objects", testMonitorDetects},
		{"corrects drift", testMonitorCorrects},
		{"gives up on an object a controller keeps changing", testMonitorConflict},
		{"backs off failed corrections", testMonitorBackoff},
		{"detects drift of a Secret", testMonitorSecret},
		{"reports changed valuesFrom sources", testMonitorValuesFrom},
		{"corrects drift inside deployment windows only", testMonitorWindows},
		{"corrects at any time when the windows do not parse", testMonitorBadWindows},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, e)
		})
	}
}

// clean accepts the report of the undrifted release with n ready objects.
func clean(n int) func(status.LiveReport) bool {
	return func(r status.LiveReport) bool {
		return r.Resources == n && r.Ready == n && !r.Drifted() && r.Error == ""
	}
}

// testMonitorDetects: without correctDrift, a hand edit, a deletion and an
// object labelled with the bundle are reported, one after the other, and
// nothing is restored.
func testMonitorDetects(t *testing.T, e *monitorEnv) {
	const ns, bundleName = "drift-detect", "detect"
	e.deploy(t, ns, bundleName, monConfigMapTemplate("first"), monConfigMapTemplate("second"))
	run := e.start(t, drift.Config{}, monTarget(ns, bundleName))
	initial := run.reports.waitFor(t, 0, 30*time.Second, "of the unchanged release", clean(2))
	settle()
	assert.Equal(t, status.LiveReport{Bundle: bundleName, Release: monRelease, Namespace: ns, DeploymentID: monDeploymentID,
		Resources: 2, Ready: 2}, normal(initial))

	// A hand edit.
	from, start := run.reports.mark(), time.Now()
	e.update(t, monConfigMaps, ns, "first", "kubectl-edit", setKey("by-hand"))
	rep := run.reports.waitFor(t, from, detectWithin, "with the edit", func(r status.LiveReport) bool { return r.Modified == 1 })
	t.Logf("edit reported after %s", time.Since(start).Round(time.Millisecond))
	first := status.ModifiedStatus{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: "first", Patch: monGitPatch}
	assert.Equal(t, status.LiveReport{Bundle: bundleName, Release: monRelease, Namespace: ns, DeploymentID: monDeploymentID,
		Resources: 2, Ready: 1, Modified: 1, ModifiedStatus: []status.ModifiedStatus{first}}, normal(rep))

	// A deletion.
	from, start = run.reports.mark(), time.Now()
	require.NoError(t, e.dyn.Resource(monConfigMaps).Namespace(ns).Delete(e.ctx(t), "second", metav1.DeleteOptions{}))
	rep = run.reports.waitFor(t, from, detectWithin, "with the deletion", func(r status.LiveReport) bool { return r.Missing == 1 })
	t.Logf("deletion reported after %s", time.Since(start).Round(time.Millisecond))
	second := status.ModifiedStatus{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: "second", Missing: true}
	assert.Equal(t, status.LiveReport{Bundle: bundleName, Release: monRelease, Namespace: ns, DeploymentID: monDeploymentID,
		Resources: 2, Modified: 1, Missing: 1, ModifiedStatus: []status.ModifiedStatus{first, second}}, normal(rep))

	// Objects of another bundle, or without the label, are not orphans of
	// this release; one labelled with its bundle is.
	from, start = run.reports.mark(), time.Now()
	for name, labels := range map[string]map[string]any{
		"foreign":   {drift.BundleLabel: "another-bundle"},
		"unrelated": {"app": "web"},
		"stray":     {drift.BundleLabel: bundleName},
	} {
		obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": name, "namespace": ns, "labels": labels}, "data": map[string]any{"key": "x"}}}
		_, err := e.dyn.Resource(monConfigMaps).Namespace(ns).Create(e.ctx(t), obj, metav1.CreateOptions{FieldManager: "kubectl-create"})
		require.NoError(t, err)
	}
	rep = run.reports.waitFor(t, from, detectWithin, "with the orphan", func(r status.LiveReport) bool { return r.Orphaned > 0 })
	t.Logf("orphan reported after %s", time.Since(start).Round(time.Millisecond))
	stray := status.ModifiedStatus{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: "stray", Delete: true}
	assert.Equal(t, status.LiveReport{Bundle: bundleName, Release: monRelease, Namespace: ns, DeploymentID: monDeploymentID,
		Resources: 2, Modified: 1, Missing: 1, Orphaned: 1, ModifiedStatus: []status.ModifiedStatus{first, second, stray}}, normal(rep))

	// Detection only: nothing is restored, however long one waits.
	time.Sleep(2500 * time.Millisecond)
	assert.Equal(t, "by-hand", e.dataKey(t, ns, "first"))
	assert.Equal(t, "<missing>", e.dataKey(t, ns, "second"))
	assert.NotNil(t, e.get(t, monConfigMaps, ns, "stray"), "the orphan is left alone")
	assert.Zero(t, run.count("Corrected drift"))
	assert.Zero(t, run.count("Drift correction failed"))
	assert.Zero(t, run.corrected("success")+run.corrected("failure"), "nothing corrected")
	assert.Empty(t, run.results, "Corrected calls")
	assert.Equal(t, 1, e.helmRecords(t, ns), "Helm records")
	e.assertCurrent(t, ns, 1)
	reports, repos := run.reports.all()
	for _, r := range repos {
		assert.Equal(t, monGitRepo, r, "reported GitRepo")
	}
	last := reports[len(reports)-1]
	assert.Equal(t, 3, last.Modified+last.Missing+last.Orphaned, "last report %+v", last)
}

// testMonitorCorrects: with correctDrift, each hand edit or deletion is
// restored by one Helm rollback to the same deployment ID, logged once,
// and the rollbacks keep at most MaxHistory records.
func testMonitorCorrects(t *testing.T, e *monitorEnv) {
	const ns, bundleName = "drift-correct", "correct"
	e.deploy(t, ns, bundleName, monConfigMapTemplate("first"), monConfigMapTemplate("second"))
	target := monTarget(ns, bundleName)
	target.Correct = &bundle.CorrectDrift{Enabled: true}
	target.MaxHistory = 2
	run := e.start(t, drift.Config{}, target)
	run.reports.waitFor(t, 0, 30*time.Second, "of the unchanged release", clean(2))
	settle()

	steps := []struct {
		name   string
		change func(t *testing.T)
		object string // the object as the log line lists it
	}{
		{"edit first", func(t *testing.T) { e.update(t, monConfigMaps, ns, "first", "kubectl-edit", setKey("by-hand")) },
			"ConfigMap " + ns + "/first: modified " + monGitPatch},
		{"delete second", func(t *testing.T) {
			require.NoError(t, e.dyn.Resource(monConfigMaps).Namespace(ns).Delete(e.ctx(t), "second", metav1.DeleteOptions{}))
		}, "ConfigMap " + ns + "/second: missing"},
		{"edit second", func(t *testing.T) { e.update(t, monConfigMaps, ns, "second", "kubectl-edit", setKey("again")) },
			"ConfigMap " + ns + "/second: modified " + monGitPatch},
	}
	for i, step := range steps {
		from, start := run.reports.mark(), time.Now()
		step.change(t)
		rep := run.reports.waitFor(t, from, correctWithin, "after correcting "+step.name, func(r status.LiveReport) bool {
			return r.Corrections == i+1 && !r.Drifted()
		})
		t.Logf("%s corrected after %s", step.name, time.Since(start).Round(time.Millisecond))
		assert.Equal(t, status.LiveReport{Bundle: bundleName, Release: monRelease, Namespace: ns, DeploymentID: monDeploymentID,
			Resources: 2, Ready: 2, Corrections: i + 1}, normal(rep), step.name)
		assert.Equal(t, "from-git", e.dataKey(t, ns, "first"), step.name)
		assert.Equal(t, "from-git", e.dataKey(t, ns, "second"), step.name)
		lines := run.logs.FilterMessage("Corrected drift").All()
		require.Len(t, lines, i+1, "%q lines after %s", "Corrected drift", step.name)
		fields := lines[i].ContextMap()
		assert.Equal(t, monDeploymentID, fields["deploymentID"], step.name)
		assert.Equal(t, ns+"/"+monRelease, fields["release"], step.name)
		assert.Equal(t, bundleName, fields["bundle"], step.name)
		assert.Equal(t, monGitRepo, fields["gitrepo"], step.name)
		assert.EqualValues(t, i+2, fields["revision"], step.name)
		assert.Equal(t, []any{step.object}, fields["objects"], step.name)
	}

	// No correction follows the last one's re-diff.
	time.Sleep(2500 * time.Millisecond)
	assert.Equal(t, len(steps), run.count("Corrected drift"), "one correction per change")
	assert.Equal(t, len(steps), run.corrected("success"), "flotilla_drift_corrections_total{result=success}")
	assert.Equal(t, map[string]int{"success": len(steps)}, run.results, "Corrected calls")
	assert.Zero(t, run.count("Drift correction failed"))
	e.assertCurrent(t, ns, 1+len(steps))
	records := e.helmRecords(t, ns)
	assert.LessOrEqual(t, records, target.MaxHistory, "Helm records")
	assert.Positive(t, records, "Helm records")
}

// testMonitorConflict: a controller that keeps setting a field back makes
// the object a conflict after ConflictTries corrections, naming the
// controller; it is then no longer corrected.
func testMonitorConflict(t *testing.T, e *monitorEnv) {
	const ns, bundleName, tries = "drift-conflict", "conflict", 2
	e.deploy(t, ns, bundleName, monConfigMapTemplate("first"), monConfigMapTemplate("second"))
	target := monTarget(ns, bundleName)
	target.Correct = &bundle.CorrectDrift{Enabled: true}
	run := e.start(t, drift.Config{ConflictTries: tries, ConflictWindow: time.Minute}, target)
	run.reports.waitFor(t, 0, 30*time.Second, "of the unchanged release", clean(2))
	settle()

	// The controller sets data.key back whenever it differs. Once the
	// conflict is reported it also touches an annotation every 1.2s: each
	// touch is an event the monitor evaluates (a debounce later), so
	// corrections would go on if they were going to.
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var fights, touches atomic.Int32
	var touching atomic.Bool
	wg.Add(1)
	go func() {
		defer wg.Done()
		client := e.dyn.Resource(monConfigMaps).Namespace(ns)
		lastTouch := time.Now()
		for ctx.Err() == nil {
			if live, err := client.Get(ctx, "first", metav1.GetOptions{}); err == nil {
				key, _, _ := unstructured.NestedString(live.Object, "data", "key")
				switch {
				case key != "fighter":
					_ = unstructured.SetNestedField(live.Object, "fighter", "data", "key")
					if _, err := client.Update(ctx, live, metav1.UpdateOptions{FieldManager: "fighting-controller"}); err == nil {
						fights.Add(1)
					}
				case touching.Load() && time.Since(lastTouch) > 1200*time.Millisecond:
					_ = unstructured.SetNestedField(live.Object, time.Now().String(), "metadata", "annotations", "fighting-controller/seen")
					if _, err := client.Update(ctx, live, metav1.UpdateOptions{FieldManager: "fighting-controller"}); err == nil {
						touches.Add(1)
						lastTouch = time.Now()
					}
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { stop(); wg.Wait() })

	start := time.Now()
	rep := run.reports.waitFor(t, 0, 30*time.Second, "with a conflict", func(r status.LiveReport) bool {
		return len(r.ModifiedStatus) > 0 && r.ModifiedStatus[0].Conflict != ""
	})
	t.Logf("conflict reported after %s (%d fights)", time.Since(start).Round(time.Millisecond), fights.Load())
	require.Len(t, rep.ModifiedStatus, 1, "%+v", rep)
	entry := rep.ModifiedStatus[0]
	assert.Equal(t, "ConfigMap "+ns+"/first", entry.Object())
	assert.JSONEq(t, monGitPatch, entry.Patch)
	assert.Equal(t, "fighting-controller keeps changing data.key back", entry.Conflict)
	assert.Equal(t, 1, rep.Modified, "%+v", rep)
	assert.Equal(t, tries, rep.Corrections, "%+v", rep)
	assert.Empty(t, rep.Error)

	lines := run.logs.FilterMessage("Drift correction conflict").All()
	require.Len(t, lines, 1)
	fields := lines[0].ContextMap()
	assert.Equal(t, "fighting-controller", fields["fieldManager"])
	assert.Equal(t, "data.key", fields["field"])
	assert.Equal(t, "ConfigMap "+ns+"/first", fields["object"])
	assert.EqualValues(t, tries, fields["corrections"])
	assert.Equal(t, tries, run.count("Corrected drift"), "corrections before the conflict")

	// Corrections stop while the controller keeps going.
	touching.Store(true)
	time.Sleep(4 * time.Second)
	assert.GreaterOrEqual(t, touches.Load(), int32(2), "the controller kept touching the object")
	assert.Equal(t, tries, run.count("Corrected drift"), "corrections after the conflict")
	assert.Equal(t, 1, run.count("Drift correction conflict"), "conflict lines")
	assert.Equal(t, 1, run.corrected("conflict"), "flotilla_drift_corrections_total{result=conflict}")
	assert.Equal(t, map[string]int{"success": tries, "conflict": 1}, run.results, "Corrected calls")
	assert.Equal(t, "fighter", e.dataKey(t, ns, "first"))
	reports, _ := run.reports.all()
	last := reports[len(reports)-1]
	require.Len(t, last.ModifiedStatus, 1, "last report %+v", last)
	assert.Equal(t, entry.Conflict, last.ModifiedStatus[0].Conflict, "the last report still names the conflict")

	// The other object is still corrected.
	from := run.reports.mark()
	e.update(t, monConfigMaps, ns, "second", "kubectl-edit", setKey("by-hand"))
	run.reports.waitFor(t, from, correctWithin, "after correcting the other object", func(r status.LiveReport) bool {
		return r.Corrections == tries+1 && r.Modified == 1 && r.Missing == 0
	})
	assert.Equal(t, "from-git", e.dataKey(t, ns, "second"))
	assert.Equal(t, tries+1, run.count("Corrected drift"))
	lines = run.logs.FilterMessage("Corrected drift").All()
	assert.Equal(t, []any{"ConfigMap " + ns + "/second: modified " + monGitPatch}, lines[len(lines)-1].ContextMap()["objects"],
		"the conflict is not listed as corrected")
}

// testMonitorBackoff: a correction that cannot succeed (a Service port
// changed by hand, without force) is reported and retried after 2s, 4s,
// …, not in a loop; the release keeps its revision.
func testMonitorBackoff(t *testing.T, e *monitorEnv) {
	const ns, bundleName = "drift-backoff", "backoff"
	e.deploy(t, ns, bundleName, monServiceTemplate)
	target := monTarget(ns, bundleName)
	target.Correct = &bundle.CorrectDrift{Enabled: true}
	run := e.start(t, drift.Config{}, target)
	run.reports.waitFor(t, 0, 30*time.Second, "of the unchanged release", clean(1))
	settle()

	from := run.reports.mark()
	e.update(t, monServices, ns, "web", "kubectl-edit", func(obj map[string]any) {
		ports, _, _ := unstructured.NestedSlice(obj, "spec", "ports")
		ports[0].(map[string]any)["port"] = int64(8080)
		_ = unstructured.SetNestedSlice(obj, ports, "spec", "ports")
	})
	rep := run.reports.waitFor(t, from, correctWithin, "with the failed correction", func(r status.LiveReport) bool {
		return strings.Contains(r.Error, "drift correction failed")
	})
	assert.Equal(t, 1, rep.Modified, "%+v", rep)
	assert.Contains(t, rep.Error, "retry in 2s", "%+v", rep)
	failures := run.logs.FilterMessage("Drift correction failed").All()
	require.NotEmpty(t, failures)
	t0 := failures[0].Time

	// Count the attempts over 8s from the first: 2s, then 4s later, then
	// 8s later, so at most 3 (4 leaves room for timing).
	time.Sleep(time.Until(t0.Add(8 * time.Second)))
	failures = run.logs.FilterMessage("Drift correction failed").All()
	var within []observer.LoggedEntry
	for _, f := range failures {
		if f.Time.Before(t0.Add(8 * time.Second)) {
			within = append(within, f)
		}
	}
	t.Logf("%d failed corrections within 8s", len(within))
	assert.LessOrEqual(t, len(within), 4, "failed corrections within 8s (a hot loop?)")
	require.GreaterOrEqual(t, len(within), 2, "the failed correction is retried")
	assert.Equal(t, 2*time.Second, within[0].ContextMap()["retryIn"], "first backoff")
	assert.Equal(t, 4*time.Second, within[1].ContextMap()["retryIn"], "second backoff")
	gap := within[1].Time.Sub(within[0].Time)
	// The retry waits out the backoff and then a debounce.
	assert.True(t, gap >= 2*time.Second && gap < 5*time.Second, "retry after %s, want 2s (+ a debounce)", gap)
	assert.Zero(t, run.count("Corrected drift"))
	assert.Equal(t, map[string]int{"failure": len(failures)}, run.results, "Corrected calls")

	reports, _ := run.reports.all()
	last := reports[len(reports)-1]
	assert.Contains(t, last.Error, "drift correction failed", "last report %+v", last)
	assert.Equal(t, 1, last.Modified, "last report %+v", last)
	svc := e.get(t, monServices, ns, "web")
	require.NotNil(t, svc)
	ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	require.Len(t, ports, 1)
	assert.EqualValues(t, 8080, ports[0].(map[string]any)["port"], "the Service was left as it was")
	// The failed rollbacks left no record: the release still runs its
	// first revision.
	e.assertCurrent(t, ns, 1)
	assert.Equal(t, 1, e.helmRecords(t, ns), "Helm records")
}

// monSecretTemplate renders Secret "creds" as Git wants it.
const monSecretTemplate = `apiVersion: v1
kind: Secret
metadata:
  name: creds
stringData:
  key: from-git
`

// testMonitorSecret: a release's Secrets are watched like its other
// objects: a hand edit and an orphan are reported.
func testMonitorSecret(t *testing.T, e *monitorEnv) {
	const ns, bundleName = "drift-secret", "secret"
	e.deploy(t, ns, bundleName, monSecretTemplate, monConfigMapTemplate("first"))
	run := e.start(t, drift.Config{}, monTarget(ns, bundleName))
	run.reports.waitFor(t, 0, 30*time.Second, "of the unchanged release", clean(2))
	settle()

	from, start := run.reports.mark(), time.Now()
	e.update(t, monSecrets, ns, "creds", "kubectl-edit", func(obj map[string]any) {
		_ = unstructured.SetNestedField(obj, "YnktaGFuZA==", "data", "key") // "by-hand"
	})
	rep := run.reports.waitFor(t, from, detectWithin, "with the edited Secret", func(r status.LiveReport) bool { return r.Modified == 1 })
	t.Logf("Secret edit reported after %s", time.Since(start).Round(time.Millisecond))
	require.Len(t, rep.ModifiedStatus, 1, "%+v", rep)
	assert.Equal(t, "Secret "+ns+"/creds", rep.ModifiedStatus[0].Object())
	assert.JSONEq(t, `{"data":{"key":"(redacted)"}}`, rep.ModifiedStatus[0].Patch, "the key, not Git's value")
	assert.NotContains(t, fmt.Sprintf("%+v", rep), "ZnJvbS1naXQ=", "no secret value in the report")
}
