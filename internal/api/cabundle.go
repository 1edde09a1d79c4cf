package api

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateCABundle checks a caBundle holds PEM certificates only: at least
// one CERTIFICATE block, each of which parses. The error says which block
// is wrong, never its content (a bundle is public, but a pasted key is not).
func validateCABundle(p *field.Path, bundle []byte) field.ErrorList {
	if len(bundle) == 0 {
		return nil
	}
	certs := 0
	for i, rest := 1, bundle; ; i++ {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return field.ErrorList{field.Invalid(p, fmt.Sprintf("(%d bytes)", len(bundle)),
				fmt.Sprintf("PEM block %d is a %q, not a CERTIFICATE", i, block.Type))}
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return field.ErrorList{field.Invalid(p, fmt.Sprintf("(%d bytes)", len(bundle)),
				fmt.Sprintf("PEM block %d is not an X.509 certificate: %v", i, err))}
		}
		certs++
	}
	if certs == 0 {
		return field.ErrorList{field.Invalid(p, fmt.Sprintf("(%d bytes)", len(bundle)),
			"holds no PEM certificate (-----BEGIN CERTIFICATE-----)")}
	}
	return nil
}
