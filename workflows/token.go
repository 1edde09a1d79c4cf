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
	tk := &token{in: in, st: protocol.TokenStatus{ID: in.ID, CreatedAt: now, ExpiresAt: now.Add(in.TTL)}}
	if in.Status != nil {
		tk.st = *in.Status
	}
	if err := workflow.SetQueryHandler(ctx, protocol.QueryStatus, func() (protocol.TokenStatus, error) { return tk.st, nil }); err != nil {
		return tk.st, err
	}
	tk.keep = workflow.GetVersion(ctx, versionTokenKeep, workflow.DefaultVersion, 1) == 1
	err := workflow.SetUpdateHandlerWithOptions(ctx, protocol.UpdateRegister, tk.register,
		workflow.UpdateHandlerOptions{Validator: tk.validate})
	if err != nil {
		return tk.st, err
	}
	workflow.Go(ctx, func(ctx workflow.Context) {
		workflow.GetSignalChannel(ctx, protocol.SignalDelete).Receive(ctx, nil)
		tk.st.Revoked = true
	})
	full := func() bool { return tk.keep && tk.registering == "" && historyFull(ctx) }
	ok, err := workflow.AwaitWithTimeout(ctx, tk.st.ExpiresAt.Sub(now), func() bool { return tk.st.UsedBy != "" || tk.st.Revoked || full() })
	if err != nil {
		return tk.st, err
	}
	if !ok {
		tk.st.Expired = true
	}
	err = workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
	if err == nil && tk.keep && ok && tk.st.UsedBy == "" && !tk.st.Revoked {
		// Many refused registrations: a new run carries the token on.
		in.Status = &tk.st
		return tk.st, workflow.NewContinueAsNewError(ctx, ClusterTokenWorkflow, in)
	}
	return tk.st, err
}

// token is a registration token's workflow state.
type token struct {
	in protocol.TokenStart
	st protocol.TokenStatus
	// keep: a refused registration leaves the token usable (runs before
	// versionTokenKeep ended as soon as a registration began, refused
	// or not); registering is the cluster whose registration runs.
	keep        bool
	registering string
}

// register registers the cluster of r with the token (the update's
// handler, after validate accepted it).
func (tk *token) register(ctx workflow.Context, r protocol.Register) (protocol.ClusterRecord, error) {
	used := workflow.Now(ctx)
	if tk.keep {
		tk.registering = r.Cluster
	} else {
		tk.st.UsedBy, tk.st.UsedAt = r.Cluster, &used
	}
	var rec protocol.ClusterRecord
	var a *activities.Activities
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, registryOptions), a.RegisterAgent,
		activities.RegisterAgentInput{Cluster: r.Cluster, Labels: r.Labels, TokenID: tk.in.ID}).Get(ctx, &rec)
	tk.registering = ""
	switch {
	case err != nil:
		tk.st.UsedBy, tk.st.UsedAt = "", nil // refused: the token stays usable
		tk.st.Refused = activityMessage(err)
	case tk.keep:
		tk.st.UsedBy, tk.st.UsedAt, tk.st.Refused = r.Cluster, &used, ""
	}
	return rec, err
}

// validate rejects a registration the token cannot take.
func (tk *token) validate(ctx workflow.Context, r protocol.Register) error {
	id, st := tk.in.ID, tk.st
	reject := func(format string, args ...any) error {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf(format, args...), activities.ErrTypeRegistrationRejected, nil)
	}
	switch {
	case st.Revoked:
		return reject("registration token %s was revoked", id)
	case tk.registering != "":
		return reject("registration token %s is being used by cluster %s; try again in a moment", id, tk.registering)
	case st.UsedBy != "":
		return reject("registration token %s was already used by cluster %s; tokens are single-use, create another with `flotilla cluster token create`", id, st.UsedBy)
	case !workflow.Now(ctx).Before(st.ExpiresAt):
		return reject("registration token %s expired at %s", id, st.ExpiresAt.UTC().Format(time.RFC3339))
	case !cluster.VerifyProof(r.Proof, tk.in.Verifier):
		return reject("invalid registration token %s", id)
	}
	meta := api.ObjectMeta{Name: r.Cluster, Labels: r.Labels}
	//workflowcheck:ignore validation only reads its input
	if errs := api.ValidateClusterMeta(meta); len(errs) > 0 {
		return reject("%s", (&api.ValidationError{Kind: api.KindCluster, Name: r.Cluster, Errs: errs}).Error())
	}
	return nil
}
