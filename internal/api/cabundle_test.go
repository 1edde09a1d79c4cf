package api

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestValidateCABundle(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	keyPEM := string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))

	tests := []struct {
		name   string
		bundle string
		// wantErr is a part of the error; "" means valid.
		wantErr string
	}{
		{name: "none", bundle: ""},
		{name: "one certificate", bundle: cert},
		{name: "two certificates with text between", bundle: "# corp CA\n" + cert + "\n" + cert},
		{name: "not PEM", bundle: "just text", wantErr: "holds no PEM certificate"},
		{name: "a key", bundle: cert + keyPEM, wantErr: `PEM block 2 is a "EC PRIVATE KEY"`},
		{name: "garbage certificate", bundle: "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", wantErr: "PEM block 1 is not an X.509 certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := validateCABundle(field.NewPath("spec", "caBundle"), []byte(tt.bundle))
			if tt.wantErr == "" {
				assert.Empty(t, errs)
				return
			}
			require.Len(t, errs, 1)
			assert.Contains(t, errs[0].Error(), "spec.caBundle")
			assert.Contains(t, errs[0].Error(), tt.wantErr)
			assert.NotContains(t, errs[0].Error(), "MII", "no bundle content")
		})
	}
}
