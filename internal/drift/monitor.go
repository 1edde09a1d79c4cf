package drift

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/flotilla-gitops/flotilla/internal/bundle"
	"github.com/flotilla-gitops/flotilla/internal/deployer"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

// BundleLabel is the label Flotilla puts on every object of a bundle; the
// watches select on it.
const BundleLabel = "flotilla.dev/bundle"

// Helm's ownership annotations on every object of a release.
const (
	helmReleaseName      = "meta.helm.sh/release-name"
	helmReleaseNamespace = "meta.helm.sh/release-namespace"
)

// Corrections counts drift corrections by result: success, failure,
// conflict (an object given up on). Workers register it on /metrics.
var Corrections = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "flotilla_drift_corrections_total",
	Help: "Drift corrections by result: success, failure, conflict (an object a controller keeps changing back).",
}, []string{"result"})

// Target is one release the monitor watches: a GitRepo's bundle at a
// deployment ID, with the bundle's drift settings on this cluster.
type Target struct {
	GitRepo      string
	Bundle       string
	Release      string
	Namespace    string
	DeploymentID string
	Rules        Rules
	Ready        deployer.ReadyOptions
	// Correct is the bundle's correctDrift; nil or not Enabled: detect only.
	Correct *bundle.CorrectDrift
	// MaxHistory bounds the Helm records corrections leave.
	MaxHistory int
	// Error is set when the settings could not be read; it is reported
	// and nothing is corrected.
	Error string
	// ValuesFrom are the ConfigMap and Secret keys the release's values
	// are read from at deploy time (helm.valuesFrom). Data that differs
	// from what the deployed revision was deployed with is reported as
	// drift ("valuesFrom configmap ns/name"); it is not corrected (a Helm
	// rollback would restore the old values): the next deploy at the
	// same deployment ID, such as a sync's, applies the new data.
	ValuesFrom []deployer.ValuesRef
	// Windows are the bundle's deployment windows (rolloutStrategy
	// windows). Outside all of them drift is reported but not corrected,
	// the report saying which window the correction waits for, and the
	// release is judged again when that window opens; a correction that
	// started inside a window runs to its end. None: drift is corrected
	// at any time. Windows that do not parse (rendering rejects them)
	// gate nothing, and the reports say so.
	Windows []bundle.Window
	// Owner is the owner of the release (deployer.Owner): a correction
	// of a release another owner took over is refused. Optional: none
	// checks nothing.
	Owner deployer.Owner
}

// Key names the target's release: namespace/release.
func (t Target) Key() string { return t.Namespace + "/" + t.Release }

// Config configures a Monitor.
type Config struct {
	// Cluster is the cluster's name, for logs and messages.
	Cluster string
	// Getter returns the cluster's REST client getter for a namespace.
	Getter   func(namespace string) (genericclioptions.RESTClientGetter, error)
	Deployer *deployer.Deployer
	Logger   *zap.Logger
	// Report delivers the changed reports of one GitRepo's releases.
	Report func(ctx context.Context, gitRepo string, reports []status.LiveReport) error
	// Corrected, if set, counts each correction by result ("success",
	// "failure", "conflict").
	Corrected func(result string)
	// Debounce is how long the monitor waits after a burst of events
	// before it diffs (default 1s); a burst never delays a diff beyond 3
	// debounces.
	Debounce time.Duration
	// ReportBurst and ReportInterval bound the reports sent per GitRepo:
	// ReportBurst at once, then one per ReportInterval (defaults 10, 30s),
	// changes in between merged.
	ReportBurst    int
	ReportInterval time.Duration
	// An object that drifts again within ConflictWindow of each of its
	// last ConflictTries corrections is a conflict: something in the
	// cluster changes it back (defaults 3 and 5s). A person editing it
	// again later is corrected again.
	ConflictTries  int
	ConflictWindow time.Duration
	// Now is the clock corrections are judged by: deployment windows,
	// the backoff of failed corrections and conflicts. Debounces and
	// re-checks run on the real clock, so Now must advance with it.
	// Optional: default time.Now.
	Now func() time.Time
}

