package deployer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/release"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/resource"
)

// ErrNotCurrent marks a correction of a release whose deployed revision no
// longer carries the deployment ID the caller watched: a deploy changed it.
var ErrNotCurrent = errors.New("release does not run the deployment ID")

// correctionFailed starts the description of a failed correction's
// record, so Deploy knows the revision before it is still what runs.
const correctionFailed = "Flotilla drift correction failed: "

// Revision is a release's deployed revision: its deployment ID and the
// objects its manifest applies (hooks excluded), as Helm builds them, with
// their REST mappings and namespaces resolved.
type Revision struct {
	DeploymentID string
	Version      int
	// MaxHistory is not known from the release; see CorrectOptions.
	Objects []*resource.Info
	// Pending is set when a newer record of the release is pending: an
	// install, upgrade or rollback runs, or was interrupted.
	// PendingRollback says that record is a rollback's (a correction's).
	Pending, PendingRollback bool
	// ValuesFrom are the digests of the Release.ValuesFrom data the
	// revision was deployed with, in order.
	ValuesFrom []ValuesDigest
}

// Deployed returns the release's deployed revision and its objects. It
// returns an error wrapping ErrNotFound when none is deployed and none
// was. A release left without a deployed revision by a rollback that died
// between its two writes (stateNoDeployed, see repair) reports the
// revision that rollback superseded, with Pending and PendingRollback set,
// as if the rollback were still pending: Correct repairs it.
func (d *Deployer) Deployed(getter genericclioptions.RESTClientGetter, namespace, name string) (Revision, error) {
	cfg, err := d.configuration(getter, namespace)
	if err != nil {
		return Revision{}, err
	}
	o, err := records(cfg, namespace, name)
	if err != nil {
		return Revision{}, err
	}
	rel := o.deployed
	var out Revision
	switch {
	case rel != nil:
		if o.last.Version > rel.Version && o.last.Info.Status.IsPending() {
			out.Pending = true
			out.PendingRollback = o.last.Info.Status == release.StatusPendingRollback
		}
	case o.superseded != nil && (o.last.Info.Status == release.StatusSuperseded || o.last.Info.Status == release.StatusPendingRollback):
		rel = o.superseded
		out.Pending, out.PendingRollback = true, true
	default:
		return Revision{}, fmt.Errorf("read release %s/%s: %w", namespace, name, ErrNotFound)
	}
	out.DeploymentID, out.Version, out.ValuesFrom = DeploymentIDOf(rel), rel.Version, ValuesFromDigests(rel)
	out.Objects, err = cfg.KubeClient.Build(bytes.NewBufferString(rel.Manifest), false)
	if err != nil {
		return Revision{}, fmt.Errorf("build objects of release %s/%s: %w", namespace, name, err)
	}
	return out, nil
}

// Namespaced reports whether info's kind is namespaced.
func Namespaced(info *resource.Info) bool {
	return info.Mapping != nil && info.Mapping.Scope.Name() == meta.RESTScopeNameNamespace
}

// CorrectOptions are a bundle's correctDrift settings and Helm history.
type CorrectOptions struct {
	// Force replaces objects that cannot be patched in place (a Service
	// whose port was changed by hand, an immutable field).
	Force bool
	// KeepFailHistory keeps the Helm record of a failed correction;
	// otherwise it is dropped.
	KeepFailHistory bool
	// MaxHistory bounds the release's records; DefaultMaxHistory when 0.
	MaxHistory int
	// Owner is who corrects: a release whose newest record names another
	// owner is not touched (an *OwnedError). Optional: default none,
	// nothing checked.
	Owner Owner
}

