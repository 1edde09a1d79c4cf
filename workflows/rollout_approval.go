package workflows

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/workflow"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/notify"
	"github.com/flotilla-gitops/flotilla/internal/plan"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

// versionApprovalPlan: a partition that starts waiting for approval gets
// the plan of what approving it would do (a PlanWorkflow child) and an
// ApprovalWaiting event (issue 31). Rollouts recorded before it do
// neither.
const versionApprovalPlan = "approval-plan"

// approvalPlanTimeout bounds an approval's plan: a plan that takes longer
// (no worker runs PlanWorkflow, clusters that never answer) is shown as
// failed. Approving never waits for it.
const approvalPlanTimeout = 10 * time.Minute

// maxDetailClusters bounds the clusters the Temporal UI's details list
// per waiting partition; `flotilla approve --show` prints them all.
const maxDetailClusters = 20

// approvalPlans are the plans of the partitions that waited for approval
// in this rollout, by "bundle/partition".
type approvalPlans struct {
	// on: versionApprovalPlan holds (asked once, at the first wait).
	on, asked bool
	byKey     map[string]*plan.PartitionPlan
}

// watchApprovals starts, for every partition whose approval wait shows
// for the first time, the plan of the partition and emits
// ApprovalWaiting; it returns waits with each approval wait's plan
// summary. The plan's result arrives while the rollout waits (it wakes
// the rollout, which shows it); nothing waits for it.
func (r *rolloutRun) watchApprovals(ctx workflow.Context, waits []status.Wait) []status.Wait {
	if !slices.ContainsFunc(waits, func(w status.Wait) bool { return w.Kind == status.WaitApproval }) {
		return waits
	}
	if !r.plans.asked {
		r.plans.asked = true
		r.plans.on = workflow.GetVersion(ctx, versionApprovalPlan, workflow.DefaultVersion, 1) == 1
		r.plans.byKey = map[string]*plan.PartitionPlan{}
	}
	if !r.plans.on {
		return waits
	}
	out := slices.Clone(waits)
	for i := range out {
		w := &out[i]
		if w.Kind != status.WaitApproval {
			continue
		}
		pp := r.plans.byKey[w.Bundle+"/"+w.Partition]
		if pp == nil {
			if r.superseded {
				continue // it ends: nothing to approve
			}
			pp = r.startApprovalPlan(ctx, *w)
			r.plans.byKey[w.Bundle+"/"+w.Partition] = pp
			r.emitApprovalWaiting(ctx, *w, pp)
		}
		w.Plan = pp.Summary
	}
	return out
}

// approvalPlanID is the ID of the plan of bundle's partition in this
// rollout run: "plan/<ns>/<name>/<commit>-<generation>-<run>-<bundle>-<partition>".
func (r *rolloutRun) approvalPlanID(ctx workflow.Context, bundle, partition string) string {
	rollout := strings.TrimPrefix(r.id, "rollout/"+r.in.GitRepo.Namespace+"/"+r.in.GitRepo.Name+"/")
	run := workflow.GetInfo(ctx).WorkflowExecution.RunID
	if len(run) > 8 {
		run = run[:8]
	}
	return fmt.Sprintf("%s%s/%s/%s-%s-%s-%s", plan.WorkflowIDPrefix, r.in.GitRepo.Namespace, r.in.GitRepo.Name,
		rollout, run, bundle, partition)
}

// startApprovalPlan starts the PlanWorkflow of the waiting partition of
// w, restricted to its clusters, and returns its entry; the entry is
// filled when the plan ends (a failure is shown, never the rollout's).
func (r *rolloutRun) startApprovalPlan(ctx workflow.Context, w status.Wait) *plan.PartitionPlan {
	pp := &plan.PartitionPlan{Bundle: w.Bundle, Partition: w.Partition,
		Clusters: r.s.PartitionClusters(w.Bundle, w.Partition)}
	if r.in.GitRepo.Kind == api.KindHelmOp {
		pp.State, pp.Summary = plan.StateNone, "no plan: HelmOps are not planned"
		return pp
	}
	pp.Workflow = r.approvalPlanID(ctx, w.Bundle, w.Partition)
	pp.State, pp.Summary = plan.StatePlanning, "planning…"
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:               pp.Workflow,
		WorkflowExecutionTimeout: approvalPlanTimeout,
		// Nobody needs the plan once the rollout ended.
		ParentClosePolicy: enumspb.PARENT_CLOSE_POLICY_TERMINATE,
		StaticSummary:     "plan of " + w.Bundle + "/" + w.Partition + " for its approval",
	})
	f := workflow.ExecuteChildWorkflow(cctx, plan.WorkflowName, plan.Request{
		Namespace: r.in.GitRepo.Namespace, Name: r.in.GitRepo.Name, Commit: r.in.Commit,
		Clusters: pp.Clusters, Source: "approval of " + w.Bundle + "/" + w.Partition})
	workflow.Go(ctx, func(ctx workflow.Context) {
		var res plan.Result
		if err := f.Get(ctx, &res); err != nil {
			pp.State, pp.Error = plan.StateFailed, activityMessage(err)
			pp.Summary = "plan failed: " + pp.Error
			workflow.GetLogger(ctx).Warn("Approval plan failed", "partition", w.Bundle+"/"+w.Partition, "error", pp.Error)
		} else {
			pp.State, pp.Plan, pp.Summary = plan.StatePlanned, &res, res.Summary()
		}
		r.changed++ // shown in the waits and the details
	})
	return pp
}

