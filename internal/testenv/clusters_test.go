package testenv_test

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

func TestStartClusters_IsolatedAndVersioned(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real API servers")
	}
	testenv.Binaries(t) // A cold build must not count against the start time.

	start := time.Now()
	clusters := testenv.StartClusters(t, 2, testenv.Options{})
	t.Logf("started 2 clusters in %s", time.Since(start).Round(time.Millisecond))

	require.Len(t, clusters, 2)
	assert.Equal(t, "cluster-1", clusters[0].Name)
	assert.Equal(t, "cluster-2", clusters[1].Name)
	ctx := t.Context()
	cs1, cs2 := clusters[0].Clientset(t), clusters[1].Clientset(t)

	version, err := cs1.Discovery().ServerVersion()
	require.NoError(t, err)
	assert.Equal(t, "v1.37.1", version.GitVersion)

	probe := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "isolation-probe", Namespace: metav1.NamespaceDefault},
		Data:       map[string]string{"cluster": clusters[0].Name},
	}
	_, err = cs1.CoreV1().ConfigMaps(metav1.NamespaceDefault).Create(ctx, probe, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = cs1.CoreV1().ConfigMaps(metav1.NamespaceDefault).Get(ctx, probe.Name, metav1.GetOptions{})
	require.NoError(t, err)
	_, err = cs2.CoreV1().ConfigMaps(metav1.NamespaceDefault).Get(ctx, probe.Name, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "cluster-2 must not see cluster-1's ConfigMap, got err=%v", err)

	// The kubeconfig file works on its own, as Helm or kubectl would use it.
	onDisk, err := os.ReadFile(clusters[1].KubeconfigPath)
	require.NoError(t, err)
	assert.Equal(t, clusters[1].Kubeconfig, onDisk)
	cfg, err := clientcmd.BuildConfigFromFlags("", clusters[1].KubeconfigPath)
	require.NoError(t, err)
	fromFile, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	_, err = fromFile.CoreV1().Namespaces().Get(ctx, metav1.NamespaceDefault, metav1.GetOptions{})
	require.NoError(t, err)
}

func TestStartClusters_SimRollsOutAndCollectsGarbage(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real API servers and controllers")
	}
	testenv.Binaries(t)

	start := time.Now()
	clusters := testenv.StartClusters(t, 1, testenv.Options{Sim: true})
	t.Logf("started 1 simulated cluster in %s", time.Since(start).Round(time.Millisecond))
	cs := clusters[0].Clientset(t)
	ctx := t.Context()
	ns := metav1.NamespaceDefault

	labels := map[string]string{"app": "web"}
	deploy := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name:  "web",
					Image: "registry.k8s.io/pause:3.10", // Never pulled: kwok only fakes the pod.
				}}},
			},
		},
	}
	rolloutStart := time.Now()
	_, err := cs.AppsV1().Deployments(ns).Create(ctx, deploy, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, deploy.Name, metav1.GetOptions{})
		return err == nil && d.Status.AvailableReplicas == 1 && deploymentAvailable(d)
	}, 60*time.Second, 100*time.Millisecond, "deployment never became Available")
	t.Logf("deployment Available after %s", time.Since(rolloutStart).Round(time.Millisecond))

	owner, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "owner", Namespace: ns},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	dependent, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name:      "dependent",
			Namespace: ns,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1",
				Kind:       "ConfigMap",
				Name:       owner.Name,
				UID:        owner.UID,
			}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	gcStart := time.Now()
	require.NoError(t, cs.CoreV1().ConfigMaps(ns).Delete(ctx, owner.Name, metav1.DeleteOptions{
		PropagationPolicy: ptr.To(metav1.DeletePropagationBackground),
	}))
	require.Eventually(t, func() bool {
		_, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, dependent.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, 60*time.Second, 100*time.Millisecond, "dependent ConfigMap was never garbage collected")
	t.Logf("dependent collected after %s", time.Since(gcStart).Round(time.Millisecond))
}

// deploymentAvailable reports whether d has the condition Available=True.
func deploymentAvailable(d *appsv1.Deployment) bool {
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// TestCluster_StopStartAndRevokedToken: a stopped API server refuses
// connections; started again it serves the same data on the same address
// to the same kubeconfigs; a ServiceAccount's token works until the
// ServiceAccount is deleted, then gets 401.
func TestCluster_StopStartAndRevokedToken(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real API servers")
	}
	testenv.Binaries(t)
	c := testenv.StartClusters(t, 1, testenv.Options{})[0]
	ctx := t.Context()
	admin := c.Clientset(t)

	saPath := c.ServiceAccountKubeconfig(t, "deployer-ns", "deployer")
	saCfg, err := clientcmd.BuildConfigFromFlags("", saPath)
	require.NoError(t, err)
	asSA, err := kubernetes.NewForConfig(saCfg)
	require.NoError(t, err)
	_, err = asSA.CoreV1().ConfigMaps(metav1.NamespaceDefault).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "before-restart"}}, metav1.CreateOptions{})
	require.NoError(t, err, "the ServiceAccount is cluster-admin")

	c.Stop()
	_, err = admin.CoreV1().Namespaces().Get(ctx, metav1.NamespaceDefault, metav1.GetOptions{})
	require.Error(t, err)
	assert.ErrorContains(t, err, "connection refused")

	start := time.Now()
	c.Start(t)
	t.Logf("restarted in %s", time.Since(start).Round(time.Millisecond))
	fromFile, err := clientcmd.BuildConfigFromFlags("", c.KubeconfigPath)
	require.NoError(t, err)
	viaFile, err := kubernetes.NewForConfig(fromFile)
	require.NoError(t, err)
	_, err = viaFile.CoreV1().Namespaces().Get(ctx, metav1.NamespaceDefault, metav1.GetOptions{})
	require.NoError(t, err, "the kubeconfig written at the first start stays valid")
	_, err = asSA.CoreV1().ConfigMaps(metav1.NamespaceDefault).Get(ctx, "before-restart", metav1.GetOptions{})
	require.NoError(t, err, "data and the ServiceAccount token survive a restart")

	require.NoError(t, admin.CoreV1().ServiceAccounts("deployer-ns").Delete(ctx, "deployer", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		_, err = asSA.CoreV1().ConfigMaps(metav1.NamespaceDefault).Get(ctx, "before-restart", metav1.GetOptions{})
		return apierrors.IsUnauthorized(err)
	}, 30*time.Second, 200*time.Millisecond, "token of a deleted ServiceAccount must get 401, got %v", err)
}
