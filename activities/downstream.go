package activities

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/bundle"
	"github.com/flotilla-gitops/flotilla/internal/cluster"
	"github.com/flotilla-gitops/flotilla/internal/deployer"
	"github.com/flotilla-gitops/flotilla/internal/fleetyaml"
	"github.com/flotilla-gitops/flotilla/internal/outcome"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/render"
	"github.com/flotilla-gitops/flotilla/internal/seal"
	"github.com/flotilla-gitops/flotilla/internal/status"
	"github.com/flotilla-gitops/flotilla/internal/temporalx"
)

// fleet.yaml downstreamResources: Secrets and ConfigMaps applied with
// `flotilla apply` in a GitRepo's namespace are copied to each cluster a
// bundle targets, into the bundle's namespace, before it deploys.
//
//   - Targeting (TargetBundles, refills) reads the sources and puts a keyed
//     digest of their content into the cluster's options
//     (Options.DownstreamResourcesDigest, HMAC under a key derived from the
//     controllers' sealing key), so a change of a copied object is a new
//     deployment ID. A missing source fails the bundle on that cluster
//     (Invalid), naming it; the cluster keeps what it runs.
//   - Deploying reads the sources again through a DownstreamSource and
//     hands them out only when they still match the digest: a controller
//     (push mode) opens them in memory; an agent (pull mode) asks its
//     ClusterWorkflow, whose controller activity (SealDownstream) seals
//     them to the key the agent published. Plaintext never enters
//     Temporal.
//   - Copies carry LabelDownstreamCopy and one owner label per release
//     (downstreamOwnerPrefix + release = bundle); removing the release
//     removes its owner label, and the copy with the last one, unless
//     keepResources.

// Labels and annotations of the copies.
const (
	// LabelDownstreamCopy marks an object Flotilla copied to a cluster.
	LabelDownstreamCopy = "flotilla.dev/downstream-copy"
	// downstreamOwnerPrefix + release labels a copy with the bundle of
	// each release that uses it.
	downstreamOwnerPrefix = "downstream.flotilla.dev/"
	// AnnotationDownstreamSource names the copy's source: "<kind>
	// <namespace>/<name>".
	AnnotationDownstreamSource = "flotilla.dev/downstream-source"
	labelManagedBy             = "app.kubernetes.io/managed-by"
)

// Error types of the SealDownstream activity, which agents read.
const (
	// ErrTypeDownstreamMissing: a source does not exist (or cannot be
	// copied): the bundle fails on the cluster (Invalid).
	ErrTypeDownstreamMissing = "DownstreamMissing"
	// ErrTypeDownstreamChanged: the sources differ from what the cluster's
	// options were computed with; the rollout that follows the change
	// deploys them (ContentUnavailable until then).
	ErrTypeDownstreamChanged = "DownstreamChanged"
)

// DownstreamSource delivers the Secrets and ConfigMaps a bundle copies to
// its cluster, checked against the digest in the cluster's options.
// Errors are *DownstreamError when their class is known.
type DownstreamSource interface {
	Downstream(ctx context.Context, req protocol.DownstreamRequest) ([]protocol.DownstreamObject, error)
}

// DownstreamError is a failure to deliver a bundle's downstream resources
// with its outcome class: Invalid for a missing source, ContentUnavailable
// when they changed since the options were computed.
type DownstreamError struct {
	Class outcome.Class
	Msg   string
}

func (e *DownstreamError) Error() string { return e.Msg }

// downstreamClass is err's class: its DownstreamError's, else
// ContentUnavailable (Temporal, a controller or the key was away).
func downstreamClass(err error) outcome.Class {
	var de *DownstreamError
	if errors.As(err, &de) {
		return de.Class
	}
	return outcome.ContentUnavailable
}

// missingSource is the error of a source that cannot be copied.
func missingSource(ref protocol.DownstreamRef, namespace, problem string) error {
	return &DownstreamError{Class: outcome.Invalid, Msg: fmt.Sprintf("downstreamResources: %s %s in namespace %s: %s",
		ref.Kind, ref.Name, namespace, problem)}
}

// errDownstreamChanged: the sources are not what the options name.
var errDownstreamChanged = &DownstreamError{Class: outcome.ContentUnavailable,
	Msg: "downstreamResources changed since the rollout was planned; the rollout that follows the change deploys them"}

