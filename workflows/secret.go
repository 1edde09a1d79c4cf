package workflows

import (
	"bytes"
	"errors"
	"maps"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/flotilla-gitops/flotilla/activities"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/seal"
)

// SecretWorkflow is the entity workflow of one Secret applied with
// `flotilla apply` (ID secret/<namespace>/<name>). It holds the Secret's
// content sealed to the controllers' key: only ciphertext and key names
// ever enter its history. Controllers read it with a query and open it in
// memory; the delete signal ends it. A new content (any apply: sealed
// content cannot be compared) or the delete tells the GitRepos of its
// namespace, whose bundles may copy it (downstreamResources).
func SecretWorkflow(ctx workflow.Context, in protocol.SecretStart) error {
	rec := in.Record
	notify := false
	if err := workflow.SetQueryHandler(ctx, protocol.QueryStatus, func() (protocol.SecretRecord, error) { return rec, nil }); err != nil {
		return err
	}
	err := workflow.SetUpdateHandlerWithOptions(ctx, protocol.UpdateApply,
		func(ctx workflow.Context, a protocol.SecretRecord) (protocol.SecretRecord, error) {
			changed := rec.Type != a.Type || !slices.Equal(rec.Keys, a.Keys) || rec.Sealed.KeyID != a.Sealed.KeyID ||
				!bytes.Equal(rec.Sealed.Data, a.Sealed.Data)
			if changed {
				rec.Type, rec.Keys, rec.Sealed = a.Type, a.Keys, a.Sealed
				rec.Generation++
				// Bundles may copy it (downstreamResources): their GitRepos
				// target again, and a new content is a new deployment ID.
				if !a.Resealed && workflow.GetVersion(ctx, versionDownstreamNotify, workflow.DefaultVersion, 1) == 1 {
					notify = true
				}
			}
			return rec, nil
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, a protocol.SecretRecord) error {
			if a.Namespace != rec.Namespace || a.Name != rec.Name {
				return temporal.NewNonRetryableApplicationError("Secret "+a.Namespace+"/"+a.Name+" sent to the workflow of "+
					rec.Namespace+"/"+rec.Name, "InvalidSpec", nil)
			}
			if a.Sealed.IsZero() || a.Sealed.KeyID == "" {
				return temporal.NewNonRetryableApplicationError("Secret "+a.Namespace+"/"+a.Name+": content is not sealed", "InvalidSpec", nil)
			}
			return nil
		}})
	if err != nil {
		return err
	}
	deleted, err := serveSource(ctx, &notify, rec.Namespace, "secret "+rec.Namespace+"/"+rec.Name)
	if err != nil {
		return err
	}
	if deleted {
		rec.Removed = true
		if workflow.GetVersion(ctx, versionDownstreamNotify, workflow.DefaultVersion, 1) == 1 {
			return notifyNamespace(ctx, rec.Namespace, "deleted secret "+rec.Namespace+"/"+rec.Name)
		}
		return nil
	}
	return workflow.NewContinueAsNewError(ctx, SecretWorkflow, protocol.SecretStart{Record: rec})
}

// versionDownstreamNotify: a Secret's workflow tells the GitRepos of its
// namespace when its content changes or it is deleted.
const versionDownstreamNotify = "downstream-notify"

// serveSource serves the workflow of a Secret or ConfigMap (what) until
// it is deleted (true) or should continue as new (false). Whenever
// *notify is set, it tells every GitRepo of namespace to target again:
// their bundles may copy it (downstreamResources).
func serveSource(ctx workflow.Context, notify *bool, namespace, what string) (bool, error) {
	deleted := false
	workflow.Go(ctx, func(ctx workflow.Context) {
		workflow.GetSignalChannel(ctx, protocol.SignalDelete).Receive(ctx, nil)
		deleted = true
	})
	for {
		if err := workflow.Await(ctx, func() bool {
			return deleted || *notify || historyFull(ctx)
		}); err != nil {
			return false, err
		}
		if deleted || !*notify {
			break
		}
		*notify = false
		if err := notifyNamespace(ctx, namespace, "changed "+what); err != nil {
			return false, err
		}
	}
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return false, err
	}
	if deleted || workflow.GetSignalChannel(ctx, protocol.SignalDelete).ReceiveAsync(nil) {
		return true, nil
	}
	if *notify {
		// A change arrived with the history limit: tell before moving on.
		*notify = false
		if err := notifyNamespace(ctx, namespace, "changed "+what); err != nil {
			return false, err
		}
	}
	return false, nil
}

// notifyNamespace tells every GitRepo (and HelmOp) of namespace to target
// its clusters again.
func notifyNamespace(ctx workflow.Context, namespace, reason string) error {
	var a *activities.Activities
	return workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, registryOptions), a.NotifyNamespace,
		activities.NotifyNamespaceInput{Namespace: namespace, Reason: reason}).Get(ctx, nil)
}

