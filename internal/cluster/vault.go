package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	"k8s.io/client-go/rest"

	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/seal"
	"github.com/flotilla-gitops/flotilla/internal/temporalx"
)

// vaultTimeout bounds one read of a sealed kubeconfig or Secret (a query
// of its workflow). The first deploys of a large rollout read hundreds at
// once and a query can wait behind the controller's workflow tasks: at
// 1,000 clusters, 78 of them took over 15 s, and each failed read cost a
// deploy retried, and a second read.
const vaultTimeout = time.Minute

// kubeconfigTTL is how long a controller reuses a kubeconfig it read: a
// deploy to many clusters reads each once, and a re-added kubeconfig is
// in use within this long.
const kubeconfigTTL = 5 * time.Second

// ErrNoKeys means no controller has published a sealing key yet.
var ErrNoKeys = errors.New("no controller has published a sealing key yet: start a controller (flotilla-worker) first")

// Vault reads the sealed kubeconfigs and Secrets that live in Temporal
// (ClusterWorkflow, SecretWorkflow) and opens them with the controller's
// private keys. It is what a controller reads instead of files: any
// replica reads the same, and nothing is kept on disk. Opened content
// stays in memory; kubeconfigs are reused for kubeconfigTTL.
//
// A Vault is safe for concurrent use.
type Vault struct {
	client client.Client
	opener *seal.Opener
	logger *zap.Logger

	mu   sync.Mutex
	kube map[string]kubeEntry
	// warned is, by cluster, the hash of the kubeconfig whose ignored
	// fields were logged: each kubeconfig is warned about once.
	warned map[string]string
}

type kubeEntry struct {
	at  time.Time
	cfg *rest.Config
}

// NewVault returns a Vault reading through c and opening with o; it logs
// to logger (nil: nowhere) the kubeconfig fields it ignores.
func NewVault(c client.Client, o *seal.Opener, logger *zap.Logger) *Vault {
	if logger == nil {
		logger = zap.NewNop()
	}
	return &Vault{client: c, opener: o, logger: logger, kube: map[string]kubeEntry{}, warned: map[string]string{}}
}

// RESTConfig returns the REST client configuration of cluster name from
// its sealed kubeconfig's inline data (SafeRESTConfig): commands, file
// paths and proxies in it are ignored, and logged once per kubeconfig
// (the cluster and the fields, never a value). A cluster that is not
// registered or has no kubeconfig is ErrNotFound.
func (v *Vault) RESTConfig(name string) (*rest.Config, error) {
	v.mu.Lock()
	e, ok := v.kube[name]
	v.mu.Unlock()
	if ok && time.Since(e.at) < kubeconfigTTL {
		return rest.CopyConfig(e.cfg), nil
	}
	if err := validateClusterName(name); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), vaultTimeout)
	defer cancel()
	var box *seal.Box
	found, err := queryOpen(ctx, v.client, protocol.ClusterID(name), protocol.QueryKubeconfig, &box)
	switch {
	case err != nil:
		return nil, fmt.Errorf("cluster %q: read its sealed kubeconfig: %w", name, err)
	case !found:
		return nil, fmt.Errorf("cluster %q %w: it is not registered", name, ErrNotFound)
	case box.IsZero():
		return nil, fmt.Errorf("cluster %q %w: it has no kubeconfig (add one with `flotilla cluster add %s --kubeconfig FILE`)", name, ErrNotFound, name)
	}
	data, err := v.opener.Open(*box)
	if err != nil {
		return nil, fmt.Errorf("cluster %q: kubeconfig: %w", name, err)
	}
	cfg, ignored, err := SafeRESTConfig(name, data)
	v.warnIgnored(name, data, ignored)
	if err != nil {
		return nil, err
	}
	v.mu.Lock()
	v.kube[name] = kubeEntry{at: time.Now(), cfg: cfg}
	v.mu.Unlock()
	return rest.CopyConfig(cfg), nil
}

// warnIgnored logs the fields SafeRESTConfig ignored in cluster name's
// kubeconfig data, once per kubeconfig.
func (v *Vault) warnIgnored(name string, data []byte, ignored []string) {
	if len(ignored) == 0 {
		return
	}
	h := hashOf(data)
	v.mu.Lock()
	seen := v.warned[name] == h
	v.warned[name] = h
	v.mu.Unlock()
	if !seen {
		v.logger.Warn("Ignored kubeconfig fields that are not inline data (commands, files and proxies are never followed)",
			zap.String("cluster", name), zap.Strings("fields", ignored))
	}
}

// Kubeconfig returns cluster name's sealed kubeconfig (nil without one)
// and whether the cluster is registered.
func (v *Vault) Kubeconfig(ctx context.Context, name string) (*seal.Box, bool, error) {
	var box *seal.Box
	found, err := queryOpen(ctx, v.client, protocol.ClusterID(name), protocol.QueryKubeconfig, &box)
	return box, found, err
}

