package tests

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/flotilla-gitops/flotilla/internal/cluster"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/seal"
	"github.com/flotilla-gitops/flotilla/internal/status"
	"github.com/flotilla-gitops/flotilla/internal/temporalx"
	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

// fanoutConfig is BenchmarkFanout's configuration, read from the
// environment so that `make bench BENCH=fanout` runs the full size and a
// developer can run smaller ones.
type fanoutConfig struct {
	// sizes are the cluster counts rolled out to, one round each: 100,
	// 300 and 1,000, and those up to FANOUT_MAX (5000 adds 5,000), or
	// only FLOTILLA_FANOUT_CLUSTERS when set.
	sizes []int
	// apiservers is how many real kube-apiservers carry them
	// (FLOTILLA_FANOUT_APISERVERS, default 3); vc-i uses apiserver i%n.
	apiservers int
	// workload is what each cluster gets (FLOTILLA_FANOUT_WORKLOAD):
	// "configmap" (default: API servers only) or "deployment" (sim mode:
	// kube-controller-manager, kube-scheduler and kwok make the Deployment
	// Available).
	workload string
	// separateTemporal runs the Temporal dev server in a process of its own
	// (FLOTILLA_FANOUT_TEMPORAL=separate) so that its memory and CPU are
	// measured apart from the worker's; the default "embedded" is the
	// product's one-command `flotilla-worker --dev`.
	separateTemporal bool
	// unpartitioned turns automatic partitions off in fleet.yaml
	// (FLOTILLA_FANOUT_PARTITIONS=off: rolloutStrategy.autoPartitionSize
	// 0). By default the product's Fleet-style strategy applies: from 200
	// clusters on, four partitions of 25 %, each started once the ones
	// before it are Ready (maxUnavailablePartitions 0).
	unpartitioned bool
	// sameNamespace puts every virtual cluster's release in one namespace
	// (fanoutSharedNamespace) under one name, each virtual cluster behind a
	// URL of its own on a namespace proxy (see fanoutKubeconfigs):
	// FLOTILLA_FANOUT_SAME_NAMESPACE=1 runs every round so.
	sameNamespace bool
	// sameNamespaceAt is the size of the one extra same-namespace round run
	// after the per-namespace ones (its figures are fanout.json's
	// same_namespace_* fields): 300 when 300 is among the sizes, else the
	// headline size; 0 (FLOTILLA_FANOUT_SAME_NAMESPACE=0 or =1) runs none.
	sameNamespaceAt int
	// proxied gives every virtual cluster a URL of its own on the
	// namespace proxies, as sameNamespace does, but its own namespace
	// (FLOTILLA_FANOUT_PROXY=1 runs every round so). The extra
	// same-namespace round is preceded by one so, the control that tells
	// what the proxies and a client per cluster cost apart from the shared
	// namespace: fanout.json's proxied_total_s.
	proxied bool
	// timeout bounds the rollout (FLOTILLA_FANOUT_TIMEOUT, default 20m).
	timeout time.Duration
	// cliProbe is how many clusters are registered with the CLI to time it
	// before deciding how to register the rest (FLOTILLA_FANOUT_CLI_PROBE,
	// default 10).
	cliProbe int
	// cliBudget is the projected CLI registration time above which the
	// rest are registered through the library (default 2m).
	cliBudget time.Duration
}

const (
	workloadConfigMap  = "configmap"
	workloadDeployment = "deployment"
)