// downstreamRefs are the options' downstreamResources with kinds spelled
// Secret and ConfigMap, in their order.
func downstreamRefs(rs []bundle.DownstreamResource) []protocol.DownstreamRef {
	out := make([]protocol.DownstreamRef, 0, len(rs))
	for _, r := range rs {
		kind := r.Kind
		switch {
		case strings.EqualFold(kind, api.KindSecret):
			kind = api.KindSecret
		case strings.EqualFold(kind, api.KindConfigMap):
			kind = api.KindConfigMap
		}
		out = append(out, protocol.DownstreamRef{Kind: kind, Name: r.Name})
	}
	return out
}

// sourceReader reads the sources of one namespace through a controller's
// vault, each once.
type sourceReader struct {
	vault *cluster.Vault
	seen  map[string]sourceRead
}

type sourceRead struct {
	obj protocol.DownstreamObject
	err error
}

// newSourceReader returns a reader through s's vault; nil without s.
func newSourceReader(s *Sealing) *sourceReader {
	if s == nil {
		return nil
	}
	return &sourceReader{vault: s.Vault, seen: map[string]sourceRead{}}
}

// read returns the objects refs name in namespace, in their order.
func (r *sourceReader) read(ctx context.Context, namespace string, refs []protocol.DownstreamRef) ([]protocol.DownstreamObject, error) {
	out := make([]protocol.DownstreamObject, 0, len(refs))
	for _, ref := range refs {
		key := ref.Kind + "|" + namespace + "/" + ref.Name
		got, ok := r.seen[key]
		if !ok {
			got.obj, got.err = r.readOne(ctx, namespace, ref)
			r.seen[key] = got
		}
		if got.err != nil {
			return nil, got.err
		}
		out = append(out, got.obj)
	}
	return out, nil
}

func (r *sourceReader) readOne(ctx context.Context, namespace string, ref protocol.DownstreamRef) (protocol.DownstreamObject, error) {
	obj := protocol.DownstreamObject{Kind: ref.Kind, Name: ref.Name}
	var err error
	switch ref.Kind {
	case api.KindSecret:
		obj.Type, obj.SecretData, err = r.vault.SecretData(ctx, namespace, ref.Name)
		if errors.Is(err, cluster.ErrNoData) {
			return obj, missingSource(ref, namespace, "it was applied by an older version of Flotilla, which kept only its credentials; apply it again")
		}
	case api.KindConfigMap:
		var rec protocol.ConfigMapRecord
		rec, err = r.vault.ConfigMap(ctx, namespace, ref.Name)
		obj.Data, obj.BinaryData = rec.Data, rec.BinaryData
	default:
		return obj, missingSource(ref, namespace, "only Secrets and ConfigMaps can be copied")
	}
	if errors.Is(err, cluster.ErrNotFound) || errors.Is(err, cluster.ErrInvalidName) {
		return obj, missingSource(ref, namespace, "not found (apply it there with `flotilla apply`)")
	}
	return obj, err
}

// downstreamDigest is the keyed digest of the objects a cluster gets from
// namespace: "<key ID>:<hex HMAC>" under the sealing key keyID. It binds
// the cluster, so an agent can only obtain what was targeted to it.
func downstreamDigest(o *seal.Opener, keyID, clusterName, namespace string, objs []protocol.DownstreamObject) (string, error) {
	msg, err := json.Marshal(struct {
		Cluster   string                      `json:"cluster"`
		Namespace string                      `json:"namespace"`
		Objects   []protocol.DownstreamObject `json:"objects"`
	}{clusterName, namespace, objs})
	if err != nil {
		return "", err
	}
	mac, err := o.MAC(keyID, msg)
	if err != nil {
		return "", err
	}
	return keyID + ":" + hex.EncodeToString(mac), nil
}

// verifyDownstream checks objs against digest with the key it names.
func verifyDownstream(o *seal.Opener, digest, clusterName, namespace string, objs []protocol.DownstreamObject) error {
	keyID, _, ok := strings.Cut(digest, ":")
	if !ok {
		return errDownstreamChanged
	}
	want, err := downstreamDigest(o, keyID, clusterName, namespace, objs)
	if err != nil {
		// The key that made the digest is gone (rotated out): the next
		// rollout computes one with the newest key.
		return &DownstreamError{Class: outcome.ContentUnavailable, Msg: "downstreamResources: " + err.Error()}
	}
	if !hmac.Equal([]byte(want), []byte(digest)) {
		return errDownstreamChanged
	}
	return nil
}

