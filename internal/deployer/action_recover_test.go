package deployer_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/flotilla-gitops/flotilla/internal/deployer"
)

// killSwitch lets requests through until at matches one: that request
// and every later one fail as if the process had died (connection
// refused). The request matched never reaches the server.
type killSwitch struct {
	next http.RoundTripper
	at   func(*http.Request, []byte) bool
	dead *atomic.Bool
}

func (k killSwitch) RoundTrip(req *http.Request) (*http.Response, error) {
	dead := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	if k.dead.Load() {
		return nil, dead
	}
	if req.Body != nil && req.Method == http.MethodPut {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		if k.at(req, body) {
			k.dead.Store(true)
			return nil, dead
		}
	}
	return k.next.RoundTrip(req)
}

// recordWrite matches Helm's write of revision version of release "app"
// with status: the storage driver updates the record's Secret, whose
// labels (the only text not compressed) carry the status, as JSON or as
// a protobuf map entry (key "status", value status).
func recordWrite(version, status string) func(*http.Request, []byte) bool {
	asProto := []byte("\x0a\x06status\x12" + string(rune(len(status))) + status)
	return func(req *http.Request, body []byte) bool {
		return strings.HasSuffix(req.URL.Path, "/secrets/sh.helm.release.v1.app.v"+version) &&
			(bytes.Contains(body, []byte(`"status":"`+status+`"`)) || bytes.Contains(body, asProto))
	}
}

// killedGetter returns a getter of the fixture's cluster through which a
// process "dies" at the request at matches.
func (f *fixture) killedGetter(t *testing.T, at func(*http.Request, []byte) bool) *deployer.RESTClientGetter {
	t.Helper()
	cfg := rest.CopyConfig(f.config)
	// One switch for every client built from the config: the process
	// dies as a whole.
	dead := new(atomic.Bool)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return killSwitch{next: rt, at: at, dead: dead} })
	getter, err := deployer.NewRESTClientGetter(cfg, metav1.NamespaceDefault)
	require.NoError(t, err)
	return getter
}

// leaseOf returns the release's lease Secret, failing when there is none.
func (f *fixture) leaseOf(ctx context.Context, t *testing.T, namespace, name string) *corev1.Secret {
	t.Helper()
	s, err := f.cs.CoreV1().Secrets(namespace).Get(ctx, "flotilla.release-lease."+name, metav1.GetOptions{})
	require.NoError(t, err, "the killed process's lease")
	return s
}

// setLeaseHolder rewrites the release's lease as held by holder, renewed
// at renewed: another process's lease.
func (f *fixture) setLeaseHolder(ctx context.Context, t *testing.T, namespace, name, holder string, renewed time.Time) {
	t.Helper()
	s := f.leaseOf(ctx, t, namespace, name)
	s.Annotations["flotilla.dev/lease-holder"] = holder
	s.Annotations["flotilla.dev/lease-renewed"] = renewed.UTC().Format(time.RFC3339Nano)
	_, err := f.cs.CoreV1().Secrets(namespace).Update(ctx, s, metav1.UpdateOptions{})
	require.NoError(t, err)
}

