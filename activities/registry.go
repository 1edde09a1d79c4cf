package activities

import (
	"context"
	"time"

	"go.temporal.io/sdk/activity"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
	"golang.org/x/time/rate"

	"github.com/flotilla-gitops/flotilla/internal/cluster"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/target"
)

// ListTargets reads every registered cluster and group and matches the
// targets against them. Cluster workflows are enumerated through
// visibility and each one is queried, so labels are never stale.
func (a *Activities) ListTargets(ctx context.Context, in TargetsInput) (TargetsResult, error) {
	clusters, groups, err := a.registry(ctx)
	if err != nil {
		return TargetsResult{}, err
	}
	var tcs []target.Cluster
	paused := map[string]bool{}
	out := TargetsResult{Registered: []string{}, Matched: []TargetCluster{}}
	for _, c := range clusters {
		tcs = append(tcs, target.Cluster{Name: c.Name, Labels: c.Labels})
		paused[c.Name] = c.Paused
		out.Registered = append(out.Registered, c.Name)
	}
	matched, err := target.Match(in.Targets, tcs, targetGroups(groups))
	if err != nil {
		return TargetsResult{}, err
	}
	for _, m := range matched {
		out.Matched = append(out.Matched, TargetCluster{Name: m.Cluster, Paused: paused[m.Cluster]})
	}
	return out, nil
}

// targetGroups converts group records for matching.
func targetGroups(groups []protocol.GroupRecord) []target.Group {
	out := make([]target.Group, 0, len(groups))
	for _, g := range groups {
		out = append(out, target.Group{Name: g.Name, Selector: g.Selector, Labels: g.Labels})
	}
	return out
}

// registry returns every registered cluster and group, sorted by name.
func (a *Activities) registry(ctx context.Context) ([]protocol.ClusterRecord, []protocol.GroupRecord, error) {
	return cluster.NewRegistry(a.Client, a.DataConverter).List(ctx)
}

// NotifyGitRepos signals every running GitRepo workflow that clusters or
// groups changed. With WaitFor set it first waits until that workflow is
// listed, so every GitRepo that lists clusters afterwards sees it. The
// calls of a burst (a thousand clusters registered at once) share
// rounds: see cluster.Notifier.
func (a *Activities) NotifyGitRepos(ctx context.Context, in NotifyInput) error {
	a.notifierOnce.Do(func() {
		a.notifier = cluster.NewNotifier(cluster.NewRegistry(a.Client, a.DataConverter), notifyRoundTimeout)
	})
	wait := cluster.Wait{ID: in.WaitFor, Generation: in.Generation, Removed: in.Removed}
	n, err := a.notifier.Notify(ctx, wait, func() { activity.RecordHeartbeat(ctx) })
	a.Logger.Debug("Notified GitRepos", zap.String("reason", in.Reason), zap.Int("gitrepos", n))
	return err
}

// notifyRoundTimeout bounds one round of notifications, within the
// activity's one minute.
const notifyRoundTimeout = 45 * time.Second

// WatchSetsInput are the watch sets a GitRepo tells its clusters'
// workflows (protocol.SignalWatch), one per cluster.
type WatchSetsInput struct {
	Sets []ClusterWatchSet `json:"sets"`
}

// ClusterWatchSet is one cluster's watch set.
type ClusterWatchSet struct {
	Cluster string            `json:"cluster"`
	Set     protocol.WatchSet `json:"set"`
}

// WatchSetsResult names the clusters whose workflows took their set.
type WatchSetsResult struct {
	Told []string `json:"told,omitempty"`
}

// SendWatchSets signals each cluster's workflow its watch set, a few at a
// time: after a rollout to a thousand clusters, one activity in the
// GitRepo's history instead of two thousand signal events. A cluster
// whose workflow is gone (removed meanwhile) or did not answer is left
// out of the result, to be told after the next rollout.
func (a *Activities) SendWatchSets(ctx context.Context, in WatchSetsInput) (WatchSetsResult, error) {
	told := make([]bool, len(in.Sets))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(watchSetParallelism)
	pace := rate.NewLimiter(watchSetRate, watchSetParallelism)
	for i, s := range in.Sets {
		if err := pace.Wait(ctx); err != nil {
			break
		}
		g.Go(func() error {
			err := a.Client.SignalWorkflow(gctx, protocol.ClusterID(s.Cluster), "", protocol.SignalWatch, s.Set)
			told[i] = err == nil
			if err != nil {
				a.Logger.Debug("Watch set not delivered", zap.String("cluster", s.Cluster), zap.Error(err))
			}
			return nil
		})
		activity.RecordHeartbeat(ctx, i)
	}
	_ = g.Wait() // failures are per cluster
	var out WatchSetsResult
	for i, ok := range told {
		if ok {
			out.Told = append(out.Told, in.Sets[i].Cluster)
		}
	}
	return out, nil
}

// SendWatchSets sends at most watchSetParallelism signals at once and
// watchSetRate a second: each starts a cluster workflow task and a
// watch, and a thousand of those at once would keep the controller from
// answering queries (`flotilla status`) for tens of seconds.
const (
	watchSetParallelism = 16
	watchSetRate        = 100
)