// refillDownstream is withDownstream for a refill of options, which must
// come out as the rollout computed them: sources that are missing now are
// a change.
func (a *Activities) refillDownstream(ctx context.Context, dep *render.Deployment, manifestID, clusterName, namespace string) error {
	err := withDownstream(ctx, a.Sealing, newSourceReader(a.Sealing), dep, manifestID, clusterName, namespace)
	var de *DownstreamError
	if errors.As(err, &de) {
		return &changedError{what: fmt.Sprintf("cluster %s: %v", clusterName, err), cluster: true}
	}
	return err
}

// readDownstream reads and checks what req asks for.
func readDownstream(ctx context.Context, s *Sealing, req protocol.DownstreamRequest) ([]protocol.DownstreamObject, error) {
	objs, err := newSourceReader(s).read(ctx, req.Namespace, req.Refs)
	if err != nil {
		return nil, err
	}
	if err := verifyDownstream(s.Opener, req.Digest, req.Cluster, req.Namespace, objs); err != nil {
		return nil, err
	}
	return objs, nil
}

// withDownstream completes dep, a bundle's deployment on clusterName, with
// the digest of the downstream resources it copies from namespace, and
// recomputes its deployment ID. Options without downstreamResources are
// left as they are (their IDs stay Fleet's). A source that is missing is
// a *DownstreamError (Invalid); other errors are the reads' own.
func withDownstream(ctx context.Context, s *Sealing, r *sourceReader, dep *render.Deployment, manifestID, clusterName, namespace string) error {
	refs := downstreamRefs(dep.Options.DownstreamResources)
	if len(refs) == 0 {
		return nil
	}
	if s == nil {
		return &DownstreamError{Class: outcome.Invalid, Msg: "downstreamResources: this controller holds no sealing keys to read Secrets with"}
	}
	objs, err := r.read(ctx, namespace, refs)
	if err != nil {
		return err
	}
	digest, err := downstreamDigest(s.Opener, s.Opener.Newest().ID, clusterName, namespace, objs)
	if err != nil {
		return err
	}
	dep.Options.DownstreamResourcesDigest = digest
	dep.DeploymentID = fleetyaml.DeploymentID(manifestID, dep.Options)
	return nil
}

// downstream completes the options of bundle rb on cluster c for
// TargetBundles. A bundle that cannot get its sources there is returned
// as failed (ErrApplied, Invalid, naming the source, the namespace, the
// bundle and the cluster); an error is a failure to read them.
func (t *targeting) downstream(ctx context.Context, dep *render.Deployment, rb Bundle, c string) (*status.Deployment, error) {
	if t.sources == nil {
		t.sources = newSourceReader(t.a.Sealing)
	}
	err := withDownstream(ctx, t.a.Sealing, t.sources, dep, rb.ManifestID, c, t.in.GitRepo.Namespace)
	var de *DownstreamError
	if !errors.As(err, &de) {
		return nil, err
	}
	return &status.Deployment{Bundle: rb.Name, Cluster: c, Release: dep.Release, Namespace: dep.Namespace, State: status.ErrApplied,
		Outcome: de.Class, Message: fmt.Sprintf("cluster %s: bundle %s of %s: %v", c, rb.Name, t.in.GitRepo.Title(), err)}, nil
}

// NotifyNamespaceInput asks to tell the GitRepos of a namespace that a
// Secret or ConfigMap there changed.
type NotifyNamespaceInput struct {
	Namespace string `json:"namespace"`
	Reason    string `json:"reason"`
	// Signal is the signal sent; "" is protocol.SignalClustersChanged.
	Signal string `json:"signal,omitempty"`
}

