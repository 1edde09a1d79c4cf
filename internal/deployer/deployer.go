package deployer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/kube"
	"helm.sh/helm/v3/pkg/postrender"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/releaseutil"
	"helm.sh/helm/v3/pkg/storage/driver"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cli-runtime/pkg/genericclioptions"
)

// DeploymentIDAnnotation is the chart annotation, stored with every release
// revision, that records the deployment ID the revision applied.
const DeploymentIDAnnotation = "flotilla.dev/deployment-id"

// DefaultTimeout bounds one Helm action when Options.Timeout is unset.
const DefaultTimeout = 5 * time.Minute

// DefaultMaxHistory is how many revisions a release keeps when
// Release.MaxHistory is unset.
const DefaultMaxHistory = 10

// ErrWaitTimeout marks a Deploy that timed out waiting on the cluster:
// for the release's resources to become ready (Release.Wait), for its
// hooks, or for its CRDs to be established. The cluster answered; the
// release did not converge in time. Errors wrapping it also wrap the cause
// (context.DeadlineExceeded or wait.ErrWaitTimeout).
var ErrWaitTimeout = errors.New("timed out waiting for the release")

// Options configure a Deployer.
type Options struct {
	// Logger receives Helm's debug output at debug level. Optional: default no-op.
	Logger *zap.Logger
	// Timeout bounds one Helm action. Optional: default 5m.
	Timeout time.Duration
	// ProtectedNamespaces are namespaces DeleteNamespace never deletes (the
	// agent's, when it is configured), in addition to
	// DefaultProtectedNamespaces and Kubernetes' own. Optional.
	ProtectedNamespaces []string
}

// Deployer runs Helm actions. It is safe for concurrent use. Deploy,
// Correct and Rollback of one release (a namespace and name on one API
// server) wait for each other within the process; those of different
// releases run in parallel, the same bundle's releases on different
// clusters included.
type Deployer struct {
	log     *zap.Logger
	timeout time.Duration
	// protected are the namespaces DeleteNamespace keeps, Kubernetes' own
	// included.
	protected map[string]KeepReason
	// fields remembers the objects whose fields a cluster's schema knew.
	fields *fieldVerdicts
}

// New returns a Deployer.
func New(opts Options) *Deployer {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	setFieldManager.Do(func() {
		if kube.ManagedFieldsManager == "" {
			kube.ManagedFieldsManager = FieldManager
		}
	})
	return &Deployer{log: opts.Logger, timeout: opts.Timeout, fields: newFieldVerdicts(),
		protected: protectedNamespaces(opts.ProtectedNamespaces)}
}

// FieldManager is the field manager of everything Helm writes for
// Flotilla (Helm's default would be the binary's name), so drift
// detection can tell Flotilla's fields from those of others.
const FieldManager = "flotilla"

// setFieldManager sets Helm's process-wide field manager once.
var setFieldManager sync.Once

