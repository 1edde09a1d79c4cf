package workflows

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/activities"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

// dropRig is a rollout rig whose cluster offline is served by an agent
// that never takes its deploy up (it waits until the pickup timeout), and
// whose registry lists registered once the supersede arrives.
func dropRig(t *testing.T, clusters []string, offline string, registered []string) *stratRig {
	r := newRig(t, clusters, bundleAt("app", "m:o1"))
	r.strategies = []activities.BundleStrategy{{Bundle: "app", Plan: onePartition(len(clusters), clusters)}}
	var a *activities.Activities
	r.env.OnActivity(a.TargetBundles, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.BundleTargetsInput) (activities.TargetsResult, error) {
			res := activities.TargetsResult{Registered: r.clusters, Strategies: r.strategies, Agents: []string{offline},
				PickupTimeout: 10 * time.Minute}
			for _, c := range r.clusters {
				res.Matched = append(res.Matched, activities.TargetCluster{Name: c, Bundles: in.Bundles})
			}
			return res, nil
		})
	r.env.OnActivity(a.ListTargets, mock.Anything, mock.Anything).Return(activities.TargetsResult{Registered: registered}, nil)
	r.deployDelay = func(c string) time.Duration {
		if c == offline {
			return 9 * time.Minute // still queued when the supersede comes
		}
		return 10 * time.Second
	}
	r.register()
	return r
}

// A rollout superseded because its offline agent's cluster was removed
// cancels that cluster's queued deploy at once instead of waiting for the
// pickup timeout; the other clusters' in-flight work finishes.
func TestRolloutDrop_RemovedClusterIsCanceled(t *testing.T) {
	cs := nClusters(3)
	r := dropRig(t, cs, "c3", []string{"c1", "c2"})
	r.at(5*time.Second, func() { r.env.SignalWorkflow(protocol.SignalSupersede, nil) })
	res := r.run()

	assert.True(t, res.Superseded)
	for _, c := range r.callsOf("Deploy", "app") {
		switch c.cluster {
		case "c3":
			assert.Equal(t, 5*time.Second, c.end, "the removed cluster's deploy is canceled with the supersede")
		default:
			assert.Equal(t, 10*time.Second, c.end, "in-flight deploys on %s finish", c.cluster)
		}
	}
	assert.Equal(t, map[string]status.State{"c1": status.Ready, "c2": status.Ready, "c3": status.WaitApplied},
		statesOf(res.Deployments, "app"))
}

// A cluster still registered is not dropped: its queued deploy holds the
// superseded rollout until it ends, as before.
func TestRolloutDrop_RegisteredClusterWaits(t *testing.T) {
	cs := nClusters(3)
	r := dropRig(t, cs, "c3", cs)
	r.at(5*time.Second, func() { r.env.SignalWorkflow(protocol.SignalSupersede, nil) })
	res := r.run()

	assert.True(t, res.Superseded)
	assert.Equal(t, 9*time.Minute, deployEnd(r, "c3"), "the deploy of a registered cluster is not canceled")
}

// In a rollout that fans out to batches, the batch holding the removed
// cluster drops its work when told.
func TestRolloutDrop_FanOut(t *testing.T) {
	cs := nClusters(inlineClusterLimit + 10)
	offline := cs[len(cs)-1]
	r := dropRig(t, cs, offline, cs[:len(cs)-1])
	r.at(5*time.Second, func() { r.env.SignalWorkflow(protocol.SignalSupersede, nil) })
	res := r.run()

	assert.True(t, res.Superseded)
	assert.NotEmpty(t, r.children)
	assert.Positive(t, r.signals.count(signalDropClusters))
	assert.Equal(t, 5*time.Second, deployEnd(r, offline), "the removed cluster's deploy is canceled")
}

// A cluster removed after the supersede is dropped when the rollout is
// superseded again (a later cluster change).
func TestRolloutDrop_LaterSupersedeLooksAgain(t *testing.T) {
	cs := nClusters(3)
	r := newRig(t, cs, bundleAt("app", "m:o1"))
	r.strategies = []activities.BundleStrategy{{Bundle: "app", Plan: onePartition(len(cs), cs)}}
	var a *activities.Activities
	r.env.OnActivity(a.TargetBundles, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.BundleTargetsInput) (activities.TargetsResult, error) {
			res := activities.TargetsResult{Registered: cs, Strategies: r.strategies, Agents: []string{"c3"}, PickupTimeout: 10 * time.Minute}
			for _, c := range cs {
				res.Matched = append(res.Matched, activities.TargetCluster{Name: c, Bundles: in.Bundles})
			}
			return res, nil
		})
	lists := 0
	r.env.OnActivity(a.ListTargets, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.TargetsInput) (activities.TargetsResult, error) {
			lists++
			if lists == 1 {
				return activities.TargetsResult{Registered: cs}, nil
			}
			return activities.TargetsResult{Registered: cs[:2]}, nil
		})
	r.deployDelay = func(c string) time.Duration {
		if c == "c3" {
			return 9 * time.Minute
		}
		return 10 * time.Second
	}
	r.register()
	r.at(5*time.Second, func() { r.env.SignalWorkflow(protocol.SignalSupersede, nil) })
	r.at(30*time.Second, func() { r.env.SignalWorkflow(protocol.SignalSupersede, nil) })
	res := r.run()

	assert.True(t, res.Superseded)
	assert.Equal(t, 2, lists)
	assert.Equal(t, 30*time.Second, deployEnd(r, "c3"), "canceled with the second supersede")
}

// deployEnd is when the one deploy of app to cluster ended.
func deployEnd(r *stratRig, cluster string) time.Duration {
	r.t.Helper()
	var ends []time.Duration
	for _, c := range r.callsOf("Deploy", "app") {
		if c.cluster == cluster {
			ends = append(ends, c.end)
		}
	}
	require.Len(r.t, ends, 1, "deploys of app to %s", cluster)
	return ends[0]
}