// NotifyNamespace signals every running GitRepo and HelmOp of a namespace
// to target its clusters again (clustersChanged): a Secret or ConfigMap
// their bundles may copy changed, which changes the deployment IDs of the
// bundles that copy it, and only theirs.
func (a *Activities) NotifyNamespace(ctx context.Context, in NotifyNamespaceInput) error {
	prefixes := []string{protocol.GitRepoID(in.Namespace, ""), protocol.HelmOpID(in.Namespace, "")}
	n := 0
	err := temporalx.EachWorkflow(ctx, a.Client, temporalx.RunningOfTypes(protocol.GitRepoWorkflow, protocol.HelmOpWorkflow), func(id string) error {
		if !slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(id, p) }) {
			return nil
		}
		err := a.Client.SignalWorkflow(ctx, id, "", cmp.Or(in.Signal, protocol.SignalClustersChanged), nil)
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return nil // it ended since it was listed
		}
		n++
		return err
	})
	a.Logger.Debug("Notified GitRepos", zap.String("reason", in.Reason), zap.String("namespace", in.Namespace), zap.Int("gitrepos", n))
	return err
}

// SealDownstreamInput asks a controller for a bundle's downstream
// resources on a pull-mode cluster, sealed to the agent's key (which the
// ClusterWorkflow checked against the one its agent published).
type SealDownstreamInput struct {
	Request protocol.DownstreamRequest `json:"request"`
}

// SealDownstream reads the sources a request names, checks them against
// its digest and seals them (JSON of []protocol.DownstreamObject) to the
// request's key: the only form in which a Secret's content reaches an
// agent. A missing source is ErrTypeDownstreamMissing, sources that
// changed ErrTypeDownstreamChanged; both are final.
func (a *Activities) SealDownstream(ctx context.Context, in SealDownstreamInput) (seal.Box, error) {
	if a.Sealing == nil {
		return seal.Box{}, temporal.NewNonRetryableApplicationError("this worker holds no sealing keys", ErrTypeDownstreamChanged, nil)
	}
	req := in.Request
	if err := req.Key.Validate(); err != nil {
		return seal.Box{}, temporal.NewNonRetryableApplicationError("agent key: "+err.Error(), ErrTypeDownstreamChanged, nil)
	}
	objs, err := readDownstream(ctx, a.Sealing, req)
	var de *DownstreamError
	if errors.As(err, &de) {
		typ := ErrTypeDownstreamChanged
		if de.Class == outcome.Invalid {
			typ = ErrTypeDownstreamMissing
		}
		return seal.Box{}, temporal.NewNonRetryableApplicationError(de.Msg, typ, nil)
	}
	if err != nil {
		return seal.Box{}, err
	}
	plain, err := json.Marshal(objs)
	if err != nil {
		return seal.Box{}, err
	}
	a.Logger.Info("Sealed downstream resources for an agent", zap.String("cluster", req.Cluster), zap.String("gitRepo", req.GitRepo),
		zap.String("bundle", req.Bundle), zap.Int("objects", len(objs)), zap.String("keyID", req.Key.ID))
	return seal.Seal(req.Key, plain)
}

// VaultDownstream is a controller's DownstreamSource (push mode): it
// reads the sources from Temporal and opens them in memory.
func VaultDownstream(s *Sealing) DownstreamSource { return vaultDownstream{s: s} }

type vaultDownstream struct{ s *Sealing }

func (v vaultDownstream) Downstream(ctx context.Context, req protocol.DownstreamRequest) ([]protocol.DownstreamObject, error) {
	ctx, cancel := context.WithTimeout(ctx, downstreamTimeout)
	defer cancel()
	return readDownstream(ctx, v.s, req)
}

// downstreamTimeout bounds one delivery of a bundle's sources.
const downstreamTimeout = 30 * time.Second

// AgentDownstream is an agent's DownstreamSource (pull mode): it asks its
// cluster's workflow, whose controller seals the sources to the key o
// holds (published with every heartbeat), and opens them in memory.
func AgentDownstream(c client.Client, clusterName string, o *seal.Opener) DownstreamSource {
	return agentDownstream{c: c, cluster: clusterName, o: o}
}

type agentDownstream struct {
	c       client.Client
	cluster string
	o       *seal.Opener
}