// Release is one chart to run as one Helm release on one cluster.
type Release struct {
	// Name is the Helm release name (≤ 53 characters).
	Name string
	// Namespace is where the release and its namespaced objects go; it is
	// created when missing.
	Namespace string
	// Chart is the chart to install. Deploy does not modify it.
	Chart *chart.Chart
	// Values are the Helm values.
	Values map[string]any
	// DeploymentID identifies chart plus values plus options; a release
	// already at this ID is left alone.
	DeploymentID string
	// Wait waits for resources to become ready within the timeout.
	Wait bool
	// ForceNamespace confines the release to one namespace (Fleet's
	// fleet.yaml namespace or GitRepo targetNamespace): every namespaced
	// object is moved into it, whatever namespace it names, and a
	// cluster-scoped object (including a CRD in the chart's crds/) makes
	// Deploy fail with ErrInvalidRelease before anything is applied. It is
	// normally equal to Namespace; Deploy creates only Namespace.
	// Optional: default "" (objects keep their namespaces; those without
	// one go to Namespace).
	ForceNamespace string
	// Labels are set on every object the templates render, replacing the
	// object's own value for the same key (for example flotilla.dev/bundle).
	// They are not the labels of Helm's release records.
	// Optional: default none.
	Labels map[string]string
	// Annotations are set on every object the templates render, replacing
	// the object's own value for the same key. Optional: default none.
	Annotations map[string]string
	// PreRender runs on Helm's rendered manifests before Flotilla's own
	// post-rendering (Fleet runs kustomize there). Optional.
	PreRender postrender.PostRenderer
	// Timeout bounds Helm's wait when Wait is set. Optional: default the
	// Deployer's timeout.
	Timeout time.Duration
	// WaitForJobs also waits for Jobs to complete (with Wait).
	WaitForJobs bool
	// Force replaces objects that cannot be updated in place.
	Force bool
	// TakeOwnership adopts existing objects Helm did not create.
	TakeOwnership bool
	// Atomic rolls a failed upgrade back (and uninstalls a failed install).
	Atomic bool
	// MaxHistory is how many revisions Helm keeps, failed ones included.
	// Optional: default DefaultMaxHistory.
	MaxHistory int
	// DeleteCRDResources lets Uninstall delete the CustomResourceDefinitions
	// the templates render, and with them every custom resource of theirs
	// (Fleet's deleteCRDResources). By default the post-renderer annotates
	// each such CRD with helm.sh/resource-policy: keep, so that uninstalling
	// the release, or an upgrade that drops the CRD, leaves it on the
	// cluster. A kept CRD still carries this release's ownership metadata;
	// a later Deploy of any release that renders it takes it over once this
	// release no longer exists. Optional: default false.
	DeleteCRDResources bool
	// DisableDNS turns off DNS lookups in templates.
	DisableDNS bool
	// SkipSchemaValidation skips the chart's values schema.
	SkipSchemaValidation bool
	// Description is recorded on the revision Deploy creates (helm history
	// shows it); callers name who deployed it, so a retry can tell a
	// revision its own interrupted attempt created. Optional: default
	// Helm's "Install complete" / "Upgrade complete".
	Description string
	// ServiceAccount names a ServiceAccount of Namespace that Helm acts as
	// (Kubernetes impersonation of system:serviceaccount:<ns>:<name>;
	// Fleet's serviceAccount): the install or upgrade has exactly the
	// account's permissions, and a refusal (403) is reported naming it.
	// Deploy checks that the account exists before anything else
	// (ErrServiceAccountNotFound), and records it on the revision
	// (ServiceAccountAnnotation), so that Status, Rollback, Correct,
	// Uninstall and Forget of the release act as it too. The namespace
	// must exist (it holds the account): Deploy does not create it.
	// Optional: default the getter's own credentials.
	ServiceAccount string
	// ValuesFrom are ConfigMap and Secret keys on the cluster whose YAML
	// values are merged over Values, in order, when Deploy runs (Fleet's
	// helm.valuesFrom); they are read with the getter's own credentials.
	// A digest of each key's data is recorded on the revision
	// (ValuesFromAnnotation): a release at DeploymentID whose keys hold
	// other data since is upgraded. A missing object or key fails Deploy
	// (ErrValuesFrom) before anything is applied. Optional.
	ValuesFrom []ValuesRef
	// NamespaceLabels and NamespaceAnnotations are applied to Namespace
	// (Fleet's namespaceLabels and namespaceAnnotations) by server-side
	// apply with the getter's own credentials, once the templates
	// rendered and passed the checks and before Helm applies anything;
	// see NamespaceFieldManager. Keys dropped since the release's last
	// deploy are removed. Only an install or upgrade applies them.
	// Optional.
	NamespaceLabels      map[string]string
	NamespaceAnnotations map[string]string
}

// Result reports what Deploy did.
type Result struct {
	// Revision is the release revision now deployed.
	Revision int
	// Changed is false when the cluster already ran DeploymentID.
	Changed bool
	// Previous is the deployment ID of the release's last successfully
	// deployed revision before this call, if any.
	Previous string
	// Description is the description of the revision now deployed: when
	// Changed is false, the one whoever deployed it recorded.
	Description string
}

