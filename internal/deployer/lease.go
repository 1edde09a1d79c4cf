package deployer

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"
	"helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
)

// A release's writer lease tells other processes that one is changing the
// release, so that none of them takes its pending record for the remains of
// a crash. Helm writes a pending record (pending-install, -upgrade or
// -rollback) before it applies anything and replaces it when done; a
// process that dies in between leaves it pending for ever, and the next
// Deploy must recover it. Recovery must not touch a record that another
// process (a second controller replica, an agent, a drift correction in
// another worker) is writing right now.
//
// Before it writes any record of a release, a Deployer takes the release's
// lease: a Secret named leaseName(release) in the release namespace whose
// annotations name the holder (processIdentity: host, process ID, PID
// namespace and a random nonce), when it last renewed the lease and for
// how long it holds. While the Helm action runs, a goroutine renews the
// lease every third of its duration; once the action returned, the lease
// is deleted. A process that finds a live lease held by someone else does
// not write: Deploy, Correct, Rollback, Uninstall and Forget fail with an
// error wrapping ErrReleaseBusy, which callers retry soon.
//
// A pending record counts as abandoned, and is recovered, only when its
// writer is known to be gone:
//   - the lease is held by this very process: the Deployer holds the
//     release's in-process lock, so no action of this process runs on it;
//   - the lease expired: its holder did not renew it for its duration;
//   - the holder ran on this host in this PID namespace and its process no
//     longer exists (a restarted agent or worker recovers at once instead
//     of waiting for the lease to expire);
//   - there is no lease, and the record says it was written under one
//     (LeaseAnnotation): its writer released the lease, so it is done;
//   - there is no lease and the record is older than the lease duration
//     (a record of a Flotilla without leases, or of the helm CLI).
//
// The lease is a Secret, not a coordination.k8s.io Lease, on purpose: it
// is read and written with exactly the credentials Helm's release storage
// (Secrets in the release namespace) already needs, the release's
// ServiceAccount when Helm acts as one, so no deployment needs a new
// permission. Expiry compares the holder's clock with the reader's: clocks
// skewed by more than the lease duration defeat it.
//
// A holder that cannot renew for a whole duration (an API server
// unreachable from it alone) may lose its lease while its action still
// runs; another process may then recover its record, and the slow action
// fails when it writes its result. That costs a retry, never an object.

// LeaseAnnotation is the chart annotation, stored with every revision a
// Deployer writes, that says its writer held the release's lease while
// writing it: when no lease is held, such a pending record is known
// abandoned at once.
const LeaseAnnotation = "flotilla.dev/writer-lease"

// underLease reports whether rec says it was written under a lease.
func underLease(rec *release.Release) bool {
	return rec.Chart != nil && rec.Chart.Metadata != nil && rec.Chart.Metadata.Annotations[LeaseAnnotation] != ""
}

// DefaultLeaseDuration is how long a writer lease holds without renewal
// when Options.LeaseDuration is unset.
const DefaultLeaseDuration = 30 * time.Second

// ErrReleaseBusy marks an operation that did not start because another
// process is changing the release (it holds the release's writer lease,
// or wrote a pending record too recently to be known gone). Nothing was
// changed; trying again shortly is expected to succeed.
var ErrReleaseBusy = errors.New("another process is changing the release")

// Annotations of a lease Secret.
const (
	leaseHolderAnnotation   = "flotilla.dev/lease-holder"
	leaseRenewedAnnotation  = "flotilla.dev/lease-renewed"
	leaseDurationAnnotation = "flotilla.dev/lease-duration-seconds"
	// leaseLabel marks lease Secrets, naming the release.
	leaseLabel = "flotilla.dev/release-lease"
	// leaseType is the Secret type of leases; they hold no data.
	leaseType corev1.SecretType = "flotilla.dev/release-lease"
)

// leaseName is the name of release name's lease Secret: a release name
// has at most 53 characters, so it is a valid name, and Helm's records
// (sh.helm.release.v1.*) never take it.
func leaseName(release string) string { return "flotilla.release-lease." + release }

// writerLease is what a lease Secret says about the writer of a release.
type writerLease struct {
	// Holder is the identity of the process holding it, "" when the
	// release has no lease.
	Holder   string
	Renewed  time.Time
	Duration time.Duration
}

// writer is what the state decision knows of the process that wrote a
// release's newest record.
type writer int

const (
	// writerUnknown: no lease says who writes the release.
	writerUnknown writer = iota
	// writerLive: another process holds a live lease.
	writerLive
	// writerGone: the lease's holder is known to be gone, or is this
	// process (see the lease rules above).
	writerGone
)

// judge tells what l says about the release's writer at now, as seen by
// self.
func (l writerLease) judge(now time.Time, self identity) writer {
	switch {
	case l.Holder == "":
		return writerUnknown
	case l.Holder == self.String():
		return writerGone
	case now.After(l.Renewed.Add(l.Duration)):
		return writerGone
	case self.knowsGone(l.Holder):
		return writerGone
	}
	return writerLive
}

// leaseFrom reads a lease Secret. A Secret whose annotations do not parse
// is a lease without a holder.
func leaseFrom(s *corev1.Secret) writerLease {
	a := s.GetAnnotations()
	renewed, err := time.Parse(time.RFC3339Nano, a[leaseRenewedAnnotation])
	if err != nil {
		return writerLease{}
	}
	secs, err := strconv.Atoi(a[leaseDurationAnnotation])
	if err != nil {
		return writerLease{}
	}
	return writerLease{Holder: a[leaseHolderAnnotation], Renewed: renewed, Duration: time.Duration(secs) * time.Second}
}

