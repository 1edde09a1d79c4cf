package activities

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"sort"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/bundle"
	"github.com/flotilla-gitops/flotilla/internal/chartfetch"
	"github.com/flotilla-gitops/flotilla/internal/cluster"
	"github.com/flotilla-gitops/flotilla/internal/content"
	"github.com/flotilla-gitops/flotilla/internal/githubapp"
	"github.com/flotilla-gitops/flotilla/internal/gitsource"
	"github.com/flotilla-gitops/flotilla/internal/render"
	"github.com/flotilla-gitops/flotilla/internal/rollout"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

// Activities are the controller's activities: Git, rendering and the
// cluster registry. They run on the controller's task queue.
type Activities struct {
	// Client reads cluster and group workflows and signals GitRepos;
	// DataConverter is its data converter, with which the clusters' memos
	// are read (nil: every cluster's record is queried).
	Client        client.Client
	DataConverter converter.DataConverter
	// Secrets reads the credentials GitRepos name (a cluster.Vault).
	Secrets SecretSource
	// Sealing re-seals secrets (ResealWorkflow). Optional: without it
	// Reseal fails.
	Sealing *Sealing
	Content *content.Store
	Git     *gitsource.Cache
	// KnownHostsFile is the worker's --ssh-known-hosts: the host keys of
	// SSH remotes whose Secret has no known_hosts. Read on each use.
	KnownHostsFile string
	// InsecureSkipHostKeyChecks (--insecure-skip-host-key-checks) accepts
	// any SSH host key, for every GitRepo; status warns.
	InsecureSkipHostKeyChecks bool
	// GitHubApps mints GitHub App installation tokens. Optional: created
	// on first use.
	GitHubApps *githubapp.Tokens
	// Charts configures fetching remote Helm charts (cache directory,
	// mirrors); each render gets its own Fetcher with the GitRepo's Helm
	// credentials. Optional: without it, bundles with remote charts fail
	// to render.
	Charts *chartfetch.Fetcher
	// Limits bound the repository files a render reads. Optional:
	// bundle.Limits' defaults.
	Limits bundle.Limits
	Logger *zap.Logger
	// Retry paces the retries of deployments that failed (rollouts get it
	// with their targets). Optional: default 30s doubling to 10m.
	Retry rollout.Backoff
	// PickupTimeout is how long a rollout waits for a cluster to take up
	// its work (rollouts get it with their targets). Optional: default
	// rollout.DefaultPickupTimeout.
	PickupTimeout time.Duration
	// DeletionGuard caps the share of a GitRepo's releases one rollout
	// may uninstall without approval (rollouts get it with their
	// targets). Optional: default off.
	DeletionGuard rollout.DeletionGuard

	// refills deduplicates the renders and GitRepo queries of refills.
	refills refills
	// answers shares ls-remote answers between the GitRepos of a remote
	// (lsRemote).
	answers gitsource.Answers
	// changes keeps the comparisons of commits unchanged made.
	changes changeMemo
	// notifier coalesces NotifyGitRepos calls.
	notifierOnce sync.Once
	notifier     *cluster.Notifier
	appsOnce     sync.Once
}

// reader returns the bundle reader of one render of a GitRepo: remote
// charts are fetched with the GitRepo's helmSecretName credentials, sent
// only to URLs matching its helmRepoURLRegex.
func (a *Activities) reader(ref GitRepoRef, spec api.GitRepoSpec) (*bundle.Reader, error) {
	if a.Charts == nil {
		return &bundle.Reader{Limits: a.Limits}, nil
	}
	f, err := a.fetcher(ref, spec)
	if err != nil {
		return nil, err
	}
	return &bundle.Reader{Charts: f, Limits: a.Limits}, nil
}