// Deploy makes the cluster behind getter run rel. It installs when the
// release does not exist, upgrades when it runs another deployment ID (or
// the data of rel.ValuesFrom changed since) or is failed, recovers a
// release stuck in a pending state, and does nothing when the deployed
// revision already carries rel.DeploymentID and the same ValuesFrom data.
// getter's credentials read rel.ValuesFrom and check and impersonate
// rel.ServiceAccount (see Release).
func (d *Deployer) Deploy(ctx context.Context, getter genericclioptions.RESTClientGetter, rel Release) (Result, error) {
	if err := validate(rel); err != nil {
		return Result{}, err
	}
	unlock, err := d.lock(ctx, getter, rel.Namespace, rel.Name)
	if err != nil {
		return Result{}, err
	}
	defer unlock()
	values, digest, err := resolveValues(ctx, getter, rel)
	if err != nil {
		return Result{}, err
	}
	rel.Values = values
	helmGetter, err := actor(ctx, getter, rel)
	if err != nil {
		return Result{}, err
	}
	res, err := d.deploy(ctx, getter, helmGetter, rel, digest)
	return res, asServiceAccount(err, rel.Namespace, rel.ServiceAccount)
}

// deploy is Deploy once rel's values are resolved (digest records
// ValuesFrom's data) and Helm's getter chosen (getter itself, or acting as
// rel.ServiceAccount).
func (d *Deployer) deploy(ctx context.Context, getter, helmGetter genericclioptions.RESTClientGetter, rel Release, digest string) (Result, error) {
	cfg, err := d.configuration(helmGetter, rel.Namespace)
	if err != nil {
		return Result{}, err
	}
	last, err := cfg.Releases.Last(rel.Name)
	if err != nil && !errors.Is(err, driver.ErrReleaseNotFound) {
		return Result{}, fmt.Errorf("read release %s/%s: %w", rel.Namespace, rel.Name, err)
	}
	if cur := running(cfg, last); cur != nil && DeploymentIDOf(cur) == rel.DeploymentID && valuesFromOf(cur) == digest {
		return Result{Revision: cur.Version, Previous: rel.DeploymentID, Description: cur.Info.Description}, nil
	}
	// Rendering, post-rendering and checking happen before Helm applies
	// anything, except for the chart's crds/, which Helm installs first:
	// check those now, before a release is recovered or created.
	pr, err := newPostRenderer(helmGetter, rel)
	if err != nil {
		return Result{}, err
	}
	pr.crds = &crdInstaller{ctx: ctx, getter: helmGetter, log: d.log, release: rel.Name, namespace: rel.Namespace,
		takeOwnership: rel.TakeOwnership, timeout: d.timeoutOf(rel)}
	// A ServiceAccount lives in the namespace, which therefore exists; it
	// is rarely allowed to create namespaces.
	pr.ns = &namespaceMetadata{ctx: ctx, getter: getter, namespace: rel.Namespace, release: rel.Name,
		labels: rel.NamespaceLabels, annotations: rel.NamespaceAnnotations, create: rel.ServiceAccount == ""}
	pr.fields = &fieldChecker{ctx: ctx, getter: helmGetter, mapper: pr.mapper, cache: d.fields, namespace: rel.Namespace}
	if err := pr.checkCRDFiles(rel.Chart); err != nil {
		return Result{}, fmt.Errorf("check CRDs of release %s/%s: %w", rel.Namespace, rel.Name, err)
	}
	if last != nil {
		if last, err = d.recoverPending(cfg, last); err != nil {
			return Result{}, err
		}
	}
	// Previous is what the cluster last ran successfully, not the ID of a
	// revision that failed or was interrupted.
	var prev string
	if deployed, err := cfg.Releases.Deployed(rel.Name); err == nil {
		prev = DeploymentIDOf(deployed)
	}

	chrt := stamp(rel.Chart, rel.DeploymentID)
	setAnnotation(chrt, ServiceAccountAnnotation, rel.ServiceAccount)
	setAnnotation(chrt, ValuesFromAnnotation, digest)
	// The cluster's capabilities are shared (see capabilitiesTTL), except
	// for a chart with a crds/ directory: Helm installs those before it
	// reads the capabilities, and its templates may ask for them.
	caps, dc := capabilitiesOf(helmGetter)
	if caps != nil && len(chrt.CRDObjects()) == 0 {
		if cfg.Capabilities, err = caps.get(dc); err != nil {
			return Result{}, fmt.Errorf("cluster capabilities for release %s/%s: %w", rel.Namespace, rel.Name, err)
		}
	}
	var out *release.Release
	if last == nil {
		out, err = d.install(ctx, cfg, rel, chrt, pr)
	} else {
		out, err = d.upgrade(ctx, cfg, rel, chrt, pr)
	}
	if caps != nil && (len(chrt.CRDObjects()) > 0 || pr.crds.installed) {
		caps.invalidate() // new API versions for the cluster's next deploys
	}
	if err != nil {
		return Result{}, err
	}
	return Result{Revision: out.Version, Changed: true, Previous: prev, Description: out.Info.Description}, nil
}

