package testenv_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

// Two virtual clusters of one API server each have their own namespace
// "shared-ns": objects of the same name in it are two objects, each
// shown in "shared-ns", stored in its backing namespace, in JSON and in
// protobuf, and watches see them there.
func TestNamespaceProxy_VirtualClustersAreIsolated(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real API server")
	}
	api := testenv.StartClusters(t, 1, testenv.Options{})[0]
	p := testenv.StartNamespaceProxy(t, api, "shared-ns")
	ctx := t.Context()
	vcs := []*testenv.VirtualCluster{p.Add(t, "vc-a", "backing-a"), p.Add(t, "vc-b", "backing-b")}
	for i, vc := range vcs {
		cfg := mustConfig(t, vc.KubeconfigPath)
		if i == 1 {
			cfg.ContentType = "application/vnd.kubernetes.protobuf"
		}
		cs, err := kubernetes.NewForConfig(cfg)
		require.NoError(t, err)
		ns, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shared-ns"}}, metav1.CreateOptions{})
		require.NoError(t, err, vc.Name)
		assert.Equal(t, "shared-ns", ns.Name)

		w, err := cs.CoreV1().ConfigMaps("shared-ns").Watch(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "shared-ns"},
			Data: map[string]string{"cluster": vc.Name, "ns": "shared-ns"}}
		_, err = cs.CoreV1().ConfigMaps("shared-ns").Create(ctx, cm, metav1.CreateOptions{})
		require.NoError(t, err, vc.Name)
		select {
		case ev := <-w.ResultChan():
			require.Equal(t, watch.Added, ev.Type, "%+v", ev.Object)
			got := ev.Object.(*corev1.ConfigMap)
			assert.Equal(t, "shared-ns", got.Namespace)
			assert.Equal(t, vc.Name, got.Data["cluster"])
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no watch event", vc.Name)
		}
		w.Stop()
		got, err := cs.CoreV1().ConfigMaps("shared-ns").Get(ctx, "app", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, map[string]string{"cluster": vc.Name, "ns": "shared-ns"}, got.Data)
	}
	// A watch still open when the test ends (a worker stopped after the
	// proxy) must not keep the proxy's cleanup waiting.
	cs, err := kubernetes.NewForConfig(mustConfig(t, vcs[0].KubeconfigPath))
	require.NoError(t, err)
	_, err = cs.CoreV1().ConfigMaps("shared-ns").Watch(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)

	// On the API server: one ConfigMap per backing namespace.
	for _, vc := range vcs {
		cm, err := api.Clientset(t).CoreV1().ConfigMaps(vc.Backing).Get(ctx, "app", metav1.GetOptions{})
		require.NoError(t, err, vc.Name)
		assert.Equal(t, map[string]string{"cluster": vc.Name, "ns": vc.Backing}, cm.Data)
	}
}

func mustConfig(t *testing.T, kubeconfig string) *rest.Config {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	require.NoError(t, err)
	return cfg
}
