package deployer_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/release"

	"github.com/flotilla-gitops/flotilla/internal/deployer"
	"github.com/flotilla-gitops/flotilla/internal/outcome"
)

// rejectedTemplate renders a ConfigMap the API server refuses (422: a
// data key may not hold a space), after Helm has stored the revision.
const rejectedTemplate = `apiVersion: v1
kind: ConfigMap
metadata:
  name: rejected
data:
  "bad key": x
`

// requiredTemplate fails to render: it requires a value no test sets.
const requiredTemplate = `apiVersion: v1
kind: ConfigMap
metadata:
  name: required
data:
  value: {{ required "value missing is required" .Values.missing | quote }}
`

// failedAttempts is how many failing deploys the history tests make: more
// than the default maxHistory.
const failedAttempts = 15

// failRepeatedly deploys release "app" in ns failedAttempts times with the
// chart's extra templates, each time at a new ID, expecting each deploy to
// fail. It returns the number of Helm records after each attempt.
func failRepeatedly(ctx context.Context, t *testing.T, d *deployer.Deployer, f *fixture, ns string, atomic bool, templates ...string) []int {
	t.Helper()
	var counts []int
	for i := range failedAttempts {
		rel := testRelease(ns, "app", fmt.Sprintf("id-fail-%d", i), "failing")
		rel.Chart = testChart(templates...)
		rel.Atomic = atomic
		_, err := d.Deploy(ctx, f.getter, rel)
		require.Error(t, err, "attempt %d", i)
		counts = append(counts, len(f.helmSecrets(ctx, t, ns, "app")))
	}
	t.Logf("Helm records after each failing deploy: %v", counts)
	return counts
}

// testHistory is TestOnBareCluster's group for history limits and failed
// deploys.
func testHistory(t *testing.T, f *fixture) {
	tests := []struct {
		name string
		ns   string
		// deployed makes a successful deploy (revision 1, "id-1") first.
		deployed bool
		atomic   bool
		// template is the chart's extra template that makes deploys fail.
		template string
		// step is how many records one failing deploy may add.
		step int
		// wantRecords is how many records are left; wantCurrent is the
		// deployment ID the release then runs.
		wantRecords int
		wantCurrent string
	}{
		{name: "failing upgrades keep at most maxHistory records", ns: "history-upgrade", deployed: true,
			template: rejectedTemplate, step: 1, wantRecords: deployer.DefaultMaxHistory, wantCurrent: "id-1"},
		// Upgrades of a release that exists only as a failed install.
		{name: "a failed first install then failing upgrades keep at most maxHistory records", ns: "history-install",
			template: rejectedTemplate, step: 1, wantRecords: deployer.DefaultMaxHistory},
		// Helm stores the rollback of a failed atomic upgrade without
		// pruning: each attempt adds two records, and Deploy prunes back.
		{name: "failing atomic upgrades keep at most maxHistory records", ns: "history-atomic", deployed: true, atomic: true,
			template: rejectedTemplate, step: 2, wantRecords: deployer.DefaultMaxHistory, wantCurrent: "id-1"},
		{name: "render failures add no record", ns: "history-render", deployed: true,
			template: requiredTemplate, step: 0, wantRecords: 1, wantCurrent: "id-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t)
			d := newDeployer(t)
			prev := 0
			if tt.deployed {
				mustDeploy(ctx, t, d, f, tt.ns, "id-1", "one")
				prev = 1
			}

			counts := failRepeatedly(ctx, t, d, f, tt.ns, tt.atomic, tt.template)

			for i, n := range counts {
				assert.LessOrEqual(t, n, deployer.DefaultMaxHistory, "records after attempt %d", i)
				assert.LessOrEqual(t, n-prev, tt.step, "records added by attempt %d", i)
				prev = n
			}
			assert.Equal(t, tt.wantRecords, counts[len(counts)-1], "records left")
			// The deployed revision is never pruned.
			id, _, err := d.Current(f.getter, tt.ns, "app")
			require.NoError(t, err)
			assert.Equal(t, tt.wantCurrent, id, "deployment ID running")
		})
	}

	t.Run("a wait timeout is ErrWaitTimeout and the bundle's failure", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		d := newDeployer(t)
		// Without controllers the Deployment never becomes available.
		rel := testRelease("history-wait", "app", "id-1", "one")
		rel.Chart = testChart(deploymentTemplate)
		rel.Wait, rel.Timeout = true, 3*time.Second

		_, err := d.Deploy(ctx, f.getter, rel)

		require.ErrorIs(t, err, deployer.ErrWaitTimeout)
		require.ErrorIs(t, err, context.DeadlineExceeded, "the cause is kept")
		assert.Equal(t, outcome.BundleFailed, deployer.Classify(err))
		assert.Equal(t, []release.Status{release.StatusFailed}, f.statuses(t, "history-wait", "app"))
	})
}
