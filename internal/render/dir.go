package render

import (
	"context"
	"runtime"

	"golang.org/x/sync/errgroup"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/bundle"
	"github.com/flotilla-gitops/flotilla/internal/deployer"
	"github.com/flotilla-gitops/flotilla/internal/target"
)

// DirOptions say what to render: the bundles under Root, for one cluster.
type DirOptions struct {
	// Root is the repository checkout; Paths are its scan paths (default
	// the GitRepo's bundles entries, or its paths; else ".").
	Root  string
	Paths []string
	// GitRepo, when set, is the spec of the GitRepo the bundles belong
	// to, applied as a rollout applies it: its options to every bundle
	// (GitRepoOptions) and its Bounds, its bundles or paths unless Paths
	// are set, and its targets
	// (EffectiveTargets: clusterGroup default when it names none) unless
	// Restrict is set. Nil: no GitRepo, as Fleet's `fleet test`.
	GitRepo *api.GitRepoSpec
	// RepoName prefixes bundle names, as a GitRepo's name does.
	RepoName string
	// Reader reads bundles (and fetches remote charts).
	Reader *bundle.Reader
	// Deployer renders releases.
	Deployer *deployer.Deployer
	// Cluster is the cluster rendered for, Restrict its GitRepo targets
	// (nil: none, see target.Targeted).
	Cluster  bundle.Cluster
	Restrict []api.TargetSelector
	// KubeVersion is what .Capabilities reports (default
	// deployer.DefaultKubeVersion).
	KubeVersion string
	// Parallel bounds concurrent bundles. Default GOMAXPROCS.
	Parallel int
}

// Result is one bundle's outcome for the cluster.
type Result struct {
	Bundle     bundle.Bundle
	Deployment Deployment
	// Objects is the YAML stream the cluster receives (nil when the
	// bundle does not deploy there).
	Objects []byte
}

// Dir reads every bundle under o.Root (bundle.Locate) and renders it for
// o.Cluster, in bundle order. The first error stops it and is returned.
func Dir(ctx context.Context, o DirOptions) ([]Result, error) {
	paths, restrict := o.Paths, o.Restrict
	var entries []api.BundlePath
	if o.GitRepo != nil {
		if len(paths) == 0 {
			paths, entries = o.GitRepo.EffectivePaths(), o.GitRepo.Bundles
		}
		if restrict == nil {
			restrict = o.GitRepo.EffectiveTargets()
		}
	}
	if len(paths) == 0 {
		paths = []string{"."}
	}
	locs, err := bundle.Locate(o.Root, paths, entries)
	if err != nil {
		return nil, err
	}
	reader := o.Reader
	if reader == nil {
		reader = &bundle.Reader{}
	}
	parallel := o.Parallel
	if parallel <= 0 {
		parallel = runtime.GOMAXPROCS(0)
	}
	// The first bundle that fails stops the others; its error is returned.
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(parallel)
	out := make([]Result, len(locs))
	for i, loc := range locs {
		g.Go(func() error {
			if err := ctx.Err(); err != nil {
				return err
			}
			b, m, err := reader.ReadLocation(ctx, o.Root, loc, o.RepoName)
			if err != nil {
				return err
			}
			var bounds target.Bounds
			if o.GitRepo != nil {
				b.Options, bounds = GitRepoOptions(b.Options, *o.GitRepo), Bounds(*o.GitRepo)
			}
			out[i].Bundle = b
			p := target.Compile(b, restrict).Bind(bounds)
			out[i].Deployment, out[i].Objects, err = templateCompiled(ctx, o.Deployer, p, b, m, o.Cluster, o.KubeVersion)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}
