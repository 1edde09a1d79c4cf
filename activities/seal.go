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
	res := protocol.ResealResult{KeyID: s.Opener.Newest().ID}
	fail := func(what string, err error) {
		res.Failed = append(res.Failed, what+": "+err.Error())
	}
	err := temporalx.EachWorkflow(ctx, a.Client, temporalx.RunningOfType(protocol.ClusterWorkflow), func(id string) error {
		activity.RecordHeartbeat(ctx, id)
		var rec protocol.ClusterRecord
		v, err := a.Client.QueryWorkflow(ctx, id, "", protocol.QueryStatus)
		if err == nil {
			err = v.Get(&rec)
		}
		if err != nil || rec.Removed {
			return nil // ended since it was listed
		}
		box, _, err := s.Vault.Kubeconfig(ctx, rec.Name)
		if err != nil {
			fail("cluster "+rec.Name, err)
			return nil
		}
		if box.IsZero() {
			return nil
		}
		moved, changed, err := s.Opener.Reseal(*box)
		switch {
		case err != nil:
			fail("cluster "+rec.Name, err)
		case !changed:
			res.Unchanged++
		default:
			if _, err := temporalx.ApplyCluster(ctx, a.Client, activity.GetInfo(ctx).TaskQueue, rec.Name,
				protocol.ClusterApply{KubeconfigHash: rec.KubeconfigHash, Context: rec.Context, Kubeconfig: &moved}); err != nil {
				fail("cluster "+rec.Name, err)
				return nil
			}
			res.Kubeconfigs++
		}
		return nil
	})
	if err != nil {
		return res, err
	}
	err = temporalx.EachWorkflow(ctx, a.Client, temporalx.RunningOfType(protocol.SecretWorkflow), func(id string) error {
		activity.RecordHeartbeat(ctx, id)
		var rec protocol.SecretRecord
		v, err := a.Client.QueryWorkflow(ctx, id, "", protocol.QueryStatus)
		if err == nil {
			err = v.Get(&rec)
		}
		if err != nil || rec.Removed {
			return nil
		}
		moved, changed, err := s.Opener.Reseal(rec.Sealed)
		switch {
		case err != nil:
			fail("secret "+rec.Namespace+"/"+rec.Name, err)
		case !changed:
			res.Unchanged++
		default:
			rec.Sealed = moved
			if _, err := temporalx.ApplySecret(ctx, a.Client, activity.GetInfo(ctx).TaskQueue, rec); err != nil {
				fail("secret "+rec.Namespace+"/"+rec.Name, err)
				return nil
			}
			res.Secrets++
		}
		return nil
	})
	a.Logger.Info("Re-sealed secrets", zap.String("keyID", res.KeyID), zap.Int("kubeconfigs", res.Kubeconfigs),
		zap.Int("secrets", res.Secrets), zap.Int("unchanged", res.Unchanged), zap.Int("failed", len(res.Failed)))
	return res, err
}
