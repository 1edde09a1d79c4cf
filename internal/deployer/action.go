package deployer

import (
	"context"
	"errors"
	"fmt"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	"k8s.io/cli-runtime/pkg/genericclioptions"
)

// deployAction is what Deploy does about a release in one state; each
// has its own file (action_*.go).
type deployAction string

const (
	// actNone: the release runs what is wanted (stateInSync).
	actNone deployAction = "none"
	// actRefuse: another owner's release is not touched.
	actRefuse deployAction = "refuse"
	// actWait: another process is writing the release; the caller
	// retries (ErrReleaseBusy).
	actWait deployAction = "wait"
	// actInstall: a first install (action_install.go).
	actInstall deployAction = "install"
	// actUpgrade: an upgrade, of a deployed or a failed release
	// (action_upgrade.go).
	actUpgrade deployAction = "upgrade"
	// actRecover: settle an abandoned pending record (action_recover.go).
	actRecover deployAction = "recover"
	// actRepair: mark the last deployed revision deployed again
	// (action_repair.go).
	actRepair deployAction = "repair"
	// actAdopt: record the owner on the running revision
	// (action_adopt.go).
	actAdopt deployAction = "adopt"
)

// actionForState picks what Deploy does about a release in state s.
func actionForState(s releaseState) deployAction {
	switch s {
	case stateAbsent:
		return actInstall
	case stateOwnedByAnother:
		return actRefuse
	case statePendingLive:
		return actWait
	case statePendingAbandoned:
		return actRecover
	case stateNoDeployed:
		return actRepair
	case stateInSync:
		return actNone
	case stateUnowned:
		return actAdopt
	case stateOutOfSync, stateFailed:
		return actUpgrade
	}
	panic(fmt.Sprintf("deployer: no action for release state %q", s))
}

// writes reports whether a writes records or objects, and so needs the
// release's lease and the checks that precede any change.
func (a deployAction) writes() bool {
	switch a {
	case actInstall, actUpgrade, actRecover, actRepair, actAdopt:
		return true
	}
	return false
}

// maxSteps bounds the actions of one Deploy: a recovery, a repair and the
// upgrade after them, plus taking the lease.
const maxSteps = 6

// errUnsettled marks a Deploy whose release kept changing under it.
var errUnsettled = errors.New("release did not settle")

// deployRun is one Deploy of one release: what its actions share.
type deployRun struct {
	d    *Deployer
	cfg  *action.Configuration
	rel  Release
	want desired
	// chrt is rel.Chart stamped with what the revision records.
	chrt *chart.Chart
	pr   *postRenderer
	// helmGetter is the getter Helm acts with.
	helmGetter genericclioptions.RESTClientGetter
	leases     *leases
	// hold is the release's lease once taken.
	hold *hold
	// began is set once the checks that precede any change passed.
	began bool
}

// run decides and acts until the release runs rel or an action failed:
// each step observes the release, determines its state and takes the one
// action for it. prev is the deployment ID the release ran before.
func (r *deployRun) run(ctx context.Context) (Result, error) {
	o, err := r.observe(ctx)
	if err != nil {
		return Result{}, err
	}
	prev := DeploymentIDOf(o.deployed)
	for range maxSteps {
		act := actionForState(determineReleaseState(o, r.want))
		if act.writes() && !r.began {
			// What was observed may change until the lease is held.
			if err := r.begin(ctx); err != nil {
				return Result{}, err
			}
		} else {
			res, done, err := r.do(ctx, act, o)
			if err != nil || done {
				res.Previous = prev
				return res, err
			}
		}
		if o, err = r.observe(ctx); err != nil {
			return Result{}, err
		}
	}
	return Result{}, fmt.Errorf("deploy release %s/%s: %w", r.rel.Namespace, r.rel.Name, errUnsettled)
}

// do takes action act on the release observed as o. done is set when
// Deploy is over.
func (r *deployRun) do(ctx context.Context, act deployAction, o observation) (Result, bool, error) {
	var out *release.Release
	var err error
	switch act {
	case actNone:
		cur := o.running()
		return Result{Revision: cur.Version, Description: cur.Info.Description}, true, nil
	case actRefuse:
		return Result{}, true, checkOwner(o.last, r.rel.Namespace, r.rel.Name, r.rel.Owner)
	case actWait:
		return Result{}, true, pendingBusy(o)
	case actRecover:
		return Result{}, false, r.d.recoverPending(r.cfg, o.last)
	case actRepair:
		return Result{}, false, r.d.repair(r.cfg, o.superseded)
	case actAdopt:
		return Result{}, false, r.d.adopt(r.cfg, o.running(), r.rel.Owner)
	case actInstall:
		out, err = r.install(ctx, o)
	case actUpgrade:
		out, err = r.upgrade(ctx)
	}
	if err != nil {
		return Result{}, true, err
	}
	return Result{Revision: out.Version, Changed: true, Description: out.Info.Description}, true, nil
}

// pendingBusy is the error for a pending record whose writer may be at
// work.
func pendingBusy(o observation) error {
	return fmt.Errorf("release %s/%s: %w: its revision %d is %s", o.last.Namespace, o.last.Name, ErrReleaseBusy,
		o.last.Version, o.last.Info.Status)
}

// observe reads the release's records and lease.
func (r *deployRun) observe(ctx context.Context) (observation, error) {
	return r.d.observeRelease(ctx, r.cfg, r.leases, r.hold, r.rel.Namespace, r.rel.Name)
}

// begin runs the checks that precede any change and takes the release's
// lease. Rendering, post-rendering and checking happen before Helm
// applies anything, except for the chart's crds/, which Helm installs
// first: those are checked here, before a release is recovered or
// created. A namespace that does not exist yet holds no record: its
// first install takes the lease once the post-renderer created it.
func (r *deployRun) begin(ctx context.Context) error {
	r.began = true
	if err := r.pr.checkCRDFiles(r.rel.Chart); err != nil {
		return fmt.Errorf("check CRDs of release %s/%s: %w", r.rel.Namespace, r.rel.Name, err)
	}
	h, err := r.leases.acquire(ctx)
	switch {
	case errors.Is(err, errNoNamespace):
		r.pr.lease = func() error { return r.takeLease(ctx) }
		return nil
	case err != nil:
		return err
	}
	r.hold = h
	return nil
}

// takeLease takes the release's lease unless held; the post-renderer
// calls it once it created the namespace.
func (r *deployRun) takeLease(ctx context.Context) error {
	if r.hold != nil {
		return nil
	}
	h, err := r.leases.acquire(ctx)
	if err != nil {
		return err
	}
	r.hold = h
	return nil
}

// close releases the lease, if held.
func (r *deployRun) close(ctx context.Context) {
	if r.hold != nil {
		r.hold.release(ctx)
	}
}
