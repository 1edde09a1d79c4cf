// Package outcome names what happened to one bundle on one cluster when
// Flotilla tried to deploy, check, roll back or remove it. Errors are
// classified where they happen (the activity that called Helm, the API
// server or the content store) and the class travels as a value: workflow
// code switches on it and never reads a message.
package outcome

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/url"
	"syscall"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/flotilla-gitops/flotilla/internal/deployer"
)

// Class is the kind of failure of one step on one cluster. The zero value
// means the step succeeded.
type Class string

// The failure classes. Each says who must act and how Flotilla retries.
const (
	// OK: the step did what it was asked.
	OK Class = ""
	// Unreachable: the cluster's API server did not answer (connection
	// refused, DNS, TLS, timeouts, 5xx, 429). The deployment is
	// WaitApplied and the rollout retries with a short backoff.
	Unreachable Class = "Unreachable"
	// Unauthorized: the API server refused the credentials (401). The
	// deployment is WaitApplied and retried slowly.
	Unauthorized Class = "Unauthorized"
	// BundleFailed: the cluster answered and refused or failed the bundle
	// (a template error, an admission denial, an immutable field, a wait
	// timeout, a missing permission). ErrApplied on that cluster alone,
	// retried with a long backoff at the same deployment ID.
	BundleFailed Class = "BundleFailed"
	// Invalid: the bundle's objects failed Flotilla's checks before
	// anything was applied (bad label, cluster-scoped object in a forced
	// namespace). ErrApplied; nothing was applied.
	Invalid Class = "Invalid"
	// ContentUnavailable: the rendered bundle could not be read from the
	// content store or registry. WaitApplied, retried like Unreachable.
	ContentUnavailable Class = "ContentUnavailable"
)

// Transient reports whether a retry within the same rollout, after a short
// pause, is likely to succeed (the cluster or the store was briefly away).
func (c Class) Transient() bool { return c == Unreachable || c == ContentUnavailable }

// Failed reports whether the bundle itself failed on the cluster
// (ErrApplied), as opposed to not having been tried.
func (c Class) Failed() bool { return c == BundleFailed || c == Invalid }

// Classify tells whether err, returned by a call to a cluster's API server
// (directly or through Helm), means the cluster could not be reached, that
// it refused the credentials, or that it refused or failed the request
// itself (BundleFailed). It inspects error values, never messages.
func Classify(err error) Class {
	if err == nil {
		return OK
	}
	// Helm's wait for the release ran out of time: the cluster answered
	// all along. The cause (a context deadline) would otherwise pass for
	// a transport timeout.
	if errors.Is(err, deployer.ErrWaitTimeout) {
		return BundleFailed
	}
	if status, ok := statusCode(err); ok {
		switch {
		case status == 401:
			return Unauthorized
		case status == 429 || status >= 500:
			return Unreachable
		default:
			return BundleFailed
		}
	}
	if unreachable(err) {
		return Unreachable
	}
	return BundleFailed
}

// statusCode returns the HTTP status of an API server error in err's chain.
func statusCode(err error) (int, bool) {
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		if code := int(se.Status().Code); code != 0 {
			return code, true
		}
	}
	return 0, false
}

// unreachable reports transport failures: no connection, no answer, no
// trusted TLS session, a connection cut mid-answer.
func unreachable(err error) bool {
	var (
		netErr   net.Error
		opErr    *net.OpError
		dnsErr   *net.DNSError
		urlErr   *url.Error
		unknown  x509.UnknownAuthorityError
		hostErr  x509.HostnameError
		certErr  x509.CertificateInvalidError
		recErr   tls.RecordHeaderError
		certVErr *tls.CertificateVerificationError
	)
	switch {
	case errors.As(err, &opErr), errors.As(err, &dnsErr), errors.As(err, &unknown), errors.As(err, &hostErr),
		errors.As(err, &certErr), errors.As(err, &recErr), errors.As(err, &certVErr):
		return true
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EHOSTUNREACH),
		errors.Is(err, syscall.ENETUNREACH), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return true
	case errors.As(err, &urlErr):
		// A request that never got an answer (the client gave up).
		return true
	case errors.As(err, &netErr) && netErr.Timeout():
		// Includes context.DeadlineExceeded: a request's deadline passed
		// without an answer. Helm's own wait timeouts are marked
		// deployer.ErrWaitTimeout and classified BundleFailed before this.
		return true
	}
	return false
}

// Rollback is what rolling a release back to its previous deployment did.
type Rollback string

// Rollback outcomes.
const (
	// RolledBack: the release runs its previous deployment again.
	RolledBack Rollback = "RolledBack"
	// RollbackFailed: the release still runs what the halted rollout
	// deployed.
	RollbackFailed Rollback = "RollbackFailed"
)
