package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/flotilla-gitops/flotilla/activities"
	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/cluster"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
)

// ClusterTokenWorkflow is one registration token (ID clustertoken/<id>):
// it accepts one registration with a valid proof before it expires, then
// ends. Its history holds only the verifier. A completed run still
// answers the status query, so an agent presenting a used or expired
// token learns which.
func ClusterTokenWorkflow(ctx workflow.Context, in protocol.TokenStart) (protocol.TokenStatus, error) {
	now := workflow.Now(ctx)
	st := protocol.TokenStatus{ID: in.ID, CreatedAt: now, ExpiresAt: now.Add(in.TTL)}
	if in.Status != nil {
		st = *in.Status
	}
	if err := workflow.SetQueryHandler(ctx, protocol.QueryStatus, func() (protocol.TokenStatus, error) { return st, nil }); err != nil {
		return st, err
	}
	// keep: a refused registration leaves the token usable (runs before
	// versionTokenKeep ended as soon as a registration began, refused
	// or not); registering is the cluster whose registration runs.
	keep := workflow.GetVersion(ctx, versionTokenKeep, workflow.DefaultVersion, 1) == 1
	registering := ""
	reject := func(format string, args ...any) error {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf(format, args...), activities.ErrTypeRegistrationRejected, nil)
	}
	err := workflow.SetUpdateHandlerWithOptions(ctx, protocol.UpdateRegister,
		func(ctx workflow.Context, r protocol.Register) (protocol.ClusterRecord, error) {
			used := workflow.Now(ctx)
			if keep {
				registering = r.Cluster
			} else {
				st.UsedBy, st.UsedAt = r.Cluster, &used
			}
			var rec protocol.ClusterRecord
			var a *activities.Activities
			err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, registryOptions), a.RegisterAgent,
				activities.RegisterAgentInput{Cluster: r.Cluster, Labels: r.Labels, TokenID: in.ID}).Get(ctx, &rec)
			registering = ""
			switch {
			case err != nil:
				st.UsedBy, st.UsedAt = "", nil // refused: the token stays usable
				st.Refused = activityMessage(err)
			case keep:
				st.UsedBy, st.UsedAt, st.Refused = r.Cluster, &used, ""
			}
			return rec, err
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, r protocol.Register) error {
			switch {
			case st.Revoked:
				return reject("registration token %s was revoked", in.ID)
			case registering != "":
				return reject("registration token %s is being used by cluster %s; try again in a moment", in.ID, registering)
			case st.UsedBy != "":
				return reject("registration token %s was already used by cluster %s; tokens are single-use, create another with `flotilla cluster token create`", in.ID, st.UsedBy)
			case !workflow.Now(ctx).Before(st.ExpiresAt):
				return reject("registration token %s expired at %s", in.ID, st.ExpiresAt.UTC().Format(time.RFC3339))
			case !cluster.VerifyProof(r.Proof, in.Verifier):
				return reject("invalid registration token %s", in.ID)
			}
			meta := api.ObjectMeta{Name: r.Cluster, Labels: r.Labels}
			//workflowcheck:ignore validation only reads its input
			if errs := api.ValidateClusterMeta(meta); len(errs) > 0 {
				return reject("%s", (&api.ValidationError{Kind: api.KindCluster, Name: r.Cluster, Errs: errs}).Error())
			}
			return nil
		}})
	if err != nil {
		return st, err
	}
	workflow.Go(ctx, func(ctx workflow.Context) {
		workflow.GetSignalChannel(ctx, protocol.SignalDelete).Receive(ctx, nil)
		st.Revoked = true
	})
	full := func() bool { return keep && registering == "" && historyFull(ctx) }
	ok, err := workflow.AwaitWithTimeout(ctx, st.ExpiresAt.Sub(now), func() bool { return st.UsedBy != "" || st.Revoked || full() })
	if err != nil {
		return st, err
	}
	if !ok {
		st.Expired = true
	}
	err = workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
	if err == nil && keep && ok && st.UsedBy == "" && !st.Revoked {
		// Many refused registrations: a new run carries the token on.
		in.Status = &st
		return st, workflow.NewContinueAsNewError(ctx, ClusterTokenWorkflow, in)
	}
	return st, err
}
