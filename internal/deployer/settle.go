package deployer

import (
	"context"
	"errors"
	"fmt"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/release"
	"k8s.io/cli-runtime/pkg/genericclioptions"
)

// settleAction is what Correct and Rollback do about a release before
// their Helm rollback, by its state (settleStep).
type settleAction string

const (
	// settleReady: the release has a deployed revision to roll back from
	// or to, and no pending record.
	settleReady settleAction = "ready"
	// settleRefuse: another owner's release is not touched.
	settleRefuse settleAction = "refuse"
	// settleWait: another process is writing the release (ErrReleaseBusy).
	settleWait settleAction = "wait"
	// settleMissing: the release does not exist (ErrNotFound).
	settleMissing settleAction = "missing"
	// settleLeave: a correction does not run over an install or upgrade,
	// live or interrupted: the deploy, or its retry, settles the release
	// (ErrNotCurrent).
	settleLeave settleAction = "leave"
	// settleRecover and settleRepair: as actRecover and actRepair.
	settleRecover settleAction = "recover"
	settleRepair  settleAction = "repair"
)

// settleStep picks what a correction (correction set) or a rollback does
// about a release in state s whose newest record is last.
func settleStep(s releaseState, last *release.Release, correction bool) settleAction {
	switch s {
	case stateAbsent:
		return settleMissing
	case stateOwnedByAnother:
		return settleRefuse
	case statePendingLive, statePendingAbandoned:
		if correction && last.Info.Status != release.StatusPendingRollback {
			return settleLeave
		}
		if s == statePendingLive {
			return settleWait
		}
		return settleRecover
	case stateNoDeployed:
		return settleRepair
	case stateInSync, stateUnowned, stateOutOfSync, stateFailed:
		return settleReady
	}
	panic(fmt.Sprintf("deployer: no settle step for release state %q", s))
}

// settle prepares release namespace/name, whose Helm configuration is
// cfg, for a Helm rollback by owner: it takes the release's lease (with
// the credentials of lg, those Helm acts with) and recovers or repairs
// the release until it is ready (settleStep). It returns the release as
// observed then and the lease, which the caller releases.
func (d *Deployer) settle(ctx context.Context, cfg *action.Configuration, lg genericclioptions.RESTClientGetter, namespace, name string,
	owner Owner, correction bool) (observation, *hold, error) {
	l, err := d.newLeases(lg, namespace, name)
	if err != nil {
		return observation{}, nil, err
	}
	var h *hold
	fail := func(err error) (observation, *hold, error) {
		if h != nil {
			h.release(ctx)
		}
		return observation{}, nil, err
	}
	o, err := d.observeRelease(ctx, cfg, l, nil, namespace, name)
	for range maxSteps {
		if err != nil {
			return fail(err)
		}
		step := settleStep(determineReleaseState(o, desired{owner: owner}), o.last, correction)
		switch {
		case step == settleRefuse:
			return fail(checkOwner(o.last, namespace, name, owner))
		case step == settleWait:
			return fail(pendingBusy(o))
		case step == settleMissing:
			return fail(fmt.Errorf("release %s/%s: %w", namespace, name, ErrNotFound))
		case step == settleLeave:
			return fail(fmt.Errorf("release %s/%s: %w: a %s is pending", namespace, name, ErrNotCurrent, o.last.Info.Status))
		case h == nil:
			// What was observed may change until the lease is held.
			if h, err = l.acquire(ctx); err != nil {
				return fail(err)
			}
		case step == settleReady:
			return o, h, nil
		case step == settleRecover:
			err = d.recoverPending(cfg, o.last)
		case step == settleRepair:
			err = d.repair(cfg, o.superseded)
		}
		if err == nil {
			o, err = d.observeRelease(ctx, cfg, l, h, namespace, name)
		}
	}
	return fail(fmt.Errorf("release %s/%s: %w", namespace, name, errUnsettled))
}

// claim takes the lease of release namespace/name for its removal by
// owner (Uninstall, Forget) and returns it, or nil when the release has
// no record at all. It fails with an *OwnedError for another owner's
// release and with ErrReleaseBusy while another process writes it.
func (d *Deployer) claim(ctx context.Context, cfg *action.Configuration, lg genericclioptions.RESTClientGetter, namespace, name string,
	owner Owner) (*hold, error) {
	o, err := d.observeRelease(ctx, cfg, nil, nil, namespace, name)
	if err != nil || o.last == nil {
		return nil, err
	}
	if err := checkOwner(o.last, namespace, name, owner); err != nil {
		return nil, err
	}
	l, err := d.newLeases(lg, namespace, name)
	if err != nil {
		return nil, err
	}
	h, err := l.acquire(ctx)
	if errors.Is(err, errNoNamespace) {
		return nil, nil // the records went with their namespace meanwhile
	}
	if err != nil {
		return nil, err
	}
	if o, err = d.observeRelease(ctx, cfg, l, h, namespace, name); err != nil {
		h.release(ctx)
		return nil, err
	}
	switch determineReleaseState(o, desired{owner: owner}) {
	case stateOwnedByAnother:
		err = checkOwner(o.last, namespace, name, owner)
	case statePendingLive:
		err = pendingBusy(o)
	}
	if err != nil {
		h.release(ctx)
		return nil, err
	}
	return h, nil
}

// helmGetterOf returns the getter Helm acts with on a release deployed as
// ServiceAccount sa of namespace ("" for none).
func helmGetterOf(getter genericclioptions.RESTClientGetter, namespace, sa string) genericclioptions.RESTClientGetter {
	if sa == "" {
		return getter
	}
	return Impersonating(getter, ServiceAccountUser(namespace, sa))
}
