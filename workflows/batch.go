package workflows

import (
	"fmt"
	"strconv"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/flotilla-gitops/flotilla/activities"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/temporalx"
	"github.com/flotilla-gitops/flotilla/internal/webhook"
)

// BatchInput is one batch of a rollout's cluster work.
type BatchInput struct {
	GitRepo activities.GitRepoRef `json:"gitRepo"`
	Commit  string                `json:"commit"`
	// Rollout is the ID of the rollout the batch reports to.
	Rollout string        `json:"rollout"`
	Work    []clusterWork `json:"work"`
	// Typed: deploys report an outcome per bundle (versionTypedOutcomes).
	Typed bool `json:"typed,omitempty"`
	// Batched: the rollout takes gathered outcomes (signalClusterReports).
	// Rollouts of older code leave it unset and get a signal per outcome.
	Batched bool `json:"batched,omitempty"`
	// Pickup is the rollout's cluster pickup timeout (zero: none, as
	// before versionPickupTimeout).
	Pickup time.Duration `json:"pickup,omitempty"`
}

// signalDropClusters tells a batch the clusters ([]string) whose work to
// drop: they were removed while it waited for them (versionDropRemoved).
const signalDropClusters = "dropClusters"

// RolloutBatchWorkflow works a batch of clusters for a large rollout (ID
// <rollout ID>/batch-<n>): deploys, readiness waits, cleanups and
// rollbacks, as the rollout itself does for small rollouts. Each
// cluster's outcome is signalled to the rollout as soon as it is known,
// so the rollout's strategy reacts per cluster, not per batch.
func RolloutBatchWorkflow(ctx workflow.Context, in BatchInput) error {
	superseded := false
	stopCtx, stop := workflow.WithCancel(ctx)
	workflow.Go(ctx, func(ctx workflow.Context) {
		workflow.GetSignalChannel(ctx, protocol.SignalSupersede).Receive(ctx, nil)
		superseded = true
		stop()
	})
	run := &runner{gitRepo: in.GitRepo, commit: in.Commit, workflowID: in.Rollout, stopCtx: stopCtx, typed: in.Typed, pickup: in.Pickup,
		superseded: func() bool { return superseded },
		report: func(ctx workflow.Context, rep clusterReport) {
			err := workflow.SignalExternalWorkflow(ctx, in.Rollout, "", signalClusterReport, rep).Get(ctx, nil)
			if err != nil {
				workflow.GetLogger(ctx).Warn("Cannot report to the rollout", "rollout", in.Rollout, "cluster", rep.Cluster, "error", err)
			}
		}}
	run.scopes = newClusterScopes(ctx)
	workflow.Go(ctx, func(ctx workflow.Context) {
		ch := workflow.GetSignalChannel(ctx, signalDropClusters)
		for {
			var clusters []string
			ch.Receive(ctx, &clusters)
			if workflow.GetVersion(ctx, versionDropRemoved, workflow.DefaultVersion, 1) == 1 {
				run.scopes.drop(clusters)
			}
		}
	})
	if in.Batched && workflow.GetVersion(ctx, versionBatchedReports, workflow.DefaultVersion, 1) == 1 {
		out := &reportOutbox{rollout: in.Rollout}
		run.report = out.add
		sent := out.start(ctx)
		run.runAll(ctx, in.Work)
		out.close(ctx, sent)
		return nil
	}
	run.runAll(ctx, in.Work)
	return nil
}

// reportOutbox sends a batch's cluster outcomes to its rollout: one
// signal at a time, each carrying every outcome gathered while the one
// before was in flight. A batch whose hundred deploys end within a few
// workflow tasks of each other sends a handful of signals, not a hundred,
// and the rollout folds them in as many workflow tasks.
type reportOutbox struct {
	rollout string
	pending []clusterReport
	closed  bool
}

// maxReportsPerSignal bounds one signal's outcomes, so that a batch of
// clusters with many bundles each stays far from Temporal's payload limit.
const maxReportsPerSignal = 50

func (o *reportOutbox) add(_ workflow.Context, rep clusterReport) { o.pending = append(o.pending, rep) }

