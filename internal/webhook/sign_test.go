package webhook

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
)

// sign sets on h the credential headers provider p sends for body when its
// hook is configured with s, the way the real host does (GitHub also sends
// the legacy SHA-1 signature; Gitea sends its own, Gogs' and GitHub's).
// It signs with whatever s holds, an empty Token included, so tests can
// also build deliveries that must not verify.
func sign(p Provider, h http.Header, body []byte, s Secret) {
	switch p {
	case GitHub:
		h.Set("X-Hub-Signature", "sha1="+hmacSHA1Hex(s.Token, body))
		h.Set("X-Hub-Signature-256", "sha256="+hmacHex(s.Token, body))
	case Gitea:
		h.Set("X-Gitea-Signature", hmacHex(s.Token, body))
		h.Set("X-Gogs-Signature", hmacHex(s.Token, body))
		h.Set("X-Hub-Signature", "sha1="+hmacSHA1Hex(s.Token, body))
		h.Set("X-Hub-Signature-256", "sha256="+hmacHex(s.Token, body))
	case Gogs:
		h.Set("X-Gogs-Signature", hmacHex(s.Token, body))
	case GitLab:
		h.Set("X-Gitlab-Token", s.Token)
	case Bitbucket, BitbucketServer:
		h.Set("X-Hub-Signature", "sha256="+hmacHex(s.Token, body))
	case AzureDevOps:
		(&http.Request{Header: h}).SetBasicAuth(s.Username, s.Password)
	default:
		panic(fmt.Sprintf("sign: unknown provider %q", p))
	}
}

// hmacHex is the lower-case hex HMAC-SHA256 of body under key.
func hmacHex(key string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(key))
	mac.Write(body)
	return hex.EncodeToString(mac.Sum(nil))
}

func hmacSHA1Hex(key string, body []byte) string {
	mac := hmac.New(sha1.New, []byte(key))
	mac.Write(body)
	return hex.EncodeToString(mac.Sum(nil))
}