// Secret returns the record of Secret namespace/name (ErrNotFound when it
// was never applied or was deleted).
func (v *Vault) Secret(ctx context.Context, namespace, name string) (protocol.SecretRecord, error) {
	var rec protocol.SecretRecord
	found, err := queryOpen(ctx, v.client, protocol.SecretID(namespace, name), protocol.QueryStatus, &rec)
	switch {
	case err != nil:
		return rec, fmt.Errorf("secret %s/%s: %w", namespace, name, err)
	case !found || rec.Removed:
		return rec, fmt.Errorf("secret %s/%s %w", namespace, name, ErrNotFound)
	}
	return rec, nil
}

func (v *Vault) open(namespace, name string) (storedSecret, error) {
	if err := validateSecretName(namespace, name); err != nil {
		return storedSecret{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), vaultTimeout)
	defer cancel()
	rec, err := v.Secret(ctx, namespace, name)
	if err != nil {
		return storedSecret{}, err
	}
	data, err := v.opener.Open(rec.Sealed)
	if err != nil {
		return storedSecret{}, fmt.Errorf("secret %s/%s: %w", namespace, name, err)
	}
	return decodeSecret(namespace, name, data)
}

// Load returns the credentials of Secret namespace/name.
func (v *Vault) Load(namespace, name string) (username, password string, err error) {
	st, err := v.open(namespace, name)
	return st.Username, st.Password, err
}

// LoadWebhook returns the webhook keys of Secret namespace/name (see
// api.WebhookSecretKeys); a Secret without any is an empty map.
func (v *Vault) LoadWebhook(namespace, name string) (map[string]string, error) {
	st, err := v.open(namespace, name)
	return st.Webhook, err
}

// SecretData opens Secret namespace/name and returns its type and data:
// what a bundle copies to its clusters (downstreamResources). It is
// ErrNotFound when the Secret was never applied or was deleted, and
// ErrNoData when it was sealed by an older version, which kept only its
// credentials. Errors never quote the content.
func (v *Vault) SecretData(ctx context.Context, namespace, name string) (typ string, data map[string][]byte, err error) {
	if err := validateSecretName(namespace, name); err != nil {
		return "", nil, err
	}
	rec, err := v.Secret(ctx, namespace, name)
	if err != nil {
		return "", nil, err
	}
	plain, err := v.opener.Open(rec.Sealed)
	if err != nil {
		return "", nil, fmt.Errorf("secret %s/%s: %w", namespace, name, err)
	}
	st, err := decodeSecret(namespace, name, plain)
	if err != nil {
		return "", nil, err
	}
	if st.Data == nil {
		return "", nil, fmt.Errorf("secret %s/%s %w: it was applied by an older version of Flotilla, which kept only its credentials; apply it again",
			namespace, name, ErrNoData)
	}
	return rec.Type, st.Data, nil
}

// ErrNoData means a Secret's sealed content holds only credentials.
var ErrNoData = errors.New("holds no data to copy")

// ConfigMap returns the record of ConfigMap namespace/name (ErrNotFound
// when it was never applied or was deleted).
func (v *Vault) ConfigMap(ctx context.Context, namespace, name string) (protocol.ConfigMapRecord, error) {
	var rec protocol.ConfigMapRecord
	if err := validateSecretName(namespace, name); err != nil {
		return rec, err
	}
	found, err := queryOpen(ctx, v.client, protocol.ConfigMapID(namespace, name), protocol.QueryStatus, &rec)
	switch {
	case err != nil:
		return rec, fmt.Errorf("configmap %s/%s: %w", namespace, name, err)
	case !found || rec.Removed:
		return rec, fmt.Errorf("configmap %s/%s %w", namespace, name, ErrNotFound)
	}
	return rec, nil
}

// queryOpen queries a running workflow; found is false when it does not
// exist or has ended (a removed cluster, a deleted Secret), whose state
// must not be read.
func queryOpen(ctx context.Context, c client.Client, id, query string, out any) (found bool, err error) {
	resp, err := c.QueryWorkflowWithOptions(ctx, &client.QueryWorkflowWithOptionsRequest{
		WorkflowID: id, QueryType: query, QueryRejectCondition: enumspb.QUERY_REJECT_CONDITION_NOT_OPEN})
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
		return false, nil
	case err != nil:
		return false, err
	case resp.QueryRejected != nil:
		return false, nil
	}
	return true, resp.QueryResult.Get(out)
}

// CurrentKey returns the newest public key the controllers published:
// what the CLI seals to.
func CurrentKey(ctx context.Context, c client.Client) (seal.PublicKey, error) {
	var rec protocol.KeysRecord
	found, err := queryOpen(ctx, c, protocol.KeysID, protocol.QueryStatus, &rec)
	if err != nil {
		return seal.PublicKey{}, fmt.Errorf("read the controllers' sealing key: %w", err)
	}
	k, ok := seal.Newest(rec.Keys)
	if !found || !ok {
		return seal.PublicKey{}, ErrNoKeys
	}
	return k, nil
}

// PublishKeys adds a controller's public keys to the KeysWorkflow,
// starting it on queue when it does not run, and returns every key
// published so far.
func PublishKeys(ctx context.Context, c client.Client, queue string, keys []seal.PublicKey) (protocol.KeysRecord, error) {
	var rec protocol.KeysRecord
	err := temporalx.UpdateWithStart(ctx, c, queue, protocol.KeysID, protocol.UpdatePublishKeys, keys, &rec,
		protocol.KeysWorkflow, protocol.KeysRecord{})
	return rec, err
}
