package deployer

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chartutil"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/discovery"
)

// capabilitiesTTL is how long a cluster's capabilities (what a chart's
// .Capabilities shows) are reused. Helm reads them afresh for every
// install and upgrade, throwing away the whole discovery cache to do so:
// at a thousand deploys that was a full discovery of the API server per
// deploy, a twentieth of the controller's CPU and more of the server's.
// Within the TTL a new API version shows up as soon as a release of this
// controller installed it (see invalidate); one installed by someone
// else is seen at the latest after the TTL, as a later reconcile would.
const capabilitiesTTL = 10 * time.Second

// capabilities caches one cluster's Helm capabilities; every namespace's
// getter of the cluster shares it.
type capabilities struct {
	mu   sync.Mutex
	caps *chartutil.Capabilities
	at   time.Time
	// ttl is capabilitiesTTL (tests lengthen it).
	ttl time.Duration
}

// get returns a copy of the cluster's capabilities, read through dc when
// there are none younger than capabilitiesTTL: what Helm's own
// getCapabilities computes.
func (c *capabilities) get(dc discovery.CachedDiscoveryInterface) (*chartutil.Capabilities, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.caps == nil || time.Since(c.at) >= c.ttl {
		dc.Invalidate()
		v, err := dc.ServerVersion()
		if err != nil {
			return nil, fmt.Errorf("read the server version: %w", err)
		}
		// An API service registered but not served fails discovery of its
		// group only; Helm goes on with the others, and so does this.
		apis, err := action.GetVersionSet(dc)
		if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
			return nil, fmt.Errorf("read the API versions: %w", err)
		}
		c.caps = &chartutil.Capabilities{APIVersions: apis,
			KubeVersion: chartutil.KubeVersion{Version: v.GitVersion, Major: v.Major, Minor: v.Minor},
			HelmVersion: chartutil.DefaultCapabilities.HelmVersion}
		c.at = time.Now()
	}
	// Helm may append to a release's copy.
	out := *c.caps
	out.APIVersions = slices.Clone(c.caps.APIVersions)
	return &out, nil
}

// invalidate makes the next get read the cluster again: a release
// brought new API versions (CustomResourceDefinitions).
func (c *capabilities) invalidate() {
	c.mu.Lock()
	c.caps = nil
	c.mu.Unlock()
}

// capabilitiesOf returns the shared capabilities of getter's cluster, or
// nil for a getter of another kind (Helm then reads them itself).
func capabilitiesOf(getter genericclioptions.RESTClientGetter) (*capabilities, discovery.CachedDiscoveryInterface) {
	if ig, ok := getter.(*impersonatingGetter); ok {
		getter = ig.RESTClientGetter
	}
	g, ok := getter.(*RESTClientGetter)
	if !ok || g.caps == nil {
		return nil, nil
	}
	return g.caps, g.discovery
}
