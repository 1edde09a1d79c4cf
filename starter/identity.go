package main

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"os"
	"os/user"
	"strings"

	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/temporalx"
)

// identity is who runs this CLI, as approvals, syncs and rollbacks record
// it: the OS user and host, the mTLS client certificate's subject and the
// API key's name. Nothing it cannot read is fatal: a part it cannot tell
// is left out.
func (g *globals) identity() protocol.Identity {
	return cliIdentity(g.Temporal)
}

func cliIdentity(o temporalx.ClientOptions) protocol.Identity {
	id := protocol.Identity{Via: "cli", User: osUser()}
	if o.TLSCertFile != "" {
		id.Subject = certSubject(o.TLSCertFile)
	}
	key := o.APIKey
	if key == "" && o.APIKeyFile != "" {
		if b, err := os.ReadFile(o.APIKeyFile); err == nil {
			key = strings.TrimSpace(string(b))
		}
	}
	if key != "" {
		id.APIKey = apiKeyName(key)
	}
	return id
}

// osUser returns "user@host", or what of it is known.
func osUser() string {
	name := os.Getenv("USER")
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	if host, err := os.Hostname(); err == nil && host != "" {
		if name == "" {
			return "@" + host
		}
		return name + "@" + host
	}
	return name
}

// certSubject returns the subject of the first certificate in file.
func certSubject(file string) string {
	b, err := os.ReadFile(file)
	if err != nil {
		return ""
	}
	block, _ := pem.Decode(b)
	if block == nil {
		return ""
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return ""
	}
	return cert.Subject.String()
}

// apiKeyName names an API key without revealing it: the subject of a JWT
// (Temporal Cloud's keys are), else the start of its SHA-256 digest.
func apiKeyName(key string) string {
	if parts := strings.Split(key, "."); len(parts) == 3 {
		if b, err := base64.RawURLEncoding.DecodeString(parts[1]); err == nil {
			var claims struct {
				Sub string `json:"sub"`
			}
			if json.Unmarshal(b, &claims) == nil && claims.Sub != "" {
				return claims.Sub
			}
		}
	}
	sum := sha256.Sum256([]byte(key))
	return "sha256:" + hex.EncodeToString(sum[:])[:12]
}
