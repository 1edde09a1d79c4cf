package drift

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/resource"

	"github.com/flotilla-gitops/flotilla/internal/deployer"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

// objectKey identifies one object of a cluster.
type objectKey struct {
	gvr             schema.GroupVersionResource
	namespace, name string
}

// compared is the last diff of one object: valid while the live object's
// resourceVersion, the release revision and the namespace's autoscalers
// are the same.
type compared struct {
	rv      string
	version int
	scalers int
	patch   []byte
}

// watched is the monitor's state of one release.
type watched struct {
	t Target
	// rev is the deployed revision being compared; nil until loaded and
	// while the release runs another deployment ID.
	rev *deployer.Revision
	// kinds are the watches the release's objects are in.
	kinds    map[informerKey]bool
	watchErr string
	cache    map[objectKey]compared
	// corrected holds each object's recent corrections; conflicts the
	// objects no longer corrected, with what keeps changing them.
	corrected map[objectKey][]time.Time
	conflicts map[objectKey]string
	// nextCorrection and backoff pace corrections after a failure.
	nextCorrection time.Time
	backoff        time.Duration
	failure        string
	corrections    int
	// windowErr says why the target's deployment windows gate nothing
	// (they do not parse); windowWake is the window opening a re-check is
	// set for, so that each evaluation outside the windows does not add
	// a timer.
	windowErr  string
	windowWake time.Time
}

func newWatched(t Target) *watched {
	return &watched{t: t, kinds: map[informerKey]bool{}, cache: map[objectKey]compared{},
		corrected: map[objectKey][]time.Time{}, conflicts: map[objectKey]string{}, windowErr: windowsError(t)}
}

// drifted is one object that differs, as the report lists it.
type drifted struct {
	key   objectKey
	entry status.ModifiedStatus
}

// evaluate diffs the release (re-reading its Helm record with reload),
// corrects its drift when enabled, and hands the report to the sender.
func (m *Monitor) evaluate(ctx context.Context, w *watched, reload bool) {
	if reload || w.rev == nil {
		if !m.load(ctx, w) {
			return
		}
	}
	if w.rev.Pending && (!w.rev.PendingRollback || !m.correcting(w)) {
		// A deploy runs (or an agent died in one, which its retry
		// recovers): judge the release once it is done.
		m.later(w.t.Key(), 5*time.Second)
		return
	}
	rep, drift := m.diff(ctx, w)
	if m.correcting(w) && (len(drift) > 0 || w.rev.Pending) && m.correct(ctx, w, drift, &rep) {
		return // the re-diff after the correction reports
	}
	m.sender.put(w.t.GitRepo, rep)
}

// correcting reports whether the release's drift is to be corrected.
func (w *watched) correcting() bool {
	return w.t.Correct != nil && w.t.Correct.Enabled && w.t.Error == ""
}

// correcting reports whether w's drift is to be corrected by this
// monitor: not while it lingers unused.
func (m *Monitor) correcting(w *watched) bool { return w.correcting() && !m.passive.Load() }

// load reads the release's deployed revision and watches its objects'
// kinds. It reports false, and the release is not diffed, when the
// release runs another deployment ID (a deploy changed it; the watch set
// follows) or cannot be read (reported).
func (m *Monitor) load(ctx context.Context, w *watched) bool {
	w.rev = nil
	getter, err := m.cfg.Getter(w.t.Namespace)
	if err == nil {
		var rev deployer.Revision
		rev, err = m.cfg.Deployer.Deployed(getter, w.t.Namespace, w.t.Release)
		if err == nil {
			if rev.DeploymentID != w.t.DeploymentID {
				return false
			}
			w.rev = &rev
		}
	}
	if err != nil {
		rep := w.report()
		rep.Error = fmt.Sprintf("cannot read release %s: %v", w.t.Key(), err)
		m.sender.put(w.t.GitRepo, rep)
		if !errors.Is(err, deployer.ErrNotFound) {
			m.later(w.t.Key(), 10*time.Second)
		}
		return false
	}
	for _, info := range w.rev.Objects {
		k := objectsKey(info.Mapping.Resource, "")
		if deployer.Namespaced(info) {
			k.namespace = info.Namespace
		}
		if err := m.watchObjects(k.gvr, k.namespace); err != nil {
			w.watchErr = err.Error()
			continue
		}
		w.kinds[k] = true
	}
	m.watchValuesFrom(w)
	_ = ctx
	return true
}