func loadFanoutConfig(b *testing.B) fanoutConfig {
	b.Helper()
	cfg := fanoutConfig{apiservers: 3, workload: workloadConfigMap, timeout: 20 * time.Minute,
		cliProbe: 10, cliBudget: 2 * time.Minute}
	intEnv := func(name string, dst *int, lo int) {
		if v := os.Getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < lo {
				b.Fatalf("%s=%q: want an integer ≥ %d", name, v, lo)
			}
			*dst = n
		}
	}
	only, most := 0, 1000
	intEnv("FLOTILLA_FANOUT_CLUSTERS", &only, 1)
	intEnv("FLOTILLA_FANOUT_MAX", &most, 1)
	intEnv("FANOUT_MAX", &most, 1)
	if only > 0 {
		cfg.sizes = []int{only}
	} else {
		for _, n := range []int{100, 300, 1000, 5000} {
			if n <= most {
				cfg.sizes = append(cfg.sizes, n)
			}
		}
		if !slices.Contains(cfg.sizes, most) {
			cfg.sizes = append(cfg.sizes, most)
		}
	}
	intEnv("FLOTILLA_FANOUT_APISERVERS", &cfg.apiservers, 1)
	intEnv("FLOTILLA_FANOUT_CLI_PROBE", &cfg.cliProbe, 0)
	if v := os.Getenv("FLOTILLA_FANOUT_WORKLOAD"); v != "" {
		if v != workloadConfigMap && v != workloadDeployment {
			b.Fatalf("FLOTILLA_FANOUT_WORKLOAD=%q: want %s or %s", v, workloadConfigMap, workloadDeployment)
		}
		cfg.workload = v
	}
	switch v := os.Getenv("FLOTILLA_FANOUT_TEMPORAL"); v {
	case "", "embedded":
	case "separate":
		cfg.separateTemporal = true
	default:
		b.Fatalf("FLOTILLA_FANOUT_TEMPORAL=%q: want embedded or separate", v)
	}
	switch v := os.Getenv("FLOTILLA_FANOUT_PARTITIONS"); v {
	case "", "auto":
	case "off":
		cfg.unpartitioned = true
	default:
		b.Fatalf("FLOTILLA_FANOUT_PARTITIONS=%q: want auto or off", v)
	}
	switch v := os.Getenv("FLOTILLA_FANOUT_SAME_NAMESPACE"); v {
	case "":
		cfg.sameNamespaceAt = cfg.headline()
		if slices.Contains(cfg.sizes, 300) {
			cfg.sameNamespaceAt = 300
		}
	case "0":
	case "1":
		cfg.sameNamespace = true
	default:
		b.Fatalf("FLOTILLA_FANOUT_SAME_NAMESPACE=%q: want 1 (every round), 0 (none) or unset (one extra round)", v)
	}
	switch v := os.Getenv("FLOTILLA_FANOUT_PROXY"); v {
	case "", "0":
	case "1":
		cfg.proxied = true
	default:
		b.Fatalf("FLOTILLA_FANOUT_PROXY=%q: want 1 or 0", v)
	}
	if v := os.Getenv("FLOTILLA_FANOUT_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			b.Fatalf("FLOTILLA_FANOUT_TIMEOUT=%q: want a positive duration", v)
		}
		cfg.timeout = d
	}
	return cfg
}

// headline is the size whose figures are fanout.json's own fields (the
// issue's goals are for 1,000 clusters): 1,000 when it is run, else the
// largest size.
func (cfg fanoutConfig) headline() int {
	if slices.Contains(cfg.sizes, 1000) {
		return 1000
	}
	return slices.Max(cfg.sizes)
}

// virtualClusterName is the name of virtual cluster i.
func virtualClusterName(i int) string { return fmt.Sprintf("vc-%04d", i) }

// fanoutSharedNamespace is the one namespace of every virtual cluster's
// release in a same-namespace round.
const fanoutSharedNamespace = "fanout-shared"

// fanoutBackingNamespace is the API server's namespace behind virtual
// cluster i's fanoutSharedNamespace: as long as it (see NamespaceProxy),
// and a name nothing else contains.
func fanoutBackingNamespace(i int) string { return fmt.Sprintf("fanout-%06d", i) }

// fanoutKubeconfigs returns each virtual cluster's kubeconfig. By default
// virtual cluster i uses API server i%k's. With proxied each gets a URL of
// its own on a namespace proxy in front of API server i%k, where its
// fanoutSharedNamespace is namespace fanoutBackingNamespace(i): to
// Flotilla (and Helm's per-cluster lock, keyed by server URL) they are
// distinct clusters, each with a namespace and release of the same name
// that are its own.
func fanoutKubeconfigs(b *testing.B, apis []*testenv.Cluster, names []string, proxied bool) []string {
	b.Helper()
	out := make([]string, len(names))
	var proxies []*testenv.NamespaceProxy
	if proxied {
		for _, a := range apis {
			proxies = append(proxies, testenv.StartNamespaceProxy(b, a, fanoutSharedNamespace))
		}
	}
	for i, name := range names {
		if !proxied {
			out[i] = apis[i%len(apis)].KubeconfigPath
			continue
		}
		out[i] = proxies[i%len(apis)].Add(b, name, fanoutBackingNamespace(i)).KubeconfigPath
	}
	return out
}

