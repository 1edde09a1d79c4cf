package webhook

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// secretFor is the secret a hook of provider p is configured with.
func secretFor(p Provider) Secret {
	if p == AzureDevOps {
		return Secret{Username: "flotilla", Password: "9vT#q2!rWz-basic"}
	}
	return Secret{Token: "It's a Secret to Everybody"}
}

// wrongSecretFor differs from secretFor(p) in what p checks.
func wrongSecretFor(p Provider) Secret {
	if p == AzureDevOps {
		return Secret{Username: "flotilla", Password: "9vT#q2!rWz-basiC"}
	}
	return Secret{Token: "It's a secret to everybody"}
}

// bodyBound reports whether p's credential covers the body. GitLab's
// token and Azure DevOps' basic auth are sent as-is, so a changed body
// still carries them: only TLS protects those deliveries.
func bodyBound(p Provider) bool { return p != GitLab && p != AzureDevOps }

func TestVerify(t *testing.T) {
	for _, p := range Providers {
		t.Run(string(p), func(t *testing.T) {
			body := readFixture(t, "github-push.json")
			s := secretFor(p)

			t.Run("good credential", func(t *testing.T) {
				h := deliveryHeaders(p, "push", "d")
				sign(p, h, body, s)
				assert.True(t, Verify(p, h, body, s))
				assert.True(t, Signed(p, h))
			})
			t.Run("good credential, empty body", func(t *testing.T) {
				h := http.Header{}
				sign(p, h, nil, s)
				assert.True(t, Verify(p, h, nil, s))
			})
			t.Run("wrong secret", func(t *testing.T) {
				h := deliveryHeaders(p, "push", "d")
				sign(p, h, body, wrongSecretFor(p))
				assert.False(t, Verify(p, h, body, s))
				assert.True(t, Signed(p, h))
			})
			t.Run("missing header", func(t *testing.T) {
				h := deliveryHeaders(p, "push", "d")
				assert.False(t, Verify(p, h, body, s))
				assert.False(t, Signed(p, h))
			})
			t.Run("tampered body", func(t *testing.T) {
				h := deliveryHeaders(p, "push", "d")
				sign(p, h, body, s)
				tampered := append([]byte{}, body...)
				tampered[len(tampered)/2] ^= 0x01
				assert.Equal(t, !bodyBound(p), Verify(p, h, tampered, s))
				assert.Equal(t, !bodyBound(p), Verify(p, h, append(body, '\n'), s), "trailing newline")
			})
			t.Run("empty secret never verifies", func(t *testing.T) {
				h := deliveryHeaders(p, "push", "d")
				sign(p, h, body, Secret{})
				assert.False(t, Verify(p, h, body, Secret{}))
				h = deliveryHeaders(p, "push", "d")
				sign(p, h, body, s)
				assert.False(t, Verify(p, h, body, Secret{}))
			})
			t.Run("secret for another provider's scheme", func(t *testing.T) {
				// A secret holding only basic-auth credentials must not let a
				// signature made with the empty key through, and vice versa.
				other := Secret{Username: "flotilla", Password: "9vT#q2!rWz-basic"}
				if p == AzureDevOps {
					other = Secret{Token: "It's a Secret to Everybody"}
				}
				h := deliveryHeaders(p, "push", "d")
				sign(p, h, body, Secret{})
				assert.False(t, Verify(p, h, body, other))
			})
			t.Run("unknown provider", func(t *testing.T) {
				h := http.Header{}
				sign(p, h, body, s)
				assert.False(t, Verify(Provider("sourcehut"), h, body, s))
				assert.False(t, Signed(Provider("sourcehut"), h))
			})
		})
	}
}

func TestVerify_HeaderForms(t *testing.T) {
	body := readFixture(t, "gitea-push.json")
	key := secretFor(GitHub).Token
	mac := hmacHex(key, body)
	s := Secret{Token: key}
	tests := []struct {
		name       string
		provider   Provider
		header     http.Header
		wantOK     bool
		wantSigned bool
	}{
		{"github sha256", GitHub, http.Header{"X-Hub-Signature-256": {"sha256=" + mac}}, true, true},
		{"github without prefix", GitHub, http.Header{"X-Hub-Signature-256": {mac}}, false, true},
		{"github legacy sha1 only", GitHub, http.Header{"X-Hub-Signature": {"sha1=" + hmacSHA1Hex(key, body)}}, false, false},
		{"github sha256 value under legacy name", GitHub, http.Header{"X-Hub-Signature": {"sha256=" + mac}}, false, false},
		{"github truncated", GitHub, http.Header{"X-Hub-Signature-256": {"sha256=" + mac[:63]}}, false, true},
		{"github not hex", GitHub, http.Header{"X-Hub-Signature-256": {"sha256=" + mac[:62] + "zz"}}, false, true},
		{"github empty", GitHub, http.Header{"X-Hub-Signature-256": {""}}, false, false},
		{"gitea own header", Gitea, http.Header{"X-Gitea-Signature": {mac}}, true, true},
		{"gitea github header", Gitea, http.Header{"X-Hub-Signature-256": {"sha256=" + mac}}, true, true},
		{"gitea own header with prefix", Gitea, http.Header{"X-Gitea-Signature": {"sha256=" + mac}}, false, true},
		{"gogs", Gogs, http.Header{"X-Gogs-Signature": {mac}}, true, true},
		{"gogs github header", Gogs, http.Header{"X-Hub-Signature-256": {"sha256=" + mac}}, false, false},
		{"bitbucket sha256", Bitbucket, http.Header{"X-Hub-Signature": {"sha256=" + mac}}, true, true},
		{"bitbucket without prefix", Bitbucket, http.Header{"X-Hub-Signature": {mac}}, false, true},
		{"bitbucket sha1 prefix", Bitbucket, http.Header{"X-Hub-Signature": {"sha1=" + mac}}, false, true},
		{"bitbucket server sha256", BitbucketServer, http.Header{"X-Hub-Signature": {"sha256=" + mac}}, true, true},
		{"bitbucket server github header", BitbucketServer, http.Header{"X-Hub-Signature-256": {"sha256=" + mac}}, false, false},
		{"gitlab token", GitLab, http.Header{"X-Gitlab-Token": {key}}, true, true},
		{"gitlab token other case", GitLab, http.Header{"X-Gitlab-Token": {"it's a secret to everybody"}}, false, true},
		{"gitlab token prefix", GitLab, http.Header{"X-Gitlab-Token": {key[:10]}}, false, true},
		{"gitlab hmac of body", GitLab, http.Header{"X-Gitlab-Token": {mac}}, false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.wantOK, Verify(tc.provider, tc.header, body, s))
			assert.Equal(t, tc.wantSigned, Signed(tc.provider, tc.header))
		})
	}
}