// report is an empty report of the release.
func (w *watched) report() status.LiveReport {
	return status.LiveReport{Bundle: w.t.Bundle, Release: w.t.Release, Namespace: w.t.Namespace,
		DeploymentID: w.t.DeploymentID, Corrections: w.corrections}
}

// diff compares every desired object with the cluster and lists orphans.
func (m *Monitor) diff(ctx context.Context, w *watched) (status.LiveReport, []drifted) {
	rep := w.report()
	rep.Resources = len(w.rev.Objects)
	var notReady []string
	var drift []drifted
	desired := map[objectKey]bool{}
	for _, info := range w.rev.Objects {
		d, nr := m.diffObject(ctx, w, info, &rep)
		desired[d.key] = true
		if nr != "" {
			notReady = append(notReady, nr)
		}
		if d.entry.Kind != "" {
			drift = append(drift, d)
		}
	}
	orphans := m.orphans(w, desired)
	rep.Orphaned = len(orphans)
	sources := m.valuesFromDrift(w)
	rep.Modified += len(sources)
	entries := make([]status.ModifiedStatus, 0, len(drift)+len(orphans)+len(sources))
	for _, d := range drift {
		entries = append(entries, d.entry)
	}
	entries = append(entries, orphans...)
	entries = append(entries, sources...)
	slices.SortFunc(entries, func(a, b status.ModifiedStatus) int { return strings.Compare(a.Object(), b.Object()) })
	slices.Sort(notReady)
	if len(entries) > status.MaxListed || len(notReady) > status.MaxListed {
		rep.Incomplete = true
	}
	rep.ModifiedStatus = entries[:min(len(entries), status.MaxListed)]
	rep.NotReadyStatus = notReady[:min(len(notReady), status.MaxListed)]
	rep.Error = strings.Join(nonEmpty(w.t.Error, w.watchErr, w.windowErr, w.failure), "; ")
	for k := range w.conflicts {
		if !slices.ContainsFunc(drift, func(d drifted) bool { return d.key == k }) {
			delete(w.conflicts, k) // it matches Git again
			delete(w.corrected, k)
		}
	}
	return rep, drift
}

// diffObject judges one desired object: counted in rep, with a drift
// entry when it differs and the reason when it is not ready.
func (m *Monitor) diffObject(ctx context.Context, w *watched, info *resource.Info, rep *status.LiveReport) (drifted, string) {
	want, err := toUnstructured(info.Object)
	namespaced := deployer.Namespaced(info)
	key := objectKey{gvr: info.Mapping.Resource, name: info.Name}
	if namespaced {
		key.namespace = info.Namespace
	}
	d := drifted{key: key}
	id := status.ModifiedStatus{APIVersion: info.Mapping.GroupVersionKind.GroupVersion().String(),
		Kind: info.Mapping.GroupVersionKind.Kind, Namespace: key.namespace, Name: key.name}
	if err != nil {
		rep.Unknown++
		return d, id.Object() + ": " + err.Error()
	}
	if w.t.Rules.Ignored(id.APIVersion, id.Kind, id.Namespace, id.Name) {
		rep.Ready++
		return d, ""
	}
	live := m.live(ctx, key, namespaced)
	if live == nil {
		rep.Missing++
		id.Missing = true
		d.entry = id
		return d, ""
	}
	patch, err := m.compare(ctx, w, key, namespaced, want, live)
	if err != nil {
		rep.Unknown++
		return d, id.Object() + ": cannot compare with Git: " + err.Error()
	}
	if patch != nil {
		rep.Modified++
		id.Patch, id.Conflict = ShownPatch(Redact(id.APIVersion, id.Kind, patch)), w.conflicts[key]
		d.entry = id
		return d, ""
	}
	ready, unknown, reason := deployer.Readiness(live, w.t.Ready)
	switch {
	case ready:
		rep.Ready++
		return d, ""
	case unknown:
		rep.Unknown++
	default:
		rep.NotReady++
	}
	return d, id.Object() + ": " + reason
}