// backedReleases counts the virtual clusters 0…n-1 of a same-namespace
// round whose backing namespace holds a Helm release record.
func backedReleases(ctx context.Context, apis []*testenv.Cluster, n int) (int, error) {
	want := map[string]bool{}
	for i := range n {
		want[fanoutBackingNamespace(i)] = true
	}
	seen := map[string]bool{}
	err := eachHelmRecord(ctx, apis, func(s corev1.Secret) error {
		if want[s.Namespace] {
			seen[s.Namespace] = true
		}
		return nil
	})
	return len(seen), err
}

// eachHelmRecord calls fn with every Helm release record (Secret labelled
// owner=helm) on the API servers, until it returns an error.
func eachHelmRecord(ctx context.Context, apis []*testenv.Cluster, fn func(corev1.Secret) error) error {
	for _, a := range apis {
		cs, err := kubernetes.NewForConfig(a.RESTConfig())
		if err != nil {
			return err
		}
		list, err := cs.CoreV1().Secrets("").List(ctx, metav1.ListOptions{LabelSelector: "owner=helm"})
		if err != nil {
			return err
		}
		for _, s := range list.Items {
			if err := fn(s); err != nil {
				return err
			}
		}
	}
	return nil
}

// fanoutFleetYAML gives every virtual cluster its own namespace, named
// like the cluster, through one FirstMatch customization per cluster;
// defaultNamespace is the fallback no cluster should hit. With
// sameNamespace every cluster uses fanoutSharedNamespace instead.
// unpartitioned turns automatic rollout partitions off.
func fanoutFleetYAML(names []string, unpartitioned, sameNamespace bool) string {
	var sb strings.Builder
	if sameNamespace {
		sb.WriteString("defaultNamespace: " + fanoutSharedNamespace + "\n")
	} else {
		sb.WriteString("defaultNamespace: fanout-unmatched\n")
	}
	if unpartitioned {
		sb.WriteString("rolloutStrategy:\n  autoPartitionSize: 0\n")
	}
	if sameNamespace {
		return sb.String()
	}
	sb.WriteString("targetCustomizations:\n")
	for _, n := range names {
		fmt.Fprintf(&sb, "- name: %s\n  clusterName: %s\n  namespace: %s\n", n, n, n)
	}
	return sb.String()
}

// fanoutWorkload is the bundle's one resource.
func fanoutWorkload(kind string) (file, content string) {
	if kind == workloadDeployment {
		return "deployment.yaml", `apiVersion: apps/v1
kind: Deployment
metadata:
  name: fanout
spec:
  replicas: 1
  selector:
    matchLabels: {app: fanout}
  template:
    metadata:
      labels: {app: fanout}
    spec:
      nodeSelector: {type: kwok}
      containers:
      - name: app
        image: registry.invalid/fanout:1
`
	}
	return "configmap.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fanout\ndata:\n  value: \"1\"\n"
}

// addFakeNodes adds kwok-managed Nodes to a sim cluster until it has room
// for pods pods (the one Node testenv starts holds 110).
func addFakeNodes(ctx context.Context, b *testing.B, c *testenv.Cluster, pods int) {
	b.Helper()
	const perNode = 100
	cs := c.Clientset(b)
	for i := 1; i*perNode < pods+perNode; i++ {
		capacity := corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("64"),
			corev1.ResourceMemory: resource.MustParse("512Gi"),
			corev1.ResourcePods:   resource.MustParse(strconv.Itoa(perNode + 10)),
		}
		name := fmt.Sprintf("fanout-node-%d", i)
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name,
				// The annotation testenv's kwok manages Nodes by.
				Annotations: map[string]string{"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
				Labels:      map[string]string{"type": "kwok", "kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}},
			Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity, Phase: corev1.NodeRunning},
		}
		_, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		require.NoError(b, err)
	}
}