func (s agentDownstream) Downstream(ctx context.Context, req protocol.DownstreamRequest) ([]protocol.DownstreamObject, error) {
	ctx, cancel := context.WithTimeout(ctx, downstreamTimeout)
	defer cancel()
	req.Key = s.o.Newest()
	h, err := s.c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: protocol.ClusterID(s.cluster),
		UpdateName: protocol.UpdateDownstream, Args: []any{req}, WaitForStage: client.WorkflowUpdateStageCompleted})
	var box seal.Box
	if err == nil {
		err = h.Get(ctx, &box)
	}
	var ae *temporal.ApplicationError
	switch {
	case errors.As(err, &ae) && ae.Type() == ErrTypeDownstreamMissing:
		return nil, &DownstreamError{Class: outcome.Invalid, Msg: ae.Message()}
	case errors.As(err, &ae):
		return nil, &DownstreamError{Class: outcome.ContentUnavailable, Msg: ae.Message()}
	case err != nil:
		return nil, fmt.Errorf("downstreamResources: ask the controller: %w", err)
	}
	plain, err := s.o.Open(box)
	if err != nil {
		return nil, fmt.Errorf("downstreamResources: %w", err)
	}
	var objs []protocol.DownstreamObject
	if err := json.Unmarshal(plain, &objs); err != nil {
		return nil, errors.New("downstreamResources: the controller's answer does not decode")
	}
	return objs, nil
}

// copyDownstream copies the Secrets and ConfigMaps b's options name into
// its namespace on k (created when missing), before the release deploys,
// and drops this release's copies it no longer names. Every call copies
// again, so a deploy that changes nothing (a sync) restores a copy that
// was edited or deleted on the cluster.
func (c *ClusterActivities) copyDownstream(ctx context.Context, k *cluster.Conn, in DeployInput, b Bundle, opts bundle.Options) (outcome.Class, error) {
	refs := downstreamRefs(opts.DownstreamResources)
	if len(refs) == 0 {
		return outcome.OK, nil
	}
	if c.Downstream == nil {
		return outcome.Invalid, errors.New("downstreamResources: this worker cannot copy Secrets and ConfigMaps")
	}
	objs, err := c.Downstream.Downstream(ctx, protocol.DownstreamRequest{Cluster: k.Name(), GitRepo: in.GitRepo.String(),
		Namespace: in.GitRepo.Namespace, Bundle: b.Name, Refs: refs, Digest: opts.DownstreamResourcesDigest})
	if err != nil {
		return downstreamClass(err), err
	}
	getter, err := k.Getter(b.Namespace)
	if err != nil {
		return outcome.Unreachable, err
	}
	cs, err := clientsetOf(actingAs(getter, b.Namespace, opts.ServiceAccount))
	if err != nil {
		return outcome.Unreachable, err
	}
	cp := copier{cs: cs, namespace: b.Namespace, release: b.Release, bundle: b.Name, source: in.GitRepo.Namespace,
		serviceAccount: opts.ServiceAccount}
	if err := cp.apply(ctx, objs); err != nil {
		var de *DownstreamError
		if errors.As(err, &de) {
			return de.Class, err
		}
		return deployer.Classify(err), fmt.Errorf("downstreamResources: %w", cp.as(err))
	}
	return outcome.OK, nil
}

// downstreamFailed reports a bundle whose downstream resources could not
// be copied; gone is set when the cluster itself stopped answering.
func (c *ClusterActivities) downstreamFailed(ctx context.Context, k *cluster.Conn, in DeployInput, d status.Deployment,
	class outcome.Class, err error) (status.Deployment, error) {
	if class == outcome.Unreachable {
		if perr := k.Reachable(ctx); perr != nil {
			return d, perr
		}
	}
	return c.failed(in, d, class, err), nil
}

// removeDownstream releases the copies of a release that is removed from
// the cluster, acting as getter (the release's ServiceAccount sa, if it
// had one): its owner label goes, and a copy no other release uses is
// deleted. keepResources keeps them as they are.
func (c *ClusterActivities) removeDownstream(ctx context.Context, getter genericclioptions.RESTClientGetter, sa string, r Release) error {
	if r.KeepResources {
		return nil
	}
	cs, err := clientsetOf(getter)
	if err != nil {
		return err
	}
	cp := copier{cs: cs, namespace: r.Namespace, release: r.Release, bundle: r.Bundle, serviceAccount: sa}
	if err := cp.prune(ctx, nil); err != nil {
		return fmt.Errorf("downstreamResources: %w", cp.as(err))
	}
	return nil
}

// actingAs is getter acting as ServiceAccount sa of namespace, or getter
// itself when sa is "".
func actingAs(getter genericclioptions.RESTClientGetter, namespace, sa string) genericclioptions.RESTClientGetter {
	if sa == "" {
		return getter
	}
	return deployer.Impersonating(getter, deployer.ServiceAccountUser(namespace, sa))
}

