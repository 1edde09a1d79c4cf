package kubenative

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/cluster"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
)

// The Secret a ClusterRegistrationToken yields, as Fleet writes it: named
// as the token, in its namespace, of this type, with the agent's values
// (YAML) under TokenValuesKey.
const (
	TokenSecretType = "fleet.cattle.io/cluster-registration-values"
	TokenValuesKey  = "values"
	// AnnotationTokenID names, on the Secret and on the
	// ClusterRegistrationToken, the Flotilla registration token
	// (clustertoken/<id>) the Secret holds.
	AnnotationTokenID = "flotilla.dev/token-id"
	// AnnotationTokenStarted, on the ClusterRegistrationToken, names the
	// token whose workflow was started: it is never started again, even
	// once Temporal has forgotten the ended workflow (retention), so a
	// used, expired or revoked token stays dead.
	AnnotationTokenStarted = "flotilla.dev/token-started"
	// fleetManagedLabel marks the Secret as Fleet marks it.
	fleetManagedLabel = "fleet.cattle.io/managed"
)

// noExpiry is the lifetime of a token without spec.ttl (Fleet's tokens
// then never expire): it is revoked when its resource is deleted.
const noExpiry = 100 * 365 * 24 * time.Hour

var fleetTokens = schema.GroupVersionResource{Group: "fleet.cattle.io", Version: "v1alpha1", Resource: "clusterregistrationtokens"}

// Registration is how agents reach the controllers, written with each
// token into its Secret as flotilla-agent chart values.
type Registration struct {
	// Address is the Temporal frontend agents dial, or the agents'
	// gateway when Gateway is set (the controller's --gateway-address).
	Address string
	// Namespace is the Temporal namespace.
	Namespace string
	// Gateway: Address is the gateway.
	Gateway bool
}

// agentValues are the flotilla-agent chart values of a token's Secret:
// `helm install flotilla-agent -f values.yaml --set cluster=NAME`
// registers a cluster with it.
func agentValues(r Registration, token string) ([]byte, error) {
	v := map[string]any{"registration": map[string]any{"token": token}}
	if r.Gateway {
		v["gateway"] = true
	}
	temporal := map[string]any{}
	if r.Address != "" {
		temporal["address"] = r.Address
	}
	if r.Namespace != "" {
		temporal["namespace"] = r.Namespace
	}
	if len(temporal) > 0 {
		v["temporal"] = temporal
	}
	return yaml.Marshal(v)
}

// tokenHandler turns Fleet's ClusterRegistrationTokens into Flotilla
// registration tokens (as `flotilla cluster token create`): the token is
// written only to the Secret; Temporal holds a verifier of it.
type tokenHandler struct {
	d  *Deps
	ev *eventLog
}

// NewTokenHandler returns the Handler of ClusterRegistrationTokens, whose
// Secrets tell agents d.Registration.
func NewTokenHandler(d *Deps) Handler {
	return &tokenHandler{d: d, ev: newEventLog(d)}
}

// tokenState is what a ClusterRegistrationToken has of its token.
type tokenState int

const (
	// tokenNone: no Secret; a token is to be made.
	tokenNone tokenState = iota
	// tokenExpired: spec.ttl ran out before a token was made; none is.
	tokenExpired
	// tokenHeld: the Secret holds this resource's token.
	tokenHeld
	// tokenForeign: a Secret of that name belongs to something else.
	tokenForeign
)

// tokenStateOf names the state of crt from its Secret (nil: none).
func tokenStateOf(crt *unstructured.Unstructured, sec *corev1.Secret, expires *time.Time, now time.Time) tokenState {
	switch {
	case sec != nil && ownedBy(sec.OwnerReferences, crt.GetUID()) && sec.Annotations[AnnotationTokenID] != "":
		return tokenHeld
	case sec != nil:
		return tokenForeign
	case expires != nil && !now.Before(*expires):
		return tokenExpired
	}
	return tokenNone
}

func ownedBy(refs []metav1.OwnerReference, uid types.UID) bool {
	for _, r := range refs {
		if r.UID == uid {
			return true
		}
	}
	return false
}

