package deployer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"helm.sh/helm/v3/pkg/kube"
	"helm.sh/helm/v3/pkg/storage/driver"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/client-go/dynamic"
)

// DefaultPollInterval is WaitReady's interval when none is given.
const DefaultPollInterval = 2 * time.Second

// maxListed bounds Status.NotReady and Status.Missing, as Fleet bounds its
// non-ready resource lists.
const maxListed = 10

// ErrNotFound marks a release that does not exist or has no deployed
// revision.
var ErrNotFound = errors.New("release not found")

// Status is the readiness of a release's deployed revision.
type Status struct {
	// DeploymentID is the deployment ID the deployed revision carries.
	DeploymentID string
	// Revision is the deployed revision.
	Revision int
	// Resources is the number of objects in the revision's manifest
	// (hooks excluded).
	Resources int
	// Ready is the number of those objects that exist and are ready by
	// Helm's rules (helm upgrade --wait --wait-for-jobs).
	Ready int
	// NotReady describes existing objects that are not ready, such as
	// "Deployment ns/web: 0/1 replicas available": sorted, at most 10.
	NotReady []string
	// Missing names objects that do not exist, such as "ConfigMap ns/app":
	// sorted, at most 10. They count as not ready.
	Missing []string
}

// AllReady reports whether every object of the release is ready.
func (s Status) AllReady() bool { return s.Ready == s.Resources }

// Status reports the readiness of every object in the release's deployed
// revision, read from the cluster now. It returns an error wrapping
// ErrNotFound when the release has no deployed revision. It does not wait
// and does not modify anything.
func (d *Deployer) Status(ctx context.Context, getter genericclioptions.RESTClientGetter, namespace, name string) (Status, error) {
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
	c, err := d.newReadiness(getter)
	if err != nil {
		return Status{}, err
	}
	st := Status{DeploymentID: DeploymentIDOf(rel), Revision: rel.Version, Resources: len(resources)}
	for _, info := range resources {
		ready, missing, reason, err := c.check(ctx, info)
		if err != nil {
			return Status{}, fmt.Errorf("check readiness of release %s/%s: %w", namespace, name, err)
		}
		switch id := info.Mapping.GroupVersionKind.Kind + " " + infoName(info); {
		case missing:
			st.Missing = append(st.Missing, id)
		case !ready:
			st.NotReady = append(st.NotReady, id+": "+reason)
		default:
			st.Ready++
		}
	}
	st.NotReady, st.Missing = firstSorted(st.NotReady), firstSorted(st.Missing)
	return st, nil
}

// WaitReady polls Status every interval (DefaultPollInterval when not
// positive) until every object is ready, calling progress, if not nil,
// with each status. When ctx ends first it returns the last status and an
// error wrapping ctx's; any error from Status ends the wait too.
func (d *Deployer) WaitReady(ctx context.Context, getter genericclioptions.RESTClientGetter, namespace, name string,
	interval time.Duration, progress func(Status)) (Status, error) {
	if interval <= 0 {
		interval = DefaultPollInterval
	}
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	var last Status
	for {
		st, err := d.Status(ctx, getter, namespace, name)
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

// readiness checks objects of one cluster.
type readiness struct {
	dyn     dynamic.Interface
	checker kube.ReadyChecker
}

// newReadiness returns a readiness for the cluster behind getter.
func (d *Deployer) newReadiness(getter genericclioptions.RESTClientGetter) (*readiness, error) {
	cs, err := newClientset(getter)
	if err != nil {
		return nil, err
	}
	cfg, err := getter.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("read REST config: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("create dynamic client for %s: %w", cfg.Host, err)
	}
	// The same options as helm --wait --wait-for-jobs.
	checker := kube.NewReadyChecker(cs, d.log.Sugar().Debugf, kube.PausedAsReady(true), kube.CheckJobs(true))
	return &readiness{dyn: dyn, checker: checker}, nil
}

// check fetches info's object and reports whether it is ready, missing,
// and if neither why not.
func (r *readiness) check(ctx context.Context, info *resource.Info) (ready, missing bool, reason string, err error) {
	obj, err := r.dyn.Resource(info.Mapping.Resource).Namespace(info.Namespace).Get(ctx, info.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, true, "", nil
	}
	if err != nil {
		return false, false, "", fmt.Errorf("get %s %s: %w", info.Mapping.GroupVersionKind.Kind, infoName(info), err)
	}
	// The checker reads some kinds (CRDs) from info.Object.
	info.Object = obj
	ready, err = r.checker.IsReady(ctx, info)
	if apierrors.IsNotFound(err) {
		// Deleted since the Get above.
		return false, true, "", nil
	}
	if err != nil {
		return false, false, "", fmt.Errorf("check %s %s: %w", info.Mapping.GroupVersionKind.Kind, infoName(info), err)
	}
	if ready {
		return true, false, "", nil
	}
	return false, false, notReadyReason(obj), nil
}

// notReadyReason says briefly why obj, which Helm's checker found not
// ready, is not: replica counts for workloads, the phase for Pods and
// claims.
func notReadyReason(obj *unstructured.Unstructured) string {
	num := func(path ...string) int64 {
		v, _, _ := unstructured.NestedInt64(obj.Object, path...) // absent means 0
		return v
	}
	switch obj.GetKind() {
	case "Deployment", "StatefulSet", "ReplicaSet", "ReplicationController":
		want, found, _ := unstructured.NestedInt64(obj.Object, "spec", "replicas")
		if !found {
			want = 1 // the API default
		}
		return fmt.Sprintf("%d/%d replicas available", num("status", "availableReplicas"), want)
	case "DaemonSet":
		return fmt.Sprintf("%d/%d pods available", num("status", "numberAvailable"), num("status", "desiredNumberScheduled"))
	case "Pod", "PersistentVolumeClaim":
		phase, _, _ := unstructured.NestedString(obj.Object, "status", "phase")
		if phase == "" {
			phase = "unknown"
		}
		return "phase " + phase
	case "Job":
		return "not complete"
	case "Service":
		return "no address assigned"
	case "CustomResourceDefinition":
		return "not established"
	}
	return "not ready"
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
