package tests

import (
	"context"
	"net/http"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/flotilla-gitops/flotilla/internal/cluster"
	"github.com/flotilla-gitops/flotilla/internal/crds"
	"github.com/flotilla-gitops/flotilla/internal/fleetstatus"
	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

// writeLog records the writes (every request but GET, LIST and WATCH) a
// client makes, per object path (a status subresource counts as its
// object).
type writeLog struct {
	mu     sync.Mutex
	writes map[string][]time.Time
	next   http.RoundTripper
}

func (l *writeLog) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodGet {
		path := strings.TrimSuffix(r.URL.Path, "/status")
		l.mu.Lock()
		l.writes[path] = append(l.writes[path], time.Now())
		l.mu.Unlock()
	}
	return l.next.RoundTrip(r)
}

// since returns the writes per path at or after t.
func (l *writeLog) since(t time.Time) map[string][]time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string][]time.Time{}
	for p, ts := range l.writes {
		for _, w := range ts {
			if !w.Before(t) {
				out[p] = append(out[p], w)
			}
		}
	}
	return out
}

var (
	fsGitRepoGVR = schema.GroupVersionResource{Group: "fleet.cattle.io", Version: "v1alpha1", Resource: "gitrepos"}
	fsBundleGVR  = schema.GroupVersionResource{Group: "fleet.cattle.io", Version: "v1alpha1", Resource: "bundles"}
)

