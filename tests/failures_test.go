package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/flotilla-gitops/flotilla/internal/outcome"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/status"
	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

// Backoff of bundle failures for TestFailures: a failed bundle is retried
// after 2 s, 4 s, then every 8 s (production: 30 s doubling to 10 m).
const (
	failRetryBackoff    = "2s"
	failRetryBackoffMax = "8s"
	// failMaxGap bounds the pause between two attempts at one deployment
	// ID: the maximum backoff plus the time an attempt and its scheduling
	// take on a busy machine.
	failMaxGap = 8*time.Second + 7*time.Second
)

// The log lines of issue 14, which say what happened to a bundle.
const (
	logDeployed     = "Deployed bundle"
	logBundleFailed = "Bundle failed"
	logUnreachable  = "Cluster not reachable"
	logUnauthorized = "Cluster refused credentials"
	logContent      = "Content unavailable"
)

// TestFailures checks that deploy failures mean what they say (issue 14),
// on one fleet: a dev worker with a short failure backoff, three clusters
// (cluster-1 and cluster-2 env=dev, cluster-3 env=prod), a Git server and an
// OCI content registry. Every scenario deploys a GitRepo with a failing
// bundle and a healthy one, and checks the failing deployment's state,
// outcome and message (naming cluster and bundle), its Helm revisions, that
// the other bundle on the same cluster is Ready, and the log lines.
// Scenario 5 registers cluster "revoked" (cluster-2's API server, through a
// ServiceAccount token) and scenario 6 a pull-mode agent "pull-1" (cluster-1's
// API server). Scenarios leave their GitRepos running; each uses its own
// names and targets clusters by name, and log lines are counted from the
// scenario's start.
func TestFailures(t *testing.T) {
	start := time.Now()
	f := startFailureFleet(t)
	t.Run("TemplateFailsOnOneCluster", func(t *testing.T) { testTemplateFailsOnOneCluster(t, f) })
	t.Run("AdmissionDenied", func(t *testing.T) { testAdmissionDenied(t, f) })
	t.Run("ImmutableField", func(t *testing.T) { testImmutableField(t, f) })
	t.Run("APIServerDownAndBack", func(t *testing.T) { testAPIServerDownAndBack(t, f) })
	t.Run("RevokedToken", func(t *testing.T) { testRevokedToken(t, f) })
	t.Run("ContentReadFailsOnce", func(t *testing.T) { testContentReadFailsOnce(t, f) })
	t.Logf("TestFailures ran in %s", time.Since(start).Round(time.Second))
}

// failureFleet is a fleet whose worker retries failed bundles quickly and
// pushes rendered bundles to an OCI registry (for pull-mode agents).
type failureFleet struct {
	*fleet
	// registry is the OCI registry the worker pushes rendered bundles to.
	registry *httptest.Server
}

