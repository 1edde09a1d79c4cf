// Package githubapp mints GitHub App installation access tokens: a JWT
// signed (RS256) with the App's private key is exchanged at the API's
// /app/installations/<id>/access_tokens for a token Git accepts as
// basic-auth password (username x-access-token). Tokens are cached in
// memory per App and installation and minted again shortly before they
// expire; they are never written anywhere.
package githubapp

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
)

// Sentinel errors, for errors.Is.
var (
	// ErrUnauthorized means the API refused the App's JWT (wrong App ID or
	// key, or an installation the App does not have): HTTP 401, 403 or
	// 404. Trying again does not help.
	ErrUnauthorized = errors.New("GitHub App authentication failed")
	// ErrInvalidKey means the App's private key is not a PEM RSA key
	// (PKCS#1 or PKCS#8). Trying again does not help.
	ErrInvalidKey = errors.New("GitHub App private key is not a PEM RSA private key")
	// ErrInvalidApp means an App lacks its ID, installation ID or API URL,
	// or its CABundle holds no PEM certificate.
	ErrInvalidApp = errors.New("invalid GitHub App")
)

// StatusError is an unexpected answer of the token endpoint (other than
// 401, 403 and 404, which are ErrUnauthorized): a 5xx, a rate limit, or
// a 2xx without a token. It is worth trying again.
type StatusError struct {
	// App names the App and installation.
	App string
	// StatusCode is the HTTP status.
	StatusCode int
	// Message is GitHub's explanation, if the body had one.
	Message string
}

// Error reads "GitHub App 1 installation 2 at URL: token endpoint answered
// HTTP 502: message".
func (e *StatusError) Error() string {
	msg := fmt.Sprintf("%s: token endpoint answered HTTP %d", e.App, e.StatusCode)
	if e.Message != "" {
		msg += ": " + e.Message
	}
	return msg
}

// App is a GitHub App installation and its private key.
type App struct {
	// ID is the App's ID; InstallationID the installation's.
	ID             int64
	InstallationID int64
	// PrivateKey is the App's PEM RSA private key (PKCS#1 or PKCS#8).
	PrivateKey []byte
	// APIURL is the REST API's base: https://api.github.com, or
	// https://HOST/api/v3 for GitHub Enterprise Server (APIURL).
	APIURL string
	// CABundle and InsecureSkipTLSVerify are the GitRepo's TLS settings,
	// used for the API too.
	CABundle              []byte
	InsecureSkipTLSVerify bool
}

// String names the App, never its key.
func (a App) String() string {
	return fmt.Sprintf("GitHub App %d installation %d at %s", a.ID, a.InstallationID, a.APIURL)
}

// GoString keeps %#v from printing the key.
func (a App) GoString() string { return "githubapp.App{" + a.String() + "}" }

// validate checks what Token needs before any request.
func (a App) validate() error {
	switch {
	case a.ID <= 0:
		return fmt.Errorf("%w: %s: the App ID must be a positive number", ErrInvalidApp, a)
	case a.InstallationID <= 0:
		return fmt.Errorf("%w: %s: the installation ID must be a positive number", ErrInvalidApp, a)
	case a.APIURL == "":
		return fmt.Errorf("%w: %s: no API URL", ErrInvalidApp, a)
	}
	return nil
}

// APIURL returns the REST API base for a repository URL (https, ssh:// or
// scp-like): https://api.github.com for github.com,
// https://api.SUBDOMAIN.ghe.com for GitHub Enterprise Cloud with data
// residency, and https://HOST[:port]/api/v3 (GitHub Enterprise Server) for
// any other host. The port is kept for http(s) URLs only: an SSH port is
// not the API's. It returns "" when repoURL names no host.
func APIURL(repoURL string) string {
	host, port := repoHost(repoURL)
	host = strings.ToLower(host)
	switch {
	case host == "":
		return ""
	case host == "github.com" || host == "www.github.com":
		return "https://api.github.com"
	case strings.HasSuffix(host, ".ghe.com"):
		return "https://api." + host
	case port != "":
		return "https://" + net.JoinHostPort(host, port) + "/api/v3"
	}
	if strings.Contains(host, ":") { // IPv6 literal
		host = "[" + host + "]"
	}
	return "https://" + host + "/api/v3"
}

// repoHost returns a repository URL's host, and its port for http(s).
func repoHost(repoURL string) (host, port string) {
	if !strings.Contains(repoURL, "://") {
		// scp-like: [user@]host:path
		hostPart, _, ok := strings.Cut(repoURL, ":")
		if !ok {
			return "", ""
		}
		if i := strings.LastIndex(hostPart, "@"); i >= 0 {
			hostPart = hostPart[i+1:]
		}
		return strings.Trim(hostPart, "[]"), ""
	}
	u, err := url.Parse(repoURL)
	if err != nil {
		return "", ""
	}
	if u.Scheme == "http" || u.Scheme == "https" {
		return u.Hostname(), u.Port()
	}
	return u.Hostname(), ""
}
