package activities

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/target"
	"github.com/flotilla-gitops/flotilla/internal/temporalx"
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

// clusters returns every registered cluster, sorted by name.
func (a *Activities) clusters(ctx context.Context) ([]protocol.ClusterRecord, error) {
	return records(ctx, a, protocol.ClusterWorkflow, func(r protocol.ClusterRecord) (string, bool) { return r.Name, r.Removed })
}

// registry returns every registered cluster and group, sorted by name.
func (a *Activities) registry(ctx context.Context) ([]protocol.ClusterRecord, []protocol.GroupRecord, error) {
	clusters, err := a.clusters(ctx)
	if err != nil {
		return nil, nil, err
	}
	groups, err := a.groups(ctx)
	return clusters, groups, err
}

// groups returns every cluster group, sorted by name.
func (a *Activities) groups(ctx context.Context) ([]protocol.GroupRecord, error) {
	return records(ctx, a, protocol.ClusterGroupWorkflow, func(r protocol.GroupRecord) (string, bool) { return r.Name, r.Removed })
}

// records queries every running workflow of wfType for its record and
// returns those not removed, sorted by name. Queries run a few at a time:
// a fleet of thousands of clusters is listed in about a second, not one
// query after another.
func records[T any](ctx context.Context, a *Activities, wfType string, key func(T) (name string, removed bool)) ([]T, error) {
	var ids []string
	if err := a.each(ctx, wfType, func(id string) error { ids = append(ids, id); return nil }); err != nil {
		return nil, err
	}
	recs := make([]T, len(ids))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(queryParallelism)
	for i, id := range ids {
		g.Go(func() error {
			err := a.query(gctx, id, &recs[i])
			var nf *serviceerror.NotFound
			if errors.As(err, &nf) {
				return nil // it ended since it was listed
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	var out []T
	for _, rec := range recs {
		if name, removed := key(rec); !removed && name != "" {
			out = append(out, rec)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, _ := key(out[i])
		b, _ := key(out[j])
		return a < b
	})
	return out, nil
}

// queryParallelism bounds the concurrent queries of records.
const queryParallelism = 16

func (a *Activities) query(ctx context.Context, id string, out any) error {
	v, err := a.Client.QueryWorkflow(ctx, id, "", protocol.QueryStatus)
	if err != nil {
		return fmt.Errorf("query %s: %w", id, err)
	}
	return v.Get(out)
}

// each calls fn with the ID of every running workflow of type wfType.
func (a *Activities) each(ctx context.Context, wfType string, fn func(id string) error) error {
	return temporalx.EachWorkflow(ctx, a.Client, temporalx.RunningOfType(wfType), fn)
}

// NotifyGitRepos signals every running GitRepo workflow that clusters or
// groups changed. With WaitFor set it first waits until that workflow is
// listed, so every GitRepo that lists clusters afterwards sees it.
func (a *Activities) NotifyGitRepos(ctx context.Context, in NotifyInput) error {
	if in.WaitFor != "" {
		q := fmt.Sprintf("WorkflowId = '%s' AND ExecutionStatus = 'Running'", in.WaitFor)
		// Back off from 50 ms to 1 s: many clusters registered at once must
		// not flood visibility with list calls.
		pause := 50 * time.Millisecond
		for {
			found := false
			if err := temporalx.EachWorkflow(ctx, a.Client, q, func(string) error { found = true; return nil }); err != nil {
				return err
			}
			if found {
				break
			}
			activity.RecordHeartbeat(ctx)
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(pause):
			}
			pause = min(2*pause, time.Second)
		}
	}
	n := 0
	err := a.each(ctx, protocol.GitRepoWorkflow, func(id string) error {
		err := a.Client.SignalWorkflow(ctx, id, "", protocol.SignalClustersChanged, nil)
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return nil // it ended since it was listed
		}
		n++
		return err
	})
	a.Logger.Debug("Notified GitRepos", zap.String("reason", in.Reason), zap.Int("gitrepos", n))
	return err
}