// startFailureFleet starts three clusters, all registered, a Git server, a
// registry and a dev worker run with extra flags.
func startFailureFleet(t testing.TB, workerArgs ...string) *failureFleet {
	t.Helper()
	if testing.Short() {
		t.Skip("starts kube-apiservers, a Temporal dev server, a registry and a Git server")
	}
	start := time.Now()
	f := &failureFleet{fleet: &fleet{t: t, stateDir: t.TempDir()}}
	f.clusters = testenv.StartClusters(t, 3, testenv.Options{})
	f.git = testenv.NewGitServer(t, testenv.GitServerOptions{})
	f.registry = httptest.NewServer(ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(f.registry.Close)
	if len(workerArgs) == 0 {
		workerArgs = []string{"--retry-backoff", failRetryBackoff, "--retry-backoff-max", failRetryBackoffMax}
	}
	workerArgs = append(workerArgs, "--content-registry", registryURL(f.registry), "--content-registry-plain-http")
	f.w = startDevWorker(t, f.stateDir, workerArgs...)
	f.logs = append(f.logs, f.w.proc.LogPath())
	for i, c := range f.clusters {
		out := f.cli(t, "cluster", "add", c.Name, "--kubeconfig", c.KubeconfigPath, "--label", clusterLabels(i))
		require.Contains(t, out, "cluster/"+c.Name+" created")
	}
	t.Logf("fleet of 3 clusters ready in %s", time.Since(start).Round(time.Millisecond))
	return f
}

// registryURL is the content registry URL of a registry served by srv.
func registryURL(srv *httptest.Server) string {
	return "oci://" + strings.TrimPrefix(srv.URL, "http://") + "/flotilla/content"
}

// clusterTarget is a targets spec naming clusters. (Clusters registered
// by later scenarios are not targeted, as they would be by a selector.)
func clusterTarget(names ...string) string {
	s := "  targets:\n"
	for _, n := range names {
		s += "  - clusterName: " + n + "\n"
	}
	return s
}

// twoBundles is a GitRepo's files: bundle dirs bad/ (the files of bad)
// and good/, which holds the ConfigMap <ns>-good in namespace ns.
func twoBundles(ns string, bad map[string]string) map[string]string {
	files := map[string]string{"good/fleet.yaml": fleetYAML(ns), "good/cm.yaml": configMapDoc(ns+"-good", "v1")}
	for p, content := range bad {
		files["bad/"+p] = content
	}
	return files
}

// logMark remembers how far each log file was written, so lines can be
// counted from a moment on.
type logMark map[string]int64

// mark returns the current size of each of the fleet's log files.
func (f *failureFleet) mark() logMark {
	m := logMark{}
	for _, p := range f.logs {
		if fi, err := os.Stat(p); err == nil {
			m[p] = fi.Size()
		}
	}
	return m
}

// logLine is one JSON log line.
type logLine map[string]any

func (l logLine) str(k string) string { s, _ := l[k].(string); return s }

// time returns the line's timestamp.
func (l logLine) time(t testing.TB) time.Time {
	t.Helper()
	ts, err := time.Parse("2006-01-02T15:04:05.000Z0700", l.str("ts"))
	require.NoError(t, err, "log line timestamp %q", l.str("ts"))
	return ts
}

// linesSince returns the lines with message msg written to files since
// mark (files not in mark are read whole) that match every key=value of
// fields.
func linesSince(t testing.TB, files []string, mark logMark, msg string, fields ...string) []logLine {
	t.Helper()
	var out []logLine
	for _, p := range files {
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		data = data[min(mark[p], int64(len(data))):]
	lines:
		for _, line := range bytes.Split(data, []byte("\n")) {
			if !bytes.Contains(line, []byte(`"`+msg+`"`)) {
				continue
			}
			var m logLine
			if json.Unmarshal(line, &m) != nil || m["msg"] != msg {
				continue
			}
			for i := 0; i+1 < len(fields); i += 2 {
				if m.str(fields[i]) != fields[i+1] {
					continue lines
				}
			}
			out = append(out, m)
		}
	}
	return out
}

// since is linesSince over the fleet's logs.
func (f *failureFleet) since(mark logMark, msg string, fields ...string) []logLine {
	f.t.Helper()
	return linesSince(f.t, f.logs, mark, msg, fields...)
}

// dep returns the deployment of bundle on cluster, failing the test when
// the status has none.
func dep(t testing.TB, st status.GitRepo, bundle, cluster string) status.Deployment {
	t.Helper()
	d, ok := deploymentOn(st, bundle, cluster)
	require.True(t, ok, "no deployment of %s on %s in %+v", bundle, cluster, st.Deployments)
	return d
}

// is reports whether the GitRepo's deployment of bundle on cluster is in
// state s.
func is(st status.GitRepo, bundle, cluster string, s status.State) bool {
	d, ok := deploymentOn(st, bundle, cluster)
	return ok && d.State == s
}

// readyAt reports whether bundle runs deploymentID on cluster and is Ready.
func readyAt(st status.GitRepo, bundle, cluster, deploymentID string) bool {
	d, ok := deploymentOn(st, bundle, cluster)
	return ok && d.State == status.Ready && d.DeploymentID == deploymentID && d.AppliedDeploymentID == deploymentID
}

// deploymentIDs maps each bundle of a GitRepo deployed to one cluster to
// its deployment ID.
func deploymentIDs(st status.GitRepo) map[string]string {
	ids := map[string]string{}
	for _, d := range st.Deployments {
		ids[d.Bundle] = d.DeploymentID
	}
	return ids
}

// waitingAtNewIDs reports whether every bundle of ids waits on cluster
// (WaitApplied, with a message saying why) to deploy a deployment ID
// other than the one in ids.
func waitingAtNewIDs(ids map[string]string, cluster string) func(status.GitRepo) bool {
	return func(st status.GitRepo) bool {
		for b, id := range ids {
			d, ok := deploymentOn(st, b, cluster)
			if !ok || d.DeploymentID == id || d.State != status.WaitApplied || d.Message == "" {
				return false
			}
		}
		return true
	}
}

// assertRetrying checks a deployment that failed and is retried with
// backoff: failed attempts counted, the next one scheduled.
func assertRetrying(t testing.TB, d status.Deployment, class outcome.Class) {
	t.Helper()
	assert.Equal(t, class, d.Outcome, "outcome of %s on %s", d.Bundle, d.Cluster)
	assert.GreaterOrEqual(t, d.Attempts, 1, "attempts of %s on %s", d.Bundle, d.Cluster)
	if assert.NotEmpty(t, d.NextRetry, "nextRetry of %s on %s", d.Bundle, d.Cluster) {
		_, err := time.Parse(time.RFC3339, d.NextRetry)
		assert.NoError(t, err, "nextRetry of %s on %s is RFC 3339", d.Bundle, d.Cluster)
	}
}

// assertReady checks that bundle is Ready on cluster with no failure
// recorded.
func assertReady(t testing.TB, st status.GitRepo, bundle, cluster string) {
	t.Helper()
	d, ok := deploymentOn(st, bundle, cluster)
	if !assert.True(t, ok, "no deployment of %s on %s", bundle, cluster) {
		return
	}
	assert.Equal(t, status.Ready, d.State, "%s on %s: %s", bundle, cluster, d.Message)
	assert.Empty(t, d.Outcome, "outcome of Ready %s on %s", bundle, cluster)
	assert.Zero(t, d.Attempts, "attempts of Ready %s on %s", bundle, cluster)
	assert.Equal(t, d.DeploymentID, d.AppliedDeploymentID, "%s on %s runs its deployment ID", bundle, cluster)
}

// assertBundleFailedLines checks the "Bundle failed" lines about bundle on
// cluster since mark: at least one, all of class, and as many as attempts
// counted (give or take the attempt running while status was read). It
// returns them.
func (f *failureFleet) assertBundleFailedLines(t testing.TB, mark logMark, d status.Deployment, class outcome.Class) []logLine {
	t.Helper()
	lines := f.since(mark, logBundleFailed, "bundle", d.Bundle, "cluster", d.Cluster)
	if assert.NotEmpty(t, lines, "%q lines about %s on %s", logBundleFailed, d.Bundle, d.Cluster) {
		for _, l := range lines {
			assert.Equal(t, string(class), l.str("class"), "class of %q line %v", logBundleFailed, l)
			assert.Equal(t, d.DeploymentID, l.str("deploymentID"), "deploymentID of %q line", logBundleFailed)
			assert.Equal(t, d.Namespace+"/"+d.Release, l.str("release"), "release of %q line", logBundleFailed)
		}
		assert.InDelta(t, d.Attempts, len(lines), 1, "%q lines about %s on %s vs attempts in status", logBundleFailed, d.Bundle, d.Cluster)
	}
	return lines
}

// assertPaced checks that consecutive lines are apart by at least min and
// at most failMaxGap: the retries back off and go on.
func assertPaced(t testing.TB, lines []logLine, minGap time.Duration) {
	t.Helper()
	for i := 1; i < len(lines); i++ {
		gap := lines[i].time(t).Sub(lines[i-1].time(t))
		assert.GreaterOrEqual(t, gap, minGap, "attempt %d came %s after the previous one", i+1, gap)
		assert.LessOrEqual(t, gap, failMaxGap, "attempt %d came %s after the previous one", i+1, gap)
	}
}

// logCounts logs how many lines of each issue-14 message were written
// since mark about cluster: per bundle for the bundle messages, for the
// cluster for the others.
func (f *failureFleet) logCounts(t testing.TB, mark logMark, cluster string, bundles ...string) {
	t.Helper()
	var parts []string
	for _, b := range bundles {
		for _, msg := range []string{logDeployed, logBundleFailed, logContent} {
			parts = append(parts, fmt.Sprintf("%s %q=%d", b, msg, len(f.since(mark, msg, "bundle", b, "cluster", cluster))))
		}
	}
	for _, msg := range []string{logUnreachable, logUnauthorized} {
		parts = append(parts, fmt.Sprintf("%q=%d", msg, len(f.since(mark, msg, "cluster", cluster))))
	}
	t.Logf("log lines about %s: %s", cluster, strings.Join(parts, ", "))
}

// helmRecordCount counts the Helm release records of release on c.
func helmRecordCount(t testing.TB, c *testenv.Cluster, ns, release string) int {
	t.Helper()
	return len(helmRecordIDs(t, c, ns, release))
}

// waitAttempts waits until the deployment of bundle on cluster has failed
// at least n times in a row and returns the status.
func (f *failureFleet) waitAttempts(t testing.TB, name, bundle, cluster string, n int, timeout time.Duration) status.GitRepo {
	t.Helper()
	return f.waitForWithin(t, name, fmt.Sprintf("%s on %s failed %d times", bundle, cluster, n), timeout, func(st status.GitRepo) bool {
		d, ok := deploymentOn(st, bundle, cluster)
		return ok && d.Attempts >= n
	})
}

// liveStatus is the GitRepo's status as `flotilla status` shows it: the
// GitRepo workflow's, with the running rollout's deployments folded in.
func liveStatus(c client.Client, name string) (status.GitRepo, error) {
	var st status.GitRepo
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v, err := c.QueryWorkflow(ctx, protocol.GitRepoID("fleet-default", name), "", protocol.QueryStatus)
	if err == nil {
		err = v.Get(&st)
	}
	if err != nil || st.Rollout == "" {
		return st, err
	}
	var ro status.Rollout
	if v, err := c.QueryWorkflow(ctx, st.Rollout, "", protocol.QueryStatus); err == nil && v.Get(&ro) == nil && len(ro.Deployments) > 0 {
		st.Deployments = ro.Deployments
		st.Finish()
	}
	return st, nil
}

// watch polls liveStatus every 100 ms (the CLI is too slow to see a state
// that lasts a second) until done, which sees every status, holds; it
// returns the last status.
func (f *failureFleet) watch(t testing.TB, name string, timeout time.Duration, done func(status.GitRepo) bool) status.GitRepo {
	t.Helper()
	c := f.w.client(t)
	deadline := time.Now().Add(timeout)
	for {
		st, err := liveStatus(c, name)
		if err == nil && done(st) {
			return st
		}
		if time.Now().After(deadline) {
			js, _ := json.MarshalIndent(st, "", "  ")
			t.Fatalf("GitRepo %s: not reached within %s (query error %v)\nstatus: %s\nworker log tail:\n%s",
				name, timeout, err, js, f.w.proc.LogTail(30))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// watchReady watches the GitRepo until it holds, and returns the last
// status and each observation of one of keys in a state other than Ready
// after it was Ready (the first 10 are logged).
func (f *failureFleet) watchReady(t testing.TB, name string, keys []status.Key, timeout time.Duration,
	until func(status.GitRepo) bool) (status.GitRepo, []string) {
	t.Helper()
	start := time.Now()
	ready := map[status.Key]bool{}
	var flaps []string
	st := f.watch(t, name, timeout, func(st status.GitRepo) bool {
		for _, k := range keys {
			d, ok := deploymentOn(st, k.Bundle, k.Cluster)
			switch {
			case ok && d.State == status.Ready:
				ready[k] = true
			case ready[k]:
				flaps = append(flaps, fmt.Sprintf("%s at +%s: %s %s %q", k, time.Since(start).Round(100*time.Millisecond),
					d.State, d.Outcome, d.Message))
			}
		}
		return until(st)
	})
	for _, fl := range flaps[:min(len(flaps), 10)] {
		t.Logf("not Ready after Ready: %s", fl)
	}
	return st, flaps
}

// Scenario 1: a chart whose template calls `fail` for the values one
// cluster gets. The bundle is ErrApplied on that cluster alone, with
// Helm's error; the other clusters run it and the GitRepo's other bundle
// is Ready everywhere.
func testTemplateFailsOnOneCluster(t *testing.T, f *failureFleet) {
	const ns, bad, good = "tmpl-ns", "tmpl-bad", "tmpl-good"
	mark := f.mark()
	repo := f.git.CreateRepo(t, "tmpl", twoBundles(ns, map[string]string{
		"fleet.yaml": "namespace: " + ns + "\nhelm:\n  values:\n    mode: plain\n" +
			"targetCustomizations:\n- name: broken\n  clusterName: cluster-3\n  helm:\n    values:\n      mode: broken\n",
		"Chart.yaml": "apiVersion: v2\nname: tmpl\nversion: 0.1.0\n",
		"templates/cm.yaml": `{{- if eq .Values.mode "broken" }}{{ fail "mode broken is not supported" }}{{ end }}
apiVersion: v1
kind: ConfigMap
metadata:
  name: tmpl-chart
data:
  mode: {{ .Values.mode | quote }}
`,
	}))
	f.apply(t, gitRepoDoc("tmpl", repo.URL(), clusterTarget("cluster-1", "cluster-2", "cluster-3")))
	st := f.waitFor(t, "tmpl", "tmpl-bad ErrApplied on cluster-3, the rest Ready", func(st status.GitRepo) bool {
		if !is(st, bad, "cluster-3", status.ErrApplied) {
			return false
		}
		for _, c := range []string{"cluster-1", "cluster-2", "cluster-3"} {
			if !is(st, good, c, status.Ready) || (c != "cluster-3" && !is(st, bad, c, status.Ready)) {
				return false
			}
		}
		return true
	})
	d := dep(t, st, bad, "cluster-3")
	t.Logf("tmpl-bad on cluster-3: %s %s attempts=%d nextRetry=%s: %s", d.State, d.Outcome, d.Attempts, d.NextRetry, d.Message)
	assert.Contains(t, d.Message, "cluster cluster-3: bundle tmpl-bad: ")
	assert.Contains(t, d.Message, "mode broken is not supported", "Helm's error")
	assertRetrying(t, d, outcome.BundleFailed)
	for _, c := range []string{"cluster-1", "cluster-2"} {
		assertReady(t, st, bad, c)
		cm, ok := f.configMap(t, c, ns, "tmpl-chart")
		if assert.True(t, ok, "tmpl-chart on %s", c) {
			assert.Equal(t, "plain", cm.Data["mode"])
		}
	}
	for _, c := range []string{"cluster-1", "cluster-2", "cluster-3"} {
		assertReady(t, st, good, c)
	}
	_, ok := f.configMap(t, "cluster-3", ns, "tmpl-chart")
	assert.False(t, ok, "nothing of tmpl-bad reaches cluster-3")

	// Attempts go on with backoff; Helm never installs anything on
	// cluster-3 (the template fails before Helm writes a record).
	st = f.waitAttempts(t, "tmpl", bad, "cluster-3", 3, 60*time.Second)
	d = dep(t, st, bad, "cluster-3")
	assert.Equal(t, status.ErrApplied, d.State)
	assertRetrying(t, d, outcome.BundleFailed)
	revs := helmRevisions(t, f.cluster("cluster-3"), ns, bad)
	t.Logf("after %d attempts: %d Helm revisions of tmpl-bad on cluster-3", d.Attempts, revs)
	assert.LessOrEqual(t, revs, d.Attempts, "at most one Helm revision per attempt")
	lines := f.assertBundleFailedLines(t, mark, d, outcome.BundleFailed)
	assertPaced(t, lines, 1500*time.Millisecond)
	assert.Empty(t, f.since(mark, logDeployed, "bundle", bad, "cluster", "cluster-3"), "no %q for the failed bundle", logDeployed)
	for _, c := range []string{"cluster-1", "cluster-2", "cluster-3"} {
		assert.Len(t, f.since(mark, logDeployed, "bundle", good, "cluster", c), 1, "%q for tmpl-good on %s", logDeployed, c)
		assert.Empty(t, f.since(mark, logUnreachable, "cluster", c), "%q about reachable %s", logUnreachable, c)
	}
	f.logCounts(t, mark, "cluster-3", bad, good)
}

// admissionPolicy makes cluster deny ConfigMaps named name through a
// ValidatingAdmissionPolicy and its binding (no webhook), and waits until
// the API server enforces it.
func admissionPolicy(t testing.TB, c *testenv.Cluster, name, message string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs := c.Clientset(t)
	policy := "deny-" + name
	_, err := cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: policy},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
					Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
				},
			}}},
			Validations: []admissionv1.Validation{{
				Expression: fmt.Sprintf("object.metadata.name != %q", name),
				Message:    message,
			}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: policy},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policy,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	// The API server picks policies up asynchronously: probe with dry-run
	// creates until one is denied.
	probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}
	require.Eventually(t, func() bool {
		_, err = cs.CoreV1().ConfigMaps(metav1.NamespaceDefault).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), message)
	}, 30*time.Second, 200*time.Millisecond, "policy %s never enforced on %s (last error %v)", policy, c.Name, err)
}

