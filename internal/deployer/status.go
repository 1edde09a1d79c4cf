package deployer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"helm.sh/helm/v3/pkg/storage/driver"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/client-go/dynamic"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

// DefaultPollInterval is WaitReady's interval when none is given.
const DefaultPollInterval = 2 * time.Second

// maxListed bounds Status.NotReady and Status.Missing, as Fleet bounds its
// non-ready resource lists.
const maxListed = 10

// ErrNotFound marks a release that does not exist or has no deployed
// revision.
var ErrNotFound = errors.New("release not found")

// ReadyOptions tune how Status decides that an object is ready.
type ReadyOptions struct {
	// WaitForJobs makes a Job ready only once it has completed (its
	// Complete condition is True). Without it a Job is ready as soon as it
	// exists and has not failed.
	WaitForJobs bool
	// IgnoreConditions is Fleet's fleet.yaml ignore.conditions. Each entry
	// maps condition fields to values, such as
	// {"type": "Progressing", "status": "False"}; every status.conditions[]
	// entry of an object whose fields equal all the key/values of one entry
	// is disregarded when judging that object. An empty entry matches
	// nothing.
	IgnoreConditions []map[string]string
}

// Status is the readiness of a release's deployed revision.
type Status struct {
	// DeploymentID is the deployment ID the deployed revision carries.
	DeploymentID string
	// Revision is the deployed revision.
	Revision int
	// Resources is the number of objects in the revision's manifest
	// (hooks excluded): Fleet's desiredReady. It equals Ready +
	// NotReadyCount + MissingCount + UnknownCount.
	Resources int
	// Ready is the number of those objects that exist and are ready: kstatus
	// reports them Current (see ReadyOptions for Jobs).
	Ready int
	// NotReady describes existing objects that are not ready, with kstatus's
	// message, such as "Deployment ns/web: Available: 0/1", and those whose
	// status cannot be computed: sorted, at most 10.
	NotReady []string
	// Missing names objects that do not exist, such as "ConfigMap ns/app":
	// sorted, at most 10. They count as not ready.
	Missing []string
	// NotReadyCount is the number of existing objects that are not ready
	// (kstatus InProgress, Failed or Terminating), however many NotReady
	// lists.
	NotReadyCount int
	// MissingCount is the number of objects that do not exist, however many
	// Missing lists.
	MissingCount int
	// UnknownCount is the number of existing objects whose status cannot be
	// computed (kstatus Unknown). They count as not ready and are listed in
	// NotReady.
	UnknownCount int
}

// AllReady reports whether every object of the release is ready.
func (s Status) AllReady() bool { return s.Ready == s.Resources }

// Status reports the readiness of every object in the release's deployed
// revision, read from the cluster now (acting as the ServiceAccount the
// revision was deployed as, if any) and judged by kstatus with opts. It
// returns an error wrapping ErrNotFound when the release has no deployed
// revision. It does not wait and does not modify anything.
func (d *Deployer) Status(ctx context.Context, getter genericclioptions.RESTClientGetter, namespace, name string,
	opts ReadyOptions) (Status, error) {
	cfg, err := d.configuration(getter, namespace)
	if err != nil {
		return Status{}, err
	}
	rel, err := cfg.Releases.Deployed(name)
	if errors.Is(err, driver.ErrNoDeployedReleases) || errors.Is(err, driver.ErrReleaseNotFound) {
		return Status{}, fmt.Errorf("read release %s/%s: %w", namespace, name, ErrNotFound)
	}
	if err != nil {
		return Status{}, fmt.Errorf("read release %s/%s: %w", namespace, name, err)
	}
	resources, err := cfg.KubeClient.Build(bytes.NewBufferString(rel.Manifest), false)
	if err != nil {
		return Status{}, fmt.Errorf("build objects of release %s/%s: %w", namespace, name, err)
	}
	dyn, err := newDynamic(actingAs(getter, rel))
	if err != nil {
		return Status{}, err
	}
	st := Status{DeploymentID: DeploymentIDOf(rel), Revision: rel.Version, Resources: len(resources)}
	for _, info := range resources {
		obj, err := dyn.Resource(info.Mapping.Resource).Namespace(info.Namespace).Get(ctx, info.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			obj, err = nil, nil
		}
		if err != nil {
			return Status{}, asServiceAccount(fmt.Errorf("check readiness of release %s/%s: get %s %s: %w",
				namespace, name, info.Mapping.GroupVersionKind.Kind, infoName(info), err), namespace, ServiceAccountOf(rel))
		}
		state, reason := classify(obj, opts)
		st.add(info.Mapping.GroupVersionKind.Kind+" "+infoName(info), state, reason)
	}
	st.NotReady, st.Missing = firstSorted(st.NotReady), firstSorted(st.Missing)
	return st, nil
}

