package gitsource

import (
	"errors"
	"fmt"
	"net/url"

	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"

	"github.com/flotilla-gitops/flotilla/internal/api"
)

// Sentinel errors, for errors.Is.
var (
	// ErrAuth means the server refused the credentials, or asked for some
	// and none were given.
	ErrAuth = errors.New("git authentication failed")
	// ErrRefNotFound means a branch, tag, revision or commit does not exist
	// in the remote; the error is a *RefNotFoundError.
	ErrRefNotFound = errors.New("git reference not found")
	// ErrRepositoryNotFound means the server has no repository at the URL.
	ErrRepositoryNotFound = errors.New("git repository not found")
	// ErrInvalidURL means a Remote's URL cannot be parsed.
	ErrInvalidURL = errors.New("invalid Git URL")
	// ErrHostKey means an SSH server's host key is not in known_hosts or
	// differs from the line there; the error names the host and the
	// offered key's SHA256 fingerprint.
	ErrHostKey = errors.New("SSH host key not trusted")
)

// RefNotFoundError is a branch, tag, revision or commit missing from a
// remote. It matches ErrRefNotFound.
type RefNotFoundError struct {
	// Kind is "branch", "revision" or "commit".
	Kind string
	// Name is what was looked for, as given.
	Name string
	// URL is the remote, without credentials.
	URL string
}

// Error reads `branch "x" not found in <url>`.
func (e *RefNotFoundError) Error() string {
	return fmt.Sprintf("%s %q not found in %s", e.Kind, e.Name, e.URL)
}

// Is makes errors.Is(err, ErrRefNotFound) true.
func (e *RefNotFoundError) Is(target error) bool { return target == ErrRefNotFound }

// Auth is HTTP basic authentication. A token goes in Password (most servers
// accept any non-empty Username with it).
type Auth struct {
	Username string
	Password string
}

// String names the user and hides the password.
func (a Auth) String() string {
	if a.Password == "" {
		return fmt.Sprintf("basic auth %q (no password)", a.Username)
	}
	return fmt.Sprintf("basic auth %q (password redacted)", a.Username)
}

// GoString keeps %#v from printing the password.
func (a Auth) GoString() string { return "gitsource.Auth{" + a.String() + "}" }

// SSHAuth is a private key for ssh:// and scp-like remotes, and what the
// server's host key is checked against.
type SSHAuth struct {
	// User is the SSH user; empty: the URL's, else "git".
	User string
	// PrivateKey is PEM or OpenSSH format; Passphrase opens an encrypted
	// one.
	PrivateKey []byte
	Passphrase []byte
	// KnownHosts are known_hosts lines the host key must match (the
	// Secret's known_hosts, else the worker's --ssh-known-hosts file). A
	// host with no line is refused, as is a key that differs.
	KnownHosts []byte
	// InsecureIgnoreHostKey accepts any host key.
	InsecureIgnoreHostKey bool
}

// String names the key's presence, never the key.
func (a SSHAuth) String() string {
	return fmt.Sprintf("ssh key for %q (redacted), %d bytes of known_hosts", a.User, len(a.KnownHosts))
}

// GoString keeps %#v from printing the key.
func (a SSHAuth) GoString() string { return "gitsource.SSHAuth{" + a.String() + "}" }

// Remote is a Git repository reachable over HTTP(S) or SSH.
type Remote struct {
	// URL is the clone URL. Userinfo in it is used as Auth when Auth is nil
	// and is never sent to go-git or shown in messages.
	URL string
	// Auth is optional: default anonymous. It is for http(s) remotes.
	Auth *Auth
	// SSH authenticates ssh:// and scp-like remotes.
	SSH *SSHAuth
	// InsecureSkipTLSVerify turns off certificate verification.
	InsecureSkipTLSVerify bool
	// CABundle holds PEM certificates trusted in addition to the system's.
	CABundle []byte
}

// String is the URL without credentials.
func (r Remote) String() string { return api.RedactURL(r.URL) }

// GoString keeps %#v from printing credentials.
func (r Remote) GoString() string {
	auth := "nil"
	if r.Auth != nil {
		auth = r.Auth.GoString()
	}
	return fmt.Sprintf("gitsource.Remote{URL: %q, Auth: %s, InsecureSkipTLSVerify: %t, CABundle: %d bytes}",
		api.RedactURL(r.URL), auth, r.InsecureSkipTLSVerify, len(r.CABundle))
}

// endpoint is a Remote prepared for go-git: a URL without userinfo and the
// transport options.
type endpoint struct {
	url      string
	auth     transport.AuthMethod
	insecure bool
	caBundle []byte
	// ssh is auth for ssh remotes: it knows how far a handshake got.
	ssh *sshKeyAuth
}

func (r Remote) endpoint() (endpoint, error) {
	if IsSSH(r.URL) {
		return r.sshEndpoint()
	}
	// The parse error is not wrapped: url.Error quotes the whole URL,
	// credentials included.
	u, err := url.Parse(r.URL)
	if err != nil || u.Host == "" {
		return endpoint{}, fmt.Errorf("%w: %s", ErrInvalidURL, api.RedactURL(r.URL))
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return endpoint{}, fmt.Errorf("%w: %s: only http and https are supported", ErrInvalidURL, api.RedactURL(r.URL))
	}
	ep := endpoint{insecure: r.InsecureSkipTLSVerify, caBundle: r.CABundle}
	switch {
	case r.Auth != nil:
		ep.auth = &githttp.BasicAuth{Username: r.Auth.Username, Password: r.Auth.Password}
	case u.User != nil:
		pw, _ := u.User.Password()
		ep.auth = &githttp.BasicAuth{Username: u.User.Username(), Password: pw}
	}
	u.User = nil
	ep.url = u.String()
	return ep, nil
}

// classify wraps a go-git error from an operation on ep with this package's
// sentinels. go-git's messages never carry the password: it is sent in a
// header and the URL it sees has no userinfo.
func (ep endpoint) classify(op string, err error) error {
	if rl, ok := asRateLimited(err); ok {
		return fmt.Errorf("%s %s: %w", op, ep.url, rl)
	}
	switch {
	case errors.Is(err, ErrHostKey):
		return fmt.Errorf("%s %s: %w", op, ep.url, err)
	case errors.Is(err, transport.ErrAuthenticationRequired), errors.Is(err, transport.ErrAuthorizationFailed),
		ep.ssh != nil && ep.ssh.refused(err):
		return fmt.Errorf("%s %s: %w: %w", op, ep.url, ErrAuth, err)
	case errors.Is(err, transport.ErrRepositoryNotFound):
		return fmt.Errorf("%s %s: %w: %w", op, ep.url, ErrRepositoryNotFound, err)
	case UntrustedCertificate(err):
		return fmt.Errorf("%s %s: %w: %w", op, ep.url, ErrTLS, err)
	default:
		return fmt.Errorf("%s %s: %w", op, ep.url, err)
	}
}

// IsSSH reports whether url is an ssh:// (or git+ssh://) URL or scp-like
// ([user@]host:path, no scheme).
func IsSSH(url string) bool { return api.IsSSHURL(url) }
