package render

import (
	"context"
	"fmt"
	"path"
	"time"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/bundle"
	"github.com/flotilla-gitops/flotilla/internal/deployer"
	"github.com/flotilla-gitops/flotilla/internal/fleetyaml"
	"github.com/flotilla-gitops/flotilla/internal/target"
)

// Deployment is what one cluster gets from one bundle.
type Deployment struct {
	// Deploy is false when the bundle does not target the cluster or a
	// customization says doNotDeploy; the other fields are then empty.
	Deploy bool
	// Options are the bundle's options on the cluster.
	Options bundle.Options
	// DeploymentID is manifestID:optionsHash.
	DeploymentID string
	// Release and Namespace are the Helm release's name and namespace.
	Release, Namespace string
}

// ForCluster decides what cluster c gets from bundle b with manifest ID
// manifestID: whether b targets c and with which customizations (both
// decided by internal/target; restrict are the GitRepo's targets, see
// target.Targeted), then c's helm values are templated
// (bundle.ProcessValues). Errors (an invalid selector, a template error)
// name the bundle and the cluster; template errors (a template over its
// budget is a *fleetyaml.TemplateBudgetError, class Invalid) name the
// bundle's fleet.yaml too.
func ForCluster(b bundle.Bundle, manifestID string, c bundle.Cluster, restrict []api.TargetSelector) (Deployment, error) {
	return ForClusterCompiled(target.Compile(b, restrict), b, manifestID, c)
}

// ForGitRepo is ForCluster for a bundle of the GitRepo spec: its targets
// restrict, and its Bounds bind, the bundle.
func ForGitRepo(b bundle.Bundle, manifestID string, c bundle.Cluster, spec api.GitRepoSpec) (Deployment, error) {
	return ForClusterCompiled(target.Compile(b, spec.EffectiveTargets()).Bind(Bounds(spec)), b, manifestID, c)
}

// ForClusterCompiled is ForCluster with b's targets and customizations
// compiled once (target.Compile(b, restrict)), for targeting many
// clusters.
func ForClusterCompiled(p *target.Compiled, b bundle.Bundle, manifestID string, c bundle.Cluster) (Deployment, error) {
	ok, err := p.Targeted(c)
	if err != nil || !ok {
		return Deployment{}, err
	}
	opts, deploy, err := p.Customize(c)
	if err != nil || !deploy {
		return Deployment{}, err
	}
	if opts, err = fleetyaml.ProcessValues(opts, c); err != nil {
		// Values come from fleet.yaml (valuesFiles are merged into them);
		// the file is named as target.BoundsError names it.
		return Deployment{}, fmt.Errorf("bundle %s: cluster %s: %s: %w", b.Name, c.Name, path.Join(b.Dir, "fleet.yaml"), err)
	}
	cb := b
	cb.Options = opts
	return Deployment{Deploy: true, Options: opts, DeploymentID: fleetyaml.DeploymentID(manifestID, opts),
		Release: cb.ReleaseName(), Namespace: Namespace(opts)}, nil
}

// GitRepoOptions returns a bundle's options opts with its GitRepo's
// settings applied, as a rollout stores them before any cluster is
// targeted (customizations are merged over the result): the GitRepo's
// targetNamespace replaces the bundle's namespace (as in Fleet), its
// serviceAccount is the bundle's when fleet.yaml names none (one naming
// another is refused at targeting, see Bounds), keepResources and
// deleteNamespace are OR-ed in, a non-zero forceSyncGeneration replaces the
// bundle's, and correctDrift applies when fleet.yaml sets none (a
// fleet.yaml correctDrift, even enabled: false, wins). The GitRepo's
// targets and paths are not options: see Targeted and DirOptions. opts is
// not modified.
func GitRepoOptions(opts bundle.Options, spec api.GitRepoSpec) bundle.Options {
	if spec.TargetNamespace != "" {
		opts.TargetNamespace = spec.TargetNamespace
	}
	if opts.ServiceAccount == "" {
		opts.ServiceAccount = spec.ServiceAccount
	}
	opts.KeepResources = opts.KeepResources || spec.KeepResources
	opts.DeleteNamespace = opts.DeleteNamespace || spec.DeleteNamespace
	if spec.ForceSyncGeneration != 0 {
		opts.ForceSyncGeneration = spec.ForceSyncGeneration
	}
	if cd := spec.CorrectDrift; cd != nil && opts.CorrectDrift == nil {
		opts.CorrectDrift = &bundle.CorrectDrift{Enabled: cd.Enabled, Force: cd.Force, KeepFailHistory: cd.KeepFailHistory}
	}
	return opts
}