// start runs the sender; the future is set once it sent everything
// after close.
func (o *reportOutbox) start(ctx workflow.Context) workflow.Future {
	done, settle := workflow.NewFuture(ctx)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			_ = workflow.Await(ctx, func() bool { return len(o.pending) > 0 || o.closed })
			if len(o.pending) == 0 {
				settle.Set(nil, nil)
				return
			}
			n := min(len(o.pending), maxReportsPerSignal)
			reps := o.pending[:n:n]
			o.pending = o.pending[n:]
			if err := workflow.SignalExternalWorkflow(ctx, o.rollout, "", signalClusterReports, reps).Get(ctx, nil); err != nil {
				workflow.GetLogger(ctx).Warn("Cannot report to the rollout", "rollout", o.rollout, "clusters", len(reps), "error", err)
			}
		}
	})
	return done
}

// close waits until everything added was sent.
func (o *reportOutbox) close(ctx workflow.Context, sent workflow.Future) {
	o.closed = true
	_ = sent.Get(ctx, nil)
}

// dispatcher hands cluster work to goroutines of the rollout (small
// rollouts) or to batch children (large ones), and tracks what is in
// flight.
type dispatcher struct {
	r        *rolloutRun
	ctx      workflow.Context
	run      *runner
	wg       workflow.WaitGroup
	inflight int
	batches  int
	// children are the running batches, told when the rollout is
	// superseded.
	children map[string]bool
	// pending is small work held back for a moment so that clusters
	// released one at a time (a slot freed by each finished cluster) share
	// a batch instead of starting one child each.
	pending  []clusterWork
	flushing bool
	stopCtx  workflow.Context
}

func (r *rolloutRun) newDispatcher(ctx, stopCtx workflow.Context) *dispatcher {
	d := &dispatcher{r: r, ctx: ctx, run: r.runner(ctx, stopCtx), wg: workflow.NewWaitGroup(ctx), children: map[string]bool{}, stopCtx: stopCtx}
	r.disp = d
	if r.batching {
		workflow.Go(ctx, func(ctx workflow.Context) {
			_ = workflow.Await(ctx, func() bool { return r.superseded })
			for _, id := range sortedKeys(d.children) {
				_ = workflow.SignalExternalWorkflow(ctx, id, "", protocol.SignalSupersede, nil).Get(ctx, nil)
			}
		})
	}
	return d
}

func (d *dispatcher) dispatch(works []clusterWork) {
	if len(works) == 0 {
		return
	}
	if !d.r.batching {
		for _, w := range works {
			d.start(func(ctx workflow.Context) { d.run.run(ctx, w) })
		}
		return
	}
	if d.inflight > 0 && len(d.pending)+len(works) < minBatchClusters {
		d.pending = append(d.pending, works...)
		if !d.flushing {
			d.flushing = true
			workflow.Go(d.ctx, func(ctx workflow.Context) {
				err := workflow.NewTimerWithOptions(d.stopCtx, batchCoalesce, workflow.TimerOptions{Summary: "gather clusters into a batch"}).Get(ctx, nil)
				works := d.pending
				d.pending, d.flushing = nil, false
				if err != nil || d.r.superseded {
					for _, w := range works {
						d.r.fold(ctx, clusterReport{Cluster: w.Cluster, GaveUp: true, Final: true, Bundles: bundleNames(w.Deploy)})
					}
					return
				}
				d.startBatches(works)
			})
		}
		return
	}
	works = append(d.pending, works...)
	d.pending = nil
	d.startBatches(works)
}

// startBatches starts batch children of at most batchClusters clusters.
func (d *dispatcher) startBatches(works []clusterWork) {
	for len(works) > 0 {
		// At most batchClusters clusters, and as many as fit the batch's
		// FlotillaCluster search attribute.
		n := 1
		for n < min(len(works), batchClusters) && fitsClusterAttr(clusterNames(works[:n+1])) {
			n++
		}
		chunk := works[:n]
		works = works[n:]
		d.batches++
		id := d.r.id + "/batch-" + strconv.Itoa(d.batches)
		cctx := workflow.WithChildOptions(d.ctx, workflow.ChildWorkflowOptions{
			WorkflowID:            id,
			WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
			StaticSummary:         batchSummary(chunk),
			TypedSearchAttributes: temporal.NewSearchAttributes(
				temporalx.KeyGitRepo.ValueSet(d.r.in.GitRepo.String()),
				temporalx.KeyCommit.ValueSet(d.r.in.Commit),
				temporalx.KeyRepoURL.ValueSet(webhook.SearchKey(d.r.in.Spec.Repo)),
				temporalx.KeyCluster.ValueSet(clusterNames(chunk)),
			),
		})
		d.children[id] = true
		in := BatchInput{GitRepo: d.r.in.GitRepo, Commit: d.r.in.Commit, Rollout: d.r.id, Work: chunk, Typed: d.r.typed, Batched: true, Pickup: d.r.pickup}
		d.start(func(ctx workflow.Context) {
			err := workflow.ExecuteChildWorkflow(cctx, RolloutBatchWorkflow, in).Get(ctx, nil)
			delete(d.children, id)
			if err != nil {
				workflow.GetLogger(ctx).Warn("Batch failed", "batch", id, "error", err)
			}
			// Units the batch did not report are given up for this
			// rollout, so the rollout never waits on a lost batch.
			for _, w := range chunk {
				for _, b := range w.Deploy {
					if d.r.s.Running(b.Name, w.Cluster) {
						d.r.fold(ctx, clusterReport{Cluster: w.Cluster, GaveUp: true, Final: true, Bundles: []string{b.Name}})
					}
				}
			}
		})
	}
}