// Apply makes the token and its Secret once, and keeps its workflow and
// status in line (it is called again on resyncs: idempotent).
func (h *tokenHandler) Apply(ctx context.Context, obj *unstructured.Unstructured) error {
	return h.ev.report(ctx, obj, h.apply(ctx, obj))
}

func (h *tokenHandler) apply(ctx context.Context, obj *unstructured.Unstructured) error {
	expires, err := tokenExpiry(obj)
	if err != nil {
		return err
	}
	sec, err := h.secret(ctx, obj)
	if err != nil {
		return err
	}
	switch tokenStateOf(obj, sec, expires, time.Now()) {
	case tokenForeign:
		return refusal(obj, "metadata.name", ReasonNameTaken, fmt.Sprintf(
			"Secret %s/%s exists and is not this token's: delete it or rename the token", obj.GetNamespace(), obj.GetName()))
	case tokenExpired:
		return h.writeStatus(ctx, obj, "", expires)
	case tokenNone:
		if sec, err = h.create(ctx, obj); err != nil {
			return err
		}
	}
	if id := sec.Annotations[AnnotationTokenID]; obj.GetAnnotations()[AnnotationTokenStarted] != id {
		if err := h.start(ctx, sec, expires); err != nil {
			return err
		}
		if err := h.annotate(ctx, obj, AnnotationTokenStarted, id); err != nil {
			return err
		}
	}
	return h.writeStatus(ctx, obj, sec.Name, expires)
}

// annotate sets annotation key of the ClusterRegistrationToken obj.
func (h *tokenHandler) annotate(ctx context.Context, obj *unstructured.Unstructured, key, value string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{key: value}}})
	if err != nil {
		return err
	}
	_, err = h.d.Dynamic.Resource(fleetTokens).Namespace(obj.GetNamespace()).Patch(ctx, obj.GetName(), types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("annotate ClusterRegistrationToken %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}

// tokenExpiry is creationTimestamp + spec.ttl, as in Fleet; nil without a
// ttl (or ttl 0): the token lives until its resource is deleted.
func tokenExpiry(obj *unstructured.Unstructured) (*time.Time, error) {
	var crt api.ClusterRegistrationToken
	data, err := json.Marshal(obj.Object)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(data, &crt); err != nil {
		return nil, refusal(obj, "spec.ttl", ReasonInvalidSpec, err.Error())
	}
	ttl := crt.Spec.TTL
	if ttl == nil || ttl.Duration == 0 {
		return nil, nil
	}
	if ttl.Duration < 0 {
		return nil, refusal(obj, "spec.ttl", ReasonInvalidSpec, fmt.Sprintf("%s is negative", ttl.Duration))
	}
	t := obj.GetCreationTimestamp().Add(ttl.Duration)
	return &t, nil
}

// secret reads the Secret named as obj; nil when there is none.
func (h *tokenHandler) secret(ctx context.Context, obj *unstructured.Unstructured) (*corev1.Secret, error) {
	sec, err := h.d.Kube.CoreV1().Secrets(obj.GetNamespace()).Get(ctx, obj.GetName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read Secret %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	return sec, nil
}

// create makes a new token and writes it to the Secret, owned by obj so
// that it goes with it. A token an earlier Secret held (deleted since) is
// revoked first. The token ID is also kept on obj, for its deletion.
func (h *tokenHandler) create(ctx context.Context, obj *unstructured.Unstructured) (*corev1.Secret, error) {
	if old := obj.GetAnnotations()[AnnotationTokenID]; old != "" {
		if err := revokeToken(ctx, h.d, old); err != nil {
			return nil, err
		}
	}
	tok, err := cluster.NewToken()
	if err != nil {
		return nil, err
	}
	values, err := agentValues(h.d.Registration, tok.Value)
	if err != nil {
		return nil, err
	}
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: obj.GetName(), Namespace: obj.GetNamespace(),
			Labels:      map[string]string{fleetManagedLabel: "true"},
			Annotations: map[string]string{AnnotationTokenID: tok.ID},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(), Name: obj.GetName(),
				UID: obj.GetUID(), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
		Type: TokenSecretType,
		Data: map[string][]byte{TokenValuesKey: values},
	}
	out, err := h.d.Kube.CoreV1().Secrets(obj.GetNamespace()).Create(ctx, sec, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create Secret %s/%s: %w", sec.Namespace, sec.Name, err)
	}
	if err := h.annotate(ctx, obj, AnnotationTokenID, tok.ID); err != nil {
		return nil, err
	}
	return out, nil
}

// start starts the token's workflow from the Secret's token (its
// verifier only), unless it was started before: a used, expired or
// revoked token is never started again.
func (h *tokenHandler) start(ctx context.Context, sec *corev1.Secret, expires *time.Time) error {
	id := sec.Annotations[AnnotationTokenID]
	var vals struct {
		Registration struct {
			Token string `json:"token"`
		} `json:"registration"`
	}
	if err := yaml.Unmarshal(sec.Data[TokenValuesKey], &vals); err != nil {
		return fmt.Errorf("secret %s/%s: key %s does not parse", sec.Namespace, sec.Name, TokenValuesKey)
	}
	tid, proof, err := cluster.ParseToken(vals.Registration.Token)
	if err != nil || tid != id {
		return fmt.Errorf("secret %s/%s: key %s holds no token %s", sec.Namespace, sec.Name, TokenValuesKey, id)
	}
	ttl := noExpiry
	if expires != nil {
		if ttl = time.Until(*expires); ttl <= 0 {
			return nil // expired: nothing to start
		}
	}
	_, err = h.d.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: protocol.ClusterTokenID(id), TaskQueue: h.d.TaskQueue,
		WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowExecutionErrorWhenAlreadyStarted: true},
		protocol.ClusterTokenWorkflow, protocol.TokenStart{ID: id, Verifier: cluster.Verifier(proof), TTL: ttl})
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &started) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("start registration token %s: %w", id, err)
	}
	return nil
}

