package tests

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/converter"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/activities"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

// The window of TestWindows opens at every minute and stays open for
// windowOpen; each cluster's Deployment becomes Ready unitReady after it
// appears, so that with maxUnavailable 1 two clusters start in one window
// (at its opening and about unitReady later, well before it closes) and
// the third would start about 2×unitReady after the opening, well after
// it closed.
const (
	windowSchedule = "* * * * *"
	windowOpen     = 30 * time.Second
	unitReady      = 18 * time.Second
)

// TestWindows rolls a bundle out to three clusters, one at a time, inside
// a deployment window that closes while the rollout's only partition runs:
// the unit that started before the close runs to its end, no unit starts
// while the window is closed (the one that would is OutOfSync, saying when
// the window opens), and the rest start when it reopens. Start times are
// the scheduler's decisions, read from the rollout's history (the time of
// the workflow task that scheduled each Deploy), and the Helm releases'
// first records on the clusters.
func TestWindows(t *testing.T) {
	const name, ns = "windows", "windows-ns"
	bundle := name + "-app"
	clusters := []string{"cluster-1", "cluster-2", "cluster-3"}
	f := startFleet(t, 3, 3)
	stop := f.readyAfter(t, clusters, ns, "app", unitReady)
	defer stop()

	fy := fleetYAML(ns) + fmt.Sprintf(`rolloutStrategy:
  maxUnavailable: 1
  readyTimeoutSeconds: 120
  windows:
  - schedule: %q
    duration: %s
`, windowSchedule, windowOpen)
	repo := f.git.CreateRepo(t, name, map[string]string{"app/fleet.yaml": fy, "app/deploy.yaml": deploymentDoc("app", false)})
	// Apply while the window is closed, long enough before it opens for
	// the rollout to render and wait for it: the first unit then starts
	// at the opening, and no start falls near a closing.
	waitForSecond(t, 30, 50)
	applied := time.Now()
	f.apply(t, gitRepoDoc(name, repo.URL(), allClusters))
	defer f.remove(t, name)

	// The window closes while the second cluster runs: the third is held.
	settled := settledAt(repo.Head(t), len(clusters))
	st := f.waitForWithin(t, name, "a cluster held outside the window", 2*time.Minute, func(st status.GitRepo) bool {
		return len(outsideWindow(st, bundle)) > 0 || settled(st)
	})
	held := outsideWindow(st, bundle)
	heldAt := time.Now()
	require.NotEmpty(t, held, "every cluster deployed without waiting for the window to reopen; started: %v",
		f.deployDecisions(t, "fleet-default", name))
	t.Logf("held outside the window %s after the apply: %v", heldAt.Sub(applied).Round(time.Millisecond), held)
	for _, c := range held {
		d, _ := deploymentOn(st, bundle, c)
		assert.Equal(t, status.OutOfSync, d.State, "cluster %s", c)
		assert.Regexp(t, `^cluster `+c+`: bundle `+bundle+` is outside its deployment window; it opens \d{4}-\d\d-\d\dT\d\d:\d\d:00Z$`,
			d.Message, "cluster %s", c)
		assert.Zero(t, f.releaseRevisions(t, c, ns, bundle), "cluster %s has no release while held", c)
	}

	f.waitForWithin(t, name, "every cluster Ready after the window reopened", 2*time.Minute, settled)
	t.Logf("settled %s after the apply", time.Since(applied).Round(time.Millisecond))

	starts := f.deployDecisions(t, "fleet-default", name)
	checkWindowStarts(t, clusters, held, heldAt, starts)
	for _, c := range clusters {
		created := f.firstReleaseRecord(t, c, ns, bundle)
		assert.True(t, inWindow(created), "cluster %s: Helm's first record of %s was written at %s, outside the window",
			c, bundle, created.Format(time.RFC3339))
	}
}

// checkWindowStarts checks the scheduler's decisions to deploy: each
// cluster deployed once, every decision inside a window, the held
// clusters only in a later window than the others, and the first of them
// within a few seconds of that window's opening.
func checkWindowStarts(t *testing.T, clusters, held []string, heldAt time.Time, starts map[string][]time.Time) {
	t.Helper()
	for _, c := range clusters {
		t.Logf("cluster %s: Deploy decided at %v", c, starts[c])
		require.Len(t, starts[c], 1, "cluster %s: Deploy activities", c)
		at := starts[c][0]
		assert.True(t, inWindow(at), "cluster %s started at %s, outside the window", c, at.Format(time.RFC3339Nano))
	}
	var first, reopened time.Time // the first start; the first held cluster's
	for _, c := range clusters {
		at := starts[c][0]
		if !slices.Contains(held, c) {
			if first.IsZero() || at.Before(first) {
				first = at
			}
			continue
		}
		assert.True(t, at.After(heldAt), "cluster %s started at %s, before it was seen held", c, at.Format(time.RFC3339Nano))
		if reopened.IsZero() || at.Before(reopened) {
			reopened = at
		}
	}
	require.False(t, first.IsZero(), "no cluster started before the window closed")
	opening := reopened.Truncate(time.Minute)
	assert.True(t, opening.After(first), "the held clusters started in the window the others did (%s)", opening.Format(time.RFC3339))
	assert.Less(t, reopened.Sub(opening), 5*time.Second, "the first held cluster starts when the window reopens at %s",
		opening.Format(time.RFC3339))
}

