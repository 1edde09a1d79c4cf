package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"strings"
)

// Secret is what a provider's deliveries are authenticated with.
type Secret struct {
	// Token is the HMAC key (GitHub, Gitea, Gogs, Bitbucket) or the
	// token GitLab sends verbatim.
	Token string
	// Username and Password are Azure DevOps' basic authentication.
	Username, Password string
}

// IsZero reports an unset secret, which authenticates nothing.
func (s Secret) IsZero() bool { return s.Token == "" && s.Password == "" }

// String never shows the secret.
func (s Secret) String() string {
	if s.IsZero() {
		return "webhook.Secret{}"
	}
	return "webhook.Secret{REDACTED}"
}

// GoString never shows the secret either.
func (s Secret) GoString() string { return s.String() }

// Verify reports whether the delivery carries valid credentials for s.
// Every comparison takes constant time; an unset secret verifies nothing.
func Verify(p Provider, h http.Header, body []byte, s Secret) bool {
	if s.IsZero() {
		return false
	}
	switch p {
	case GitHub:
		return verifyPrefixed(h.Get("X-Hub-Signature-256"), body, s.Token)
	case Gitea:
		if sig := h.Get("X-Gitea-Signature"); sig != "" {
			return verifyHex(sig, body, s.Token)
		}
		return verifyPrefixed(h.Get("X-Hub-Signature-256"), body, s.Token)
	case Gogs:
		return verifyHex(h.Get("X-Gogs-Signature"), body, s.Token)
	case GitLab:
		return s.Token != "" && equal(h.Get("X-Gitlab-Token"), s.Token)
	case Bitbucket, BitbucketServer:
		return verifyPrefixed(h.Get("X-Hub-Signature"), body, s.Token)
	case AzureDevOps:
		user, pass, ok := (&http.Request{Header: h}).BasicAuth()
		// Both compared, always, so the time taken reveals neither.
		userOK := equal(user, s.Username)
		passOK := equal(pass, s.Password)
		return ok && s.Password != "" && userOK && passOK
	}
	return false
}

// Signed reports whether the delivery carries a credential for p at all.
func Signed(p Provider, h http.Header) bool {
	switch p {
	case GitHub:
		return h.Get("X-Hub-Signature-256") != ""
	case Gitea:
		return h.Get("X-Gitea-Signature") != "" || h.Get("X-Hub-Signature-256") != ""
	case Gogs:
		return h.Get("X-Gogs-Signature") != ""
	case GitLab:
		return h.Get("X-Gitlab-Token") != ""
	case Bitbucket, BitbucketServer:
		return h.Get("X-Hub-Signature") != ""
	case AzureDevOps:
		return h.Get("Authorization") != ""
	}
	return false
}

// maxTokenLength bounds the GitLab token (and the Azure DevOps password)
// a well-formed delivery carries.
const maxTokenLength = 1024

// WellFormed reports whether the delivery carries a credential of the
// form p sends: an HMAC-SHA256 of 64 hex digits in p's header (after
// "sha256=" where p writes it), a GitLab token of 1 to 1024 bytes, or
// HTTP basic authentication with a password. It checks no secret: a
// delivery that is not well formed cannot pass any, and is refused before
// anything is looked up for it.
func WellFormed(p Provider, h http.Header) bool {
	switch p {
	case GitHub:
		return prefixedHex(h.Get("X-Hub-Signature-256"))
	case Gitea:
		if sig := h.Get("X-Gitea-Signature"); sig != "" {
			return hexMAC(sig)
		}
		return prefixedHex(h.Get("X-Hub-Signature-256"))
	case Gogs:
		return hexMAC(h.Get("X-Gogs-Signature"))
	case GitLab:
		tok := h.Get("X-Gitlab-Token")
		return tok != "" && len(tok) <= maxTokenLength
	case Bitbucket, BitbucketServer:
		return prefixedHex(h.Get("X-Hub-Signature"))
	case AzureDevOps:
		_, pass, ok := (&http.Request{Header: h}).BasicAuth()
		return ok && pass != "" && len(pass) <= maxTokenLength
	}
	return false
}

// prefixedHex reports whether sig is "sha256=" and a hex HMAC-SHA256.
func prefixedHex(sig string) bool {
	hexSig, ok := strings.CutPrefix(sig, "sha256=")
	return ok && hexMAC(hexSig)
}

// hexMAC reports whether sig is a hex HMAC-SHA256 as verifyHex reads it.
func hexMAC(sig string) bool {
	b, err := hex.DecodeString(strings.TrimSpace(sig))
	return err == nil && len(b) == sha256.Size
}

// verifyPrefixed checks a "sha256=<hex>" signature.
func verifyPrefixed(sig string, body []byte, key string) bool {
	hexSig, ok := strings.CutPrefix(sig, "sha256=")
	return ok && verifyHex(hexSig, body, key)
}

// verifyHex checks a hex HMAC-SHA256 of body.
func verifyHex(sig string, body []byte, key string) bool {
	if key == "" {
		return false
	}
	got, err := hex.DecodeString(strings.TrimSpace(sig))
	if err != nil {
		return false
	}
	mac := hmac.New(sha256.New, []byte(key))
	mac.Write(body)
	return hmac.Equal(got, mac.Sum(nil))
}

// equal compares in time that depends only on the lengths.
func equal(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
