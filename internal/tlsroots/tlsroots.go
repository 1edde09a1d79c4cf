// Package tlsroots builds the certificate pools clients of Git hosts,
// chart repositories and registries trust: the system's roots plus a
// configured CA bundle.
package tlsroots

import "crypto/x509"

// Pool returns the system's roots plus the PEM certificates in bundle
// (the bundle alone where the system has no roots), and whether bundle
// held any certificate.
func Pool(bundle []byte) (*x509.CertPool, bool) {
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	return pool, pool.AppendCertsFromPEM(bundle)
}