// leaseSecret returns the lease Secret of release name in namespace held
// by holder, renewed at now for d.
func leaseSecret(namespace, name, holder string, now time.Time, d time.Duration) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: leaseName(name), Namespace: namespace,
			Labels: map[string]string{leaseLabel: name, managedByLabel: "flotilla"},
			Annotations: map[string]string{
				leaseHolderAnnotation:   holder,
				leaseRenewedAnnotation:  now.UTC().Format(time.RFC3339Nano),
				leaseDurationAnnotation: strconv.Itoa(int(d.Round(time.Second) / time.Second)),
			},
		},
		Type: leaseType,
	}
}

// leases reads and takes the writer leases of one release.
type leases struct {
	secrets  typedcorev1.SecretInterface
	release  string
	self     identity
	duration time.Duration
	log      *zap.Logger
}

// newLeases returns the leases of release namespace/name on the cluster
// behind getter (Helm's getter: the same credentials as its storage).
func (d *Deployer) newLeases(getter genericclioptions.RESTClientGetter, namespace, name string) (*leases, error) {
	cs, err := newClientset(getter)
	if err != nil {
		return nil, err
	}
	return &leases{secrets: cs.CoreV1().Secrets(namespace), release: name, self: processIdentity(),
		duration: d.leaseDuration, log: d.log}, nil
}

// read returns the release's lease; the zero writerLease when it has none.
func (l *leases) read(ctx context.Context) (writerLease, error) {
	s, err := l.secrets.Get(ctx, leaseName(l.release), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return writerLease{}, nil
	}
	if err != nil {
		return writerLease{}, fmt.Errorf("read lease of release %s: %w", l.release, err)
	}
	return leaseFrom(s), nil
}

// errNoNamespace marks a lease that could not be taken because the
// release namespace does not exist yet (a first install creates it).
var errNoNamespace = errors.New("release namespace does not exist")

// acquire takes the release's lease and keeps renewing it until the
// returned hold is released. It fails with an error wrapping
// ErrReleaseBusy when another process holds a live lease or takes it at
// the same time, and with one wrapping errNoNamespace when the namespace
// does not exist.
func (l *leases) acquire(ctx context.Context) (*hold, error) {
	now := time.Now()
	want := leaseSecret("", l.release, l.self.String(), now, l.duration)
	cur, err := l.secrets.Get(ctx, want.Name, metav1.GetOptions{})
	var out *corev1.Secret
	prior := writerUnknown
	switch {
	case apierrors.IsNotFound(err):
		out, err = l.secrets.Create(ctx, want, metav1.CreateOptions{})
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("take lease of release %s: %w", l.release, errNoNamespace)
		}
	case err != nil:
		return nil, fmt.Errorf("read lease of release %s: %w", l.release, err)
	default:
		seen := leaseFrom(cur)
		if prior = seen.judge(now, l.self); prior == writerLive {
			return nil, busy(l.release, seen)
		}
		next := cur.DeepCopy()
		next.Annotations = want.Annotations
		out, err = l.secrets.Update(ctx, next, metav1.UpdateOptions{})
	}
	if apierrors.IsAlreadyExists(err) || apierrors.IsConflict(err) {
		return nil, fmt.Errorf("release %s: %w: it took the lease at the same time", l.release, ErrReleaseBusy)
	}
	if err != nil {
		return nil, fmt.Errorf("take lease of release %s: %w", l.release, err)
	}
	h := &hold{leases: l, prior: prior, secret: out, stop: make(chan struct{}), done: make(chan struct{})}
	go h.renew(context.WithoutCancel(ctx))
	return h, nil
}

// busy is the error for a release whose lease another process holds.
func busy(release string, l writerLease) error {
	return fmt.Errorf("release %s: %w: %s holds its lease (renewed %s)", release, ErrReleaseBusy, l.Holder,
		l.Renewed.UTC().Format(time.RFC3339))
}

// hold is a lease this process holds.
type hold struct {
	leases *leases
	// prior is what the lease said about the release's writer before
	// this process took it: writerUnknown when there was none, writerGone
	// when its holder was gone. Records written before are judged by it.
	prior writer
	// mu guards secret, the lease as last written.
	mu     sync.Mutex
	secret *corev1.Secret
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
}

// renew renews the lease every third of its duration until released or
// lost (another process took it over).
func (h *hold) renew(ctx context.Context) {
	defer close(h.done)
	tick := time.NewTicker(max(h.leases.duration/3, 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-tick.C:
		}
		h.mu.Lock()
		next := h.secret.DeepCopy()
		next.Annotations[leaseRenewedAnnotation] = time.Now().UTC().Format(time.RFC3339Nano)
		out, err := h.leases.secrets.Update(ctx, next, metav1.UpdateOptions{})
		if err == nil {
			h.secret = out
		}
		h.mu.Unlock()
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			h.leases.log.Warn("Lost the lease of a release while changing it", zap.String("release", h.leases.release),
				zap.String("namespace", next.Namespace), zap.Error(err))
			return
		}
		if err != nil {
			h.leases.log.Warn("Could not renew the lease of a release", zap.String("release", h.leases.release),
				zap.String("namespace", next.Namespace), zap.Error(err))
		}
	}
}

// release stops renewing and deletes the lease, unless another process
// took it over meanwhile. A lease that cannot be deleted expires.
func (h *hold) release(ctx context.Context) {
	h.once.Do(func() {
		close(h.stop)
		<-h.done
		h.mu.Lock()
		defer h.mu.Unlock()
		rv := h.secret.ResourceVersion
		err := h.leases.secrets.Delete(context.WithoutCancel(ctx), h.secret.Name,
			metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
		if err != nil && !apierrors.IsNotFound(err) {
			h.leases.log.Info("Left the lease of a release to expire", zap.String("release", h.leases.release),
				zap.String("namespace", h.secret.Namespace), zap.Error(err))
		}
	})
}