// running returns the revision the release runs when last is its newest
// record: last when deployed, the deployed revision before it when last
// is a failed drift correction (kept by keepFailHistory), nil otherwise.
func running(cfg *action.Configuration, last *release.Release) *release.Release {
	switch {
	case last == nil:
		return nil
	case last.Info.Status == release.StatusDeployed:
		return last
	case last.Info.Status == release.StatusFailed && strings.HasPrefix(last.Info.Description, correctionFailed):
		if cur, err := cfg.Releases.Deployed(last.Name); err == nil {
			return cur
		}
	}
	return nil
}

// Current returns the deployment ID the release's deployed revision carries,
// or "" when there is no deployed revision.
func (d *Deployer) Current(getter genericclioptions.RESTClientGetter, namespace, name string) (string, int, error) {
	cfg, err := d.configuration(getter, namespace)
	if err != nil {
		return "", 0, err
	}
	rel, err := cfg.Releases.Deployed(name)
	if errors.Is(err, driver.ErrNoDeployedReleases) || errors.Is(err, driver.ErrReleaseNotFound) {
		return "", 0, nil
	}
	if err != nil {
		return "", 0, fmt.Errorf("read release %s/%s: %w", namespace, name, err)
	}
	return DeploymentIDOf(rel), rel.Version, nil
}

// Uninstall removes the release and its objects, acting as the
// ServiceAccount the release was deployed as, if any. A missing release is
// not an error, so cleanups can be retried.
func (d *Deployer) Uninstall(ctx context.Context, getter genericclioptions.RESTClientGetter, namespace, name string) error {
	cfg, sa, err := d.releaseConfiguration(getter, namespace, name)
	if err != nil {
		return err
	}
	// Helm's Uninstall takes no context: honour cancellation before starting,
	// not after a removal that already happened.
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("uninstall release %s/%s: %w", namespace, name, err)
	}
	un := action.NewUninstall(cfg)
	un.Timeout = d.timeout
	un.IgnoreNotFound = true
	if caps, _ := capabilitiesOf(getter); caps != nil {
		// The release may take API versions (its CRDs) with it.
		defer caps.invalidate()
	}
	if _, err := un.Run(name); err != nil {
		if sa != "" {
			// Helm reduces a failed deletion to "failed to delete release"
			// (the cause is in its debug log): say who it acted as.
			return fmt.Errorf("uninstall release %s/%s as service account %s/%s: %w", namespace, name, namespace, sa, err)
		}
		return fmt.Errorf("uninstall release %s/%s: %w", namespace, name, err)
	}
	return nil
}

// Namespaces returns, sorted, the namespaces holding a release named name
// (any revision, any status) that match accepts. Only the release's own
// records are read: the query selects them by label.
func (d *Deployer) Namespaces(getter genericclioptions.RESTClientGetter, name string, match func(*release.Release) bool) ([]string, error) {
	cfg, err := d.configuration(getter, metav1.NamespaceAll)
	if err != nil {
		return nil, err
	}
	rels, err := cfg.Releases.Query(map[string]string{"owner": "helm", "name": name})
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("find release %s: %w", name, err)
	}
	var out []string
	for _, r := range rels {
		if match(r) && !slices.Contains(out, r.Namespace) {
			out = append(out, r.Namespace)
		}
	}
	slices.Sort(out)
	return out, nil
}

