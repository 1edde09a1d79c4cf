package fleetstatus

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/flotilla-gitops/flotilla/internal/cluster"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

// queryTimeout bounds one read of Flotilla's status.
const queryTimeout = 10 * time.Second

// gvrOf is the plural resource of a kind of Fleet's API.
func gvrOf(kind string) schema.GroupVersionResource {
	plural := map[string]string{KindGitRepo: "gitrepos", KindHelmOp: "helmops", KindCluster: "clusters",
		KindClusterGroup: "clustergroups", KindBundle: "bundles"}[kind]
	return schema.GroupVersionResource{Group: Group, Version: Version, Resource: plural}
}

// process reads, projects and writes one entry, then schedules its next
// read: soon while it is not settled or a write waits for MinInterval,
// later once it is settled.
func (w *Writer) process(ctx context.Context, e *entry) {
	w.mu.Lock()
	ref, seen := e.ref, e.changes
	overrides := make([]Condition, 0, len(e.overrides))
	for _, c := range e.overrides {
		overrides = append(overrides, c)
	}
	w.mu.Unlock()
	sort.Slice(overrides, func(i, j int) bool { return overrides[i].Type < overrides[j].Type })

	var settled bool
	var err error
	switch ref.Kind {
	case KindGitRepo, KindHelmOp:
		settled, err = w.processGitRepo(ctx, e, ref, overrides)
	case KindCluster:
		settled, err = w.processCluster(ctx, e, ref, overrides)
	case KindClusterGroup:
		settled, err = w.processGroup(ctx, e, ref, overrides)
	default:
		err = errors.New("unknown kind " + ref.Kind)
	}
	if err != nil && ctx.Err() == nil {
		w.cfg.Logger.Warn("Failed to update the status", refField(ref), zap.Error(err))
	}
	next := w.cfg.MinInterval
	if settled && err == nil {
		next = w.cfg.SettledInterval
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	e.busy, e.seen = false, seen
	e.due = time.Now().Add(next)
}

// current reports whether e is still the entry of its ref (Track may have
// replaced it for a new object of the same name, Forget removed it).
func (w *Writer) current(e *entry) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.entries[e.ref.key()] == e
}

// query runs the status query of workflow id into out; found is false
// when there is no such workflow.
func (w *Writer) query(ctx context.Context, id string, out any) (found bool, err error) {
	qctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	v, err := w.cfg.Temporal.QueryWorkflow(qctx, id, "", protocol.QueryStatus)
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, v.Get(out)
}

func (w *Writer) processGitRepo(ctx context.Context, e *entry, ref Ref, overrides []Condition) (bool, error) {
	st, found, err := w.readGitRepo(ctx, ref)
	if err != nil {
		return false, err
	}
	obs := Observe(st)
	w.mu.Lock()
	if found && st.Generation > 0 && e.specGenOf != ref.Generation && e.ref.Generation == ref.Generation {
		e.specGen, e.specGenOf = st.Generation, ref.Generation
	}
	specGen := int64(0)
	if e.specGenOf == ref.Generation {
		specGen = e.specGen
	}
	prev := e.obs
	e.obs, e.last = &obs, &st
	w.mu.Unlock()
	if !w.current(e) {
		return true, nil
	}
	if found {
		for _, ev := range Transitions(prev, obs) {
			w.Event(ref, ev.Type, ev.Reason, ev.Message)
		}
	}
	in := GitRepoInput{Status: st, Generation: ref.Generation, SpecGeneration: specGen, Overrides: overrides}
	proj := Bound(ProjectGitRepo(in), MaxStatusSize)
	pending, err := w.writeStatus(ctx, e, ref, stamped(&proj, &proj.Conditions))
	if err != nil {
		return false, err
	}
	mirrorsPending, err := w.syncMirrors(ctx, e, ref, st)
	if err != nil {
		return false, err
	}
	return st.Settled && in.caughtUp() && !pending && !mirrorsPending, nil
}

