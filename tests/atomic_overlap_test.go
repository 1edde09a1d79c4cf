package tests

import (
	"context"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// atomicReady is how long after it appears each cluster's Deployment of
// TestAtomicOverlap becomes available: Helm's wait (helm.atomic) holds
// each deploy at least that long.
const atomicReady = 10 * time.Second

// TestAtomicOverlap deploys one bundle with helm.atomic (so Helm waits for
// its Deployment, which becomes available atomicReady after it appears) to
// three push-mode clusters, each in the same namespace under the same
// release name. Helm's locks are per cluster, so the three deploys run at
// once: every Deploy activity waits about atomicReady (Helm did wait), the
// three overlap, and all are done within 15 s of the first start; with
// one lock per release name they would take 3 × atomicReady one after the
// other. The times are those Temporal recorded for the Deploy activities
// of the rollout (started, completed).
func TestAtomicOverlap(t *testing.T) {
	const name, ns = "atomic", "atomic-ns"
	const release = name + "-app"
	clusters := []string{"cluster-1", "cluster-2", "cluster-3"}
	f := startFleet(t, 3, 3)
	stop := f.rolloutAfter(t, clusters, ns, "app", atomicReady)
	defer stop()

	repo := f.git.CreateRepo(t, name, map[string]string{
		"app/fleet.yaml":  fleetYAML(ns) + "helm:\n  atomic: true\n",
		"app/deploy.yaml": deploymentDoc("app", false),
	})
	applied := time.Now()
	f.apply(t, gitRepoDoc(name, repo.URL(), allClusters))
	defer f.remove(t, name)
	f.waitForWithin(t, name, "the atomic bundle Ready on the three clusters", 90*time.Second, settledAt(repo.Head(t), len(clusters)))
	t.Logf("settled %s after the apply", time.Since(applied).Round(time.Millisecond))

	spans := f.deploySpans(t, "fleet-default", name)
	var first, last time.Time
	for _, c := range clusters {
		// The first Deploy is the install; a later rollout's (a no-op at
		// the same deployment ID, once the cluster's watch reported) may
		// follow it.
		require.NotEmpty(t, spans[c], "cluster %s: a Deploy activity", c)
		s := spans[c][0]
		t.Logf("cluster %s: Deploy started %s, completed %s (%s)", c, s.started.Format("15:04:05.000"),
			s.closed.Format("15:04:05.000"), s.closed.Sub(s.started).Round(time.Millisecond))
		require.False(t, s.failed, "cluster %s: the Deploy activity failed", c)
		// Helm's wait is what makes the deploys long enough to overlap, or
		// to queue behind each other: without it the test proves nothing.
		assert.GreaterOrEqual(t, s.closed.Sub(s.started), atomicReady-time.Second,
			"cluster %s: the deploy did not wait for its Deployment", c)
		if first.IsZero() || s.started.Before(first) {
			first = s.started
		}
		last = latest(last, s.closed)
	}
	t.Logf("three deploys: %s from the first start to the last completion", last.Sub(first).Round(time.Millisecond))
	assert.Less(t, last.Sub(first), 15*time.Second, "the three deploys ran one after the other, not at once")

	// The activities start together either way (a lock is taken inside
	// them); Helm's first record, written as its install begins, says when
	// each install really started.
	var installs []time.Time
	for _, c := range clusters {
		installs = append(installs, f.firstReleaseRecord(t, c, ns, release))
		assert.Equal(t, 1, f.releaseRevisions(t, c, ns, release), "cluster %s: one install, no rollback", c)
	}
	sort.Slice(installs, func(i, j int) bool { return installs[i].Before(installs[j]) })
	t.Logf("Helm's installs began at %v", installs)
	assert.Less(t, installs[len(installs)-1].Sub(installs[0]), atomicReady/2,
		"an install began only after another one's wait: they queued on one lock")
}

// latest is the later of a and b.
func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// activitySpan is when one activity ran, as its history records it.
type activitySpan struct {
	started, closed time.Time
	failed          bool
}

// deploySpans returns, per cluster, the Deploy activities of the GitRepo's
// rollouts that closed: when each started and closed, and whether it
// failed (or timed out, or was cancelled), in history order.
func (f *fleet) deploySpans(t *testing.T, ns, name string) map[string][]activitySpan {
	t.Helper()
	out := map[string][]activitySpan{}
	cluster := map[int64]string{}    // by scheduled event ID, within a run
	started := map[int64]time.Time{} // by scheduled event ID
	f.eachRolloutEvent(t, ns, name, func(ev *historypb.HistoryEvent) {
		at := ev.GetEventTime().AsTime()
		if in, ok := deployScheduled(t, ev); ok {
			cluster[ev.GetEventId()] = in.Cluster
			return
		}
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
			clear(cluster) // a new run: its event IDs start again
			clear(started)
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			started[ev.GetActivityTaskStartedEventAttributes().GetScheduledEventId()] = at
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED, enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED,
			enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT, enumspb.EVENT_TYPE_ACTIVITY_TASK_CANCELED:
			id := activityScheduledID(ev)
			if cl, ok := cluster[id]; ok {
				out[cl] = append(out[cl], activitySpan{started: started[id], closed: at,
					failed: ev.GetEventType() != enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED})
			}
		}
	})
	for _, spans := range out {
		sort.Slice(spans, func(i, j int) bool { return spans[i].started.Before(spans[j].started) })
	}
	return out
}