func clientsetOf(getter genericclioptions.RESTClientGetter) (kubernetes.Interface, error) {
	cfg, err := getter.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

// copier copies one release's downstream resources into its namespace.
type copier struct {
	cs                kubernetes.Interface
	namespace         string
	release, bundle   string
	source            string // the sources' namespace
	ownerKey, manager string
	// serviceAccount is the account cs acts as ("" for the cluster's own
	// credentials): its namespace exists, and it is named in refusals.
	serviceAccount string
}

// as names the ServiceAccount the copier acts as in an API server's
// refusal (403): the account lacks the permission.
func (cp *copier) as(err error) error {
	if cp.serviceAccount == "" || !apierrors.IsForbidden(err) {
		return err
	}
	return fmt.Errorf("service account %s/%s: %w", cp.namespace, cp.serviceAccount, err)
}

func (cp *copier) init() {
	cp.ownerKey = downstreamOwnerPrefix + cp.release
	if len(validation.IsQualifiedName(cp.ownerKey)) > 0 {
		// Never in practice: release names are DNS labels.
		sum := sha256.Sum256([]byte(cp.release))
		cp.ownerKey = downstreamOwnerPrefix + "r-" + hex.EncodeToString(sum[:8])
	}
	cp.manager = "flotilla-downstream/" + cp.release
}

// apply copies objs and prunes this release's copies of anything else.
func (cp *copier) apply(ctx context.Context, objs []protocol.DownstreamObject) error {
	cp.init()
	if err := cp.ensureNamespace(ctx); err != nil {
		return err
	}
	want := map[string]bool{}
	for _, o := range objs {
		want[o.Kind+"/"+o.Name] = true
		if err := cp.applyOne(ctx, o); err != nil {
			return err
		}
	}
	return cp.prune(ctx, want)
}

func (cp *copier) ensureNamespace(ctx context.Context) error {
	if cp.serviceAccount != "" {
		return nil // the namespace holds the account
	}
	_, err := cp.cs.CoreV1().Namespaces().Get(ctx, cp.namespace, metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		return err
	}
	_, err = cp.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: cp.namespace}}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

func (cp *copier) labels() map[string]string {
	value := cp.bundle
	if len(validation.IsValidLabelValue(value)) > 0 {
		value = ""
	}
	return map[string]string{LabelDownstreamCopy: "true", labelManagedBy: "flotilla", cp.ownerKey: value}
}

func (cp *copier) annotations(o protocol.DownstreamObject) map[string]string {
	return map[string]string{AnnotationDownstreamSource: o.Kind + " " + cp.source + "/" + o.Name}
}

// notACopy refuses to overwrite an object Flotilla did not copy.
func (cp *copier) notACopy(o protocol.DownstreamObject) error {
	return &DownstreamError{Class: outcome.Invalid, Msg: fmt.Sprintf("downstreamResources: %s %s/%s exists on the cluster and is not a copy "+
		"Flotilla made (no %s label); it is left alone: delete it, or copy the source under another name", o.Kind, cp.namespace, o.Name, LabelDownstreamCopy)}
}

