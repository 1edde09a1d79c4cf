package deployer_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/flotilla-gitops/flotilla/internal/deployer"
)

// TestWaitAll_Errors: errors do not end the wait; they are reported per
// release once the deadline or the context ends it. Readiness against a
// real cluster is covered by the WaitReady activity's test.
func TestWaitAll_Errors(t *testing.T) {
	errNoGetter := errors.New("no getter")
	unreachable := unreachableGetter(t)
	getter := func(namespace string) (genericclioptions.RESTClientGetter, error) {
		if namespace == "broken" {
			return nil, errNoGetter
		}
		return unreachable, nil
	}
	releases := []deployer.Awaited{{Namespace: "broken", Name: "a"}, {Namespace: "ns", Name: "b", DeploymentID: "id"}}
	d := newDeployer(t)

	t.Run("until the deadline", func(t *testing.T) {
		rounds := 0
		start := time.Now()
		seen := d.WaitAll(t.Context(), getter, releases, deployer.WaitOptions{
			Interval: 10 * time.Millisecond,
			Deadline: start.Add(200 * time.Millisecond),
			Progress: func(o []deployer.Observed) { rounds++; assert.Len(t, o, 2) },
		})
		assert.GreaterOrEqual(t, time.Since(start), 200*time.Millisecond)
		assert.Greater(t, rounds, 1, "it polls again after an error")
		require.Len(t, seen, 2)
		require.ErrorIs(t, seen[0].Err, errNoGetter)
		require.Error(t, seen[1].Err, "port 1 refuses connections")
	})

	t.Run("until the context ends", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		rounds := 0
		seen := d.WaitAll(ctx, getter, releases, deployer.WaitOptions{
			Interval: time.Hour,
			Progress: func([]deployer.Observed) { rounds++; cancel() },
		})
		assert.Equal(t, 1, rounds)
		require.Len(t, seen, 2)
		require.ErrorIs(t, seen[0].Err, errNoGetter)
	})
}