func (d *dispatcher) start(f func(ctx workflow.Context)) {
	d.inflight++
	d.wg.Add(1)
	workflow.Go(d.ctx, func(ctx workflow.Context) {
		defer d.wg.Done()
		f(ctx)
		d.inflight--
		d.r.changed++
	})
}

func (d *dispatcher) wait(ctx workflow.Context) { d.wg.Wait(ctx) }

// dropInBatches tells the running batches to drop the clusters' work
// (signalDropClusters); a batch without work there ignores it.
func (d *dispatcher) dropInBatches(ctx workflow.Context, clusters []string) {
	for _, id := range sortedKeys(d.children) {
		// A batch that ended meanwhile needs no telling.
		_ = workflow.SignalExternalWorkflow(ctx, id, "", signalDropClusters, clusters).Get(ctx, nil)
	}
}

func clusterNames(works []clusterWork) []string {
	out := make([]string, len(works))
	for i, w := range works {
		out[i] = w.Cluster
	}
	return out
}

// batchSummary is the one-line summary the Temporal UI shows for a batch.
func batchSummary(works []clusterWork) string {
	kind := "deploy"
	switch {
	case len(works[0].Rollback) > 0:
		kind = "roll back"
	case len(works[0].Deploy) == 0:
		kind = "clean up"
	}
	first, last := works[0].Cluster, works[len(works)-1].Cluster
	return fmt.Sprintf("%s %d cluster(s): %s … %s", kind, len(works), first, last)
}

// scheduled reports whether the rollout's units are scheduled: its plan
// is made and it has rollout strategies.
func (r *rolloutRun) scheduled() bool { return r.s != nil && r.s.Scheduled() }

// approve releases partitions waiting for approval.
func (r *rolloutRun) approve(ctx workflow.Context, a protocol.Approve) (protocol.ApproveResult, error) {
	if !r.scheduled() {
		// Sent while the rollout renders: it applies once the plan is
		// made (or fails if nothing is deployed).
		if err := workflow.Await(ctx, func() bool { return r.scheduled() || r.st.Phase == phaseDone }); err != nil {
			return protocol.ApproveResult{}, err
		}
		if !r.scheduled() {
			return protocol.ApproveResult{}, fmt.Errorf("rollout %s deploys nothing: %s", r.id, r.st.Error)
		}
		if err := r.validateApproval(ctx, a); err != nil {
			return protocol.ApproveResult{}, err
		}
	}
	approved := r.s.Approve(a.Bundle, a.Partition, a.Identity, workflow.Now(ctx).UTC())
	if len(approved) > 0 {
		r.changed++
		workflow.GetLogger(ctx).Info("Partitions approved", "partitions", approved)
	}
	return protocol.ApproveResult{Approved: approved, By: a.Identity}, nil
}

func (r *rolloutRun) validateApproval(ctx workflow.Context, a protocol.Approve) error {
	if !r.scheduled() {
		if r.st.Phase == phaseDone {
			return fmt.Errorf("rollout %s deploys nothing: %s", r.id, r.st.Error)
		}
		return nil // checked once the plan is made
	}
	if !r.s.HasPartition(a.Bundle, a.Partition) {
		what := "no partition requires approval"
		if a.Partition != "" {
			what = "no partition " + a.Partition + " requires approval"
		}
		if a.Bundle != "" {
			what += " in bundle " + a.Bundle
		}
		return fmt.Errorf("rollout %s: %s", r.id, what)
	}
	return nil
}
