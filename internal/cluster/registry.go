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
	return records(ctx, r, protocol.ClusterWorkflow, func(c protocol.ClusterRecord) recordKey {
		return recordKey{name: c.Name, removed: c.Removed, generation: c.Generation}
	})
}

// Groups returns every cluster group, sorted by name.
func (r *Registry) Groups(ctx context.Context) ([]protocol.GroupRecord, error) {
	return records(ctx, r, protocol.ClusterGroupWorkflow, func(g protocol.GroupRecord) recordKey {
		return recordKey{name: g.Name, removed: g.Removed, generation: g.Generation}
	})
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

// recordKey is what records needs to know of a record.
type recordKey struct {
	name       string
	removed    bool
	generation int64
}

// records reads the record of every running workflow of wfType, from its
// targeting memo or, without one, a query, and returns those not removed,
// sorted by name. A workflow that ended between listing and query is
// skipped. Queries run a few at a time: a fleet of thousands of clusters
// without memos is listed in seconds, not one query after another.

func records[T any](ctx context.Context, r *Registry, wfType string, key func(T) recordKey) ([]T, error) {
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
	// Right after a continue-as-new, visibility may still list the old
	// run as running too: the newest record wins.
	newest := map[string]T{}
	for _, rec := range recs {
		k := key(rec)
		if prev, ok := newest[k.name]; k.name != "" && (!ok || key(prev).generation < k.generation) {
			newest[k.name] = rec
		}
	}
	var out []T
	for _, rec := range newest {
		if !key(rec).removed {
			out = append(out, rec)
		}
	}
	sort.Slice(out, func(i, j int) bool { return key(out[i]).name < key(out[j]).name })
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