func TestVerify_AzureBasicAuth(t *testing.T) {
	s := secretFor(AzureDevOps)
	basic := func(userPass string) http.Header {
		return http.Header{"Authorization": {"Basic " + base64.StdEncoding.EncodeToString([]byte(userPass))}}
	}
	tests := []struct {
		name   string
		header http.Header
		secret Secret
		wantOK bool
	}{
		{"good", basic("flotilla:9vT#q2!rWz-basic"), s, true},
		{"wrong user", basic("flotila:9vT#q2!rWz-basic"), s, false},
		{"wrong password", basic("flotilla:9vT#q2!rWz-basiC"), s, false},
		{"password prefix", basic("flotilla:9vT#q2"), s, false},
		{"user and password swapped", basic("9vT#q2!rWz-basic:flotilla"), s, false},
		{"no colon", basic("flotilla9vT#q2!rWz-basic"), s, false},
		{"bearer scheme", http.Header{"Authorization": {"Bearer 9vT#q2!rWz-basic"}}, s, false},
		{"not base64", http.Header{"Authorization": {"Basic !!!notbase64"}}, s, false},
		{"empty password configured", basic("flotilla:"), Secret{Username: "flotilla"}, false},
		{"empty user configured, matching", basic(":9vT#q2!rWz-basic"), Secret{Password: "9vT#q2!rWz-basic"}, true},
		{"token only configured", basic("flotilla:"), Secret{Token: "It's a Secret to Everybody"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.wantOK, Verify(AzureDevOps, tc.header, []byte(`{}`), tc.secret))
			assert.True(t, Signed(AzureDevOps, tc.header))
		})
	}
}

// The helper other tests lean on must produce what Verify accepts.
func TestSign_RoundTrip(t *testing.T) {
	for _, p := range Providers {
		t.Run(string(p), func(t *testing.T) {
			h := http.Header{}
			body := []byte(`{"ref":"refs/heads/main"}`)
			sign(p, h, body, secretFor(p))
			assert.True(t, Verify(p, h, body, secretFor(p)))
		})
	}
}

// WellFormed accepts each provider's credential as it sends it, and
// nothing a secret could not verify.
func TestWellFormed(t *testing.T) {
	mac := hmacHex("k", []byte("body"))
	basic := func(userPass string) string { return "Basic " + base64.StdEncoding.EncodeToString([]byte(userPass)) }
	tests := []struct {
		provider Provider
		header   string
		value    string
		want     bool
	}{
		{GitHub, "X-Hub-Signature-256", "sha256=" + mac, true},
		{GitHub, "X-Hub-Signature-256", "sha256=" + strings.ToUpper(mac), true},
		{GitHub, "X-Hub-Signature-256", mac, false},
		{GitHub, "X-Hub-Signature-256", "sha256=" + mac[:62], false},
		{GitHub, "X-Hub-Signature-256", "sha256=" + mac + "00", false},
		{GitHub, "X-Hub-Signature-256", "sha256=" + strings.Repeat("g", 64), false},
		{GitHub, "X-Hub-Signature", "sha1=" + mac[:40], false},
		{Gitea, "X-Gitea-Signature", mac, true},
		{Gitea, "X-Gitea-Signature", "sha256=" + mac, false},
		{Gitea, "X-Hub-Signature-256", "sha256=" + mac, true},
		{Gogs, "X-Gogs-Signature", " " + mac + " ", true},
		{Gogs, "X-Gogs-Signature", "x", false},
		{Bitbucket, "X-Hub-Signature", "sha256=" + mac, true},
		{BitbucketServer, "X-Hub-Signature", mac, false},
		{GitLab, "X-Gitlab-Token", "t", true},
		{GitLab, "X-Gitlab-Token", strings.Repeat("t", 1024), true},
		{GitLab, "X-Gitlab-Token", strings.Repeat("t", 1025), false},
		{AzureDevOps, "Authorization", basic("u:p"), true},
		{AzureDevOps, "Authorization", basic("u:"), false},
		{AzureDevOps, "Authorization", "Bearer p", false},
		{Provider("sourcehut"), "X-Hub-Signature-256", "sha256=" + mac, false},
	}
	for _, tc := range tests {
		t.Run(string(tc.provider)+" "+tc.header+" "+tc.value, func(t *testing.T) {
			assert.Equal(t, tc.want, WellFormed(tc.provider, http.Header{http.CanonicalHeaderKey(tc.header): {tc.value}}))
		})
	}
	assert.False(t, WellFormed(GitHub, http.Header{}), "no header")
}