// registerClusterDirect does what `flotilla cluster add NAME --kubeconfig
// F --label ...` does, from this process: seal the kubeconfig to key, then
// send the apply update, starting the ClusterWorkflow if needed
// (starter/cluster.go, applyCluster).
func registerClusterDirect(ctx context.Context, c client.Client, key seal.PublicKey, name, kubeconfig string, labels map[string]string) error {
	data, hash, err := cluster.ReadKubeconfig(name, kubeconfig, "")
	if err != nil {
		return err
	}
	sealed, err := seal.Seal(key, data)
	if err != nil {
		return err
	}
	op := c.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
		ID:                       protocol.ClusterID(name),
		TaskQueue:                protocol.DefaultTaskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		TypedSearchAttributes:    temporal.NewSearchAttributes(temporalx.KeyCluster.ValueSet([]string{name})),
	}, protocol.ClusterWorkflow, protocol.ClusterStart{Record: protocol.ClusterRecord{Name: name}})
	h, err := c.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: op,
		UpdateOptions: client.UpdateWorkflowOptions{
			UpdateName:   protocol.UpdateApply,
			Args:         []any{protocol.ClusterApply{Labels: labels, SetLabels: true, KubeconfigHash: hash, Kubeconfig: &sealed}},
			WaitForStage: client.WorkflowUpdateStageCompleted,
		},
	})
	if err != nil {
		return fmt.Errorf("register cluster %s: %w", name, err)
	}
	var rec protocol.ClusterRecord
	if err := h.Get(ctx, &rec); err != nil {
		return fmt.Errorf("register cluster %s: %w", name, err)
	}
	return nil
}

// parallel runs fn(i) for i in [from, to) on workers goroutines and
// returns the first error.
func parallel(from, to, workers int, fn func(i int) error) error {
	var mu sync.Mutex
	var first error
	next := from
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				mu.Lock()
				i := next
				next++
				stop := first != nil
				mu.Unlock()
				if i >= to || stop {
					return
				}
				if err := fn(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return first
}

// countLogLines counts the lines of a log file that contain s.
func countLogLines(path, s string) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return bytes.Count(data, []byte(s)), nil
}

// ----- /proc sampling -----

// clockTick is USER_HZ, the unit of /proc/<pid>/stat times (100 on every
// Linux architecture Go supports).
const clockTick = 100

// procCPU returns the user+system CPU seconds of pid, and its command name
// and parent from /proc/<pid>/stat.
func procCPU(pid int) (cpu float64, comm string, ppid int, err error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, "", 0, err
	}
	s := string(data)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return 0, "", 0, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	comm = s[open+1 : end]
	fields := strings.Fields(s[end+1:])
	// fields[0] is state (field 3); ppid is field 4, utime 14, stime 15.
	if len(fields) < 13 {
		return 0, "", 0, fmt.Errorf("parse /proc/%d/stat: %d fields", pid, len(fields))
	}
	ppid, _ = strconv.Atoi(fields[1])
	ut, _ := strconv.ParseFloat(fields[11], 64)
	st, _ := strconv.ParseFloat(fields[12], 64)
	return (ut + st) / clockTick, comm, ppid, nil
}

// procMemMB returns VmHWM (peak RSS) and VmRSS of pid in MiB.
func procMemMB(pid int) (hwm, rss float64, err error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		for key, dst := range map[string]*float64{"VmHWM:": &hwm, "VmRSS:": &rss} {
			if rest, ok := strings.CutPrefix(line, key); ok {
				f := strings.Fields(rest) // "123456 kB"
				if len(f) > 0 {
					kb, _ := strconv.ParseFloat(f[0], 64)
					*dst = kb / 1024
				}
			}
		}
	}
	if hwm == 0 {
		return 0, 0, fmt.Errorf("no VmHWM in /proc/%d/status", pid)
	}
	return hwm, rss, nil
}

// cpuByProcess returns the CPU seconds used so far by this test process
// ("bench (test process)") and each of its children, summed by command
// name (kube-apiserver, etcd, flotilla-worker, ...).
func cpuByProcess() map[string]float64 {
	out := map[string]float64{}
	self := os.Getpid()
	if cpu, _, _, err := procCPU(self); err == nil {
		out["bench (test process)"] = cpu
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cpu, comm, ppid, err := procCPU(pid)
		if err != nil || ppid != self {
			continue
		}
		out[comm] += cpu
	}
	return out
}

