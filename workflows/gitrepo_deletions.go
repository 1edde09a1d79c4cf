package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/flotilla-gitops/flotilla/internal/protocol"
)

// validateApproveDeletions refuses an approval when the deletion guard
// holds nothing: the answer says so instead of a rollout that changes
// nothing.
func (g *gitRepo) validateApproveDeletions(workflow.Context, protocol.Approve) error {
	if len(g.s.Guarded) == 0 {
		return fmt.Errorf("%s: the deletion guard holds no uninstall", g.ref.Title())
	}
	return nil
}

// approveDeletions lets the uninstalls the deletion guard held in the
// last rollout go: a new rollout (superseding one that runs) removes
// them. It approves exactly those; a plan that would remove others is
// held again (rollout.PlanOptions.Approved). a.Identity is recorded as
// who approved (CLIs before it send no argument: nobody known).
func (g *gitRepo) approveDeletions(ctx workflow.Context, a protocol.Approve) (protocol.ApproveResult, error) {
	g.s.DeletionsApproved = g.s.Guarded
	g.s.DeletionApprovals++
	g.s.DeletionsApprovedBy, g.s.DeletionsApprovedAt = a.Identity, workflow.Now(ctx).UTC()
	g.s.Dirty = true
	out := protocol.ApproveResult{By: a.Identity}
	for _, ref := range g.s.Guarded {
		out.Approved = append(out.Approved, fmt.Sprintf("%s on %s (release %s/%s)", ref.Bundle, ref.Cluster, ref.Namespace, ref.Release))
	}
	workflow.GetLogger(ctx).Info("Uninstalls approved", "count", len(out.Approved))
	return out, nil
}

// deletionsDone takes what a finished rollout's deletion guard held, and
// forgets the approvals it acted on: a rollout started after the last
// approval that was not superseded had them all.
func (g *gitRepo) deletionsDone(res RolloutResult) {
	g.s.Guarded = res.Guarded
	if !res.Superseded && g.cur.DeletionApprovals == g.s.DeletionApprovals {
		g.s.DeletionsApproved = nil
	}
}