// Scenario 2: an admission policy on cluster-2 denies one ConfigMap of a
// bundle. ErrApplied on cluster-2 alone with the API server's message;
// retried with backoff (2 s, 4 s, 8 s, 8 s ...), at most one Helm revision
// each; the other bundle is Ready on both clusters.
func testAdmissionDenied(t *testing.T, f *failureFleet) {
	const ns, bad, good = "admit-ns", "admit-bad", "admit-good"
	const denial = "flotilla-e2e: admit-denied is not allowed here"
	admissionPolicy(t, f.cluster("cluster-2"), "admit-denied", denial)
	mark := f.mark()
	repo := f.git.CreateRepo(t, "admit", twoBundles(ns, map[string]string{
		"fleet.yaml": fleetYAML(ns),
		"cm.yaml":    configMapDoc("admit-allowed", "x") + "---\n" + configMapDoc("admit-denied", "x"),
	}))
	f.apply(t, gitRepoDoc("admit", repo.URL(), clusterTarget("cluster-1", "cluster-2")))
	st := f.waitFor(t, "admit", "admit-bad ErrApplied on cluster-2, the rest Ready", func(st status.GitRepo) bool {
		return is(st, bad, "cluster-2", status.ErrApplied) && is(st, bad, "cluster-1", status.Ready) &&
			is(st, good, "cluster-1", status.Ready) && is(st, good, "cluster-2", status.Ready)
	})
	d := dep(t, st, bad, "cluster-2")
	t.Logf("admit-bad on cluster-2: %s %s attempts=%d nextRetry=%s: %s", d.State, d.Outcome, d.Attempts, d.NextRetry, d.Message)
	assert.Contains(t, d.Message, "cluster cluster-2: bundle admit-bad: ")
	assert.Contains(t, d.Message, denial, "the API server's message")
	assertRetrying(t, d, outcome.BundleFailed)
	assertReady(t, st, bad, "cluster-1")
	assertReady(t, st, good, "cluster-1")
	assertReady(t, st, good, "cluster-2")

	// Backoff: 2 s, 4 s, 8 s, 8 s: five attempts take about 22 s. The
	// healthy deployments stay Ready all the while.
	st, flaps := f.watchReady(t, "admit", []status.Key{{Bundle: bad, Cluster: "cluster-1"}, {Bundle: good, Cluster: "cluster-1"},
		{Bundle: good, Cluster: "cluster-2"}}, 90*time.Second, func(st status.GitRepo) bool {
		d, ok := deploymentOn(st, bad, "cluster-2")
		return ok && d.Attempts >= 5
	})
	assert.Empty(t, flaps, "deployments that are Ready stay Ready while another bundle on their cluster is retried")
	d = dep(t, st, bad, "cluster-2")
	assert.Equal(t, status.ErrApplied, d.State)
	assertRetrying(t, d, outcome.BundleFailed)
	assert.Contains(t, d.Message, denial)
	assertReady(t, st, good, "cluster-2")
	lines := f.assertBundleFailedLines(t, mark, d, outcome.BundleFailed)
	assertPaced(t, lines, 1500*time.Millisecond)
	var gaps []string
	for i := 1; i < len(lines); i++ {
		gaps = append(gaps, lines[i].time(t).Sub(lines[i-1].time(t)).Round(100*time.Millisecond).String())
	}
	if len(lines) >= 4 {
		g1, g3 := lines[1].time(t).Sub(lines[0].time(t)), lines[3].time(t).Sub(lines[2].time(t))
		assert.Greater(t, g3, g1+2*time.Second, "the backoff doubles: gaps %v", gaps)
	}
	c2 := f.cluster("cluster-2")
	revs, records := helmRevisions(t, c2, ns, bad), helmRecordCount(t, c2, ns, bad)
	t.Logf("after %d attempts (gaps %v): Helm revision %d, %d records %v", d.Attempts, gaps, revs, records, helmRecordIDs(t, c2, ns, bad))
	assert.LessOrEqual(t, revs, d.Attempts+1, "at most one Helm revision per attempt")
	assert.LessOrEqual(t, records, 10, "Helm keeps at most maxHistory records")
	_, ok := f.configMap(t, "cluster-2", ns, "admit-denied")
	assert.False(t, ok)
	assert.Empty(t, f.since(mark, logDeployed, "bundle", bad, "cluster", "cluster-2"), "no %q for the failed bundle", logDeployed)
	assert.Len(t, f.since(mark, logDeployed, "bundle", bad, "cluster", "cluster-1"), 1)
	for _, c := range []string{"cluster-1", "cluster-2"} {
		assert.Len(t, f.since(mark, logDeployed, "bundle", good, "cluster", c), 1, "%q for admit-good on %s", logDeployed, c)
		assert.Empty(t, f.since(mark, logUnreachable, "cluster", c), "%q about reachable %s", logUnreachable, c)
		assert.Empty(t, f.since(mark, logUnauthorized, "cluster", c))
	}
	f.logCounts(t, mark, "cluster-2", bad, good)
}

