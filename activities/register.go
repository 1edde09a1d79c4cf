package activities

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/temporalx"
)

// RegisterAgentInput registers an agent's cluster after its registration
// token was verified.
type RegisterAgentInput struct {
	Cluster string            `json:"cluster"`
	Labels  map[string]string `json:"labels,omitempty"`
	TokenID string            `json:"tokenID"`
}

// RegisterAgent creates (or updates) the cluster's entity workflow in pull
// mode with the agent's labels. It is idempotent: a retry applies the same
// change, which the ClusterWorkflow folds into the same record.
func (a *Activities) RegisterAgent(ctx context.Context, in RegisterAgentInput) (protocol.ClusterRecord, error) {
	rec, err := temporalx.ApplyCluster(ctx, a.Client, activity.GetInfo(ctx).TaskQueue, in.Cluster, protocol.ClusterApply{
		Labels: in.Labels, SetLabels: len(in.Labels) > 0, Agent: &protocol.AgentApply{TokenID: in.TokenID},
	})
	var rejected *temporal.ApplicationError
	if errors.As(err, &rejected) {
		// The cluster's workflow refused the registration: final.
		return protocol.ClusterRecord{}, temporal.NewNonRetryableApplicationError(rejected.Message(), ErrTypeRegistrationRejected, nil)
	}
	if err != nil {
		return protocol.ClusterRecord{}, fmt.Errorf("register cluster %s: %w", in.Cluster, err)
	}
	return rec, nil
}