// cpuDelta is after - before, per process name, sorted by use.
func cpuDelta(before, after map[string]float64) string {
	type row struct {
		name string
		s    float64
	}
	var rows []row
	for k, v := range after {
		if d := v - before[k]; d > 0.05 {
			rows = append(rows, row{k, d})
		}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].s > rows[j].s })
	var parts []string
	for _, r := range rows {
		parts = append(parts, fmt.Sprintf("%s %.1fs", r.name, r.s))
	}
	return strings.Join(parts, ", ")
}

// waitQuiet waits until pid uses less than maxCores of CPU over one
// second, or until limit; it returns how long that took.
func waitQuiet(pid int, maxCores float64, limit time.Duration) (time.Duration, bool) {
	start := time.Now()
	prev, _, _, err := procCPU(pid)
	if err != nil {
		return 0, false
	}
	for time.Since(start) < limit {
		time.Sleep(time.Second)
		cur, _, _, err := procCPU(pid)
		if err != nil {
			return time.Since(start), false
		}
		if cur-prev < maxCores {
			return time.Since(start), true
		}
		prev = cur
	}
	return time.Since(start), false
}

// ----- Temporal: rollout runs, histories, pending activities -----

// rolloutPrefix is what every rollout workflow ID, and the ID of every
// child workflow a rollout starts, begins with.
const rolloutPrefix = "rollout/"

// runKey names one workflow run.
type runKey struct{ id, runID string }

func (k runKey) String() string { return k.id + " (run " + k.runID + ")" }

// listRuns lists the runs of workflows whose ID starts with prefix;
// runningOnly restricts the list to running ones.
func listRuns(ctx context.Context, c client.Client, prefix string, runningOnly bool) ([]runKey, error) {
	q := fmt.Sprintf("WorkflowId STARTS_WITH %q", prefix)
	if runningOnly {
		q += " AND ExecutionStatus = 'Running'"
	}
	var out []runKey
	var token []byte
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: q, NextPageToken: token})
		if err != nil {
			return nil, fmt.Errorf("list workflows (%s): %w", q, err)
		}
		for _, e := range resp.GetExecutions() {
			out = append(out, runKey{e.GetExecution().GetWorkflowId(), e.GetExecution().GetRunId()})
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return out, nil
		}
	}
}

// pendingSampler samples, every interval, the pending activities of every
// running rollout workflow run (DescribeWorkflowExecution).
type pendingSampler struct {
	mu sync.Mutex
	// maxPending is the most pending activities seen in any single run.
	maxPending int
	maxRun     runKey
	// maxRunning is the most rollout runs seen running at once.
	maxRunning int
	samples    int
	errs       int
	lastErr    error
}

func (s *pendingSampler) run(ctx context.Context, c client.Client, interval time.Duration) {
	for ctx.Err() == nil {
		next := time.Now().Add(interval)
		s.sample(ctx, c)
		select {
		case <-ctx.Done():
		case <-time.After(time.Until(next)):
		}
	}
}

func (s *pendingSampler) sample(ctx context.Context, c client.Client) {
	runs, err := listRuns(ctx, c, rolloutPrefix, true)
	if err != nil {
		s.fail(ctx, err)
		return
	}
	for _, r := range runs {
		d, err := c.DescribeWorkflowExecution(ctx, r.id, r.runID)
		if err != nil {
			s.fail(ctx, err)
			continue
		}
		n := len(d.GetPendingActivities())
		s.mu.Lock()
		if n > s.maxPending {
			s.maxPending, s.maxRun = n, r
		}
		s.mu.Unlock()
	}
	s.mu.Lock()
	s.samples++
	s.maxRunning = max(s.maxRunning, len(runs))
	s.mu.Unlock()
}

func (s *pendingSampler) fail(ctx context.Context, err error) {
	if ctx.Err() != nil {
		return // stopped mid-call
	}
	s.mu.Lock()
	s.errs++
	s.lastErr = err
	s.mu.Unlock()
}

