package deployer

import "time"

// SetCapabilitiesTTL sets how long g's cluster reuses its capabilities,
// so that a test does not depend on how fast the machine deploys.
func SetCapabilitiesTTL(g *RESTClientGetter, ttl time.Duration) { g.caps.ttl = ttl }