// ConfigMapWorkflow is the entity workflow of one ConfigMap applied with
// `flotilla apply` (ID configmap/<namespace>/<name>), the source bundles
// copy to their clusters (fleet.yaml downstreamResources). Its data is
// not secret and is kept in the clear. A change or delete tells the
// GitRepos of its namespace; the delete signal ends it.
func ConfigMapWorkflow(ctx workflow.Context, in protocol.ConfigMapStart) error {
	rec := in.Record
	notify := false
	if err := workflow.SetQueryHandler(ctx, protocol.QueryStatus, func() (protocol.ConfigMapRecord, error) { return rec, nil }); err != nil {
		return err
	}
	err := workflow.SetUpdateHandlerWithOptions(ctx, protocol.UpdateApply,
		func(ctx workflow.Context, a protocol.ConfigMapRecord) (protocol.ConfigMapRecord, error) {
			//workflowcheck:ignore deterministic: equality does not depend on map order
			if !maps.Equal(rec.Data, a.Data) || !maps.EqualFunc(rec.BinaryData, a.BinaryData, bytes.Equal) || rec.Generation == 0 {
				rec.Data, rec.BinaryData = a.Data, a.BinaryData
				rec.Generation++
				notify = true
			}
			return rec, nil
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, a protocol.ConfigMapRecord) error {
			if a.Namespace != rec.Namespace || a.Name != rec.Name {
				return temporal.NewNonRetryableApplicationError("ConfigMap "+a.Namespace+"/"+a.Name+" sent to the workflow of "+
					rec.Namespace+"/"+rec.Name, "InvalidSpec", nil)
			}
			return nil
		}})
	if err != nil {
		return err
	}
	what := "configmap " + rec.Namespace + "/" + rec.Name
	deleted, err := serveSource(ctx, &notify, rec.Namespace, what)
	if err != nil {
		return err
	}
	if deleted {
		rec.Removed = true
		return notifyNamespace(ctx, rec.Namespace, "deleted "+what)
	}
	return workflow.NewContinueAsNewError(ctx, ConfigMapWorkflow, protocol.ConfigMapStart{Record: rec})
}

// KeysWorkflow is the well-known workflow (ID protocol.KeysID) that holds
// every public sealing key the controllers published; the CLI seals to the
// newest, if its signature verifies under a signer it trusts. A
// controller publishes its keys, signed, at every start. A key ID
// published again with different key material is refused: two
// controllers would hold different keys under one name, and secrets
// sealed by the CLI would open on only one of them. Once a published key
// is signed, a key of another signer (or none) is refused
// (seal.CheckPublish); keys published unsigned take the signature they
// come with later (seal.MergePublished). The validator is not run on
// replay, and the handler treats unsigned keys, the only ones older
// histories hold, as it always did.
func KeysWorkflow(ctx workflow.Context, rec protocol.KeysRecord) error {
	if err := workflow.SetQueryHandler(ctx, protocol.QueryStatus, func() (protocol.KeysRecord, error) { return rec, nil }); err != nil {
		return err
	}
	err := workflow.SetUpdateHandlerWithOptions(ctx, protocol.UpdatePublishKeys,
		func(ctx workflow.Context, keys []seal.PublicKey) (protocol.KeysRecord, error) {
			rec.Keys = seal.MergePublished(rec.Keys, keys)
			return rec, nil
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, keys []seal.PublicKey) error {
			err := seal.CheckPublish(rec.Keys, keys)
			switch {
			case errors.Is(err, seal.ErrForeignSigner):
				return temporal.NewNonRetryableApplicationError(err.Error(), seal.ErrTypeForeignSigner, nil)
			case err != nil:
				return temporal.NewNonRetryableApplicationError(err.Error(), "InvalidSpec", nil)
			}
			return nil
		}})
	if err != nil {
		return err
	}
	if err := workflow.Await(ctx, func() bool {
		return historyFull(ctx)
	}); err != nil {
		return err
	}
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return err
	}
	return workflow.NewContinueAsNewError(ctx, KeysWorkflow, rec)
}

// resealOptions: one pass over every sealed kubeconfig and Secret.
var resealOptions = workflow.ActivityOptions{
	StartToCloseTimeout: 30 * time.Minute,
	HeartbeatTimeout:    30 * time.Second,
	RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: 30 * time.Second, MaximumAttempts: 5},
}

// ResealWorkflow moves every sealed kubeconfig and Secret to the newest
// sealing key (`flotilla secrets rotate`): a controller opens each with
// the key it names and seals it again. Afterwards the older keys can be
// removed from the controllers' keyring.
func ResealWorkflow(ctx workflow.Context) (protocol.ResealResult, error) {
	var a *activities.Activities
	var res protocol.ResealResult
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, resealOptions), a.Reseal).Get(ctx, &res)
	return res, err
}