// immutableConfigMap is a ConfigMap with immutable: true.
func immutableConfigMap(name, value string) string {
	return configMapDoc(name, value) + "immutable: true\n"
}

// Scenario 3: a new commit changes the data of an immutable ConfigMap.
// The upgrade is ErrApplied with the API server's message, the release
// keeps at most helm.maxHistory (3 here) records however often it is
// retried, and the other bundle upgrades to the new commit.
func testImmutableField(t *testing.T, f *failureFleet) {
	const ns, bad, good = "immut-ns", "immut-bad", "immut-good"
	c1 := f.cluster("cluster-1")
	repo := f.git.CreateRepo(t, "immut", twoBundles(ns, map[string]string{
		"fleet.yaml": fleetYAML(ns) + "helm:\n  maxHistory: 3\n",
		"cm.yaml":    immutableConfigMap("immut-config", "v1"),
	}))
	f.apply(t, gitRepoDoc("immut", repo.URL(), clusterTarget("cluster-1")))
	first := repo.Head(t)
	ids := deploymentIDs(f.waitFor(t, "immut", "first commit Ready", settledAt(first, 2)))
	require.Equal(t, 1, helmRevisions(t, c1, ns, bad))

	mark := f.mark()
	repo.Commit(t, map[string]string{
		"bad/cm.yaml": immutableConfigMap("immut-config", "v2"), "good/cm.yaml": configMapDoc(ns+"-good", "v2")}, "v2")
	f.cli(t, "sync", "immut")
	var goodID string
	st := f.waitFor(t, "immut", "immut-bad ErrApplied, immut-good Ready at the second commit", func(st status.GitRepo) bool {
		b, okb := deploymentOn(st, bad, "cluster-1")
		g, okg := deploymentOn(st, good, "cluster-1")
		goodID = g.DeploymentID
		return okb && okg && b.DeploymentID != ids[bad] && b.State == status.ErrApplied &&
			goodID != ids[good] && readyAt(st, good, "cluster-1", goodID)
	})
	d := dep(t, st, bad, "cluster-1")
	t.Logf("immut-bad on cluster-1: %s %s attempts=%d nextRetry=%s: %s", d.State, d.Outcome, d.Attempts, d.NextRetry, d.Message)
	assert.Contains(t, d.Message, "cluster cluster-1: bundle immut-bad: ")
	assert.Contains(t, d.Message, "field is immutable", "the API server's message")
	assertRetrying(t, d, outcome.BundleFailed)
	assertReady(t, st, good, "cluster-1")
	cm, _ := f.configMap(t, "cluster-1", ns, ns+"-good")
	assert.Equal(t, "v2", cm.Data["value"], "the other bundle runs the new commit")
	cm, _ = f.configMap(t, "cluster-1", ns, "immut-config")
	assert.Equal(t, "v1", cm.Data["value"], "the immutable ConfigMap is unchanged")

	st = f.waitAttempts(t, "immut", bad, "cluster-1", 5, 90*time.Second)
	d = dep(t, st, bad, "cluster-1")
	assert.Equal(t, status.ErrApplied, d.State)
	assertRetrying(t, d, outcome.BundleFailed)
	f.assertBundleFailedLines(t, mark, d, outcome.BundleFailed)
	revs, records := helmRevisions(t, c1, ns, bad), helmRecordCount(t, c1, ns, bad)
	t.Logf("after %d attempts: Helm revision %d, records %v", d.Attempts, revs, helmRecordIDs(t, c1, ns, bad))
	assert.LessOrEqual(t, revs, 1+d.Attempts, "at most one Helm revision per attempt")
	assert.LessOrEqual(t, records, 3, "helm.maxHistory: 3 bounds the records")
	assert.Empty(t, f.since(mark, logDeployed, "bundle", bad), "no %q for the failed upgrade", logDeployed)
	assert.Len(t, f.since(mark, logDeployed, "bundle", good, "deploymentID", goodID), 1)
	assert.Empty(t, f.since(mark, logUnreachable, "cluster", "cluster-1"))
	f.logCounts(t, mark, "cluster-1", bad, good)
}