// rolloutAfter plays the Deployment and ReplicaSet controllers for
// Deployment ns/name on clusters (which run no controllers), as far as
// Helm's wait looks: readyAfter makes the Deployment Available after it
// has been seen for after, and then it gets a ReplicaSet of its template
// whose replicas are ready. stop ends it.
func (f *fleet) rolloutAfter(t *testing.T, clusters []string, ns, name string, after time.Duration) (stop func()) {
	t.Helper()
	stopReady := f.readyAfter(t, clusters, ns, name, after)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, c := range clusters {
		cs := f.cluster(c).Clientset(t)
		wg.Go(func() {
			for done := false; !done && ctx.Err() == nil; {
				if d, err := cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{}); err == nil && d.Status.AvailableReplicas > 0 {
					err := readyReplicaSet(ctx, cs, d)
					if err != nil && ctx.Err() == nil {
						t.Logf("cluster %s: ReplicaSet of Deployment %s/%s: %v", c, ns, name, err)
					}
					done = err == nil
				}
				select {
				case <-ctx.Done():
				case <-time.After(100 * time.Millisecond):
				}
			}
		})
	}
	return func() { cancel(); wg.Wait(); stopReady() }
}

// readyReplicaSet gives Deployment d a ReplicaSet with its template (the
// one Helm's wait looks for) and marks its replicas ready.
func readyReplicaSet(ctx context.Context, cs kubernetes.Interface, d *appsv1.Deployment) error {
	replicas := int32(1)
	if d.Spec.Replicas != nil {
		replicas = *d.Spec.Replicas
	}
	tmpl := *d.Spec.Template.DeepCopy()
	labels := map[string]string{appsv1.DefaultDeploymentUniqueLabelKey: "fake"}
	for k, v := range tmpl.Labels {
		labels[k] = v
	}
	tmpl.Labels = labels
	controller := true
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: d.Name + "-fake", Namespace: d.Namespace, Labels: labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name, UID: d.UID,
				Controller: &controller}}},
		Spec: appsv1.ReplicaSetSpec{Replicas: &replicas, Selector: d.Spec.Selector, Template: tmpl},
	}
	rss := cs.AppsV1().ReplicaSets(d.Namespace)
	created, err := rss.Create(ctx, rs, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		created, err = rss.Get(ctx, rs.Name, metav1.GetOptions{})
	}
	if err != nil {
		return err
	}
	created.Status = appsv1.ReplicaSetStatus{Replicas: replicas, FullyLabeledReplicas: replicas, ReadyReplicas: replicas,
		AvailableReplicas: replicas, ObservedGeneration: created.Generation}
	_, err = rss.UpdateStatus(ctx, created, metav1.UpdateOptions{})
	return err
}