// fetcher returns the chart fetcher of one render or resolve: with the
// helmSecretName credentials for URLs matching helmRepoURLRegex as a
// whole (api.HelmRepoURLPattern; a GitRepo without the regex is refused,
// non-retryably, before its Secret is read), and for a HelmOp that sets
// insecureSkipTLSVerify, without verifying certificates.
func (a *Activities) fetcher(ref GitRepoRef, spec api.GitRepoSpec) (*chartfetch.Fetcher, error) {
	f := &chartfetch.Fetcher{}
	if a.Charts != nil {
		f = a.Charts.Derive()
	}
	insecure := spec.HelmOp != nil && spec.InsecureSkipTLSVerify
	if spec.HelmSecretName == "" {
		if insecure {
			f.Auth = func(string) *chartfetch.Auth { return &chartfetch.Auth{InsecureSkipTLSVerify: true} }
		}
		return f, nil
	}
	// The pattern is checked before the Secret is read: without one the
	// credentials are not even loaded.
	re, err := api.HelmRepoURLPattern(spec)
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s: helmRepoURLRegex: %v", ref.Title(), err), ErrTypeInvalidBundle, nil)
	}
	user, pass, err := a.credentials(ref, "helmSecretName", spec.HelmSecretName)
	if err != nil {
		return nil, err
	}
	f.Auth = func(url string) *chartfetch.Auth {
		if re != nil && !re.MatchString(url) {
			if insecure {
				return &chartfetch.Auth{InsecureSkipTLSVerify: true}
			}
			return nil
		}
		return &chartfetch.Auth{Username: user, Password: pass, InsecureSkipTLSVerify: insecure}
	}
	return f, nil
}

// credentials loads the basic-auth Secret a GitRepo field names. A
// missing Secret, or one without a password or token (a webhook Secret),
// is a non-retryable error naming the field.
func (a *Activities) credentials(ref GitRepoRef, field, name string) (user, pass string, err error) {
	user, pass, err = a.Secrets.Load(ref.Namespace, name)
	switch {
	case errors.Is(err, cluster.ErrNotFound):
		return "", "", temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("%s: %s %q: no such secret in namespace %s (apply a v1 Secret with `flotilla apply`)",
				ref.Title(), field, name, ref.Namespace), ErrTypeSecretNotFound, nil)
	case err != nil:
		return "", "", fmt.Errorf("%s: read secret %s: %w", ref.Title(), name, err)
	case pass == "":
		return "", "", temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("%s: %s %q has no password or token", ref.Title(), field, name), ErrTypeSecretNotFound, nil)
	}
	return user, pass, nil
}

// Render checks out the commit, finds the bundles under the GitRepo's
// paths, and stores each bundle's resources and options in the content
// store. Errors in the repository (a bad fleet.yaml, a missing chart)
// are non-retryable and name the file and the bundle.
func (a *Activities) Render(ctx context.Context, in RenderInput) (RenderResult, error) {
	defer keepAlive(ctx)()
	out, err := a.render(ctx, in, func(step string) { activity.RecordHeartbeat(ctx, step) })
	if err != nil {
		return RenderResult{}, err
	}
	a.Logger.Info("Rendered bundles", zap.String("gitrepo", in.GitRepo.String()), zap.String("commit", in.Commit),
		zap.Int("bundles", len(out.Bundles)))
	return out, nil
}

// render is Render's work, shared with refills, which render a commit
// again for content this controller's store misses. It calls progress
// after each step (Render heartbeats there) and does not log.
func (a *Activities) render(ctx context.Context, in RenderInput, progress func(step string)) (RenderResult, error) {
	dir, locs, done, err := a.source(ctx, in)
	if err != nil {
		return RenderResult{}, err
	}
	defer done()
	progress("checked out")
	return a.renderDir(ctx, in, dir, locs, progress)
}

