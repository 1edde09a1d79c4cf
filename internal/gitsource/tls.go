package gitsource

import (
	"crypto/x509"
	"errors"
)

// ErrTLS means the server's TLS certificate was not accepted: signed by a
// CA that neither the system nor the Remote's CABundle trusts, expired, or
// for another host name. The Remote's settings must change (caBundle, or
// insecureSkipTLSVerify), so trying again does not help.
var ErrTLS = errors.New("TLS certificate not trusted (set caBundle to the PEM of the CA that signed the server's certificate)")

// UntrustedCertificate reports whether err (from any HTTPS client: go-git,
// a token endpoint) is a certificate verification failure.
func UntrustedCertificate(err error) bool {
	var unknown x509.UnknownAuthorityError
	var invalid x509.CertificateInvalidError
	var hostname x509.HostnameError
	return errors.As(err, &unknown) || errors.As(err, &invalid) || errors.As(err, &hostname)
}
