package deployer_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/internal/deployer"
	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

// TestOnBareCluster runs the post-render, Status, cleanup, rollback, CRD and
// history groups on one cluster without controllers, as starting a cluster
// costs more than a group. Namespaces are unique across groups. The groups
// run one after the other, the subtests of each in parallel.
func TestOnBareCluster(t *testing.T) {
	f := newFixture(t)
	t.Run("post-render", func(t *testing.T) { testPostRender(t, f) })
	t.Run("status", func(t *testing.T) { testStatus(t, f) })
	t.Run("cleanup", func(t *testing.T) { testCleanup(t, f) })
	t.Run("rollback", func(t *testing.T) { testRollback(t, f) })
	t.Run("crds", func(t *testing.T) { testCRDs(t, f) })
	t.Run("history", func(t *testing.T) { testHistory(t, f) })
}

// TestWithControllers covers what needs controllers to happen: Deployments
// becoming available, namespaces finishing termination.
func TestWithControllers(t *testing.T) {
	f := newFixtureWith(t, testenv.Options{Sim: true})

	t.Run("WaitReady returns once the Deployment is available", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		d := newDeployer(t)
		mustDeployWeb(ctx, t, d, f, "available")

		var last deployer.Status
		st, err := d.WaitReady(ctx, f.getter, "available", "app", deployer.ReadyOptions{}, 200*time.Millisecond, func(s deployer.Status) { last = s })

		require.NoError(t, err)
		assert.Equal(t, deployer.Status{DeploymentID: "id-1", Revision: 1, Resources: 2, Ready: 2}, st)
		assert.Equal(t, st, last, "progress saw the final status")
	})

	t.Run("DeleteNamespace removes the namespace and its objects", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		d := newDeployer(t)
		mustDeploy(ctx, t, d, f, "removed", "id-1", "one")

		require.NoError(t, d.DeleteNamespace(ctx, f.getter, deployer.NamespaceDeletion{Namespace: "removed", Release: "app"}))

		require.Eventually(t, func() bool {
			_, err := f.cs.CoreV1().Namespaces().Get(ctx, "removed", metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}, time.Minute, 200*time.Millisecond, "namespace is gone")
		require.NoError(t, d.DeleteNamespace(ctx, f.getter, deployer.NamespaceDeletion{Namespace: "removed", Release: "app"}), "DeleteNamespace of a deleted namespace")
	})
}

// waiterTemplate renders Pod "waiter", bound to a node no kubelet runs: it
// becomes ready only when the test says so (markPodReady).
const waiterTemplate = `apiVersion: v1
kind: Pod
metadata:
  name: waiter
spec:
  nodeName: node-1
  containers:
  - name: waiter
    image: registry.invalid/waiter:1
`

// TestSameReleaseOnTwoClusters shows that deploys of one release (same
// namespace and name) to two clusters run at the same time in one
// process: each holds its lock while Helm waits for its Pod.
func TestSameReleaseOnTwoClusters(t *testing.T) {
	var fs []*fixture
	for _, c := range testenv.StartClusters(t, 2, testenv.Options{}) {
		getter, err := deployer.NewRESTClientGetter(c.RESTConfig(), metav1.NamespaceDefault)
		require.NoError(t, err)
		fs = append(fs, &fixture{cs: c.Clientset(t), config: c.RESTConfig(), getter: getter})
	}
	ctx := testContext(t)
	d := newDeployer(t)
	results := make(chan error, len(fs))
	for _, f := range fs {
		go func() {
			rel := testRelease("overlap", "app", "id-1", "one")
			rel.Chart = testChart(waiterTemplate)
			rel.Wait, rel.Timeout = true, time.Minute
			_, err := d.Deploy(ctx, f.getter, rel)
			results <- err
		}()
	}

	// An install's record is pending while Helm waits: both at once means
	// neither deploy waited for the other.
	assert.Eventually(t, func() bool {
		for _, f := range fs {
			list, err := f.cs.CoreV1().Secrets("overlap").List(ctx, metav1.ListOptions{LabelSelector: "owner=helm,name=app,status=pending-install"})
			if err != nil || len(list.Items) == 0 {
				return false
			}
		}
		return true
	}, 30*time.Second, 50*time.Millisecond, "both deploys wait for their Pod at the same time")

	for _, f := range fs {
		markPodReady(ctx, t, f, "overlap", "waiter")
	}
	for range fs {
		require.NoError(t, <-results)
	}
}

// markPodReady waits for Pod ns/name and reports it Running and Ready, as
// a kubelet would.
func markPodReady(ctx context.Context, t *testing.T, f *fixture, ns, name string) {
	t.Helper()
	require.Eventually(t, func() bool {
		pod, err := f.cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		pod.Status.Phase = corev1.PodRunning
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		_, err = f.cs.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		return err == nil
	}, time.Minute, 50*time.Millisecond, "Pod %s/%s reported ready", ns, name)
}