// renderDir renders and stores the bundles at locs under dir (a
// checkout, or the directory `flotilla plan --path` sent).
func (a *Activities) renderDir(ctx context.Context, in RenderInput, dir string, locs []bundle.Location, progress func(step string)) (RenderResult, error) {
	readers, err := a.readers(ctx, in.GitRepo, in.Spec)
	if err != nil {
		return RenderResult{}, err
	}
	var out RenderResult
	names, releases := map[string]string{}, map[string]string{}
	for _, loc := range locs {
		d := path.Join(loc.Dir, loc.Options)
		b, m, err := readers(loc.Dir).ReadLocation(ctx, dir, loc, in.GitRepo.Name)
		var ve *bundle.ValidationError
		if errors.As(err, &ve) {
			return RenderResult{}, invalidBundle(in.GitRepo, err)
		}
		if err != nil {
			// A chart repository that does not answer: try again.
			return RenderResult{}, fmt.Errorf("%s: %w", in.GitRepo.Title(), err)
		}
		rb, err := a.store(in, b, m)
		if err != nil {
			return RenderResult{}, err
		}
		if other, ok := names[rb.Name]; ok {
			return RenderResult{}, invalidBundle(in.GitRepo, fmt.Errorf("bundles %s and %s are both named %q", other, d, rb.Name))
		}
		if other, ok := releases[rb.Namespace+"/"+rb.Release]; ok {
			return RenderResult{}, invalidBundle(in.GitRepo, fmt.Errorf("bundles %s and %s both deploy release %s/%s", other, d, rb.Namespace, rb.Release))
		}
		names[rb.Name], releases[rb.Namespace+"/"+rb.Release] = d, d
		out.Bundles = append(out.Bundles, rb)
		progress(d)
	}
	sort.Slice(out.Bundles, func(i, j int) bool { return out.Bundles[i].Name < out.Bundles[j].Name })
	return out, nil
}

// source returns the directory to render and its bundles: a Git checkout
// of the commit and its bundles entries or the bundles under its paths
// (bundle.Locate), or a HelmOp's bundle written out at its resolved
// version. done removes what is temporary and releases the checkout,
// which the Git cache keeps until then.
func (a *Activities) source(ctx context.Context, in RenderInput) (dir string, locs []bundle.Location, done func(), err error) {
	if in.Spec.HelmOp != nil {
		dir, err := helmOpDir(in.Spec.HelmOp, in.Commit)
		if err != nil {
			return "", nil, nil, fmt.Errorf("%s: %w", in.GitRepo.Title(), err)
		}
		return dir, []bundle.Location{{Dir: "."}}, func() { _ = os.RemoveAll(dir) }, nil
	}
	r, _, err := a.remote(ctx, in.GitRepo, in.Spec)
	if err != nil {
		return "", nil, nil, err
	}
	dir, release, err := a.Git.Checkout(ctx, r, gitsource.Ref{Name: in.Commit, Commit: in.Commit})
	if err != nil {
		return "", nil, nil, gitError(in.GitRepo, err)
	}
	locs, err = bundle.Locate(dir, in.Spec.EffectivePaths(), in.Spec.Bundles)
	if err != nil {
		release()
		return "", nil, nil, invalidBundle(in.GitRepo, err)
	}
	return dir, locs, release, nil
}

// store applies the GitRepo's options to a bundle (render.GitRepoOptions,
// which `flotilla render --gitrepo` applies too) and stores it.
func (a *Activities) store(in RenderInput, b bundle.Bundle, m bundle.Manifest) (Bundle, error) {
	opts := render.GitRepoOptions(b.Options, in.Spec)
	manifestID, err := a.Content.PutManifest(m)
	if err != nil {
		return Bundle{}, fmt.Errorf("store bundle %s: %w", b.Name, err)
	}
	optionsHash, err := a.Content.PutOptions(opts)
	if err != nil {
		return Bundle{}, fmt.Errorf("store options of bundle %s: %w", b.Name, err)
	}
	b.Options = opts
	key, err := a.Content.PutBundle(b)
	if err != nil {
		return Bundle{}, err
	}
	return Bundle{Name: b.Name, Path: b.Dir, ManifestID: manifestID, OptionsHash: optionsHash,
		DeploymentID: manifestID + ":" + optionsHash, Release: b.ReleaseName(), Namespace: render.Namespace(opts),
		KeepResources: opts.KeepResources, DeleteNamespace: opts.DeleteNamespace, Resources: b.ResourceCount,
		BundleKey: key, Warnings: status.LimitWarnings(b.Warnings)}, nil
}

func invalidBundle(ref GitRepoRef, err error) error {
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s: %v", ref.Title(), err), ErrTypeInvalidBundle, nil)
}
