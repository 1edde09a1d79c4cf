package deployer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
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
	// LeaseDuration is how long a release's writer lease holds without
	// renewal (see lease.go): how long other processes wait before they
	// recover what a killed one left pending. Optional: default
	// DefaultLeaseDuration; whole seconds, at least one.
	LeaseDuration time.Duration
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
	// leaseDuration is Options.LeaseDuration.
	leaseDuration time.Duration
}

// New returns a Deployer.
func New(opts Options) *Deployer {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.LeaseDuration <= 0 {
		opts.LeaseDuration = DefaultLeaseDuration
	}
	opts.LeaseDuration = max(opts.LeaseDuration.Round(time.Second), time.Second)
	setFieldManager.Do(func() {
		if kube.ManagedFieldsManager == "" {
			kube.ManagedFieldsManager = FieldManager
		}
	})
	return &Deployer{log: opts.Logger, timeout: opts.Timeout, fields: newFieldVerdicts(),
		protected: protectedNamespaces(opts.ProtectedNamespaces), leaseDuration: opts.LeaseDuration}
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
	// Owner names who deploys the release; it is recorded on every
	// revision (OwnerAnnotation). A release whose newest record names
	// another owner is not touched: Deploy fails with an *OwnedError.
	// Optional: default none (nothing recorded, nothing checked).
	Owner Owner
	// OwnerBundle is the owner's bundle, recorded beside it
	// (OwnerBundleAnnotation) and named when another owner is refused.
	// Optional.
	OwnerBundle string
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
	// the templates render and the release created, and with them every
	// custom resource of theirs (Fleet's deleteCRDResources). A CRD that
	// existed before and was adopted (TakeOwnership, or kept by a release
	// since uninstalled) is kept all the same: the release records the
	// CRDs it created on them (CRDCreatedByAnnotation). By default the post-renderer annotates
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
	// helm.valuesFrom); they are read as ServiceAccount when set (a key
	// it may not read fails Deploy, naming the account and the object),
	// else with the getter's own credentials.
	// A digest of each key's data is recorded on the revision
	// (ValuesFromAnnotation): a release at DeploymentID whose keys hold
	// other data since is upgraded. A missing object or key fails Deploy
	// (ErrValuesFrom) before anything is applied. Optional.
	ValuesFrom []ValuesRef
	// NamespaceLabels and NamespaceAnnotations are applied to Namespace
	// (Fleet's namespaceLabels and namespaceAnnotations) by server-side
	// apply as ServiceAccount when set, else with the getter's own
	// credentials, once the templates
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
// getter's credentials check and impersonate rel.ServiceAccount (see
// Release); everything else, reading rel.ValuesFrom and setting the
// namespace's labels and annotations included, acts as the account when
// rel names one.
func (d *Deployer) Deploy(ctx context.Context, getter genericclioptions.RESTClientGetter, rel Release) (Result, error) {
	if err := validate(rel); err != nil {
		return Result{}, err
	}
	unlock, err := d.lock(ctx, getter, rel.Namespace, rel.Name)
	if err != nil {
		return Result{}, err
	}
	defer unlock()
	helmGetter, err := actor(ctx, getter, rel)
	if err != nil {
		return Result{}, err
	}
	values, digest, err := resolveValues(ctx, helmGetter, rel)
	if err != nil {
		return Result{}, asServiceAccount(err, rel.Namespace, rel.ServiceAccount)
	}
	rel.Values = values
	res, err := d.deploy(ctx, helmGetter, rel, digest)
	return res, asServiceAccount(err, rel.Namespace, rel.ServiceAccount)
}

// deploy is Deploy once rel's values are resolved (digest records
// ValuesFrom's data) and Helm's getter chosen (getter itself, or acting as
// rel.ServiceAccount). What it does is decided step by step from the
// release's state (see determineReleaseState and actionForState).
func (d *Deployer) deploy(ctx context.Context, helmGetter genericclioptions.RESTClientGetter, rel Release, digest string) (Result, error) {
	cfg, err := d.configuration(helmGetter, rel.Namespace)
	if err != nil {
		return Result{}, err
	}
	leases, err := d.newLeases(helmGetter, rel.Namespace, rel.Name)
	if err != nil {
		return Result{}, err
	}
	pr, err := newPostRenderer(helmGetter, rel)
	if err != nil {
		return Result{}, err
	}
	pr.crds = &crdInstaller{ctx: ctx, getter: helmGetter, log: d.log, release: rel.Name, namespace: rel.Namespace,
		takeOwnership: rel.TakeOwnership, timeout: d.timeoutOf(rel)}
	// A ServiceAccount lives in the namespace, which therefore exists; it
	// is rarely allowed to create namespaces.
	pr.ns = &namespaceMetadata{ctx: ctx, getter: helmGetter, namespace: rel.Namespace, release: rel.Name,
		labels: rel.NamespaceLabels, annotations: rel.NamespaceAnnotations, create: rel.ServiceAccount == ""}
	pr.fields = &fieldChecker{ctx: ctx, getter: helmGetter, mapper: pr.mapper, cache: d.fields, namespace: rel.Namespace}
	chrt := stamp(rel.Chart, rel.DeploymentID)
	setAnnotation(chrt, ServiceAccountAnnotation, rel.ServiceAccount)
	setAnnotation(chrt, ValuesFromAnnotation, digest)
	setAnnotation(chrt, OwnerAnnotation, string(rel.Owner))
	setAnnotation(chrt, OwnerBundleAnnotation, rel.OwnerBundle)
	setAnnotation(chrt, LeaseAnnotation, "v1")
	run := &deployRun{d: d, cfg: cfg, rel: rel, chrt: chrt, pr: pr, helmGetter: helmGetter, leases: leases,
		want: desired{owner: rel.Owner, deploymentID: rel.DeploymentID, valuesFrom: digest}}
	defer run.close(ctx)
	return run.run(ctx)
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
// not an error, so cleanups can be retried. A release of another owner is
// not removed: Uninstall returns an *OwnedError and changes nothing; nor
// is one that another process is changing (ErrReleaseBusy).
func (d *Deployer) Uninstall(ctx context.Context, getter genericclioptions.RESTClientGetter, namespace, name string, owner Owner) error {
	unlock, err := d.lock(ctx, getter, namespace, name)
	if err != nil {
		return err
	}
	defer unlock()
	cfg, sa, err := d.releaseConfiguration(getter, namespace, name)
	if err != nil {
		return err
	}
	h, err := d.claim(ctx, cfg, helmGetterOf(getter, namespace, sa), namespace, name, owner)
	if err != nil {
		return fmt.Errorf("uninstall release %s/%s: %w", namespace, name, err)
	}
	if h == nil {
		return nil
	}
	defer h.release(ctx)
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