func (c *Config) defaults() {
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.Debounce <= 0 {
		c.Debounce = time.Second
	}
	if c.ReportBurst <= 0 {
		c.ReportBurst = 10
	}
	if c.ReportInterval <= 0 {
		c.ReportInterval = 30 * time.Second
	}
	if c.ConflictTries <= 0 {
		c.ConflictTries = 3
	}
	if c.ConflictWindow <= 0 {
		c.ConflictWindow = 5 * time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Corrected == nil {
		c.Corrected = func(result string) { Corrections.WithLabelValues(result).Inc() }
	}
}

// Monitor keeps watching a cluster's releases: one label-scoped watch per
// kind and namespace, Helm's release records per namespace, and the
// HorizontalPodAutoscalers of the namespaces. After each burst of events
// it diffs the affected releases against their deployed revision,
// reports readiness and drift when they change, and corrects drift where
// correctDrift is enabled. Run drives it.
type Monitor struct {
	cfg Config
	dyn dynamic.Interface

	mu      sync.Mutex
	targets map[string]*watched // by Target.Key
	// byBundle maps a bundle name to the keys of its releases.
	byBundle map[string][]string
	// bySource maps a valuesFrom source (sourceKey) to the keys of the
	// releases whose values it holds.
	bySource map[string][]string
	dirty    map[string]*mark
	wake     chan struct{}

	// updates carries SetTargets' sets to Run.
	updates chan []Target
	// passive is set while no watch activity uses the monitor (it lingers
	// for the next): it reports but corrects nothing, so that a monitor
	// of another process that took the cluster over corrects alone.
	passive atomic.Bool

	informers map[informerKey]cache.SharedIndexInformer
	stop      chan struct{}
	scalers   *scalerIndex
	sender    *sender
}

// informerKey is one watch: a resource in a namespace ("" for
// cluster-scoped kinds or every namespace) with a label selector. Helm's
// release records and a bundle's own Secrets are both Secrets of the
// namespace, told apart by the selector.
type informerKey struct {
	gvr       schema.GroupVersionResource
	namespace string
	selector  string
	// field is a field selector: the watch of one valuesFrom source
	// ("metadata.name=<name>"), whose data is cached as digests only.
	field string
}

// mark records when a release was first and last touched since its last
// diff, and whether its Helm record changed.
type mark struct {
	first, last time.Time
	reload      bool
}

// New returns a monitor of the cluster behind cfg.Getter.
func New(cfg Config) (*Monitor, error) {
	cfg.defaults()
	getter, err := cfg.Getter("")
	if err != nil {
		return nil, err
	}
	rc, err := getter.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", cfg.Cluster, err)
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", cfg.Cluster, err)
	}
	m := &Monitor{cfg: cfg, dyn: dyn, targets: map[string]*watched{}, byBundle: map[string][]string{},
		dirty: map[string]*mark{}, wake: make(chan struct{}, 1), updates: make(chan []Target, 1),
		informers: map[informerKey]cache.SharedIndexInformer{},
		stop:      make(chan struct{}), scalers: newScalerIndex()}
	m.sender = newSender(cfg)
	return m, nil
}

// Run watches targets, and then each set SetTargets gives it, until ctx
// ends. It returns ctx's error.
func (m *Monitor) Run(ctx context.Context, targets []Target) error {
	defer close(m.stop)
	m.apply(targets)
	go m.sender.run(ctx)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next := m.due(ctx)
		timer.Reset(next)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ts := <-m.updates:
			m.apply(ts)
		case <-m.wake:
		case <-timer.C:
		}
	}
}

// SetTargets makes the running monitor watch targets instead of what it
// watched: releases it keeps at the same deployment ID keep their state
// (the backoff of a failing correction, conflicts, the corrections
// counted), new ones are read at once, and those left out are dropped.
// Watches already open stay open.
func (m *Monitor) SetTargets(targets []Target) {
	for {
		select {
		case m.updates <- targets:
			return
		default:
		}
		select { // replace a set Run has not taken yet
		case <-m.updates:
		default:
		}
	}
}