// Bounds are what the GitRepo spec binds every bundle and customization
// to on every cluster: its targetNamespace and serviceAccount. Target
// with target.Compile(...).Bind(Bounds(spec)).
func Bounds(spec api.GitRepoSpec) target.Bounds {
	return target.Bounds{Namespace: spec.TargetNamespace, ServiceAccount: spec.ServiceAccount}
}

// Namespace is the release namespace for opts: namespace, else
// defaultNamespace, else "default".
func Namespace(opts bundle.Options) string {
	switch {
	case opts.TargetNamespace != "":
		return opts.TargetNamespace
	case opts.DefaultNamespace != "":
		return opts.DefaultNamespace
	}
	return "default"
}

// Release builds the Helm release that deploys bundle b with manifest m
// and the cluster's options opts under deployment ID id.
func Release(b bundle.Bundle, m bundle.Manifest, opts bundle.Options, id string) (deployer.Release, error) {
	b.Options = opts
	chrt, err := bundle.Chart(b, m)
	if err != nil {
		return deployer.Release{}, err
	}
	k, err := bundle.NewKustomizer(b, m)
	if err != nil {
		return deployer.Release{}, err
	}
	rel := deployer.Release{Name: b.ReleaseName(), Namespace: Namespace(opts), Chart: chrt, DeploymentID: id,
		ForceNamespace: opts.TargetNamespace, DeleteCRDResources: opts.DeleteCRDResources}
	if k != nil {
		rel.PreRender = k
	}
	if h := opts.Helm; h != nil {
		rel.Values = h.Values
		if h.TimeoutSeconds > 0 {
			rel.Wait, rel.Timeout = true, time.Duration(h.TimeoutSeconds)*time.Second
		}
		rel.WaitForJobs, rel.Force, rel.TakeOwnership, rel.Atomic = h.WaitForJobs, h.Force, h.TakeOwnership, h.Atomic
		rel.MaxHistory, rel.DisableDNS, rel.SkipSchemaValidation = h.MaxHistory, h.DisableDNS, h.SkipSchemaValidation
	}
	return rel, nil
}

// ReadyOptions are the readiness rules of a bundle's options:
// helm.waitForJobs and fleet.yaml's ignore.conditions.
func ReadyOptions(opts bundle.Options) deployer.ReadyOptions {
	ro := deployer.ReadyOptions{IgnoreConditions: opts.Ignore.Conditions}
	if opts.Helm != nil {
		ro.WaitForJobs = opts.Helm.WaitForJobs
	}
	return ro
}

// Template renders what cluster c receives from bundle b (manifest m)
// without a cluster: nil output when the bundle does not go there.
func Template(ctx context.Context, d *deployer.Deployer, b bundle.Bundle, m bundle.Manifest, c bundle.Cluster,
	restrict []api.TargetSelector, kubeVersion string) (Deployment, []byte, error) {
	return templateCompiled(ctx, d, target.Compile(b, restrict), b, m, c, kubeVersion)
}

// templateCompiled is Template with b's targets compiled (and bound, see
// Bounds).
func templateCompiled(ctx context.Context, d *deployer.Deployer, p *target.Compiled, b bundle.Bundle, m bundle.Manifest,
	c bundle.Cluster, kubeVersion string) (Deployment, []byte, error) {
	dep, err := ForClusterCompiled(p, b, m.ID(), c)
	if err != nil || !dep.Deploy {
		return dep, nil, err
	}
	rel, err := Release(b, m, dep.Options, dep.DeploymentID)
	if err != nil {
		return dep, nil, err
	}
	out, err := d.Template(ctx, rel, kubeVersion)
	if err != nil {
		return dep, nil, fmt.Errorf("bundle %s: cluster %s: %w", b.Name, c.Name, err)
	}
	return dep, out, nil
}