// activityStats aggregates one activity type over all runs.
type activityStats struct {
	count     int
	run       []float64 // started → closed, ms
	queue     []float64 // scheduled → started, ms
	failed    int
	firstSch  time.Time
	lastClose time.Time
}

// runStats is what the history of one run says.
type runStats struct {
	key     runKey
	events  int
	started time.Time
	closed  time.Time
	// wfTasks counts workflow tasks; wfTaskMs adds up their
	// started → completed time (the worker running workflow code) and
	// wfQueueMs their scheduled → started time.
	wfTasks   int
	wfTaskMs  float64
	wfQueueMs float64
}

// historyReport is what the rollout's histories say.
type historyReport struct {
	runs       []runStats
	activities map[string]*activityStats
	// ready is, per cluster, the time of the first completed activity whose
	// result reports every deployment on that cluster Ready.
	ready map[string]time.Time
}

// readHistories reads the full history of every run, by GetWorkflowHistory.
func readHistories(ctx context.Context, c client.Client, runs []runKey) (*historyReport, error) {
	rep := &historyReport{activities: map[string]*activityStats{}, ready: map[string]time.Time{}}
	dc := converter.GetDefaultDataConverter()
	for _, r := range runs {
		rs := runStats{key: r}
		type sched struct {
			typ string
			at  time.Time
		}
		scheduled := map[int64]sched{}
		started := map[int64]time.Time{} // by scheduled event ID
		wfScheduled := map[int64]time.Time{}
		wfStarted := map[int64]time.Time{}
		it := c.GetWorkflowHistory(ctx, r.id, r.runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				return nil, fmt.Errorf("history of %s: %w", r, err)
			}
			rs.events++
			at := ev.GetEventTime().AsTime()
			switch ev.GetEventType() {
			case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
				rs.started = at
			case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
				enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED,
				enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED:
				rs.closed = at
			case enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
				wfScheduled[ev.GetEventId()] = at
			case enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED:
				a := ev.GetWorkflowTaskStartedEventAttributes()
				wfStarted[ev.GetEventId()] = at
				if s, ok := wfScheduled[a.GetScheduledEventId()]; ok {
					rs.wfQueueMs += ms(at.Sub(s))
				}
			case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
				a := ev.GetWorkflowTaskCompletedEventAttributes()
				rs.wfTasks++
				if s, ok := wfStarted[a.GetStartedEventId()]; ok {
					rs.wfTaskMs += ms(at.Sub(s))
				}
			case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
				typ := ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName()
				scheduled[ev.GetEventId()] = sched{typ, at}
			case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
				started[ev.GetActivityTaskStartedEventAttributes().GetScheduledEventId()] = at
			case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED, enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED,
				enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT, enumspb.EVENT_TYPE_ACTIVITY_TASK_CANCELED:
				schedID := activityScheduledID(ev)
				s := scheduled[schedID]
				st := rep.activity(s.typ)
				st.count++
				if st.firstSch.IsZero() || s.at.Before(st.firstSch) {
					st.firstSch = s.at
				}
				if at.After(st.lastClose) {
					st.lastClose = at
				}
				if t, ok := started[schedID]; ok {
					st.queue = append(st.queue, ms(t.Sub(s.at)))
					st.run = append(st.run, ms(at.Sub(t)))
				}
				if ev.GetEventType() != enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED {
					st.failed++
					continue
				}
				rep.noteReady(dc, ev.GetActivityTaskCompletedEventAttributes().GetResult().GetPayloads(), at)
			}
		}
		rep.runs = append(rep.runs, rs)
	}
	return rep, nil
}

func activityScheduledID(ev *historypb.HistoryEvent) int64 {
	switch ev.GetEventType() {
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
		return ev.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED:
		return ev.GetActivityTaskFailedEventAttributes().GetScheduledEventId()
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
		return ev.GetActivityTaskTimedOutEventAttributes().GetScheduledEventId()
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_CANCELED:
		return ev.GetActivityTaskCanceledEventAttributes().GetScheduledEventId()
	}
	return 0
}