func (cp *copier) applyOne(ctx context.Context, o protocol.DownstreamObject) error {
	opts := metav1.ApplyOptions{FieldManager: cp.manager, Force: true}
	switch o.Kind {
	case api.KindSecret:
		typ := corev1.SecretType(o.Type)
		if typ == "" {
			typ = corev1.SecretTypeOpaque
		}
		cur, err := cp.cs.CoreV1().Secrets(cp.namespace).Get(ctx, o.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return fmt.Errorf("read Secret %s/%s: %w", cp.namespace, o.Name, err)
		case cur.Labels[LabelDownstreamCopy] != "true":
			return cp.notACopy(o)
		case cur.Type != typ:
			// The type of a Secret cannot change: replace the copy.
			if err := cp.cs.CoreV1().Secrets(cp.namespace).Delete(ctx, o.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("replace Secret %s/%s of type %s: %w", cp.namespace, o.Name, cur.Type, err)
			}
		}
		ac := corev1ac.Secret(o.Name, cp.namespace).WithType(typ).WithLabels(cp.labels()).WithAnnotations(cp.annotations(o))
		if len(o.SecretData) > 0 {
			ac.WithData(o.SecretData)
		}
		if _, err := cp.cs.CoreV1().Secrets(cp.namespace).Apply(ctx, ac, opts); err != nil {
			// The API server's message names fields, never values.
			return fmt.Errorf("copy Secret %s/%s: %w", cp.namespace, o.Name, err)
		}
	case api.KindConfigMap:
		cur, err := cp.cs.CoreV1().ConfigMaps(cp.namespace).Get(ctx, o.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return fmt.Errorf("read ConfigMap %s/%s: %w", cp.namespace, o.Name, err)
		case cur.Labels[LabelDownstreamCopy] != "true":
			return cp.notACopy(o)
		}
		ac := corev1ac.ConfigMap(o.Name, cp.namespace).WithLabels(cp.labels()).WithAnnotations(cp.annotations(o))
		if len(o.Data) > 0 {
			ac.WithData(o.Data)
		}
		if len(o.BinaryData) > 0 {
			ac.WithBinaryData(o.BinaryData)
		}
		if _, err := cp.cs.CoreV1().ConfigMaps(cp.namespace).Apply(ctx, ac, opts); err != nil {
			return fmt.Errorf("copy ConfigMap %s/%s: %w", cp.namespace, o.Name, err)
		}
	}
	return nil
}

// prune releases this release's copies whose "<kind>/<name>" is not in
// keep (all of them for nil).
func (cp *copier) prune(ctx context.Context, keep map[string]bool) error {
	if cp.ownerKey == "" {
		cp.init()
	}
	sel := metav1.ListOptions{LabelSelector: cp.ownerKey}
	// A cleanup by credentials that may not list Secrets or ConfigMaps
	// (custom agent RBAC) is not held up by copies it cannot see.
	forbidden := func(err error) bool { return keep == nil && apierrors.IsForbidden(err) }
	secrets, err := cp.cs.CoreV1().Secrets(cp.namespace).List(ctx, sel)
	if forbidden(err) {
		secrets, err = &corev1.SecretList{}, nil
	}
	if err != nil {
		return fmt.Errorf("list copied Secrets in %s: %w", cp.namespace, err)
	}
	for _, o := range secrets.Items {
		if !keep[api.KindSecret+"/"+o.Name] {
			if err := releaseCopy[*corev1.Secret](ctx, cp, cp.cs.CoreV1().Secrets(cp.namespace), api.KindSecret, o.ObjectMeta); err != nil {
				return err
			}
		}
	}
	configMaps, err := cp.cs.CoreV1().ConfigMaps(cp.namespace).List(ctx, sel)
	if forbidden(err) {
		configMaps, err = &corev1.ConfigMapList{}, nil
	}
	if err != nil {
		return fmt.Errorf("list copied ConfigMaps in %s: %w", cp.namespace, err)
	}
	for _, o := range configMaps.Items {
		if !keep[api.KindConfigMap+"/"+o.Name] {
			if err := releaseCopy[*corev1.ConfigMap](ctx, cp, cp.cs.CoreV1().ConfigMaps(cp.namespace), api.KindConfigMap, o.ObjectMeta); err != nil {
				return err
			}
		}
	}
	return nil
}

// copyClient is the part of a Secrets or ConfigMaps client that releases
// a copy.
type copyClient[T any] interface {
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error)
}

// releaseCopy drops cp's release from a copy: only its owner label goes
// while another release still uses the copy, else the copy is deleted.
func releaseCopy[T any](ctx context.Context, cp *copier, c copyClient[T], kind string, meta metav1.ObjectMeta) error {
	if meta.Labels[LabelDownstreamCopy] != "true" {
		return nil
	}
	others := false
	for l := range meta.Labels {
		others = others || strings.HasPrefix(l, downstreamOwnerPrefix) && l != cp.ownerKey
	}
	var err error
	if others {
		p, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{cp.ownerKey: nil}}})
		_, err = c.Patch(ctx, meta.Name, types.MergePatchType, p, metav1.PatchOptions{FieldManager: cp.manager})
	} else {
		err = c.Delete(ctx, meta.Name, metav1.DeleteOptions{})
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove copied %s %s/%s: %w", kind, cp.namespace, meta.Name, err)
	}
	return nil
}
