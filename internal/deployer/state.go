package deployer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
)

// releaseState is what a release is, compared with what a Deploy wants,
// as fluxcd/helm-controller's DetermineReleaseState tells it: the one
// place that reads a release's records and lease to decide, so that
// actionForState (Deploy) and settleStep (Correct, Rollback) only map a
// state to an action.
type releaseState string

const (
	// stateAbsent: the release has no record (or only records of an
	// uninstall that kept its history).
	stateAbsent releaseState = "Absent"
	// stateOwnedByAnother: the newest record names another Owner.
	stateOwnedByAnother releaseState = "OwnedByAnother"
	// statePendingLive: the newest record is pending (or uninstalling),
	// and its writer may still be at work: another process holds the
	// release's lease, or the record is too recent to be known abandoned
	// (see lease.go).
	statePendingLive releaseState = "PendingLive"
	// statePendingAbandoned: the newest record is pending (or
	// uninstalling) and its writer is known gone: an interrupted Helm
	// operation.
	statePendingAbandoned releaseState = "PendingAbandoned"
	// stateNoDeployed: no record is deployed, though one was (the newest
	// record is superseded): Helm's rollback marks the deployed revision
	// superseded before it records the new one, and a kill in between
	// leaves none.
	stateNoDeployed releaseState = "NoDeployedRevision"
	// stateInSync: the release runs the wanted deployment ID and
	// ValuesFrom data.
	stateInSync releaseState = "InSync"
	// stateUnowned: the release runs the wanted deployment ID and
	// ValuesFrom data, but its revision names no owner (a Flotilla that
	// did not record owners deployed it) while the caller names one.
	stateUnowned releaseState = "Unowned"
	// stateOutOfSync: the release runs another deployment ID, or the same
	// with other ValuesFrom data.
	stateOutOfSync releaseState = "OutOfSync"
	// stateFailed: the newest record is failed (a failed install, upgrade
	// or recovered operation), and no deployed revision is in sync.
	stateFailed releaseState = "Failed"
)

// observation is what a release's records and lease say, read at one
// moment (see observe).
type observation struct {
	// last is the newest record, nil when there is none.
	last *release.Release
	// deployed is the newest deployed record, nil when there is none.
	deployed *release.Release
	// superseded is the newest superseded record, nil when there is none.
	superseded *release.Release
	// writer is what the release's lease says about whoever writes it.
	writer writer
	// now is when the lease was judged; leaseDuration the Deployer's.
	now           time.Time
	leaseDuration time.Duration
}

// desired is what the caller wants of the release.
type desired struct {
	owner        Owner
	deploymentID string
	// valuesFrom is the digest of Release.ValuesFrom's data.
	valuesFrom string
}

// determineReleaseState tells the state of the release o observed
// against want. It reads nothing but its arguments.
func determineReleaseState(o observation, want desired) releaseState {
	last := o.last
	switch {
	case last == nil || last.Info == nil || last.Info.Status == release.StatusUninstalled:
		return stateAbsent
	case ownedByAnother(last, want.owner):
		return stateOwnedByAnother
	case unsettled(last):
		if o.writerLive() {
			return statePendingLive
		}
		return statePendingAbandoned
	case o.deployed == nil && last.Info.Status == release.StatusSuperseded && o.superseded != nil:
		return stateNoDeployed
	}
	if cur := o.running(); cur != nil && DeploymentIDOf(cur) == want.deploymentID && valuesFromOf(cur) == want.valuesFrom {
		if want.owner != "" && OwnerOf(cur) == "" {
			return stateUnowned
		}
		return stateInSync
	}
	if last.Info.Status == release.StatusFailed {
		return stateFailed
	}
	return stateOutOfSync
}

// writerLive reports whether the writer of o.last, a pending record, may
// still be at work. Without a lease, a record that says it was written
// under one (LeaseAnnotation) was written by a process that has released
// its lease, or lost it: it is done, or gone. Any other record is known
// abandoned only once it is older than a lease duration: Flotillas
// without leases, and the helm CLI, take none.
func (o observation) writerLive() bool {
	switch o.writer {
	case writerLive:
		return true
	case writerUnknown:
		return !underLease(o.last) && o.last.Info.LastDeployed.Time.Add(o.leaseDuration).After(o.now)
	}
	return false
}

// running returns the revision the release runs: the newest record when
// deployed, the deployed revision before it when the newest is a failed
// drift correction (kept by keepFailHistory), nil otherwise.
func (o observation) running() *release.Release {
	switch {
	case o.last == nil:
		return nil
	case o.last.Info.Status == release.StatusDeployed:
		return o.last
	case o.last.Info.Status == release.StatusFailed && strings.HasPrefix(o.last.Info.Description, correctionFailed):
		return o.deployed
	}
	return nil
}

// observeRelease reads the release's records and, when the newest is
// pending (the only state the writer decides), what its lease says about
// their writer: h's prior judgement when this process holds it, otherwise
// the lease l reads (unless l is nil). A settled release costs no lease
// read: a no-op deploy or a correction check reads Helm's records only.
func (d *Deployer) observeRelease(ctx context.Context, cfg *action.Configuration, l *leases, h *hold, namespace, name string) (observation, error) {
	o, err := records(cfg, namespace, name)
	o.now, o.leaseDuration = time.Now(), d.leaseDuration
	switch {
	case err != nil || o.last == nil || !unsettled(o.last):
		return o, err
	case h != nil:
		o.writer = h.prior
		return o, nil
	case l == nil:
		return o, nil
	}
	lease, err := l.read(ctx)
	if err != nil {
		return o, err
	}
	o.writer = lease.judge(o.now, l.self)
	return o, nil
}

// records reads the release's records: its newest, deployed and
// superseded ones.
func records(cfg *action.Configuration, namespace, name string) (observation, error) {
	var o observation
	history, err := cfg.Releases.History(name)
	if err != nil && !errors.Is(err, driver.ErrReleaseNotFound) {
		return o, fmt.Errorf("read release %s/%s: %w", namespace, name, err)
	}
	for _, r := range history {
		if r.Info == nil {
			continue
		}
		if o.last == nil || r.Version > o.last.Version {
			o.last = r
		}
		switch r.Info.Status {
		case release.StatusDeployed:
			o.deployed = newer(o.deployed, r)
		case release.StatusSuperseded:
			o.superseded = newer(o.superseded, r)
		}
	}
	return o, nil
}

// newer returns the newer of two records; a may be nil.
func newer(a, b *release.Release) *release.Release {
	if a == nil || b.Version > a.Version {
		return b
	}
	return a
}

// unsettled reports whether rec, a release's newest record, is left by an
// operation that has not finished (pending, or uninstalling): whether its
// writer is alive decides what to do with it.
func unsettled(rec *release.Release) bool {
	return rec.Info != nil && (rec.Info.Status.IsPending() || rec.Info.Status == release.StatusUninstalling)
}