// emitApprovalWaiting tells the namespace's notifications that w's
// partition waits for approval (once per partition and rollout).
func (r *rolloutRun) emitApprovalWaiting(ctx workflow.Context, w status.Wait, pp *plan.PartitionPlan) {
	kind := api.KindGitRepo
	if r.in.GitRepo.Kind != "" {
		kind = r.in.GitRepo.Kind
	}
	r.events.emit(ctx, notify.Event{Type: notify.ApprovalWaiting, Severity: notify.Info,
		Namespace: r.in.GitRepo.Namespace, Kind: kind, GitRepo: r.in.GitRepo.Name, RepoURL: r.in.Spec.Repo,
		Commit: r.in.Commit, Bundles: []string{w.Bundle}, Clusters: pp.Clusters, Rollout: r.id,
		Message: fmt.Sprintf("%s: bundle %s partition %s (%d cluster(s)) waits for approval: flotilla approve %s --bundle %s --partition %s",
			r.in.GitRepo.Title(), w.Bundle, w.Partition, len(pp.Clusters), r.in.GitRepo.Name, w.Bundle, w.Partition)})
}

// waitingPlans lists the plans of the partitions that wait for approval
// now, in the order of the rollout's waits.
func (r *rolloutRun) waitingPlans() []plan.PartitionPlan {
	var out []plan.PartitionPlan
	for _, w := range r.st.Waits {
		if w.Kind != status.WaitApproval {
			continue
		}
		if pp := r.plans.byKey[w.Bundle+"/"+w.Partition]; pp != nil {
			out = append(out, *pp)
		} else {
			out = append(out, plan.PartitionPlan{Bundle: w.Bundle, Partition: w.Partition, State: plan.StateNone})
		}
	}
	return out
}

// planQuery answers protocol.QueryPlan.
func (r *rolloutRun) planQuery() (plan.ApprovalPlans, error) {
	return plan.ApprovalPlans{Rollout: r.id, Commit: r.in.Commit, Partitions: r.waitingPlans()}, nil
}

// approvalDetails is the markdown the Temporal UI shows below the
// rollout's progress for each partition waiting for approval: its plan's
// summary and, per cluster, what happens to each release.
func (r *rolloutRun) approvalDetails() string {
	var b strings.Builder
	for _, pp := range r.waitingPlans() {
		if pp.State == plan.StateNone && pp.Workflow == "" && pp.Summary == "" {
			continue // a rollout from before plans
		}
		b.WriteString("\n\n**Waiting for approval: " + pp.Bundle + "/" + pp.Partition + "**: " + pp.Summary + "\n")
		if pp.Plan == nil {
			continue
		}
		for i, c := range pp.Plan.Clusters {
			if i == maxDetailClusters {
				b.WriteString("- … " + strconv.Itoa(len(pp.Plan.Clusters)-i) + " more cluster(s): `flotilla approve --show`\n")
				break
			}
			b.WriteString("- " + clusterLine(c) + "\n")
		}
	}
	return b.String()
}

// clusterLine is one cluster of a plan in a line: "c2: upgrade app
// (default/app), install db (db/db)".
func clusterLine(c plan.Cluster) string {
	line := c.Name + ":"
	if c.Offline {
		line = c.Name + " (offline):"
	}
	if c.Error != "" {
		return line + " not planned: " + c.Error
	}
	var rels []string
	for _, rel := range c.Releases {
		s := fmt.Sprintf("%s %s (%s/%s)", rel.Action, rel.Bundle, rel.Namespace, rel.Release)
		if rel.Error != "" {
			s += " failed to plan: " + rel.Error
		}
		rels = append(rels, s)
	}
	if len(rels) == 0 {
		return line + " nothing to do"
	}
	return line + " " + strings.Join(rels, ", ")
}
