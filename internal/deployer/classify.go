package deployer

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/url"
	"syscall"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/flotilla-gitops/flotilla/internal/outcome"
)

// Classify tells whether err, returned by a call to a cluster's API server
// (directly or through Helm), means the cluster could not be reached, that
// it refused the credentials, or that it refused or failed the request
// itself (BundleFailed). A release of another owner is Invalid, one that
// another process is changing Unreachable (retried soon), an error with
// an OutcomeClass method that class. It inspects error values, never
// messages.
func Classify(err error) outcome.Class {
	if err == nil {
		return outcome.OK
	}
	// An error that knows its class carries it (a stored kubeconfig left
	// without credentials once its commands and files are dropped is
	// Unauthorized: cluster.KubeconfigError).
	var classed interface{ OutcomeClass() outcome.Class }
	if errors.As(err, &classed) {
		return classed.OutcomeClass()
	}
	// Helm's wait for the release ran out of time: the cluster answered
	// all along. The cause (a context deadline) would otherwise pass for
	// a transport timeout.
	if errors.Is(err, ErrWaitTimeout) {
		return outcome.BundleFailed
	}
	// Another GitRepo's (or HelmOp's) release: a conflict in the
	// configuration, found before anything was applied, that fails the
	// same way until one of the two is renamed or removed. ErrApplied,
	// retried on the failure backoff: once the owner's release is gone,
	// the retry installs.
	var owned *OwnedError
	if errors.As(err, &owned) {
		return outcome.Invalid
	}
	// Another process is changing the release: nothing was tried, and
	// the rollout's short retry is expected to find it done.
	if errors.Is(err, ErrReleaseBusy) {
		return outcome.Unreachable
	}
	if status, ok := statusCode(err); ok {
		switch {
		case status == 401:
			return outcome.Unauthorized
		case status == 429 || status >= 500:
			return outcome.Unreachable
		default:
			return outcome.BundleFailed
		}
	}
	if unreachable(err) {
		return outcome.Unreachable
	}
	return outcome.BundleFailed
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
		// ErrWaitTimeout and classified BundleFailed before this.
		return true
	}
	return false
}