func (rep *historyReport) activity(typ string) *activityStats {
	if typ == "" {
		typ = "?"
	}
	st := rep.activities[typ]
	if st == nil {
		st = &activityStats{}
		rep.activities[typ] = st
	}
	return st
}

// noteReady reads an activity result as a list of deployments (what the
// deploy and readiness activities return; other results decode to none)
// and records when each cluster was first seen with all of them Ready.
func (rep *historyReport) noteReady(dc converter.DataConverter, payloads []*commonpb.Payload, at time.Time) {
	if len(payloads) == 0 {
		return
	}
	var res struct {
		Deployments []status.Deployment `json:"deployments"`
	}
	if dc.FromPayload(payloads[0], &res) != nil {
		return
	}
	allReady := map[string]bool{}
	for _, d := range res.Deployments {
		if d.Cluster == "" {
			continue
		}
		r, seen := allReady[d.Cluster]
		allReady[d.Cluster] = (r || !seen) && d.State == status.Ready
	}
	for cl, ok := range allReady {
		if t, seen := rep.ready[cl]; ok && (!seen || at.Before(t)) {
			rep.ready[cl] = at
		}
	}
}

// pct is percentile for a possibly empty series: -1 when empty (JSON has
// no NaN).
func pct(v []float64, p float64) float64 {
	if len(v) == 0 {
		return -1
	}
	return percentile(v, p)
}

func sum(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s
}

// benchLog logs with b.Logf, each line prefixed with the benchmark's
// name, and, since a benchmark's log is cut to its first lines unless -v
// is given, also to <FLOTILLA_BENCH_OUT>/<name>.log.
type benchLog struct {
	b    *testing.B
	name string
	mu   sync.Mutex
	file *os.File
}

func newBenchLog(b *testing.B, name string) *benchLog {
	b.Helper()
	lg := &benchLog{b: b, name: name}
	if dir := os.Getenv("FLOTILLA_BENCH_OUT"); dir != "" {
		require.NoError(b, os.MkdirAll(dir, 0o755))
		f, err := os.Create(filepath.Join(dir, name+".log"))
		require.NoError(b, err)
		lg.file = f
		b.Cleanup(func() { _ = f.Close() }) // best effort: the log is a by-product
	}
	return lg
}

func (lg *benchLog) logf(format string, args ...any) {
	lg.b.Helper()
	msg := fmt.Sprintf(format, args...)
	lg.b.Log(lg.name + ": " + msg)
	if lg.file != nil {
		lg.mu.Lock()
		defer lg.mu.Unlock()
		fmt.Fprintf(lg.file, "%s %s\n", time.Now().Format("15:04:05.000"), msg)
	}
}

// loadAvg is the first three fields of /proc/loadavg.
func loadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(data))
	return strings.Join(f[:min(3, len(f))], " ")
}

// waitNotified waits until cluster name's workflow has no pending
// activity: it has told the GitRepos about the registration.
//
// Registering clusters faster than they notify piles the notifications
// up: each polls visibility every 50 ms until its workflow is listed
// (activities.NotifyGitRepos), and a few hundred of them at once overload
// the dev server's SQLite visibility store, so that they time out and
// retry for minutes and, once a GitRepo exists, signal it late and
// supersede its rollout. The benchmark measures a rollout, not that.
func waitNotified(ctx context.Context, c client.Client, name string) error {
	for {
		d, err := c.DescribeWorkflowExecution(ctx, protocol.ClusterID(name), "")
		if err != nil {
			return fmt.Errorf("describe cluster workflow %s: %w", name, err)
		}
		if len(d.GetPendingActivities()) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster %s: GitRepos not notified: %w", name, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// clustersBusy counts the cluster workflows with a pending activity.
func clustersBusy(ctx context.Context, c client.Client, names []string) (int, error) {
	var mu sync.Mutex
	busy := 0
	err := parallel(0, len(names), 8, func(i int) error {
		d, err := c.DescribeWorkflowExecution(ctx, protocol.ClusterID(names[i]), "")
		if err != nil {
			return fmt.Errorf("describe cluster workflow %s: %w", names[i], err)
		}
		if len(d.GetPendingActivities()) > 0 {
			mu.Lock()
			busy++
			mu.Unlock()
		}
		return nil
	})
	return busy, err
}
