package tlsroots_test

import (
	"crypto/x509"
	"encoding/base64"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/tlsroots"
)

// TestPool: a bundle's certificate is trusted besides the system's roots;
// a bundle without a certificate says so.
func TestPool(t *testing.T) {
	srv := httptest.NewTLSServer(nil)
	defer srv.Close()
	cert := srv.Certificate()

	_, err := cert.Verify(x509.VerifyOptions{Roots: must(t, nil)})
	require.Error(t, err, "the test server's certificate is not a system root")

	pem := []byte("-----BEGIN CERTIFICATE-----\n" + b64(cert.Raw) + "\n-----END CERTIFICATE-----\n")
	_, err = cert.Verify(x509.VerifyOptions{Roots: must(t, pem)})
	require.NoError(t, err)

	_, ok := tlsroots.Pool([]byte("not a certificate"))
	assert.False(t, ok)
}

func b64(der []byte) string { return base64.StdEncoding.EncodeToString(der) }

func must(t *testing.T, bundle []byte) *x509.CertPool {
	t.Helper()
	pool, ok := tlsroots.Pool(bundle)
	require.Equal(t, bundle != nil, ok)
	return pool
}
