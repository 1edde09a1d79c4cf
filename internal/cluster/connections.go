package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"github.com/flotilla-gitops/flotilla/internal/outcome"

	"github.com/flotilla-gitops/flotilla/internal/deployer"
)

// reachableTimeout bounds Reachable's single request.
const reachableTimeout = 5 * time.Second

// ConnectionsOptions configure NewConnections.
type ConnectionsOptions struct {
	// Config returns a cluster's REST config by name: Store.RESTConfig in
	// push mode, the in-cluster config for an agent. It is called once per
	// Connect or Open. Required.
	Config func(cluster string) (*rest.Config, error)
	// Only, when set, is the only cluster served (an agent's own): Connect
	// and Open of any other cluster fail without calling Config.
	// Optional: default every cluster Config knows.
	Only string
}

// Connections connects to clusters and keeps, per API server and
// credentials, the RESTClientGetters Helm uses, so discovery and OpenAPI
// schemas are read once per API server rather than once per deploy or
// namespace. Clusters registered with the same server and credentials
// (virtual clusters on one API server) share them: they are the same API.
// A re-added kubeconfig (new server, token or certificate) gets new ones.
// The cache lives in memory only and is never evicted.
//
// A Connections is safe for concurrent use.
type Connections struct {
	opts ConnectionsOptions

	mu     sync.Mutex
	caches map[string]*getterCache // by configKey
}

// getterCache holds the RESTClientGetters of one configKey by namespace;
// they share base's discovery cache.
type getterCache struct {
	base    *deployer.RESTClientGetter
	getters map[string]genericclioptions.RESTClientGetter
}

// NewConnections returns Connections reading REST configs through
// opts.Config. It panics if opts.Config is nil: that is a wiring mistake,
// not a runtime condition.
func NewConnections(opts ConnectionsOptions) *Connections {
	if opts.Config == nil {
		panic("cluster.NewConnections: ConnectionsOptions.Config is nil")
	}
	return &Connections{opts: opts, caches: map[string]*getterCache{}}
}

// Conn is a connection to one cluster with the REST config read when it
// was made: callers make one per activity call, so a kubeconfig is read
// once per call, not once per bundle or poll.
type Conn struct {
	c    *Connections
	name string
	cfg  *rest.Config
	key  string
}

// Connect reads cluster's REST config. It does not contact the cluster;
// see Open.
func (c *Connections) Connect(cluster string) (*Conn, error) {
	if c.opts.Only != "" && cluster != c.opts.Only {
		return nil, fmt.Errorf("cluster %s: this worker serves only cluster %s", cluster, c.opts.Only)
	}
	cfg, err := c.opts.Config(cluster)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", cluster, err)
	}
	return &Conn{c: c, name: cluster, cfg: cfg, key: configKey(cfg)}, nil
}

// Open connects to cluster and checks that its API server answers (see
// Reachable).
func (c *Connections) Open(ctx context.Context, cluster string) (*Conn, error) {
	k, err := c.Connect(cluster)
	if err != nil {
		return nil, err
	}
	if err := k.Reachable(ctx); err != nil {
		return nil, err
	}
	return k, nil
}

// Name is the cluster's name.
func (k *Conn) Name() string { return k.name }

// Identity identifies the server and credentials the connection uses (a
// digest, not the credentials): two connections with the same identity
// reach the cluster the same way.
func (k *Conn) Identity() string { return k.key }

// Getter returns the cluster's RESTClientGetter for namespace, cached with
// every other getter of the same server and credentials, with which it
// shares discovery. It does not contact the cluster.
func (k *Conn) Getter(namespace string) (genericclioptions.RESTClientGetter, error) {
	c := k.c
	c.mu.Lock()
	defer c.mu.Unlock()
	gc := c.caches[k.key]
	if gc == nil {
		base, err := deployer.NewRESTClientGetter(k.cfg, "default")
		if err != nil {
			return nil, fmt.Errorf("cluster %s: %w", k.name, err)
		}
		gc = &getterCache{base: base, getters: map[string]genericclioptions.RESTClientGetter{}}
		c.caches[k.key] = gc
	}
	if g, ok := gc.getters[namespace]; ok {
		return g, nil
	}
	g := gc.base.ForNamespace(namespace)
	gc.getters[namespace] = g
	return g, nil
}

// Reachable checks that the API server answers GET /version within 5s, so
// an unreachable cluster is reported as such rather than as a Helm error
// per bundle. The client's error is wrapped, not flattened: a refused
// connection or timeout classifies as outcome.Unreachable, a 401 as
// outcome.Unauthorized.
func (k *Conn) Reachable(ctx context.Context) error {
	cfg := rest.CopyConfig(k.cfg)
	cfg.Timeout = reachableTimeout
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	if _, err := dc.RESTClient().Get().AbsPath("/version").Do(ctx).Raw(); err != nil {
		host := redactHost(cfg.Host)
		if deployer.Classify(err) == outcome.Unauthorized {
			return &reachError{msg: "API server " + host + " refused the credentials", err: err}
		}
		return &reachError{msg: "API server " + host + " unreachable", err: err}
	}
	return nil
}

// reachError is Reachable's error: its message names the server (without
// credentials in its URL) and the cause, but never quotes what the server
// answered (a proxy's error page, say), which spreads to status and
// history; it wraps the client's error, so it classifies as that does.
type reachError struct {
	msg string
	err error
}

func (e *reachError) Error() string {
	var se *apierrors.StatusError
	if errors.As(e.err, &se) {
		return fmt.Sprintf("%s: HTTP %d %s", e.msg, se.ErrStatus.Code, se.ErrStatus.Reason)
	}
	return e.msg + ": " + e.err.Error()
}

func (e *reachError) Unwrap() error { return e.err }

// redactHost is host with any user information in its URL masked.
func redactHost(host string) string {
	u, err := url.Parse(host)
	if err != nil || u.User == nil {
		return host
	}
	return u.Redacted()
}

// configKey identifies a REST config's server and credentials.
func configKey(cfg *rest.Config) string {
	h := sha256.New()
	for _, part := range [][]byte{[]byte(cfg.Host), []byte(cfg.BearerToken), cfg.CertData, cfg.KeyData, cfg.CAData,
		[]byte(cfg.Username), []byte(cfg.Password)} {
		h.Write(part)
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}