// Scenario 4: cluster-3's API server stops while a new commit is rolled
// out. Its deployments wait (WaitApplied, Unreachable) with a message
// naming the API server and "Cluster not reachable" is logged; started
// again, the cluster converges with one deploy per bundle.
func testAPIServerDownAndBack(t *testing.T, f *failureFleet) {
	const ns = "down-ns"
	c3 := f.cluster("cluster-3")
	repo := f.git.CreateRepo(t, "down", map[string]string{
		"a/fleet.yaml": fleetYAML(ns), "a/cm.yaml": configMapDoc("down-a", "v1"),
		"b/fleet.yaml": fleetYAML(ns), "b/cm.yaml": configMapDoc("down-b", "v1"),
	})
	f.apply(t, gitRepoDoc("down", repo.URL(), clusterTarget("cluster-3")))
	ids := deploymentIDs(f.waitFor(t, "down", "first commit Ready", settledAt(repo.Head(t), 2)))

	mark := f.mark()
	c3.Stop()
	stopped := time.Now()
	second := repo.Commit(t, map[string]string{"a/cm.yaml": configMapDoc("down-a", "v2"), "b/cm.yaml": configMapDoc("down-b", "v2")}, "v2")
	f.cli(t, "sync", "down")
	st := f.waitFor(t, "down", "both bundles WaitApplied on the stopped cluster-3", waitingAtNewIDs(ids, "cluster-3"))
	host := strings.TrimPrefix(c3.Server, "https://")
	for _, b := range []string{"down-a", "down-b"} {
		d := dep(t, st, b, "cluster-3")
		t.Logf("%s on stopped cluster-3: %s %s attempts=%d: %s", b, d.State, d.Outcome, d.Attempts, d.Message)
		assert.Equal(t, outcome.Unreachable, d.Outcome, "outcome of %s", b)
		assert.Contains(t, d.Message, "cluster cluster-3: API server ")
		assert.Contains(t, d.Message, host)
		assert.Contains(t, d.Message, "unreachable")
	}
	// A few seconds down: retried with the short backoff, no error state.
	time.Sleep(8 * time.Second)
	st = f.status(t, "down")
	for _, b := range []string{"down-a", "down-b"} {
		assert.Equal(t, status.WaitApplied, dep(t, st, b, "cluster-3").State, "%s while cluster-3 is down", b)
	}
	down := time.Since(stopped)
	var unreachable []logLine
	for _, l := range f.since(mark, logUnreachable, "cluster", "cluster-3") {
		if strings.HasPrefix(l.str("workflowID"), "rollout/fleet-default/down/") {
			unreachable = append(unreachable, l)
		}
	}
	var gaps []string
	for i := 1; i < len(unreachable); i++ {
		gaps = append(gaps, unreachable[i].time(t).Sub(unreachable[i-1].time(t)).Round(100*time.Millisecond).String())
	}
	t.Logf("%d %q lines from the rollout of down in %s down, apart by %v", len(unreachable), logUnreachable, down.Round(time.Second), gaps)
	assert.NotEmpty(t, unreachable, "%q logged", logUnreachable)
	// The retries back off from 1 s to 15 s: no hot loop, no giving up.
	assertPaced(t, unreachable, 800*time.Millisecond)
	assert.Empty(t, f.since(mark, logBundleFailed, "cluster", "cluster-3", "bundle", "down-a"), "an unreachable cluster fails no bundle")
	assert.Empty(t, f.since(mark, logBundleFailed, "cluster", "cluster-3", "bundle", "down-b"))

	c3.Start(t)
	restarted := time.Now()
	st = f.waitFor(t, "down", "second commit Ready after the restart", settledAt(second, 2))
	t.Logf("Ready %s after the restart", time.Since(restarted).Round(100*time.Millisecond))
	for _, b := range []string{"down-a", "down-b"} {
		d := dep(t, st, b, "cluster-3")
		assertReady(t, st, b, "cluster-3")
		assert.Len(t, f.since(mark, logDeployed, "bundle", b, "cluster", "cluster-3", "deploymentID", d.DeploymentID), 1,
			"one deploy of %s after the restart", b)
		assert.Len(t, f.since(mark, logDeployed, "bundle", b), 1, "no extra deploys of %s", b)
		assert.Equal(t, 2, helmRevisions(t, c3, ns, b), "Helm revisions of %s", b)
	}
	f.logCounts(t, mark, "cluster-3", "down-a", "down-b")
}