// add counts one object, named id ("Kind ns/name"), that classify found in
// state for reason. Status sorts and bounds the lists once all are added.
func (s *Status) add(id string, st state, reason string) {
	switch st {
	case stateReady:
		s.Ready++
	case stateMissing:
		s.MissingCount++
		s.Missing = append(s.Missing, id)
	case stateUnknown:
		s.UnknownCount++
		s.NotReady = append(s.NotReady, id+": "+reason)
	default:
		s.NotReadyCount++
		s.NotReady = append(s.NotReady, id+": "+reason)
	}
}

// WaitReady polls Status with opts every interval (DefaultPollInterval
// when not positive) until every object is ready, calling progress, if not
// nil, with each status. When ctx ends first it returns the last status and
// an error wrapping ctx's; any error from Status ends the wait too.
func (d *Deployer) WaitReady(ctx context.Context, getter genericclioptions.RESTClientGetter, namespace, name string,
	opts ReadyOptions, interval time.Duration, progress func(Status)) (Status, error) {
	if interval <= 0 {
		interval = DefaultPollInterval
	}
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	var last Status
	for {
		st, err := d.Status(ctx, getter, namespace, name, opts)
		if err != nil {
			if ctx.Err() != nil {
				err = ctx.Err()
			}
			return last, fmt.Errorf("wait for release %s/%s to be ready: %w", namespace, name, err)
		}
		last = st
		if progress != nil {
			progress(st)
		}
		if st.AllReady() {
			return st, nil
		}
		select {
		case <-ctx.Done():
			return last, fmt.Errorf("wait for release %s/%s to be ready: %w", namespace, name, ctx.Err())
		case <-ticker.C:
		}
	}
}

// newDynamic returns a dynamic client for the cluster behind getter.
func newDynamic(getter genericclioptions.RESTClientGetter) (dynamic.Interface, error) {
	cfg, err := getter.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("read REST config: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("create dynamic client for %s: %w", cfg.Host, err)
	}
	return dyn, nil
}

// state is what classify makes of one object.
type state int

const (
	stateReady    state = iota
	stateNotReady       // exists, kstatus InProgress, Failed or Terminating
	stateMissing        // does not exist (kstatus NotFound)
	stateUnknown        // exists, but kstatus cannot tell (Unknown)
)

// String names the state, for test failures.
func (s state) String() string {
	switch s {
	case stateReady:
		return "ready"
	case stateNotReady:
		return "not ready"
	case stateMissing:
		return "missing"
	case stateUnknown:
		return "unknown"
	}
	return fmt.Sprintf("state(%d)", int(s))
}

// jobKind is the GroupKind of Jobs, which ReadyOptions.WaitForJobs governs.
var jobKind = schema.GroupKind{Group: "batch", Kind: "Job"}