// gitRepos returns the last status of every followed GitRepo and HelmOp.
func (w *Writer) gitRepos() []status.GitRepo {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []status.GitRepo
	for _, e := range w.entries {
		if e.last != nil {
			out = append(out, *e.last)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out
}

func (w *Writer) processCluster(ctx context.Context, e *entry, ref Ref, overrides []Condition) (bool, error) {
	rec := protocol.ClusterRecord{Name: ref.Name}
	if _, err := w.query(ctx, protocol.ClusterID(ref.Name), &rec); err != nil {
		return false, err
	}
	proj := ProjectCluster(ClusterInput{Record: rec, GitRepos: w.gitRepos(), Generation: ref.Generation, Overrides: overrides})
	pending, err := w.writeStatus(ctx, e, ref, stamped(&proj, &proj.Conditions))
	return !pending && proj.Conditions[0].Status == "True", err
}

func (w *Writer) processGroup(ctx context.Context, e *entry, ref Ref, overrides []Condition) (bool, error) {
	var rec protocol.GroupRecord
	if _, err := w.query(ctx, protocol.ClusterGroupID(ref.Name), &rec); err != nil {
		return false, err
	}
	clusters, err := w.clusters(ctx)
	if err != nil {
		return false, err
	}
	proj := ProjectGroup(GroupInput{Selector: rec.Selector, Clusters: clusters, GitRepos: w.gitRepos(), Generation: ref.Generation,
		Overrides: overrides})
	pending, err := w.writeStatus(ctx, e, ref, stamped(&proj, &proj.Conditions))
	return !pending && proj.Conditions[0].Status == status.ConditionTrue, err
}

// refField names ref in a log line.
func refField(ref Ref) zap.Field {
	return zap.String("object", ref.Kind+" "+ref.Namespace+"/"+ref.Name)
}

// foldRollout folds the running rollout's live state (deployments, waits,
// partitions, halts, progress) into st, as `flotilla status` does, so
// that the status shows a rollout's progress while it runs. A rollout
// that just ended leaves st as it is.
func (w *Writer) foldRollout(ctx context.Context, st *status.GitRepo) error {
	if st.Rollout == "" {
		return nil
	}
	var ro status.Rollout
	found, err := w.query(ctx, st.Rollout, &ro)
	if err != nil || !found || len(ro.Deployments) == 0 {
		return err
	}
	st.Deployments = ro.Deployments
	st.Waits, st.Partitions, st.Halts, st.Progress = ro.Waits, ro.Partitions, ro.Halts, ro.Progress
	st.Finish()
	return nil
}

// stamped is the projection writeStatus writes: v, whose conditions
// (*conds) get their timestamps from those last written.
func stamped(v any, conds *[]Condition) func(prev []Condition, now time.Time) (any, []Condition) {
	return func(prev []Condition, now time.Time) (any, []Condition) {
		*conds = Stamp(*conds, prev, now)
		return v, *conds
	}
}

// readGitRepo reads Flotilla's status of a GitRepo or HelmOp with its
// running rollout folded in; found is false when Flotilla has no such
// resource (then st is an empty, finished status).
func (w *Writer) readGitRepo(ctx context.Context, ref Ref) (st status.GitRepo, found bool, err error) {
	id := protocol.GitRepoID(ref.Namespace, ref.Name)
	if ref.Kind == KindHelmOp {
		id = protocol.HelmOpID(ref.Namespace, ref.Name)
	}
	found, err = w.query(ctx, id, &st)
	if err != nil {
		return st, false, err
	}
	if !found {
		st = status.GitRepo{Kind: ref.Kind, Namespace: ref.Namespace, Name: ref.Name}
		st.Finish()
		return st, false, nil
	}
	return st, true, w.foldRollout(ctx, &st)
}

// clusters lists the registered clusters for the groups' status, at most
// once per SettledInterval for all groups: without memos to decode the
// listing queries every cluster.
func (w *Writer) clusters(ctx context.Context) ([]protocol.ClusterRecord, error) {
	w.listMu.Lock()
	defer w.listMu.Unlock()
	if w.listed != nil && time.Since(w.listedAt) < w.cfg.SettledInterval {
		return w.listed, nil
	}
	l, err := cluster.NewRegistry(w.cfg.Temporal, w.cfg.DataConverter).Clusters(ctx)
	if err != nil {
		return nil, fmt.Errorf("list the clusters: %w", err)
	}
	w.listed, w.listedAt = l, time.Now()
	return l, nil
}