// DeploymentIDOf returns the deployment ID recorded on a release revision.
func DeploymentIDOf(rel *release.Release) string {
	if rel == nil || rel.Chart == nil || rel.Chart.Metadata == nil {
		return ""
	}
	return rel.Chart.Metadata.Annotations[DeploymentIDAnnotation]
}

// setAnnotation sets annotation key of a chart stamp returned, unless
// value is empty.
func setAnnotation(c *chart.Chart, key, value string) {
	if value != "" {
		c.Metadata.Annotations[key] = value
	}
}

// stamp returns a shallow copy of c whose metadata carries the deployment ID.
func stamp(c *chart.Chart, id string) *chart.Chart {
	md := *c.Metadata
	md.Annotations = maps.Clone(c.Metadata.Annotations)
	if md.Annotations == nil {
		md.Annotations = map[string]string{}
	}
	md.Annotations[DeploymentIDAnnotation] = id
	out := *c
	out.Metadata = &md
	return &out
}

func (d *Deployer) configuration(getter genericclioptions.RESTClientGetter, namespace string) (*action.Configuration, error) {
	cfg := new(action.Configuration)
	debug := d.log.Sugar().Debugf
	if err := cfg.Init(getter, namespace, "secret", debug); err != nil {
		return nil, fmt.Errorf("initialise Helm for namespace %s: %w", namespace, err)
	}
	// One getter serves a whole cluster; the release's namespace, not the
	// getter's default, is where namespaced objects without one must go.
	if kc, ok := cfg.KubeClient.(*kube.Client); ok {
		kc.Namespace = namespace
	}
	return cfg, nil
}

func (d *Deployer) install(ctx context.Context, cfg *action.Configuration, rel Release, chrt *chart.Chart, pr *postRenderer) (*release.Release, error) {
	in := action.NewInstall(cfg)
	in.PostRenderer = pr
	in.ReleaseName = rel.Name
	in.Namespace = rel.Namespace
	// The post-renderer creates the namespace (see namespaceMetadata).
	in.CreateNamespace = false
	in.Timeout = d.timeoutOf(rel)
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
	out, err := in.RunWithContext(helmContext(ctx), chrt, rel.Values)
	if err != nil {
		return nil, actionError(ctx, "install", rel, err)
	}
	return out, nil
}

func (d *Deployer) upgrade(ctx context.Context, cfg *action.Configuration, rel Release, chrt *chart.Chart, pr *postRenderer) (*release.Release, error) {
	up := action.NewUpgrade(cfg)
	up.PostRenderer = pr
	up.Namespace = rel.Namespace
	up.Timeout = d.timeoutOf(rel)
	up.Wait = rel.Wait
	up.WaitForJobs = rel.Wait && rel.WaitForJobs
	up.Atomic = rel.Atomic
	up.Force = rel.Force
	up.TakeOwnership = rel.TakeOwnership
	up.EnableDNS = !rel.DisableDNS
	up.SkipSchemaValidation = rel.SkipSchemaValidation
	up.DisableOpenAPIValidation = true // see install
	up.Description = rel.Description
	up.MaxHistory = rel.MaxHistory
	if up.MaxHistory <= 0 {
		up.MaxHistory = DefaultMaxHistory
	}
	out, err := up.RunWithContext(helmContext(ctx), rel.Name, chrt, rel.Values)
	if err != nil {
		if rel.Atomic {
			// Helm stores the rollback of a failed atomic upgrade without
			// pruning the history.
			if capErr := capHistory(cfg, rel.Name, up.MaxHistory); capErr != nil {
				d.log.Warn("Could not prune release history", zap.String("release", rel.Name),
					zap.String("namespace", rel.Namespace), zap.Error(capErr))
			}
		}
		return nil, actionError(ctx, "upgrade", rel, err)
	}
	return out, nil
}

// actionError wraps the error of Helm action op on rel. A timeout of
// Helm's own (its context never ends, see helmContext) also wraps
// ErrWaitTimeout; so does the CRD installer's, which wraps it itself.
func actionError(ctx context.Context, op string, rel Release, err error) error {
	if ctx.Err() == nil && wait.Interrupted(err) && !errors.Is(err, ErrWaitTimeout) {
		return fmt.Errorf("%s release %s/%s: %w: %w", op, rel.Namespace, rel.Name, ErrWaitTimeout, err)
	}
	return fmt.Errorf("%s release %s/%s: %w", op, rel.Namespace, rel.Name, err)
}

