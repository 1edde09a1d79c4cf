package cluster

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"golang.org/x/sync/errgroup"

	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/temporalx"
)

// queryParallelism bounds the concurrent queries of one listing.
const queryParallelism = 64

// Registry reads the registered clusters and cluster groups from Temporal:
// each is a running entity workflow (protocol.ClusterWorkflow,
// protocol.ClusterGroupWorkflow), enumerated through visibility and asked
// for its record with a query, so labels are never stale. It keeps no
// state of its own.
type Registry struct {
	client client.Client
}

// NewRegistry returns a Registry reading through c.
func NewRegistry(c client.Client) *Registry { return &Registry{client: c} }

// Clusters returns every registered cluster, sorted by name.
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
	if err := r.each(ctx, wfType, func(id string) error { ids = append(ids, id); return nil }); err != nil {
		return nil, err
	}
	recs := make([]T, len(ids))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(queryParallelism)
	for i, id := range ids {
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

func (r *Registry) query(ctx context.Context, id string, out any) error {
	v, err := r.client.QueryWorkflow(ctx, id, "", protocol.QueryStatus)
	if err != nil {
		return fmt.Errorf("query %s: %w", id, err)
	}
	return v.Get(out)
}

// each calls fn with the ID of every running workflow of type wfType.
func (r *Registry) each(ctx context.Context, wfType string, fn func(id string) error) error {
	return temporalx.EachWorkflow(ctx, r.client, temporalx.RunningOfType(wfType), fn)
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
