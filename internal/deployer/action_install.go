package deployer

import (
	"context"
	"fmt"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/release"
)

// install installs the release afresh (stateAbsent). The records of an
// uninstall that kept its history are deleted first.
func (r *deployRun) install(ctx context.Context, o observation) (*release.Release, error) {
	if o.last != nil {
		if err := r.d.purge(r.cfg, o.last); err != nil {
			return nil, err
		}
	}
	rel := r.rel
	in := action.NewInstall(r.cfg)
	in.PostRenderer = r.pr
	in.ReleaseName = rel.Name
	in.Namespace = rel.Namespace
	// The post-renderer creates the namespace (see namespaceMetadata).
	in.CreateNamespace = false
	in.Timeout = r.d.timeoutOf(rel)
	in.Wait = rel.Wait
	in.WaitForJobs = rel.Wait && rel.WaitForJobs
	in.Atomic = rel.Atomic
	in.TakeOwnership = rel.TakeOwnership
	in.EnableDNS = !rel.DisableDNS
	in.SkipSchemaValidation = rel.SkipSchemaValidation
	// The post-renderer's fieldChecker validates against the cluster's
	// schema instead (see there why).
	in.DisableOpenAPIValidation = true
	in.Description = rel.Description
	return r.withCapabilities(func() (*release.Release, error) {
		out, err := in.RunWithContext(helmContext(ctx), r.chrt, rel.Values)
		if err != nil {
			return nil, actionError(ctx, "install", rel, err)
		}
		return out, nil
	})
}

// withCapabilities runs an install or upgrade with the cluster's shared
// capabilities (see capabilitiesTTL), except for a chart with a crds/
// directory: Helm installs those before it reads the capabilities, and
// its templates may ask for them. Once CRDs were installed, the cluster's
// next deploys read them anew.
func (r *deployRun) withCapabilities(run func() (*release.Release, error)) (*release.Release, error) {
	caps, dc := capabilitiesOf(r.helmGetter)
	if caps != nil && len(r.chrt.CRDObjects()) == 0 {
		var err error
		if r.cfg.Capabilities, err = caps.get(dc); err != nil {
			return nil, fmt.Errorf("cluster capabilities for release %s/%s: %w", r.rel.Namespace, r.rel.Name, err)
		}
	}
	out, err := run()
	if caps != nil && (len(r.chrt.CRDObjects()) > 0 || r.pr.crds.installed) {
		caps.invalidate() // new API versions for the cluster's next deploys
	}
	return out, err
}