// capHistory deletes the oldest records of release name until at most limit
// remain, never the deployed one: how Helm prunes before it stores a
// revision.
func capHistory(cfg *action.Configuration, name string, limit int) error {
	history, err := cfg.Releases.History(name)
	if err != nil || len(history) <= limit {
		return err
	}
	releaseutil.SortByRevision(history)
	keep := 0
	if deployed, err := cfg.Releases.Deployed(name); err == nil {
		keep = deployed.Version
	}
	excess := len(history) - limit
	for _, r := range history {
		if excess == 0 {
			break
		}
		if r.Version == keep {
			continue
		}
		if _, err := cfg.Releases.Delete(name, r.Version); err != nil {
			return fmt.Errorf("delete revision %d: %w", r.Version, err)
		}
		excess--
	}
	return nil
}

// helmContext is the context an install or upgrade runs with: never
// cancelled (Helm's own timeout bounds it). Helm returns as soon as its
// context is cancelled but lets the operation finish in the background;
// the caller would then report an error for a release that did get
// deployed, and its retry would find nothing to do, so the deploy would go
// unreported. Waiting for Helm keeps "deployed" and "reported" together.
func helmContext(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }

// timeoutOf returns the Helm timeout for rel.
func (d *Deployer) timeoutOf(rel Release) time.Duration {
	if rel.Timeout > 0 {
		return rel.Timeout
	}
	return d.timeout
}

// recoverPending handles a release left pending by an interrupted Helm
// operation. A pending first install is uninstalled (nothing reached a
// deployed state, so nothing is lost) and nil is returned so the caller
// installs afresh. The record of a pending upgrade or rollback is dropped
// and the caller upgrades from the revision before it, so the retried
// operation takes the interrupted one's revision number: a crash adds no
// Helm revision (objects the interrupted operation created carry this
// release's ownership metadata and are adopted). Only when no earlier
// record exists is the pending one marked failed and upgraded from.
func (d *Deployer) recoverPending(cfg *action.Configuration, last *release.Release) (*release.Release, error) {
	if !last.Info.Status.IsPending() {
		if last.Info.Status == release.StatusUninstalled || last.Info.Status == release.StatusUninstalling {
			return nil, d.purge(cfg, last)
		}
		return last, nil
	}
	d.log.Info("Recovering interrupted Helm operation",
		zap.String("release", last.Name), zap.String("namespace", last.Namespace),
		zap.String("status", last.Info.Status.String()), zap.Int("revision", last.Version))
	if last.Info.Status == release.StatusPendingInstall && last.Version == 1 {
		return nil, d.purge(cfg, last)
	}
	if prev, err := cfg.Releases.Get(last.Name, last.Version-1); err == nil && !prev.Info.Status.IsPending() &&
		prev.Info.Status != release.StatusUninstalled && prev.Info.Status != release.StatusUninstalling {
		if _, err := cfg.Releases.Delete(last.Name, last.Version); err != nil {
			return nil, fmt.Errorf("drop interrupted revision %d of %s/%s: %w", last.Version, last.Namespace, last.Name, err)
		}
		return prev, nil
	}
	last.Info.Status = release.StatusFailed
	last.Info.Description = "interrupted operation recovered by Flotilla"
	if err := cfg.Releases.Update(last); err != nil {
		return nil, fmt.Errorf("mark interrupted release %s/%s failed: %w", last.Namespace, last.Name, err)
	}
	return last, nil
}

// purge uninstalls what a never-deployed release may have created and drops
// its history.
func (d *Deployer) purge(cfg *action.Configuration, last *release.Release) error {
	un := action.NewUninstall(cfg)
	un.Timeout = d.timeout
	un.IgnoreNotFound = true
	if _, err := un.Run(last.Name); err != nil {
		return fmt.Errorf("remove interrupted install %s/%s: %w", last.Namespace, last.Name, err)
	}
	return nil
}