// live returns the object from the watch, or read directly when the watch
// does not have it (its bundle label was removed, say); nil when it does
// not exist.
func (m *Monitor) live(ctx context.Context, key objectKey, namespaced bool) *unstructured.Unstructured {
	if u := m.cached(key.gvr, namespaced, key.namespace, key.name); u != nil {
		return u
	}
	u, err := m.dyn.Resource(key.gvr).Namespace(key.namespace).Get(ctx, key.name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	u.SetManagedFields(nil)
	return u
}

// compare diffs live against a dry run of want, reusing the last result
// while nothing it depends on changed.
func (m *Monitor) compare(ctx context.Context, w *watched, key objectKey, namespaced bool, want, live *unstructured.Unstructured) ([]byte, error) {
	gen, scalers := m.scalers.get(key.namespace)
	c, ok := w.cache[key]
	if ok && c.rv == live.GetResourceVersion() && c.version == w.rev.Version && c.scalers == gen {
		return c.patch, nil
	}
	applied, err := DryRun(ctx, m.dyn, key.gvr, namespaced, want)
	if err != nil {
		return nil, err
	}
	patch, err := Compare(live, applied, w.t.Rules, scalers)
	if err != nil {
		return nil, err
	}
	w.cache[key] = compared{rv: live.GetResourceVersion(), version: w.rev.Version, scalers: gen, patch: patch}
	return patch, nil
}

// orphans lists the objects in the release's watches that carry its
// bundle label (and, when they have Helm's, its release annotations) but
// are not in the release.
func (m *Monitor) orphans(w *watched, desired map[objectKey]bool) []status.ModifiedStatus {
	var out []status.ModifiedStatus
	for k := range w.kinds {
		inf := m.informers[k]
		for _, obj := range inf.GetStore().List() {
			u, ok := obj.(*unstructured.Unstructured)
			if !ok || u.GetLabels()[BundleLabel] != w.t.Bundle || !ownedBy(u, w.t) {
				continue
			}
			key := objectKey{gvr: k.gvr, namespace: u.GetNamespace(), name: u.GetName()}
			if desired[key] || w.t.Rules.Ignored(u.GetAPIVersion(), u.GetKind(), u.GetNamespace(), u.GetName()) {
				continue
			}
			out = append(out, status.ModifiedStatus{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(),
				Namespace: u.GetNamespace(), Name: u.GetName(), Delete: true})
		}
	}
	return out
}

// ownedBy reports whether u's Helm annotations, if any, name t's release.
func ownedBy(u *unstructured.Unstructured, t Target) bool {
	a := u.GetAnnotations()
	name, ok := a[helmReleaseName]
	if !ok {
		return true
	}
	return name == t.Release && a[helmReleaseNamespace] == t.Namespace
}

// toUnstructured returns obj as an unstructured object.
func toUnstructured(obj runtime.Object) (*unstructured.Unstructured, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u, nil
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: m}, nil
}

// MaxPatch bounds a patch as reports carry it: reports travel in signals
// and live in workflow state, where one edited large object must not
// weigh megabytes.
const MaxPatch = 2048

// ShownPatch is patch as a report carries it: a JSON string saying its
// size when it is longer than MaxPatch.
func ShownPatch(patch []byte) string {
	if len(patch) <= MaxPatch {
		return string(patch)
	}
	return fmt.Sprintf(`"(a patch of %d bytes, longer than %d: compare the object with Git's)"`, len(patch), MaxPatch)
}

func nonEmpty(s ...string) []string {
	return slices.DeleteFunc(s, func(v string) bool { return v == "" })
}