// apply takes a target set (in Run's goroutine).
func (m *Monitor) apply(targets []Target) {
	next := make(map[string]*watched, len(targets))
	byBundle, bySource := map[string][]string{}, map[string][]string{}
	var fresh []*watched
	for _, t := range targets {
		key := t.Key()
		w := m.targets[key]
		switch {
		case w == nil || w.t.DeploymentID != t.DeploymentID || w.t.GitRepo != t.GitRepo || w.t.Bundle != t.Bundle:
			w = newWatched(t)
			fresh = append(fresh, w)
		case !reflect.DeepEqual(w.t, t):
			// New drift settings at the same deployment ID: what was
			// compared under the old rules, and conflicts, start over.
			w.t, w.cache, w.conflicts = t, map[objectKey]compared{}, map[objectKey]string{}
			w.windowErr, w.windowWake = windowsError(t), time.Time{}
			fresh = append(fresh, w)
		}
		next[key] = w
		byBundle[t.Bundle] = append(byBundle[t.Bundle], key)
		for _, r := range t.ValuesFrom {
			bySource[sourceKey(r.Secret, r.Namespace, r.Name)] = append(bySource[sourceKey(r.Secret, r.Namespace, r.Name)], key)
		}
	}
	m.mu.Lock()
	m.targets, m.byBundle, m.bySource = next, byBundle, bySource
	m.mu.Unlock()
	gitRepos := map[string]bool{}
	for _, t := range targets {
		gitRepos[t.GitRepo] = true
	}
	m.sender.keep(gitRepos)
	// Informers start only once the targets are in place: their handlers
	// read them.
	for _, w := range fresh {
		if err := m.watchNamespace(w.t.Namespace); err != nil {
			w.watchErr = err.Error()
		}
		m.touch(w.t.Key(), true)
	}
}

// touch marks the release key dirty now (and its Helm record changed,
// with reload) and wakes Run.
func (m *Monitor) touch(key string, reload bool) {
	m.mu.Lock()
	now := time.Now()
	d := m.dirty[key]
	if d == nil {
		d = &mark{first: now}
		m.dirty[key] = d
	}
	d.last, d.reload = now, d.reload || reload
	m.mu.Unlock()
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// later marks key dirty again after d (a retry or a recheck).
func (m *Monitor) later(key string, d time.Duration) {
	time.AfterFunc(d, func() {
		select {
		case <-m.stop:
		default:
			m.touch(key, false)
		}
	})
}

// due evaluates every release whose events have settled and returns how
// long until the next one is due.
func (m *Monitor) due(ctx context.Context) time.Duration {
	now := time.Now()
	next := time.Hour
	var ready []string
	reload := map[string]bool{}
	m.mu.Lock()
	for key, d := range m.dirty {
		at := d.last.Add(m.cfg.Debounce)
		if limit := d.first.Add(3 * m.cfg.Debounce); limit.Before(at) {
			at = limit
		}
		if !at.After(now) {
			ready = append(ready, key)
			reload[key] = d.reload
			delete(m.dirty, key)
			continue
		}
		next = min(next, at.Sub(now))
	}
	m.mu.Unlock()
	for _, key := range ready {
		if ctx.Err() != nil {
			break
		}
		if w := m.target(key); w != nil {
			m.evaluate(ctx, w, reload[key])
		}
	}
	return next
}

// watchNamespace watches Helm's release records and the autoscalers of
// namespace ns, once.
func (m *Monitor) watchNamespace(ns string) error {
	secrets := schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	if err := m.watch(informerKey{gvr: secrets, namespace: ns, selector: "owner=helm"}, func(u *unstructured.Unstructured, _ cache.Store) {
		m.onRelease(u)
	}); err != nil {
		return err
	}
	hpas := schema.GroupVersionResource{Group: "autoscaling", Version: "v2", Resource: "horizontalpodautoscalers"}
	return m.watch(informerKey{gvr: hpas, namespace: ns}, func(u *unstructured.Unstructured, store cache.Store) {
		m.onScaler(u.GetNamespace(), store)
	})
}

// watchObjects watches the objects of kind gvr in ns that carry
// BundleLabel, once.
func (m *Monitor) watchObjects(gvr schema.GroupVersionResource, ns string) error {
	return m.watch(objectsKey(gvr, ns), func(u *unstructured.Unstructured, _ cache.Store) {
		m.onObject(u)
	})
}

// informerSync bounds the wait for a new watch's first list.
const informerSync = 20 * time.Second

// objectsKey is the watch of the bundles' objects of kind gvr in ns.
func objectsKey(gvr schema.GroupVersionResource, ns string) informerKey {
	return informerKey{gvr: gvr, namespace: ns, selector: BundleLabel}
}

// watch starts an informer for k, calling on with each object added,
// changed or deleted, unless one runs already. Objects are cached without
// managedFields.
func (m *Monitor) watch(k informerKey, on func(*unstructured.Unstructured, cache.Store)) error {
	if _, ok := m.informers[k]; ok {
		return nil
	}
	inf := dynamicinformer.NewFilteredDynamicInformer(m.dyn, k.gvr, k.namespace, 0, cache.Indexers{},
		func(o *metav1.ListOptions) { o.LabelSelector, o.FieldSelector = k.selector, k.field }).Informer()
	transform := stripManagedFields
	if k.field != "" {
		secret := k.gvr == secretsGVR
		transform = func(obj any) (any, error) { return digestData(obj, secret), nil }
	}
	if err := inf.SetTransform(transform); err != nil {
		return err
	}
	handle := func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if u, ok := obj.(*unstructured.Unstructured); ok {
			on(u, inf.GetStore())
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: handle, DeleteFunc: handle,
		UpdateFunc: func(_, obj any) { handle(obj) },
	}); err != nil {
		return err
	}
	// The informer runs until the monitor stops, or until its first list
	// fails.
	run, stop := context.WithCancel(context.Background())
	go func() {
		select {
		case <-m.stop:
			stop()
		case <-run.Done():
		}
	}()
	go inf.Run(run.Done())
	ctx, cancel := context.WithTimeout(context.Background(), informerSync)
	defer cancel()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		// Not kept: the next release of this kind and namespace tries
		// again, and reports the error again if it fails.
		stop()
		return fmt.Errorf("cluster %s: cannot watch %s in namespace %q", m.cfg.Cluster, k.gvr.String(), k.namespace)
	}
	m.informers[k] = inf
	return nil
}