// inWindow reports whether at is inside the window windowSchedule and
// windowOpen define: the first windowOpen of a minute (UTC).
func inWindow(at time.Time) bool { return at.Sub(at.Truncate(time.Minute)) < windowOpen }

// waitForSecond waits until the second of the minute is in [from, to).
func waitForSecond(t *testing.T, from, to int) {
	t.Helper()
	now := time.Now()
	s := now.Sub(now.Truncate(time.Minute))
	if s >= time.Duration(from)*time.Second && s < time.Duration(to)*time.Second {
		return
	}
	wait := time.Duration(from)*time.Second - s
	if wait < 0 {
		wait += time.Minute
	}
	t.Logf("waiting %s for second %d of the minute", wait.Round(time.Millisecond), from)
	time.Sleep(wait)
}

// outsideWindow lists the clusters whose deployment of bundle the rollout
// holds outside its deployment window, sorted.
func outsideWindow(st status.GitRepo, bundle string) []string {
	var out []string
	for _, d := range st.Deployments {
		if d.Bundle == bundle && d.State == status.OutOfSync && strings.Contains(d.Message, "outside its deployment window") {
			out = append(out, d.Cluster)
		}
	}
	sort.Strings(out)
	return out
}

// deployDecisions returns, per cluster, when the GitRepo's rollouts
// decided to deploy there: the time of the workflow task (workflow.Now,
// the scheduler's now) that scheduled each Deploy activity.
func (f *fleet) deployDecisions(t *testing.T, ns, name string) map[string][]time.Time {
	t.Helper()
	out := map[string][]time.Time{}
	var taskStarted time.Time
	f.eachRolloutEvent(t, ns, name, func(ev *historypb.HistoryEvent) {
		if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED {
			taskStarted = ev.GetEventTime().AsTime()
		}
		if in, ok := deployScheduled(t, ev); ok {
			out[in.Cluster] = append(out[in.Cluster], taskStarted)
		}
	})
	return out
}

// eachRolloutEvent calls fn with every history event of the GitRepo's
// rollouts (and their batches), run by run, in order.
func (f *fleet) eachRolloutEvent(t *testing.T, ns, name string, fn func(*historypb.HistoryEvent)) {
	t.Helper()
	c := f.w.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	runs, err := rolloutTreeRuns(ctx, c, ns, name)
	require.NoError(t, err)
	require.NotEmpty(t, runs, "rollouts of %s/%s", ns, name)
	for _, r := range runs {
		require.NoError(t, eachEvent(ctx, c, r, fn))
	}
}

// deployScheduled returns the input of a Deploy activity ev schedules.
func deployScheduled(t *testing.T, ev *historypb.HistoryEvent) (activities.DeployInput, bool) {
	var in activities.DeployInput
	a := ev.GetActivityTaskScheduledEventAttributes()
	if ev.GetEventType() != enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED || a.GetActivityType().GetName() != "Deploy" {
		return in, false
	}
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(a.GetInput(), &in))
	return in, true
}

// firstReleaseRecord returns when Helm wrote release's first record
// (revision 1, written as the install starts) on cluster, to the second.
func (f *fleet) firstReleaseRecord(t *testing.T, cluster, ns, release string) time.Time {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := f.cluster(cluster).Clientset(t).CoreV1().Secrets(ns).Get(ctx, "sh.helm.release.v1."+release+".v1", metav1.GetOptions{})
	require.NoError(t, err, "cluster %s: Helm's first record of %s", cluster, release)
	return s.CreationTimestamp.Time
}

// readyAfter plays the Deployment controller for Deployment ns/name on
// clusters (which run no controllers): each becomes Available, and so
// Ready, after it has been seen for after. stop ends it.
func (f *fleet) readyAfter(t *testing.T, clusters []string, ns, name string, after time.Duration) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, c := range clusters {
		deployments := f.cluster(c).Clientset(t).AppsV1().Deployments(ns)
		wg.Add(1)
		go func() {
			defer wg.Done()
			var seen time.Time
			for ctx.Err() == nil {
				d, err := deployments.Get(ctx, name, metav1.GetOptions{})
				switch {
				case apierrors.IsNotFound(err):
					seen = time.Time{}
				case err != nil:
				case seen.IsZero():
					seen = time.Now()
				case time.Since(seen) >= after && d.Status.AvailableReplicas == 0:
					available(d)
					if _, err := deployments.UpdateStatus(ctx, d, metav1.UpdateOptions{}); err != nil && ctx.Err() == nil {
						t.Logf("cluster %s: mark Deployment %s/%s available: %v", c, ns, name, err)
					}
				}
				select {
				case <-ctx.Done():
				case <-time.After(200 * time.Millisecond):
				}
			}
		}()
	}
	return func() { cancel(); wg.Wait() }
}

// available sets d's status as the Deployment controller does once its
// replicas are updated and available.
func available(d *appsv1.Deployment) {
	replicas := int32(1)
	if d.Spec.Replicas != nil {
		replicas = *d.Spec.Replicas
	}
	now := metav1.Now()
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: replicas, UpdatedReplicas: replicas,
		ReadyReplicas: replicas, AvailableReplicas: replicas, Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable",
				LastUpdateTime: now, LastTransitionTime: now},
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable",
				LastUpdateTime: now, LastTransitionTime: now},
		}}
}