// TestFleetStatus: Fleet's status of a GitRepo rolled out to 100 clusters
// is written to a management cluster (Fleet's CRDs, a real
// kube-apiserver): `kubectl wait --for=condition=Ready` right after the
// apply returns only once every cluster runs the commit, `kubectl get
// gitrepos -A` shows Fleet's columns with real values, `kubectl get
// bundles -A` lists the bundle's read-only mirror (an edit of it is
// reverted; Forget deletes it), an Event reports the rollout, and writes
// are debounced: at most one per object per 2 s during the rollout, none
// in 10 s once settled.
func TestFleetStatus(t *testing.T) {
	const n = 100
	f := startFleet(t, 2, 0)
	mgmt, down := f.clusters[0], f.clusters[1]
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	require.NoError(t, crds.Install(ctx, mgmt.RESTConfig()))
	c := f.w.client(t)
	key, err := cluster.CurrentKey(ctx, c)
	require.NoError(t, err)
	names := make([]string, n)
	for i := range names {
		names[i] = virtualClusterName(i)
	}
	require.NoError(t, parallel(0, n, 8, func(i int) error {
		if err := registerClusterDirect(ctx, c, key, names[i], down.KubeconfigPath, map[string]string{"fleetstatus": "member"}); err != nil {
			return err
		}
		return waitNotified(ctx, c, names[i])
	}))
	require.Eventually(t, func() bool { // visible to the rollout's listing
		l, err := cluster.NewRegistry(c, nil).Clusters(ctx)
		return err == nil && len(l) == n
	}, 30*time.Second, 200*time.Millisecond)

	repo := f.git.CreateRepo(t, "fleetstatus", map[string]string{
		"app/fleet.yaml": fanoutFleetYAML(names, true, false), "app/configmap.yaml": configMapDoc("fs", "1"),
	})
	f.apply(t, gitRepoDoc("fs", repo.URL(), selectorTarget("fleetstatus", "member")))

	// The same GitRepo in the management cluster, and a Writer following it.
	cfg := mgmt.RESTConfig()
	writes := &writeLog{writes: map[string][]time.Time{}}
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { writes.next = rt; return writes }
	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	kube, err := kubernetes.NewForConfig(mgmt.RESTConfig())
	require.NoError(t, err)
	_, err = kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fleet-default"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	obj, err := dyn.Resource(fsGitRepoGVR).Namespace("fleet-default").Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "fleet.cattle.io/v1alpha1", "kind": "GitRepo", "metadata": map[string]any{"name": "fs", "namespace": "fleet-default"},
		"spec": map[string]any{"repo": repo.URL(), "targets": []any{map[string]any{"clusterSelector": map[string]any{"matchLabels": map[string]any{"fleetstatus": "member"}}}}},
	}}, metav1.CreateOptions{})
	require.NoError(t, err)
	w := fleetstatus.NewWriter(fleetstatus.WriterConfig{Dynamic: dyn, Kube: kube, Temporal: c, Logger: zaptest.NewLogger(t),
		MinInterval: 2 * time.Second, SettledInterval: 4 * time.Second})
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	defer func() { stop(); require.NoError(t, <-done) }()
	ref := fleetstatus.Ref{Kind: "GitRepo", Namespace: "fleet-default", Name: "fs", Generation: obj.GetGeneration(), UID: obj.GetUID()}
	start := time.Now()
	w.Track(ref)

	k := crdKubectl{bin: filepath.Join(testenv.Binaries(t), "kubectl"), kubeconfig: mgmt.KubeconfigPath, cacheDir: t.TempDir()}
	t.Run("kubectl wait returns once the rollout is done", func(t *testing.T) {
		k.run(t, "", "wait", "--for=condition=Ready", "gitrepo/fs", "-n", "fleet-default", "--timeout=150s")
		st := f.status(t, "fs")
		assert.Equal(t, n, st.Summary.Ready, "Ready only once every cluster runs the commit: %+v %s", st.Display, st.Error)
		assert.Equal(t, repo.Head(t), st.Commit)
		t.Logf("Ready after %s", time.Since(start).Round(time.Millisecond))
	})

	t.Run("kubectl get shows Fleet's columns", func(t *testing.T) {
		out := k.run(t, "", "get", "gitrepos", "-A")
		assert.Regexp(t, `(?m)^fleet-default\s+fs\s+`+repo.URL()+`\s+`+repo.Head(t)+`\s+100/100\s*$`, out)
		// A new mirror gets its status on the sync after its creation.
		require.Eventually(t, func() bool {
			out = k.run(t, "", "get", "bundles", "-A")
			return regexp.MustCompile(`(?m)^fleet-default\s+fs-app\s+100/100\s*$`).MatchString(out)
		}, 5*time.Second, 200*time.Millisecond, "kubectl get bundles -A")
	})

	t.Run("an Event reports the rollout", func(t *testing.T) {
		require.Eventually(t, func() bool {
			evs, err := kube.CoreV1().Events("fleet-default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=fs"})
			require.NoError(t, err)
			for _, e := range evs.Items {
				if e.Reason == fleetstatus.ReasonRolloutSucceeded && strings.Contains(e.Message, "100/100") {
					assert.Equal(t, "flotilla", e.Source.Component)
					return true
				}
			}
			return false
		}, 15*time.Second, 200*time.Millisecond)
	})

	t.Run("writes are debounced and stop once settled", func(t *testing.T) {
		during := writes.since(start)
		gitRepoPath := "/apis/fleet.cattle.io/v1alpha1/namespaces/fleet-default/gitrepos/fs"
		require.NotEmpty(t, during[gitRepoPath], "the GitRepo's status was written")
		for path, ts := range during {
			sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
			for i := 1; i < len(ts); i++ {
				assert.GreaterOrEqual(t, ts[i].Sub(ts[i-1]), 1950*time.Millisecond, "%s written twice within 2 s: %v", path, ts)
			}
		}
		t.Logf("writes during the rollout: %v", counts(during))
		// Settled: once the last pending write is done (the mirror's
		// status follows its creation), 10 s without any.
		require.Eventually(t, func() bool { return len(writes.since(time.Now().Add(-3*time.Second))) == 0 },
			20*time.Second, 200*time.Millisecond)
		quiet := time.Now()
		assert.Never(t, func() bool { return len(writes.since(quiet)) > 0 }, 10*time.Second, 250*time.Millisecond,
			"writes while nothing changed")
	})

	t.Run("Cluster and ClusterGroup status", func(t *testing.T) {
		f.apply(t, "apiVersion: flotilla.dev/v1alpha1\nkind: ClusterGroup\nmetadata:\n  name: members\nspec:\n  selector:\n    matchLabels:\n      fleetstatus: member\n")
		for kind, name := range map[string]string{"Cluster": names[0], "ClusterGroup": "members"} {
			o, err := dyn.Resource(schema.GroupVersionResource{Group: "fleet.cattle.io", Version: "v1alpha1", Resource: strings.ToLower(kind) + "s"}).
				Namespace("fleet-default").Create(ctx, &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "fleet.cattle.io/v1alpha1", "kind": kind, "metadata": map[string]any{"name": name, "namespace": "fleet-default"},
				"spec": map[string]any{}}}, metav1.CreateOptions{})
			require.NoError(t, err)
			w.Track(fleetstatus.Ref{Kind: kind, Namespace: "fleet-default", Name: name, Generation: o.GetGeneration(), UID: o.GetUID()})
		}
		require.Eventually(t, func() bool {
			out := k.run(t, "", "get", "clusters.fleet.cattle.io", "-A")
			return regexp.MustCompile(`(?m)^fleet-default\s+` + names[0] + `\s+1/1\s`).MatchString(out)
		}, 15*time.Second, 250*time.Millisecond, "Cluster: Bundles-Ready")
		require.Eventually(t, func() bool {
			out := k.run(t, "", "get", "clustergroups.fleet.cattle.io", "-A")
			return regexp.MustCompile(`(?m)^fleet-default\s+members\s+100/100\s+100/100\s*$`).MatchString(out)
		}, 20*time.Second, 250*time.Millisecond, "ClusterGroup: Clusters-Ready, Bundles-Ready")
	})

	t.Run("a mirror edit is reverted; Forget deletes the mirrors", func(t *testing.T) {
		bundles := dyn.Resource(fsBundleGVR).Namespace("fleet-default")
		b, err := bundles.Get(ctx, "fs-app", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, "read-only", b.GetAnnotations()["flotilla.dev/mirror"])
		assert.Equal(t, "fs", b.GetLabels()["fleet.cattle.io/repo-name"])
		assert.Equal(t, obj.GetUID(), b.GetOwnerReferences()[0].UID)
		b.Object["spec"] = map[string]any{"paused": true}
		_, err = bundles.Update(ctx, b, metav1.UpdateOptions{})
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			b, err := bundles.Get(ctx, "fs-app", metav1.GetOptions{})
			require.NoError(t, err)
			return len(b.Object["spec"].(map[string]any)) == 0
		}, 15*time.Second, 200*time.Millisecond, "the edit is reverted")

		w.Forget(ref)
		require.Eventually(t, func() bool {
			l, err := bundles.List(ctx, metav1.ListOptions{})
			require.NoError(t, err)
			return len(l.Items) == 0
		}, 10*time.Second, 200*time.Millisecond)
	})
}

func counts(m map[string][]time.Time) map[string]int {
	out := map[string]int{}
	for p, ts := range m {
		out[p[strings.LastIndex(p, "/")+1:]] = len(ts)
	}
	return out
}