// TestKillMidRollback: a process killed between Helm rollback's two
// writes (the deployed revision marked superseded, the new one still
// pending) leaves no deployed revision. A restarted process repairs it,
// by its next deploy or its next correction, without a sync, once the
// killed process is known gone; while another process holds the lease,
// nothing is touched.
func TestKillMidRollback(t *testing.T) {
	f := newFixture(t)
	tests := []struct {
		name string
		// holder rewrites the killed process's lease; nil keeps it (the
		// restarted Deployer runs in the same process).
		holder func(ctx context.Context, t *testing.T, ns string)
		// correct restarts with a correction rather than a deploy.
		correct bool
		// busy: the restarted process must leave the release alone.
		busy bool
	}{
		{name: "deploy, same process restarted"},
		{name: "correction, same process restarted", correct: true},
		{name: "deploy, the killed process's lease expired", holder: func(ctx context.Context, t *testing.T, ns string) {
			f.setLeaseHolder(ctx, t, ns, "app", "worker-elsewhere/1/4026531836/ab", time.Now().Add(-time.Hour))
		}},
		{name: "correction, the killed process no longer exists on this host", correct: true,
			holder: func(ctx context.Context, t *testing.T, ns string) {
				// The real holder's host and PID namespace, a PID that is
				// never allocated.
				held := strings.Split(f.leaseOf(ctx, t, ns, "app").Annotations["flotilla.dev/lease-holder"], "/")
				require.Len(t, held, 4)
				f.setLeaseHolder(ctx, t, ns, "app", held[0]+"/1073741824/"+held[2]+"/ff", time.Now())
			}},
		{name: "deploy, another process holds a live lease", busy: true, holder: func(ctx context.Context, t *testing.T, ns string) {
			f.setLeaseHolder(ctx, t, ns, "app", "worker-elsewhere/1/4026531836/ab", time.Now())
		}},
		{name: "correction, another process holds a live lease", correct: true, busy: true,
			holder: func(ctx context.Context, t *testing.T, ns string) {
				f.setLeaseHolder(ctx, t, ns, "app", "worker-elsewhere/1/4026531836/ab", time.Now())
			}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t)
			ns := "kill-rollback-" + string(rune('a'+i))
			mustDeploy(ctx, t, newDeployer(t), f, ns, "id-1", "one")

			// Killed as Helm records the correction's revision deployed,
			// after it marked revision 1 superseded.
			_, err := newDeployer(t).Correct(ctx, f.killedGetter(t, recordWrite("2", "deployed")), ns, "app", "id-1",
				deployer.CorrectOptions{})
			require.Error(t, err, "the killed correction")
			require.Equal(t, []release.Status{release.StatusSuperseded, release.StatusPendingRollback}, f.statuses(t, ns, "app"),
				"what the kill left")
			f.assertCurrent(t, newDeployer(t), ns, "app", "", 0)
			// The drift monitor sees a rollback pending, and corrects.
			rev, err := newDeployer(t).Deployed(f.getter, ns, "app")
			require.NoError(t, err)
			assert.Equal(t, []any{1, true, true}, []any{rev.Version, rev.Pending, rev.PendingRollback}, "Deployed")
			if tt.holder != nil {
				tt.holder(ctx, t, ns)
			}

			restarted := newDeployer(t)
			if tt.correct {
				_, err = restarted.Correct(ctx, f.getter, ns, "app", "id-1", deployer.CorrectOptions{})
			} else {
				_, err = restarted.Deploy(ctx, f.getter, testRelease(ns, "app", "id-1", "one"))
			}

			if tt.busy {
				require.ErrorIs(t, err, deployer.ErrReleaseBusy)
				assert.Equal(t, []release.Status{release.StatusSuperseded, release.StatusPendingRollback}, f.statuses(t, ns, "app"),
					"another process's pending record is untouched")
				return
			}
			require.NoError(t, err)
			want := []release.Status{release.StatusDeployed}
			if tt.correct {
				want = []release.Status{release.StatusSuperseded, release.StatusDeployed}
			}
			assert.Equal(t, want, f.statuses(t, ns, "app"))
			id, _, err := restarted.Current(f.getter, ns, "app")
			require.NoError(t, err)
			assert.Equal(t, "id-1", id)
			assert.Equal(t, map[string]string{"value": "one"}, f.configMap(ctx, t, ns, "app").Data)
		})
	}
}

// TestKillMidTakeOwnershipInstall: a first install that adopted an
// existing object (takeOwnership), killed before Helm recorded it
// deployed, is recovered by a restarted process without deleting the
// object: its record is dropped and the install done again at revision
// 1, which takes the object over in place; it is never uninstalled.
func TestKillMidTakeOwnershipInstall(t *testing.T) {
	f := newFixture(t)
	ctx := testContext(t)
	const ns = "kill-adopt"
	_, err := f.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	theirs, err := f.cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app"},
		Data: map[string]string{"value": "before Flotilla"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	rel := testRelease(ns, "app", "id-1", "one")
	rel.TakeOwnership = true

	// Killed as Helm records the install deployed: the object is adopted.
	// Helm only logs that failed write, so the result says nothing.
	_, _ = newDeployer(t).Deploy(ctx, f.killedGetter(t, recordWrite("1", "deployed")), rel)
	require.Equal(t, []release.Status{release.StatusPendingInstall}, f.statuses(t, ns, "app"), "what the kill left")
	adopted := f.configMap(ctx, t, ns, "app")
	require.Equal(t, theirs.UID, adopted.UID)
	require.Equal(t, "app", adopted.Annotations["meta.helm.sh/release-name"], "adopted before the kill")

	res, err := newDeployer(t).Deploy(ctx, f.getter, rel)

	require.NoError(t, err)
	assert.Equal(t, 1, res.Revision, "the interrupted install is replaced, not stacked")
	assert.Equal(t, []release.Status{release.StatusDeployed}, f.statuses(t, ns, "app"))
	after := f.configMap(ctx, t, ns, "app")
	assert.Equal(t, theirs.UID, after.UID, "the adopted object was never deleted")
	assert.Equal(t, map[string]string{"value": "one"}, after.Data)
}
