package applier

import (
	"context"
	"errors"

	"go.temporal.io/sdk/client"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/cluster"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/seal"
	"github.com/flotilla-gitops/flotilla/internal/temporalx"
	"github.com/flotilla-gitops/flotilla/internal/webhook"
)

// Verbs an apply answers with, as `flotilla apply` prints them.
const (
	Created    = "created"
	Configured = "configured"
	Unchanged  = "unchanged"
)

// Sealer seals a Secret's content for the controllers. The CLI seals to
// the published key it trusts (sealtrust); a controller seals to its own
// newest key (KeySealer).
type Sealer interface {
	Seal(ctx context.Context, c client.Client, data []byte) (seal.Box, error)
}

// KeySealer seals to one public key: a controller's own newest.
type KeySealer struct{ Key seal.PublicKey }

// Seal seals data to s.Key.
func (s KeySealer) Seal(_ context.Context, _ client.Client, data []byte) (seal.Box, error) {
	return seal.Seal(s.Key, data)
}

// Applier applies documents to Temporal.
type Applier struct {
	Temporal  client.Client
	TaskQueue string
	// Sealer seals Secrets; required only to apply them.
	Sealer Sealer
	// ManagedBy marks GitRepos and HelmOps applied by this applier
	// (protocol.GitRepoApply.ManagedBy): "" for the CLI.
	ManagedBy string
	// HistoryBudget is the history length at which GitRepo and HelmOp
	// workflows this applier starts continue as new; 0: the workflow's
	// default.
	HistoryBudget int
}

// ErrUnsupported is returned for a document the applier cannot store.
var ErrUnsupported = errors.New("unsupported document")

// Apply stores d and says what happened: Created, Configured or
// Unchanged (a Secret's verb also names the key it was sealed to). d must
// be decoded and validated (api.Decode). An update the workflow rejected
// comes back as the workflow's *temporal.ApplicationError.
func (a *Applier) Apply(ctx context.Context, d api.Document) (string, error) {
	switch {
	case d.ConfigMap != nil:
		return a.applyConfigMap(ctx, *d.ConfigMap)
	case d.Secret != nil:
		return a.applySecret(ctx, *d.Secret)
	case d.GitRepo != nil:
		return a.applyGitRepo(ctx, *d.GitRepo)
	case d.HelmOp != nil:
		return a.applyHelmOp(ctx, *d.HelmOp)
	case d.ClusterGroup != nil:
		cg := d.ClusterGroup
		var res protocol.GroupRecord
		err := temporalx.UpdateWithStart(ctx, a.Temporal, a.TaskQueue, protocol.ClusterGroupID(cg.Metadata.Name), protocol.UpdateApply, *cg, &res,
			protocol.ClusterGroupWorkflow, protocol.GroupStart{Record: protocol.GroupRecord{Name: cg.Metadata.Name}})
		return Verb(res.Generation == 1, true), err
	case d.Cluster != nil:
		rec, err := temporalx.ApplyCluster(ctx, a.Temporal, a.TaskQueue, d.Cluster.Metadata.Name, ClusterApply(*d.Cluster))
		return Verb(rec.Generation == 1, true), err
	case d.GitRepoRestriction != nil || d.Policy != nil:
		return applyPolicy(ctx, a.Temporal, a.TaskQueue, d)
	case d.Notification != nil:
		return a.applyNotification(ctx, *d.Notification)
	}
	return "", ErrUnsupported
}

// ClusterApply is the cluster workflow's apply of a Cluster document.
func ClusterApply(cl api.Cluster) protocol.ClusterApply {
	paused := cl.Spec.Paused
	ap := protocol.ClusterApply{Labels: cl.Metadata.Labels, SetLabels: true,
		Annotations: cl.Metadata.Annotations, TemplateValues: cl.Spec.TemplateValues, Paused: &paused}
	if cl.Spec.HasAgentSettings() {
		ap.AgentSettings = &protocol.AgentSettings{Namespace: cl.Spec.AgentNamespace, Env: cl.Spec.AgentEnvVars,
			Tolerations: cl.Spec.AgentTolerations, Affinity: cl.Spec.AgentAffinity, Resources: cl.Spec.AgentResources,
			UpgradeWindows: cl.Spec.AgentUpgradeWindows}
	}
	return ap
}