// Scenario 5: a cluster registered with a ServiceAccount token whose
// ServiceAccount is then deleted: the API server answers 401. Deployments
// wait (WaitApplied, Unauthorized) with "refused the credentials", and
// retries back off instead of looping.
func testRevokedToken(t *testing.T, f *failureFleet) {
	const ns, cluster = "revoke-ns", "revoked"
	c2 := f.cluster("cluster-2")
	kubeconfig := c2.ServiceAccountKubeconfig(t, "flotilla-e2e", "deployer")
	require.Contains(t, f.cli(t, "cluster", "add", cluster, "--kubeconfig", kubeconfig, "--label", "env=revoked"), "created")
	repo := f.git.CreateRepo(t, "revoke", map[string]string{
		"a/fleet.yaml": fleetYAML(ns), "a/cm.yaml": configMapDoc("revoke-a", "v1"),
		"b/fleet.yaml": fleetYAML(ns), "b/cm.yaml": configMapDoc("revoke-b", "v1"),
	})
	f.apply(t, gitRepoDoc("revoke", repo.URL(), clusterTarget(cluster)))
	ids := deploymentIDs(f.waitFor(t, "revoke", "first commit Ready through the ServiceAccount", settledAt(repo.Head(t), 2)))

	require.NoError(t, c2.Clientset(t).CoreV1().ServiceAccounts("flotilla-e2e").Delete(context.Background(), "deployer", metav1.DeleteOptions{}))
	// The API server keeps accepting a token it authenticated for up to
	// 10 s (its token cache): wait until it refuses it.
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	require.NoError(t, err)
	asSA, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err = asSA.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
		return apierrors.IsUnauthorized(err)
	}, 30*time.Second, 250*time.Millisecond, "the deleted ServiceAccount's token is still accepted: %v", err)
	mark := f.mark()
	repo.Commit(t, map[string]string{"a/cm.yaml": configMapDoc("revoke-a", "v2"), "b/cm.yaml": configMapDoc("revoke-b", "v2")}, "v2")
	f.cli(t, "sync", "revoke")
	st := f.waitFor(t, "revoke", "both bundles WaitApplied with a revoked token", waitingAtNewIDs(ids, cluster))
	for _, b := range []string{"revoke-a", "revoke-b"} {
		d := dep(t, st, b, cluster)
		t.Logf("%s on %s: %s %s attempts=%d nextRetry=%s: %s", b, cluster, d.State, d.Outcome, d.Attempts, d.NextRetry, d.Message)
		assert.Equal(t, outcome.Unauthorized, d.Outcome, "outcome of %s", b)
		assert.Contains(t, d.Message, "cluster revoked: API server ")
		assert.Contains(t, d.Message, "refused the credentials")
	}

	// No hot loop: count attempts over 20 s.
	window := f.mark()
	before := f.status(t, "revoke")
	time.Sleep(20 * time.Second)
	after := f.status(t, "revoke")
	lines := f.since(window, logUnauthorized, "cluster", cluster)
	assertPaced(t, lines, 1500*time.Millisecond)
	t.Logf("in 20 s: %d %q lines; attempts %d→%d (revoke-a)", len(lines), logUnauthorized,
		dep(t, before, "revoke-a", cluster).Attempts, dep(t, after, "revoke-a", cluster).Attempts)
	assert.NotEmpty(t, f.since(mark, logUnauthorized, "cluster", cluster), "%q logged", logUnauthorized)
	// With a 2 s backoff doubling to 8 s, 20 s hold at most about five
	// attempts per deployment; allow one line per bundle and attempt.
	assert.LessOrEqual(t, len(lines), 2*6, "no hot loop on refused credentials")
	for _, b := range []string{"revoke-a", "revoke-b"} {
		d0, d1 := dep(t, before, b, cluster), dep(t, after, b, cluster)
		assert.Equal(t, status.WaitApplied, d1.State)
		assert.LessOrEqual(t, d1.Attempts-d0.Attempts, 6, "attempts of %s in 20 s", b)
		assert.Empty(t, f.since(mark, logDeployed, "bundle", b), "nothing deployed with a revoked token")
		assert.Empty(t, f.since(mark, logBundleFailed, "bundle", b), "a refused token fails no bundle")
	}
	assert.Empty(t, f.since(mark, logUnreachable, "cluster", cluster), "%q is only for unreachable clusters", logUnreachable)
	f.logCounts(t, mark, cluster, "revoke-a", "revoke-b")
}

