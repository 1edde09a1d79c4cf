package deployer

import (
	"context"
	"errors"
	"fmt"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/release"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
)

// Preview is what Deploy would do to a release, found without changing
// anything (see Deployer.Preview).
type Preview struct {
	// Getter is the getter Deploy would act through: the caller's,
	// impersonating Release.ServiceAccount when it names one. Reading the
	// live objects and dry-running them through it sees what the deploy
	// could, and no more.
	Getter genericclioptions.RESTClientGetter
	// Installed is set when the release has a deployed revision, Current.
	Installed bool
	Current   Revision
	// Unchanged is set when Deploy would leave the release alone: it runs
	// Release.DeploymentID with the same ValuesFrom data. Manifest is then
	// not rendered.
	Unchanged bool
	// Manifest is what Deploy would apply: the templates' output (the
	// chart's crds/ files first, hooks left out) with the cluster's
	// capabilities and ValuesFrom data, post-rendered as Deploy does
	// (forced namespace, labels, annotations and their checks).
	Manifest string
}

// Preview reads what Deploy of rel would do on the cluster behind getter
// without applying, creating or locking anything: it checks and acts as
// rel.ServiceAccount as Deploy does, reads rel.ValuesFrom, reads the
// release's deployed revision and, unless Deploy would leave the release
// alone, renders rel as Helm would with the cluster's version and API
// versions. It does not dry-run the objects (the caller does, through
// Preview.Getter) nor run the fields check against the cluster's
// schema, which the API server's dry run covers. Errors are those Deploy
// would return before applying anything: ErrInvalidRelease,
// ErrServiceAccountNotFound, ErrValuesFrom, a template's error, or the
// cluster's.
func (d *Deployer) Preview(ctx context.Context, getter genericclioptions.RESTClientGetter, rel Release) (Preview, error) {
	if err := validate(rel); err != nil {
		return Preview{}, err
	}
	helmGetter, err := actor(ctx, getter, rel)
	if err != nil {
		return Preview{}, err
	}
	out := Preview{Getter: helmGetter}
	values, digest, err := resolveValues(ctx, helmGetter, rel)
	if err != nil {
		return out, asServiceAccount(err, rel.Namespace, rel.ServiceAccount)
	}
	rel.Values = values
	out.Current, err = d.Deployed(helmGetter, rel.Namespace, rel.Name)
	switch {
	case errors.Is(err, ErrNotFound):
		out.Current = Revision{}
	case err != nil:
		return out, asServiceAccount(err, rel.Namespace, rel.ServiceAccount)
	default:
		out.Installed = true
	}
	if out.Installed && !out.Current.Pending && out.Current.DeploymentID == rel.DeploymentID && formatDigests(out.Current.ValuesFrom) == digest {
		out.Unchanged = true
		return out, nil
	}
	out.Manifest, err = d.renderOn(ctx, helmGetter, rel, out.Installed)
	return out, asServiceAccount(err, rel.Namespace, rel.ServiceAccount)
}

// renderOn renders rel as Deploy would on the cluster behind getter (its
// REST mapper tells namespaced kinds, its capabilities are the
// templates'), client-side: Helm's template mode, nothing sent. upgrade
// sets .Release.IsUpgrade.
func (d *Deployer) renderOn(ctx context.Context, getter genericclioptions.RESTClientGetter, rel Release, upgrade bool) (string, error) {
	pr, err := newPostRenderer(getter, rel)
	if err != nil {
		return "", err
	}
	if err := pr.checkCRDFiles(rel.Chart); err != nil {
		return "", fmt.Errorf("check CRDs of release %s/%s: %w", rel.Namespace, rel.Name, err)
	}
	caps, err := clusterCapabilities(getter)
	if err != nil {
		return "", fmt.Errorf("cluster capabilities for release %s/%s: %w", rel.Namespace, rel.Name, err)
	}
	out, err := d.clientRender(ctx, rel, pr, &caps.KubeVersion, caps.APIVersions, upgrade)
	if err != nil {
		return "", err
	}
	return out.Manifest, nil
}

// clientRender renders rel through pr client-side, as `helm template`
// does (nothing is sent to any cluster), for Kubernetes version kv with
// the extra API versions apis; upgrade sets .Release.IsUpgrade. The
// release's manifest holds the chart's crds/ files first, then the
// templates' output; its hooks are apart.
func (d *Deployer) clientRender(ctx context.Context, rel Release, pr *postRenderer, kv *chartutil.KubeVersion, apis chartutil.VersionSet,
	upgrade bool) (*release.Release, error) {
	in := action.NewInstall(&action.Configuration{Log: d.log.Sugar().Debugf})
	in.DryRun, in.ClientOnly, in.Replace, in.IncludeCRDs, in.IsUpgrade = true, true, true, true, upgrade
	in.ReleaseName, in.Namespace = rel.Name, rel.Namespace
	in.KubeVersion, in.APIVersions = kv, apis
	in.PostRenderer = pr
	in.EnableDNS = !rel.DisableDNS
	in.SkipSchemaValidation = rel.SkipSchemaValidation
	out, err := in.RunWithContext(ctx, stamp(rel.Chart, rel.DeploymentID), rel.Values)
	if err != nil {
		return nil, fmt.Errorf("render release %s/%s: %w", rel.Namespace, rel.Name, err)
	}
	return out, nil
}

// clusterCapabilities are the capabilities a chart's templates see on the
// cluster behind getter: the cluster's shared cache when getter has one
// (see capabilitiesOf), else read now.
func clusterCapabilities(getter genericclioptions.RESTClientGetter) (*chartutil.Capabilities, error) {
	caps, dc := capabilitiesOf(getter)
	if caps == nil {
		var err error
		if dc, err = getter.ToDiscoveryClient(); err != nil {
			return nil, err
		}
		caps = &capabilities{}
	}
	return caps.get(dc)
}

// Mapping is how the cluster behind getter serves objects of apiVersion
// and kind: their resource and whether they are namespaced. A kind the
// cluster does not serve is an error wrapping meta.NoKindMatchError.
func Mapping(getter genericclioptions.RESTClientGetter, apiVersion, kind string) (schema.GroupVersionResource, bool, error) {
	mapper, err := getter.ToRESTMapper()
	if err != nil {
		return schema.GroupVersionResource{}, false, err
	}
	gvk := schema.FromAPIVersionAndKind(apiVersion, kind)
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return schema.GroupVersionResource{}, false, err
	}
	return m.Resource, m.Scope.Name() == meta.RESTScopeNameNamespace, nil
}
