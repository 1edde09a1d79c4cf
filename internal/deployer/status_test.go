package deployer_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chart"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/flotilla-gitops/flotilla/internal/deployer"
)

// jobTemplate renders Job "migrate". Without controllers it never starts.
const jobTemplate = `apiVersion: batch/v1
kind: Job
metadata:
  name: migrate
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: migrate
        image: registry.invalid/migrate:1
`

// gadgetCRD defines a namespaced custom resource with a status subresource.
// Its name differs from the post-render group's widgets.example.com, which
// that group asserts is never created.
const gadgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.status.example.com
spec:
  group: status.example.com
  names: {kind: Gadget, listKind: GadgetList, plural: gadgets, singular: gadget}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`

// gadgetTemplate renders Gadget "thing".
const gadgetTemplate = `apiVersion: status.example.com/v1
kind: Gadget
metadata:
  name: thing
`

var gadgets = schema.GroupVersionResource{Group: "status.example.com", Version: "v1", Resource: "gadgets"}

// testStatus is TestOnBareCluster's Status and WaitReady group.
func testStatus(t *testing.T, f *fixture) {
	none := deployer.ReadyOptions{}

	t.Run("ConfigMap is ready", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		d := newDeployer(t)
		mustDeploy(ctx, t, d, f, "ready", "id-1", "one")
		want := deployer.Status{DeploymentID: "id-1", Revision: 1, Resources: 1, Ready: 1}

		st, err := d.Status(ctx, f.getter, "ready", "app", none)
		require.NoError(t, err)
		assert.Equal(t, want, st)
		assert.True(t, st.AllReady())

		var seen []deployer.Status
		st, err = d.WaitReady(ctx, f.getter, "ready", "app", none, time.Hour, func(s deployer.Status) { seen = append(seen, s) })
		require.NoError(t, err, "WaitReady returns at once, without waiting an interval")
		assert.Equal(t, want, st)
		assert.Equal(t, []deployer.Status{want}, seen, "progress")
	})

	t.Run("Deployment on a cluster without controllers is not ready", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		d := newDeployer(t)
		mustDeployWeb(ctx, t, d, f, "notready")
		want := deployer.Status{
			DeploymentID: "id-1", Revision: 1, Resources: 2, Ready: 1,
			NotReady:      []string{"Deployment notready/web: Replicas: 0/1"},
			NotReadyCount: 1,
		}

		st, err := d.Status(ctx, f.getter, "notready", "app", none)
		require.NoError(t, err)
		assert.Equal(t, want, st)
		assert.False(t, st.AllReady())

		// The caller gives up after the second poll.
		waitCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		polls := 0
		st, err = d.WaitReady(waitCtx, f.getter, "notready", "app", none, 10*time.Millisecond, func(deployer.Status) {
			if polls++; polls == 2 {
				cancel()
			}
		})
		require.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, want, st, "the last status")
		assert.Equal(t, 2, polls, "progress calls")
	})

	// Without controllers nothing but the test writes a Deployment's status,
	// so the test plays the deployment controller.
	t.Run("Deployment status decides readiness", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		d := newDeployer(t)
		mustDeployWeb(ctx, t, d, f, "depstatus")

		f.setDeploymentStatus(ctx, t, "depstatus", "web", func(dep *appsv1.Deployment) {
			dep.Status = appsv1.DeploymentStatus{
				ObservedGeneration: dep.Generation,
				Replicas:           1, UpdatedReplicas: 1, ReadyReplicas: 0, AvailableReplicas: 0,
			}
		})
		st, err := d.Status(ctx, f.getter, "depstatus", "app", none)
		require.NoError(t, err)
		assert.Equal(t, deployer.Status{
			DeploymentID: "id-1", Revision: 1, Resources: 2, Ready: 1,
			NotReady:      []string{"Deployment depstatus/web: Available: 0/1"},
			NotReadyCount: 1,
		}, st)

		f.setDeploymentStatus(ctx, t, "depstatus", "web", func(dep *appsv1.Deployment) {
			dep.Status = appsv1.DeploymentStatus{
				ObservedGeneration: dep.Generation,
				Replicas:           1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
				Conditions: []appsv1.DeploymentCondition{
					{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"},
					{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable"},
				},
			}
		})
		st, err = d.Status(ctx, f.getter, "depstatus", "app", none)
		require.NoError(t, err)
		assert.Equal(t, deployer.Status{DeploymentID: "id-1", Revision: 1, Resources: 2, Ready: 2}, st)
		assert.True(t, st.AllReady())
	})

	t.Run("Job is ready once created, or once complete with WaitForJobs", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		d := newDeployer(t)
		rel := testRelease("jobs", "app", "id-1", "one")
		rel.Chart = testChart(jobTemplate)
		_, err := d.Deploy(ctx, f.getter, rel)
		require.NoError(t, err)
		allReady := deployer.Status{DeploymentID: "id-1", Revision: 1, Resources: 2, Ready: 2}

		st, err := d.Status(ctx, f.getter, "jobs", "app", none)
		require.NoError(t, err)
		assert.Equal(t, allReady, st, "a Job that has not failed is ready without WaitForJobs")

		waitForJobs := deployer.ReadyOptions{WaitForJobs: true}
		st, err = d.Status(ctx, f.getter, "jobs", "app", waitForJobs)
		require.NoError(t, err)
		assert.Equal(t, deployer.Status{
			DeploymentID: "id-1", Revision: 1, Resources: 2, Ready: 1,
			NotReady:      []string{"Job jobs/migrate: Job not started"},
			NotReadyCount: 1,
		}, st)

		// The test plays the Job controller finishing the Job.
		job, err := f.cs.BatchV1().Jobs("jobs").Get(ctx, "migrate", metav1.GetOptions{})
		require.NoError(t, err)
		start := metav1.NewTime(time.Now().Add(-time.Minute).Truncate(time.Second))
		end := metav1.NewTime(start.Add(30 * time.Second))
		job.Status = batchv1.JobStatus{
			StartTime: &start, CompletionTime: &end, Succeeded: 1,
			Conditions: []batchv1.JobCondition{
				{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: end},
				{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: end},
			},
		}
		_, err = f.cs.BatchV1().Jobs("jobs").UpdateStatus(ctx, job, metav1.UpdateOptions{})
		require.NoError(t, err)

		st, err = d.Status(ctx, f.getter, "jobs", "app", waitForJobs)
		require.NoError(t, err)
		assert.Equal(t, allReady, st, "a complete Job is ready with WaitForJobs")
	})

	t.Run("ignored conditions do not make a custom resource not ready", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		d := newDeployer(t)
		rel := testRelease("ignored", "app", "id-1", "one")
		rel.Chart = testChart(gadgetTemplate)
		rel.Chart.Files = append(rel.Chart.Files, &chart.File{Name: "crds/gadgets.yaml", Data: []byte(gadgetCRD)})
		_, err := d.Deploy(ctx, f.getter, rel)
		require.NoError(t, err)

		dyn, err := dynamic.NewForConfig(f.config)
		require.NoError(t, err)
		gadget, err := dyn.Resource(gadgets).Namespace("ignored").Get(ctx, "thing", metav1.GetOptions{})
		require.NoError(t, err)
		require.NoError(t, unstructured.SetNestedSlice(gadget.Object, []any{
			map[string]any{"type": "Ready", "status": "False", "reason": "Down", "message": "backend down"},
		}, "status", "conditions"))
		_, err = dyn.Resource(gadgets).Namespace("ignored").UpdateStatus(ctx, gadget, metav1.UpdateOptions{})
		require.NoError(t, err)

		st, err := d.Status(ctx, f.getter, "ignored", "app", none)
		require.NoError(t, err)
		assert.Equal(t, deployer.Status{
			DeploymentID: "id-1", Revision: 1, Resources: 2, Ready: 1,
			NotReady:      []string{"Gadget ignored/thing: backend down"},
			NotReadyCount: 1,
		}, st)

		ignore := deployer.ReadyOptions{IgnoreConditions: []map[string]string{{"type": "Ready", "status": "False"}}}
		want := deployer.Status{DeploymentID: "id-1", Revision: 1, Resources: 2, Ready: 2}
		st, err = d.Status(ctx, f.getter, "ignored", "app", ignore)
		require.NoError(t, err)
		assert.Equal(t, want, st)

		st, err = d.WaitReady(ctx, f.getter, "ignored", "app", ignore, time.Hour, nil)
		require.NoError(t, err, "WaitReady judges with the same options, so returns at once")
		assert.Equal(t, want, st)

		// Status only reads: the condition is still on the object.
		gadget, err = dyn.Resource(gadgets).Namespace("ignored").Get(ctx, "thing", metav1.GetOptions{})
		require.NoError(t, err)
		conds, _, err := unstructured.NestedSlice(gadget.Object, "status", "conditions")
		require.NoError(t, err)
		assert.Len(t, conds, 1, "conditions on the cluster")
	})

	t.Run("deleted object is missing", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		d := newDeployer(t)
		mustDeploy(ctx, t, d, f, "missing", "id-1", "one")
		require.NoError(t, f.cs.CoreV1().ConfigMaps("missing").Delete(ctx, "app", metav1.DeleteOptions{}))

		st, err := d.Status(ctx, f.getter, "missing", "app", none)

		require.NoError(t, err)
		assert.Equal(t, deployer.Status{
			DeploymentID: "id-1", Revision: 1, Resources: 1, Ready: 0,
			Missing:      []string{"ConfigMap missing/app"},
			MissingCount: 1,
		}, st)
		assert.False(t, st.AllReady())
	})

	t.Run("unknown release is not found", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		d := newDeployer(t)

		_, err := d.Status(ctx, f.getter, metav1.NamespaceDefault, "never-installed", none)
		require.ErrorIs(t, err, deployer.ErrNotFound)

		_, err = d.WaitReady(ctx, f.getter, metav1.NamespaceDefault, "never-installed", none, time.Millisecond, nil)
		require.ErrorIs(t, err, deployer.ErrNotFound)
	})
}

// setDeploymentStatus writes the status set makes of Deployment name's,
// through the status subresource, as the deployment controller would.
func (f *fixture) setDeploymentStatus(ctx context.Context, t *testing.T, namespace, name string, set func(*appsv1.Deployment)) {
	t.Helper()
	dep, err := f.cs.AppsV1().Deployments(namespace).Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	set(dep)
	_, err = f.cs.AppsV1().Deployments(namespace).UpdateStatus(ctx, dep, metav1.UpdateOptions{})
	require.NoError(t, err)
}