func (a *Applier) applyGitRepo(ctx context.Context, gr api.GitRepo) (string, error) {
	var res protocol.ApplyResult
	ns, name := gr.Metadata.Namespace, gr.Metadata.Name
	err := temporalx.UpdateWithStart(ctx, a.Temporal, a.TaskQueue, protocol.GitRepoID(ns, name), protocol.UpdateApply,
		protocol.GitRepoApply{GitRepo: gr, ManagedBy: a.ManagedBy}, &res, protocol.GitRepoWorkflow,
		protocol.GitRepoStart{Namespace: ns, Name: name, HistoryBudget: a.HistoryBudget},
		temporalx.KeyGitRepo.ValueSet(ns+"/"+name),
		temporalx.KeyRepoURL.ValueSet(webhook.SearchKey(gr.Spec.Repo)))
	return Verb(res.Created, res.Changed), err
}

func (a *Applier) applyHelmOp(ctx context.Context, h api.HelmOp) (string, error) {
	var res protocol.ApplyResult
	ns, name := h.Metadata.Namespace, h.Metadata.Name
	err := temporalx.UpdateWithStart(ctx, a.Temporal, a.TaskQueue, protocol.HelmOpID(ns, name), protocol.UpdateApply,
		protocol.HelmOpApply{HelmOp: h, ManagedBy: a.ManagedBy}, &res, protocol.HelmOpWorkflow,
		protocol.GitRepoStart{Namespace: ns, Name: name, HistoryBudget: a.HistoryBudget},
		temporalx.KeyGitRepo.ValueSet("helmop/"+ns+"/"+name))
	return Verb(res.Created, res.Changed), err
}

// applyConfigMap stores a ConfigMap in its workflow (in the clear: it is
// not secret), where bundles that name it in downstreamResources copy it
// from.
func (a *Applier) applyConfigMap(ctx context.Context, cm api.ConfigMap) (string, error) {
	ns, name := cm.Metadata.Namespace, cm.Metadata.Name
	var out protocol.ConfigMapRecord
	err := temporalx.UpdateWithStart(ctx, a.Temporal, a.TaskQueue, protocol.ConfigMapID(ns, name), protocol.UpdateApply,
		protocol.ConfigMapRecord{Namespace: ns, Name: name, Data: cm.Data, BinaryData: cm.BinaryData}, &out,
		protocol.ConfigMapWorkflow, protocol.ConfigMapStart{Record: protocol.ConfigMapRecord{Namespace: ns, Name: name}})
	return Verb(out.Generation == 1, true), err
}

// applySecret seals and stores a Secret.
func (a *Applier) applySecret(ctx context.Context, sec api.Secret) (string, error) {
	rec, err := a.SealSecret(ctx, sec)
	if err != nil {
		return "", err
	}
	out, err := temporalx.ApplySecret(ctx, a.Temporal, a.TaskQueue, rec)
	if err != nil {
		return "", err
	}
	return Verb(out.Generation == 1, true) + " (sealed to key " + rec.Sealed.KeyID + ")", nil
}

// SealSecret seals a Secret's credentials, webhook keys and data with
// a.Sealer; only key names stay in the clear.
func (a *Applier) SealSecret(ctx context.Context, sec api.Secret) (protocol.SecretRecord, error) {
	if a.Sealer == nil {
		return protocol.SecretRecord{}, errors.New("seal a Secret: no sealer configured")
	}
	if sec.Metadata.Namespace == "" {
		sec.Metadata.Namespace = api.DefaultNamespace
	}
	ns, name := sec.Metadata.Namespace, sec.Metadata.Name
	data, err := cluster.EncodeSecret(sec)
	if err != nil {
		return protocol.SecretRecord{}, err
	}
	keys, err := cluster.ContentKeys(ns, name, data)
	if err != nil {
		return protocol.SecretRecord{}, err
	}
	box, err := a.Sealer.Seal(ctx, a.Temporal, data)
	if err != nil {
		return protocol.SecretRecord{}, err
	}
	return protocol.SecretRecord{Namespace: ns, Name: name, Type: sec.Type, Keys: keys, Sealed: box}, nil
}

// Verb is what an apply prints: created, configured or unchanged.
func Verb(created, changed bool) string {
	switch {
	case created:
		return Created
	case changed:
		return Configured
	}
	return Unchanged
}
