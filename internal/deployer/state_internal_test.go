package deployer

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	helmtime "helm.sh/helm/v3/pkg/time"
)

// rec returns record version of release "app" in status st, carrying
// deployment ID id and owner, written at when.
func rec(version int, st release.Status, id string, owner Owner, when time.Time) *release.Release {
	md := &chart.Metadata{Name: "probe", Annotations: map[string]string{DeploymentIDAnnotation: id}}
	if owner != "" {
		md.Annotations[OwnerAnnotation] = string(owner)
	}
	return &release.Release{Name: "app", Namespace: "ns", Version: version, Chart: &chart.Chart{Metadata: md},
		Info: &release.Info{Status: st, LastDeployed: helmtime.Time{Time: when}}}
}

// TestDetermineReleaseState: every state from the records and lease that
// produce it, and the one action Deploy takes for it.
func TestDetermineReleaseState(t *testing.T) {
	now := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	old, recent := now.Add(-time.Hour), now.Add(-time.Second)
	const me, them Owner = "GitRepo ns/first, bundle b", "GitRepo ns/second, bundle b"
	want := desired{owner: me, deploymentID: "id-2"}

	tests := []struct {
		name string
		// history is the release's records; writer what its lease says.
		history []*release.Release
		writer  writer
		want    releaseState
		action  deployAction
	}{
		{name: "no record", want: stateAbsent, action: actInstall},
		{name: "only an uninstalled record", history: []*release.Release{rec(1, release.StatusUninstalled, "id-1", them, old)},
			want: stateAbsent, action: actInstall},
		{name: "another owner's deployed release", history: []*release.Release{rec(1, release.StatusDeployed, "id-2", them, old)},
			want: stateOwnedByAnother, action: actRefuse},
		// Ownership is checked before anything else: even another owner's
		// abandoned record is not ours to recover.
		{name: "another owner's abandoned pending record",
			history: []*release.Release{rec(1, release.StatusDeployed, "id-1", them, old), rec(2, release.StatusPendingUpgrade, "id-2", them, old)},
			writer:  writerGone, want: stateOwnedByAnother, action: actRefuse},
		{name: "a release without owner, out of sync, is upgraded", history: []*release.Release{rec(1, release.StatusDeployed, "id-1", "", old)},
			want: stateOutOfSync, action: actUpgrade},
		{name: "a release without owner, in sync, is adopted", history: []*release.Release{rec(1, release.StatusDeployed, "id-2", "", old)},
			want: stateUnowned, action: actAdopt},
		{name: "pending, another process holds the lease",
			history: []*release.Release{rec(1, release.StatusDeployed, "id-1", me, old), rec(2, release.StatusPendingUpgrade, "id-2", me, old)},
			writer:  writerLive, want: statePendingLive, action: actWait},
		{name: "pending, no lease, written within a lease duration",
			history: []*release.Release{rec(1, release.StatusPendingInstall, "id-2", "", recent)},
			writer:  writerUnknown, want: statePendingLive, action: actWait},
		{name: "pending, no lease, written under a lease that was released",
			history: []*release.Release{func() *release.Release {
				r := rec(1, release.StatusUninstalling, "id-2", me, recent)
				r.Chart.Metadata.Annotations[LeaseAnnotation] = "v1"
				return r
			}()},
			writer: writerUnknown, want: statePendingAbandoned, action: actRecover},
		{name: "pending, no lease, older than a lease duration",
			history: []*release.Release{rec(1, release.StatusPendingInstall, "id-2", me, old)},
			writer:  writerUnknown, want: statePendingAbandoned, action: actRecover},
		// A lease whose holder is gone outweighs the record's age.
		{name: "pending, the lease's holder is gone",
			history: []*release.Release{rec(1, release.StatusDeployed, "id-1", me, old), rec(2, release.StatusPendingRollback, "id-1", me, recent)},
			writer:  writerGone, want: statePendingAbandoned, action: actRecover},
		{name: "uninstalling, the lease's holder is gone", history: []*release.Release{rec(1, release.StatusUninstalling, "id-1", me, old)},
			writer: writerGone, want: statePendingAbandoned, action: actRecover},
		{name: "killed rollback: the deployed revision superseded, none recorded",
			history: []*release.Release{rec(1, release.StatusSuperseded, "id-1", me, old), rec(2, release.StatusSuperseded, "id-2", me, old)},
			want:    stateNoDeployed, action: actRepair},
		{name: "in sync", history: []*release.Release{rec(1, release.StatusSuperseded, "id-1", me, old), rec(2, release.StatusDeployed, "id-2", me, old)},
			want: stateInSync, action: actNone},
		{name: "in sync behind a failed correction",
			history: []*release.Release{rec(1, release.StatusDeployed, "id-2", me, old), func() *release.Release {
				r := rec(2, release.StatusFailed, "id-2", me, old)
				r.Info.Description = correctionFailed + "boom"
				return r
			}()},
			want: stateInSync, action: actNone},
		{name: "out of sync", history: []*release.Release{rec(1, release.StatusDeployed, "id-1", me, old)},
			want: stateOutOfSync, action: actUpgrade},
		{name: "failed upgrade", history: []*release.Release{rec(1, release.StatusDeployed, "id-1", me, old), rec(2, release.StatusFailed, "id-2", me, old)},
			want: stateFailed, action: actUpgrade},
		{name: "failed first install", history: []*release.Release{rec(1, release.StatusFailed, "id-2", me, old)},
			want: stateFailed, action: actUpgrade},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := observation{writer: tt.writer, now: now, leaseDuration: DefaultLeaseDuration}
			for _, r := range tt.history {
				o.last = newer(o.last, r)
				switch r.Info.Status {
				case release.StatusDeployed:
					o.deployed = newer(o.deployed, r)
				case release.StatusSuperseded:
					o.superseded = newer(o.superseded, r)
				}
			}
			got := determineReleaseState(o, want)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.action, actionForState(got))
		})
	}
}

