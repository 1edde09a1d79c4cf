package cluster

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"golang.org/x/sync/errgroup"

	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/temporalx"
)

// queryParallelism bounds the concurrent queries of one listing.
const queryParallelism = 64

// Registry reads the registered clusters and cluster groups from Temporal:
// each is a running entity workflow (protocol.ClusterWorkflow,
// protocol.ClusterGroupWorkflow), enumerated through visibility. A
// cluster's record as targeting reads it comes with the listing, in the
// workflow's targeting memo (protocol.MemoTargeting); a workflow without
// one (a run of older code), and every group, is asked for its record with
// a query. The memo is current for every change the GitRepos were told of:
// the cluster's notification waits until visibility shows it (Notifier).
// It keeps no state of its own.
type Registry struct {
	client client.Client
	// dc decodes memos: the client's data converter. Without one every
	// record is queried.
	dc converter.DataConverter
}

// NewRegistry returns a Registry reading through c, whose data converter
// is dc (nil: query every record).
func NewRegistry(c client.Client, dc converter.DataConverter) *Registry {
	return &Registry{client: c, dc: dc}
}

// Clusters returns every registered cluster as targeting reads it
// (protocol.ClusterRecord.Targeting), sorted by name.
func (r *Registry) Clusters(ctx context.Context) ([]protocol.ClusterRecord, error) {
	return records(ctx, r, protocol.ClusterWorkflow, func(c protocol.ClusterRecord) (string, bool) { return c.Name, c.Removed })
}

// Groups returns every cluster group, sorted by name.
func (r *Registry) Groups(ctx context.Context) ([]protocol.GroupRecord, error) {
	return records(ctx, r, protocol.ClusterGroupWorkflow, func(g protocol.GroupRecord) (string, bool) { return g.Name, g.Removed })
}

// List returns every registered cluster and group, each sorted by name.
func (r *Registry) List(ctx context.Context) ([]protocol.ClusterRecord, []protocol.GroupRecord, error) {
	clusters, err := r.Clusters(ctx)
	if err != nil {
		return nil, nil, err
	}
	groups, err := r.Groups(ctx)
	return clusters, groups, err
}

// records queries every running workflow of wfType for its record and
// returns those not removed, sorted by name. A workflow that ended between
// listing and query is skipped. Queries run a few at a time: a fleet of
// thousands of clusters is listed in about a second, not one query after
// another.
func records[T any](ctx context.Context, r *Registry, wfType string, key func(T) (name string, removed bool)) ([]T, error) {
	var ids []string
	var recs []T
	var fromMemo []bool
	err := temporalx.EachInfo(ctx, r.client, temporalx.RunningOfType(wfType), func(info *workflowpb.WorkflowExecutionInfo) error {
		var rec T
		ok, err := r.memo(info, &rec)
		if err != nil {
			return fmt.Errorf("%s: %w", info.GetExecution().GetWorkflowId(), err)
		}
		ids, recs, fromMemo = append(ids, info.GetExecution().GetWorkflowId()), append(recs, rec), append(fromMemo, ok)
		return nil
	})
	if err != nil {
		return nil, err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(queryParallelism)
	for i, id := range ids {
		if fromMemo[i] {
			continue
		}
		g.Go(func() error {
			err := r.query(gctx, id, &recs[i])
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

// memo decodes the targeting memo of a listed workflow into out and
// reports whether it had one.
func (r *Registry) memo(info *workflowpb.WorkflowExecutionInfo, out any) (bool, error) {
	p, ok := info.GetMemo().GetFields()[protocol.MemoTargeting]
	if !ok || r.dc == nil {
		return false, nil
	}
	if err := r.dc.FromPayload(p, out); err != nil {
		return false, fmt.Errorf("read the targeting memo: %w", err)
	}
	return true, nil
}

func (r *Registry) query(ctx context.Context, id string, out any) error {
	v, err := r.client.QueryWorkflow(ctx, id, "", protocol.QueryStatus)
	if err != nil {
		return fmt.Errorf("query %s: %w", id, err)
	}
	return v.Get(out)
}

// NotifyGitRepos signals every running GitRepo workflow that clusters or
// groups changed (protocol.SignalClustersChanged) and returns how many it
// signalled. A GitRepo that ended since it was listed is skipped; any
// other error stops the notification and is returned.
func (r *Registry) NotifyGitRepos(ctx context.Context) (int, error) {
	n := 0
	// HelmOps roll out as GitRepos do: they are told too.
	err := temporalx.EachWorkflow(ctx, r.client, temporalx.RunningOfTypes(protocol.GitRepoWorkflow, protocol.HelmOpWorkflow), func(id string) error {
		err := r.client.SignalWorkflow(ctx, id, "", protocol.SignalClustersChanged, nil)
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return nil // it ended since it was listed
		}
		n++
		return err
	})
	return n, err
}