// onObject marks the releases of the object's bundle.
func (m *Monitor) onObject(u *unstructured.Unstructured) {
	b := u.GetLabels()[BundleLabel]
	m.mu.Lock()
	keys := m.byBundle[b]
	m.mu.Unlock()
	for _, k := range keys {
		m.touch(k, false)
	}
}

// target returns the watched release key, nil when it is not watched.
func (m *Monitor) target(key string) *watched {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.targets[key]
}

// onRelease marks the release whose Helm record changed.
func (m *Monitor) onRelease(u *unstructured.Unstructured) {
	key := u.GetNamespace() + "/" + u.GetLabels()["name"]
	if m.target(key) != nil {
		m.touch(key, true)
	}
}

// onScaler re-reads namespace ns's autoscalers from store and marks the
// namespace's releases.
func (m *Monitor) onScaler(ns string, store cache.Store) {
	m.scalers.set(ns, store.List())
	m.mu.Lock()
	var keys []string
	for key := range m.targets {
		if strings.HasPrefix(key, ns+"/") {
			keys = append(keys, key)
		}
	}
	m.mu.Unlock()
	for _, key := range keys {
		m.touch(key, false)
	}
}

// cached returns the watched object gvr ns/name, nil when absent.
func (m *Monitor) cached(gvr schema.GroupVersionResource, namespaced bool, ns, name string) *unstructured.Unstructured {
	k := objectsKey(gvr, "")
	if namespaced {
		k.namespace = ns
	}
	inf, ok := m.informers[k]
	if !ok {
		return nil
	}
	key := name
	if namespaced {
		key = ns + "/" + name
	}
	obj, ok, err := inf.GetStore().GetByKey(key)
	if err != nil || !ok {
		return nil
	}
	u, _ := obj.(*unstructured.Unstructured)
	return u
}

// stripManagedFields drops managedFields from objects before they are
// cached: the diff does not need them and they are a large part of every
// object.
func stripManagedFields(obj any) (any, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		u.SetManagedFields(nil)
	}
	return obj, nil
}