// TestSettleStep: what a correction and a rollback do about each state.
func TestSettleStep(t *testing.T) {
	pendingUpgrade := rec(2, release.StatusPendingUpgrade, "id-2", "", time.Time{})
	pendingRollback := rec(2, release.StatusPendingRollback, "id-1", "", time.Time{})
	tests := []struct {
		state                releaseState
		last                 *release.Release
		correction, rollback settleAction
	}{
		{stateAbsent, nil, settleMissing, settleMissing},
		{stateOwnedByAnother, pendingUpgrade, settleRefuse, settleRefuse},
		// A correction never runs over a deploy; a rollback recovers it.
		{statePendingLive, pendingUpgrade, settleLeave, settleWait},
		{statePendingAbandoned, pendingUpgrade, settleLeave, settleRecover},
		{statePendingLive, pendingRollback, settleWait, settleWait},
		{statePendingAbandoned, pendingRollback, settleRecover, settleRecover},
		{stateNoDeployed, nil, settleRepair, settleRepair},
		{stateInSync, nil, settleReady, settleReady},
		{stateUnowned, nil, settleReady, settleReady},
		{stateOutOfSync, nil, settleReady, settleReady},
		{stateFailed, nil, settleReady, settleReady},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s %v", tt.state, tt.last != nil && tt.last.Info.Status == release.StatusPendingRollback), func(t *testing.T) {
			assert.Equal(t, tt.correction, settleStep(tt.state, tt.last, true), "correction")
			assert.Equal(t, tt.rollback, settleStep(tt.state, tt.last, false), "rollback")
		})
	}
}

// TestWriterLease: when a lease's holder counts as live.
func TestWriterLease(t *testing.T) {
	now := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	self := identity{host: "worker-0", pid: 100, pidNS: "4026531836", nonce: "aa"}
	// gone ran here, in this PID namespace, as a process that no longer
	// exists: PIDs this large are never allocated (pid_max ≤ 2^22).
	gone := identity{host: "worker-0", pid: 1 << 30, pidNS: "4026531836", nonce: "bb"}
	// alive is this test's own process seen as another holder.
	alive := identity{host: "worker-0", pid: processIdentity().pid, pidNS: "4026531836", nonce: "cc"}
	elsewhere := identity{host: "worker-1", pid: 1 << 30, pidNS: "4026531836", nonce: "dd"}
	otherNS := identity{host: "worker-0", pid: 1 << 30, pidNS: "4026532000", nonce: "ee"}
	fresh := func(holder string) writerLease {
		return writerLease{Holder: holder, Renewed: now.Add(-time.Second), Duration: 30 * time.Second}
	}

	tests := []struct {
		name  string
		lease writerLease
		want  writer
	}{
		{"no lease", writerLease{}, writerUnknown},
		{"held by this process", fresh(self.String()), writerGone},
		{"expired", writerLease{Holder: elsewhere.String(), Renewed: now.Add(-31 * time.Second), Duration: 30 * time.Second}, writerGone},
		{"fresh, on another host", fresh(elsewhere.String()), writerLive},
		{"fresh, its process gone from this host", fresh(gone.String()), writerGone},
		{"fresh, its process alive on this host", fresh(alive.String()), writerLive},
		{"fresh, same host name in another PID namespace", fresh(otherNS.String()), writerLive},
		{"fresh, an unknown holder format", fresh("someone"), writerLive},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.lease.judge(now, self))
		})
	}

	t.Run("a lease Secret round-trips", func(t *testing.T) {
		s := leaseSecret("ns", "app", self.String(), now, 30*time.Second)
		assert.Equal(t, writerLease{Holder: self.String(), Renewed: now, Duration: 30 * time.Second}, leaseFrom(s))
		id, ok := parseIdentity(self.String())
		assert.True(t, ok)
		assert.Equal(t, self, id)
	})
}
