package tests

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/internal/status"
	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

// The log lines of issue 15.
const logCorrected = "Corrected drift"

// TestDrift checks that clusters keep matching Git (issue 15) on one
// fleet of two push-mode clusters (Sim: Deployments become ready).
func TestDrift(t *testing.T) {
	start := time.Now()
	f := &failureFleet{fleet: startFleetWith(t, 2, 2, testenv.Options{Sim: true})}
	t.Run("EditDetected", func(t *testing.T) { testDriftEditDetected(t, f) })
	t.Logf("TestDrift ran in %s", time.Since(start).Round(time.Second))
}

// editConfigMap sets data.value of ConfigMap ns/name on cluster by hand,
// as kubectl edit does.
func (f *failureFleet) editConfigMap(t testing.TB, cluster, ns, name, value string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cms := f.cluster(cluster).Clientset(t).CoreV1().ConfigMaps(ns)
	cm, err := cms.Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	cm.Data["value"] = value
	_, err = cms.Update(ctx, cm, metav1.UpdateOptions{FieldManager: "kubectl-edit"})
	require.NoError(t, err)
}

func testDriftEditDetected(t *testing.T, f *failureFleet) {
	const ns, name = "drift-edit", "edit"
	repo := f.git.CreateRepo(t, name, map[string]string{"app/fleet.yaml": fleetYAML(ns), "app/cm.yaml": configMapDoc("edit-cm", "v1")})
	f.apply(t, gitRepoDoc(name, repo.URL(), clusterTarget("cluster-1", "cluster-2")))
	bundle := name + "-app"
	f.waitFor(t, name, "Ready on both", func(st status.GitRepo) bool {
		return is(st, bundle, "cluster-1", status.Ready) && is(st, bundle, "cluster-2", status.Ready)
	})
	time.Sleep(3 * time.Second) // the watch starts after the rollout
	edited := time.Now()
	f.editConfigMap(t, "cluster-1", ns, "edit-cm", "by-hand")
	st := f.waitForWithin(t, name, "Modified on cluster-1", 20*time.Second, func(st status.GitRepo) bool {
		return is(st, bundle, "cluster-1", status.Modified)
	})
	t.Logf("edit to Modified: %s", time.Since(edited).Round(time.Millisecond))
	d := dep(t, st, bundle, "cluster-1")
	t.Logf("%+v", d)
	if assert.Len(t, d.ModifiedStatus, 1) {
		assert.Equal(t, `{"data":{"value":"v1"}}`, d.ModifiedStatus[0].Patch)
	}
	assert.Equal(t, 1, st.ResourceCounts.Modified)
	assert.True(t, is(st, bundle, "cluster-2", status.Ready))
	_ = corev1.ConfigMap{}
}