// faultProxy forwards to a registry. Once armed, it answers 503 to the
// first n GETs of the first manifest asked for: with n = 6 that is one
// failed registry pull (the registry client retries 5xx five times), and
// reads of other manifests, which may run at the same time, succeed.
type faultProxy struct {
	srv    *httptest.Server
	mu     sync.Mutex
	armed  bool
	fail   int
	target string
	seen   []string
}

var manifestPath = regexp.MustCompile(`^/v2/.+/manifests/[^/]+$`)

func newFaultProxy(t testing.TB, target *httptest.Server) *faultProxy {
	t.Helper()
	u, err := url.Parse(target.URL)
	require.NoError(t, err)
	p := &faultProxy{}
	rp := httputil.NewSingleHostReverseProxy(u)
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		if p.armed && p.target == "" && r.Method == http.MethodGet && manifestPath.MatchString(r.URL.Path) {
			p.target = r.URL.Path
		}
		inject := p.armed && p.fail > 0 && r.Method == http.MethodGet && r.URL.Path == p.target
		if inject {
			p.fail--
			p.seen = append(p.seen, r.URL.Path)
		}
		p.mu.Unlock()
		if inject {
			http.Error(w, "injected failure", http.StatusServiceUnavailable)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

// arm makes the next n GETs of the next manifest asked for fail.
func (p *faultProxy) arm(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed, p.fail = true, n
}

// injected returns the paths of the failed GETs and how many failures
// are left.
func (p *faultProxy) injected() ([]string, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.seen...), p.fail
}

// Scenario 6: a pull-mode agent whose first registry read fails. The
// bundle is retried as ContentUnavailable (never ErrApplied), ends Ready,
// and "Content unavailable" is logged once.
func testContentReadFailsOnce(t *testing.T, f *failureFleet) {
	const ns, cluster = "content-ns", "pull-1"
	proxy := newFaultProxy(t, f.registry)
	var tok struct {
		Token string `json:"token"`
	}
	out := f.cli(t, "cluster", "token", "create", "--ttl", "1h", "-o", "json")
	require.NoError(t, json.Unmarshal([]byte(out), &tok), out)
	// The agent deploys to cluster-1's API server under the name pull-1,
	// with an empty content cache, reading through the proxy. The fleet's
	// test owns the agent and so its state directory too: a directory of
	// this subtest would be removed while the agent still writes to it.
	agent := testenv.StartProcess(f.t, testenv.ProcessOptions{Name: "flotilla-agent-" + cluster, Path: bins.worker,
		Args: []string{"agent", "--cluster", cluster, "--kubeconfig", f.cluster("cluster-1").KubeconfigPath,
			"--temporal-address", f.w.frontend, "--state-dir", f.t.TempDir(), "--heartbeat-interval", "1s",
			"--http-listen", "127.0.0.1:0", "--label", "env=pull",
			"--content-registry", registryURL(proxy.srv), "--content-registry-plain-http"},
		Env: []string{"FLOTILLA_REGISTRATION_TOKEN=" + tok.Token}})
	f.logs = append(f.logs, agent.LogPath())
	waitLog(t, agent, `"msg":"Agent started"`, time.Minute)
	mark := f.mark()
	proxy.arm(6)

	repo := f.git.CreateRepo(t, "content", map[string]string{
		"a/fleet.yaml": fleetYAML(ns), "a/cm.yaml": configMapDoc("content-a", "v1"),
		"b/fleet.yaml": fleetYAML(ns), "b/cm.yaml": configMapDoc("content-b", "v1"),
	})
	f.apply(t, gitRepoDoc("content", repo.URL(), clusterTarget(cluster)))
	head := repo.Head(t)
	// Every distinct state, outcome and message the status shows.
	var seen []status.Deployment
	f.watch(t, "content", 90*time.Second, func(st status.GitRepo) bool {
		for _, d := range st.Deployments {
			if !slices.ContainsFunc(seen, func(s status.Deployment) bool {
				return s.Bundle == d.Bundle && s.State == d.State && s.Outcome == d.Outcome && s.Message == d.Message
			}) {
				seen = append(seen, d)
			}
		}
		return settledAt(head, 2)(st)
	})
	paths, left := proxy.injected()
	t.Logf("injected %d registry failures (%d left): %v", len(paths), left, paths)
	assert.Zero(t, left, "the injected registry failures were all consumed")
	unavailable := 0
	for _, d := range seen {
		t.Logf("status showed %s on %s: %s %q %q", d.Bundle, d.Cluster, d.State, d.Outcome, d.Message)
		assert.NotEqual(t, status.ErrApplied, d.State, "a registry hiccup never makes a bundle ErrApplied: %s", d.Message)
		if strings.Contains(d.Message, "content unavailable") || d.Outcome == outcome.ContentUnavailable {
			unavailable++
			assert.Equal(t, status.WaitApplied, d.State, "state while content is unavailable")
			assert.Equal(t, outcome.ContentUnavailable, d.Outcome, "outcome while content is unavailable")
			assert.True(t, strings.HasPrefix(d.Message, "cluster pull-1: bundle "+d.Bundle+": content unavailable: "), "message: %s", d.Message)
		}
	}
	assert.NotZero(t, unavailable, "the status showed the content read failure while it was retried (polled every 100 ms)")
	lines := f.since(mark, logContent)
	assert.Len(t, lines, 1, "%q logged once", logContent)
	for _, l := range lines {
		deployed := f.since(mark, logDeployed, "bundle", l.str("bundle"), "cluster", cluster)
		if assert.Len(t, deployed, 1) {
			t.Logf("%q about %s (class %s) at %s, deployed %s later: %s", logContent, l.str("bundle"), l.str("class"),
				l.str("ts"), deployed[0].time(t).Sub(l.time(t)).Round(10*time.Millisecond), l.str("error"))
		}
	}
	for _, b := range []string{"content-a", "content-b"} {
		assert.Len(t, f.since(mark, logDeployed, "bundle", b, "cluster", cluster), 1, "one deploy of %s", b)
		assert.Equal(t, 1, helmRevisions(t, f.cluster("cluster-1"), ns, b))
	}
	assert.Empty(t, f.since(mark, logBundleFailed, "cluster", cluster))
	assert.Empty(t, f.since(mark, logUnreachable, "cluster", cluster))
	f.logCounts(t, mark, cluster, "content-a", "content-b")
}
