package activities

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/activity"
	"go.uber.org/zap"

	"github.com/flotilla-gitops/flotilla/internal/cluster"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/seal"
	"github.com/flotilla-gitops/flotilla/internal/temporalx"
)

// SecretSource reads the credentials of a Secret applied with `flotilla
// apply`: a cluster.Vault in a controller.
type SecretSource interface {
	Load(namespace, name string) (username, password string, err error)
	// SecretData returns the Secret's type and every key (cluster.ErrNoData
	// when an older version sealed only its credentials).
	SecretData(ctx context.Context, namespace, name string) (typ string, data map[string][]byte, err error)
}

// Sealing is what the controller needs to re-seal: the vault it reads
// sealed kubeconfigs and Secrets from and the keys that open them.
type Sealing struct {
	Vault  *cluster.Vault
	Opener *seal.Opener
}

// Reseal moves every sealed kubeconfig and Secret to the newest key. One
// that cannot be opened (its key is gone) is reported by name and left as
// it is; the others go on.
func (a *Activities) Reseal(ctx context.Context) (protocol.ResealResult, error) {
	s := a.Sealing
	if s == nil {
		return protocol.ResealResult{}, fmt.Errorf("this worker cannot re-seal: it holds no sealing keys")
	}
	r := &resealing{a: a, s: s, queue: activity.GetInfo(ctx).TaskQueue, res: protocol.ResealResult{KeyID: s.Opener.Newest().ID}}
	err := temporalx.EachWorkflow(ctx, a.Client, temporalx.RunningOfType(protocol.ClusterWorkflow), func(id string) error {
		activity.RecordHeartbeat(ctx, id)
		var rec protocol.ClusterRecord
		if a.record(ctx, id, &rec) && !rec.Removed {
			r.cluster(ctx, rec)
		}
		return nil
	})
	if err == nil {
		err = temporalx.EachWorkflow(ctx, a.Client, temporalx.RunningOfType(protocol.SecretWorkflow), func(id string) error {
			activity.RecordHeartbeat(ctx, id)
			var rec protocol.SecretRecord
			if a.record(ctx, id, &rec) && !rec.Removed {
				r.secret(ctx, rec)
			}
			return nil
		})
	}
	res := r.res
	a.Logger.Info("Re-sealed secrets", zap.String("keyID", res.KeyID), zap.Int("kubeconfigs", res.Kubeconfigs),
		zap.Int("secrets", res.Secrets), zap.Int("unchanged", res.Unchanged), zap.Int("failed", len(res.Failed)))
	return res, err
}

// record queries an entity workflow's status; false when it ended since
// it was listed.
func (a *Activities) record(ctx context.Context, id string, out any) bool {
	v, err := a.Client.QueryWorkflow(ctx, id, "", protocol.QueryStatus)
	return err == nil && v.Get(out) == nil
}

// resealing is one Reseal call's progress.
type resealing struct {
	a     *Activities
	s     *Sealing
	queue string
	res   protocol.ResealResult
}

func (r *resealing) fail(what string, err error) {
	r.res.Failed = append(r.res.Failed, what+": "+err.Error())
}

// cluster re-seals one cluster's kubeconfig, keeping its hash and context.
func (r *resealing) cluster(ctx context.Context, rec protocol.ClusterRecord) {
	box, _, err := r.s.Vault.Kubeconfig(ctx, rec.Name)
	if err != nil || box.IsZero() {
		if err != nil {
			r.fail("cluster "+rec.Name, err)
		}
		return
	}
	moved, changed, err := r.s.Opener.Reseal(*box)
	if err == nil && changed {
		_, err = temporalx.ApplyCluster(ctx, r.a.Client, r.queue, rec.Name,
			protocol.ClusterApply{KubeconfigHash: rec.KubeconfigHash, Context: rec.Context, Kubeconfig: &moved})
	}
	r.count(&r.res.Kubeconfigs, changed, "cluster "+rec.Name, err)
}

// secret re-seals one Secret.
func (r *resealing) secret(ctx context.Context, rec protocol.SecretRecord) {
	moved, changed, err := r.s.Opener.Reseal(rec.Sealed)
	if err == nil && changed {
		rec.Sealed, rec.Resealed = moved, true // same content: GitRepos need not hear of it
		_, err = temporalx.ApplySecret(ctx, r.a.Client, r.queue, rec)
	}
	r.count(&r.res.Secrets, changed, "secret "+rec.Namespace+"/"+rec.Name, err)
}

func (r *resealing) count(moved *int, changed bool, what string, err error) {
	switch {
	case err != nil:
		r.fail(what, err)
	case changed:
		*moved++
	default:
		r.res.Unchanged++
	}
}