// classify judges obj, as read from the cluster (nil when it does not
// exist), with kstatus after dropping the conditions opts ignores. reason
// says why an object is not ready or unknown; it is kstatus's message. obj
// is not modified.
func classify(obj *unstructured.Unstructured, opts ReadyOptions) (state, string) {
	if obj == nil {
		return stateMissing, ""
	}
	if len(opts.IgnoreConditions) > 0 {
		obj = obj.DeepCopy()
		dropConditions(obj, opts.IgnoreConditions)
	}
	res, err := kstatus.Compute(obj)
	if err != nil {
		return stateUnknown, "status unknown: " + err.Error()
	}
	reason := res.Message
	if reason == "" {
		reason = string(res.Status)
	}
	if obj.GroupVersionKind().GroupKind() == jobKind {
		return classifyJob(obj, res.Status, reason, opts.WaitForJobs)
	}
	switch res.Status {
	case kstatus.CurrentStatus:
		return stateReady, ""
	case kstatus.NotFoundStatus:
		return stateMissing, ""
	case kstatus.InProgressStatus, kstatus.FailedStatus, kstatus.TerminatingStatus:
		return stateNotReady, reason
	}
	return stateUnknown, "status unknown: " + reason
}

// classifyJob judges a Job whose kstatus is st. kstatus reports a Job that
// has started and not failed as Current even while it runs, so waitForJobs
// also demands the Complete condition.
func classifyJob(job *unstructured.Unstructured, st kstatus.Status, reason string, waitForJobs bool) (state, string) {
	switch st {
	case kstatus.FailedStatus, kstatus.TerminatingStatus:
		return stateNotReady, reason
	case kstatus.NotFoundStatus:
		return stateMissing, ""
	case kstatus.InProgressStatus, kstatus.CurrentStatus:
		if !waitForJobs {
			return stateReady, ""
		}
		if st == kstatus.CurrentStatus && hasCondition(job, "Complete", "True") {
			return stateReady, ""
		}
		return stateNotReady, reason
	}
	return stateUnknown, "status unknown: " + reason
}

// hasCondition reports whether obj has a status condition of type typ with
// status status.
func hasCondition(obj *unstructured.Unstructured, typ, status string) bool {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if ok && m["type"] == typ && m["status"] == status {
			return true
		}
	}
	return false
}

// dropConditions removes from obj's status.conditions every condition that
// matches one of ignore. Conditions that are not a list of objects are left
// alone, for kstatus to judge.
func dropConditions(obj *unstructured.Unstructured, ignore []map[string]string) {
	conds, found, err := unstructured.NestedSlice(obj.Object, "status", "conditions")
	if !found || err != nil {
		return
	}
	kept := conds[:0]
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if ok && slices.ContainsFunc(ignore, func(want map[string]string) bool { return conditionMatches(m, want) }) {
			continue
		}
		kept = append(kept, c)
	}
	// NestedSlice returned a deep copy; a list of JSON values always sets.
	_ = unstructured.SetNestedSlice(obj.Object, kept, "status", "conditions")
}

// conditionMatches reports whether cond has, for every key of want, a string
// field of that name equal to want's value. An empty want matches nothing.
func conditionMatches(cond map[string]any, want map[string]string) bool {
	if len(want) == 0 {
		return false
	}
	for k, v := range want {
		if s, ok := cond[k].(string); !ok || s != v {
			return false
		}
	}
	return true
}

// infoName returns "ns/name" for a namespaced object, "name" otherwise.
func infoName(info *resource.Info) string {
	if info.Namespace == "" {
		return info.Name
	}
	return info.Namespace + "/" + info.Name
}

// firstSorted sorts s and keeps at most maxListed entries.
func firstSorted(s []string) []string {
	slices.Sort(s)
	if len(s) > maxListed {
		s = s[:maxListed]
	}
	return s
}

// Readiness judges one live object as Status does, with kstatus and opts:
// ready, or unknown (kstatus cannot tell), and otherwise why it is not
// ready. obj is not modified.
func Readiness(obj *unstructured.Unstructured, opts ReadyOptions) (ready, unknown bool, reason string) {
	st, reason := classify(obj, opts)
	return st == stateReady, st == stateUnknown, reason
}