// Correct undoes changes made on the cluster to the release's objects: a
// Helm rollback to the deployed revision itself (Fleet's correctDrift),
// which patches every object back to the revision's manifest and
// recreates missing ones. It adds one record, keeps at most
// opts.MaxHistory and returns the new revision; the deployment ID stays.
// It returns an error wrapping ErrNotCurrent, and changes nothing, when
// the deployed revision does not carry deploymentID. A correction an
// earlier process left pending is dropped first, once its writer is known
// gone, and a release left without a deployed revision by a correction
// killed mid-way is repaired (see recoverPending and repair); another
// process's correction in progress fails it with ErrReleaseBusy, another
// owner's release with an *OwnedError. A failed correction
// leaves the revision before it deployed (so the release still runs
// deploymentID), and its record only with opts.KeepFailHistory. It acts as
// the ServiceAccount the release's newest record names, if any.
func (d *Deployer) Correct(ctx context.Context, getter genericclioptions.RESTClientGetter, namespace, name, deploymentID string,
	opts CorrectOptions) (int, error) {
	unlock, err := d.lock(ctx, getter, namespace, name)
	if err != nil {
		return 0, err
	}
	defer unlock()
	cfg, sa, err := d.releaseConfiguration(getter, namespace, name)
	if err != nil {
		return 0, err
	}
	o, h, err := d.settle(ctx, cfg, helmGetterOf(getter, namespace, sa), namespace, name, opts.Owner, true)
	if err != nil {
		return 0, fmt.Errorf("correct release %s/%s: %w", namespace, name, err)
	}
	defer h.release(ctx)
	deployed := o.deployed
	if deployed == nil {
		// A failed install: nothing was ever deployed.
		return 0, fmt.Errorf("correct release %s/%s: %w %s (none is deployed)", namespace, name, ErrNotCurrent, deploymentID)
	}
	if id := DeploymentIDOf(deployed); id != deploymentID {
		return 0, fmt.Errorf("correct release %s/%s: %w %s (it runs %s)", namespace, name, ErrNotCurrent, deploymentID, id)
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("correct release %s/%s: %w", namespace, name, err)
	}
	rb := action.NewRollback(cfg)
	rb.Version = deployed.Version
	rb.Force = opts.Force
	rb.Timeout = d.timeout
	rb.MaxHistory = opts.MaxHistory
	if rb.MaxHistory <= 0 {
		rb.MaxHistory = DefaultMaxHistory
	}
	if err := rb.Run(name); err != nil {
		err = asServiceAccount(fmt.Errorf("correct release %s/%s: %w", namespace, name, err), namespace, sa)
		if rerr := d.restore(cfg, deployed, opts.KeepFailHistory); rerr != nil {
			return 0, errors.Join(err, rerr)
		}
		return 0, err
	}
	rel, err := cfg.Releases.Deployed(name)
	if err != nil {
		return 0, fmt.Errorf("read release %s/%s after correction: %w", namespace, name, err)
	}
	return rel.Version, nil
}

// restore undoes the records of a failed rollback of deployed to itself:
// Helm marked deployed superseded and recorded the attempt failed. deployed
// is marked deployed again; the failed record is dropped, or kept (renamed
// so Deploy recognises it) with keep.
func (d *Deployer) restore(cfg *action.Configuration, deployed *release.Release, keep bool) error {
	history, err := cfg.Releases.History(deployed.Name)
	if err != nil {
		return fmt.Errorf("read history of %s/%s: %w", deployed.Namespace, deployed.Name, err)
	}
	for _, r := range history {
		if r.Version <= deployed.Version || r.Info.Status != release.StatusFailed {
			continue
		}
		if !keep {
			if _, err := cfg.Releases.Delete(r.Name, r.Version); err != nil {
				return fmt.Errorf("drop failed correction %d of %s/%s: %w", r.Version, r.Namespace, r.Name, err)
			}
			continue
		}
		if !strings.HasPrefix(r.Info.Description, correctionFailed) {
			r.Info.Description = correctionFailed + r.Info.Description
			if err := cfg.Releases.Update(r); err != nil {
				return fmt.Errorf("record failed correction %d of %s/%s: %w", r.Version, r.Namespace, r.Name, err)
			}
		}
	}
	cur, err := cfg.Releases.Get(deployed.Name, deployed.Version)
	if err != nil {
		return fmt.Errorf("read revision %d of %s/%s: %w", deployed.Version, deployed.Namespace, deployed.Name, err)
	}
	if cur.Info.Status != release.StatusDeployed {
		cur.Info.Status = release.StatusDeployed
		if err := cfg.Releases.Update(cur); err != nil {
			return fmt.Errorf("restore revision %d of %s/%s: %w", cur.Version, cur.Namespace, cur.Name, err)
		}
	}
	return nil
}
