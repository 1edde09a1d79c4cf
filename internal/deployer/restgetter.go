package deployer

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// RESTClientGetter adapts an in-memory *rest.Config to what Helm needs,
// so kubeconfigs never have to be written to disk for Helm. Discovery is
// cached in memory for the getter's lifetime; create one per cluster and
// reuse it.
type RESTClientGetter struct {
	cfg       *rest.Config
	namespace string
	discovery discovery.CachedDiscoveryInterface
	// mapper is built from discovery once, on first use, and shared by
	// every namespace's getter: building it from discovery was a tenth of
	// a deploy's CPU when every deploy built its own.
	mapper meta.RESTMapper
	// caps are the cluster's Helm capabilities, shared likewise.
	caps *capabilities
}

var _ genericclioptions.RESTClientGetter = (*RESTClientGetter)(nil)

// NewRESTClientGetter returns a getter for cfg whose default namespace is
// namespace.
func NewRESTClientGetter(cfg *rest.Config, namespace string) (*RESTClientGetter, error) {
	cfg = rest.CopyConfig(cfg)
	if cfg.QPS == 0 {
		cfg.QPS, cfg.Burst = 50, 100
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("create discovery client for %s: %w", cfg.Host, err)
	}
	cached := memory.NewMemCacheClient(dc)
	return &RESTClientGetter{cfg: cfg, namespace: namespace, discovery: cached,
		mapper: restmapper.NewShortcutExpander(restmapper.NewDeferredDiscoveryRESTMapper(cached), cached, nil),
		caps:   &capabilities{ttl: capabilitiesTTL}}, nil
}

// ForNamespace returns a getter for the same cluster whose default
// namespace is namespace. It shares the discovery cache (and with it the
// OpenAPI schemas Helm validates against), so a cluster's schema is read
// and parsed once, not once per namespace.
func (g *RESTClientGetter) ForNamespace(namespace string) *RESTClientGetter {
	return &RESTClientGetter{cfg: g.cfg, namespace: namespace, discovery: g.discovery, mapper: g.mapper, caps: g.caps}
}

// ToRESTConfig returns a copy of the REST config.
func (g *RESTClientGetter) ToRESTConfig() (*rest.Config, error) { return rest.CopyConfig(g.cfg), nil }

// ToDiscoveryClient returns the cached discovery client.
func (g *RESTClientGetter) ToDiscoveryClient() (discovery.CachedDiscoveryInterface, error) {
	return g.discovery, nil
}

// ToRESTMapper returns the getter's REST mapper, shared with every getter
// of the same cluster, which refreshes discovery when it meets an unknown
// kind (a CRD installed by the same release) or is Reset.
func (g *RESTClientGetter) ToRESTMapper() (meta.RESTMapper, error) {
	return g.mapper, nil
}

// ToRawKubeConfigLoader returns a loader whose only job is to report the
// default namespace; credentials come from the REST config. The namespace is
// an override because a kubeconfig without clusters is not "usable" and
// would otherwise report "default".
func (g *RESTClientGetter) ToRawKubeConfigLoader() clientcmd.ClientConfig {
	return clientcmd.NewDefaultClientConfig(*clientcmdapi.NewConfig(), &clientcmd.ConfigOverrides{
		Context: clientcmdapi.Context{Namespace: g.namespace},
	})
}