// writeStatus sets status.secretName and status.expires, once per change.
func (h *tokenHandler) writeStatus(ctx context.Context, obj *unstructured.Unstructured, secretName string, expires *time.Time) error {
	want := map[string]any{}
	if secretName != "" {
		want["secretName"] = secretName
	}
	if expires != nil {
		want["expires"] = expires.UTC().Format(time.RFC3339)
	}
	have, _, _ := unstructured.NestedMap(obj.Object, "status")
	if equalStatus(have, want) {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"status": want})
	if err != nil {
		return err
	}
	_, err = h.d.Dynamic.Resource(fleetTokens).Namespace(obj.GetNamespace()).Patch(ctx, obj.GetName(), types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return fmt.Errorf("write the status of ClusterRegistrationToken %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}

func equalStatus(have, want map[string]any) bool {
	if len(have) != len(want) {
		return false
	}
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// Delete revokes the token (`flotilla cluster token revoke`); its Secret
// goes with the resource (owner reference). A used or expired token's
// workflow has ended: nothing to revoke.
func (h *tokenHandler) Delete(ctx context.Context, obj *unstructured.Unstructured) (bool, error) {
	id := obj.GetAnnotations()[AnnotationTokenID]
	if sec, err := h.secret(ctx, obj); err != nil {
		return false, err
	} else if sec != nil && ownedBy(sec.OwnerReferences, obj.GetUID()) && sec.Annotations[AnnotationTokenID] != "" {
		id = sec.Annotations[AnnotationTokenID]
	}
	if id != "" {
		if err := revokeToken(ctx, h.d, id); err != nil {
			return false, err
		}
	}
	h.ev.forget(obj)
	return true, nil
}

// revokeToken revokes registration token id, unless its workflow ended.
func revokeToken(ctx context.Context, d *Deps, id string) error {
	err := d.Temporal.SignalWorkflow(ctx, protocol.ClusterTokenID(id), "", protocol.SignalDelete, nil)
	var nf *serviceerror.NotFound
	if err != nil && !errors.As(err, &nf) {
		return fmt.Errorf("revoke registration token %s: %w", id, err)
	}
	return nil
}
