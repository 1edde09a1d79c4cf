package gitsource

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-git/go-git/v5/plumbing/transport"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"github.com/skeema/knownhosts"
	"golang.org/x/crypto/ssh"
	xknownhosts "golang.org/x/crypto/ssh/knownhosts"

	"github.com/flotilla-gitops/flotilla/internal/api"
)

// DefaultSSHUser is the SSH user when neither SSHAuth.User nor the URL
// names one (the user every Git host expects).
const DefaultSSHUser = "git"

// sshDialTimeout bounds the TCP connection to an SSH host: go-git's dial
// does not follow the operation's context.
const sshDialTimeout = 30 * time.Second

// HostKeyError is an SSH host key that known_hosts does not trust. It
// matches ErrHostKey and names no secret: host keys are public.
type HostKeyError struct {
	// Host is the host as known_hosts spells it: "github.com", or
	// "[127.0.0.1]:2222" for a port other than 22.
	Host string
	// KeyType and Fingerprint (SHA256:…) describe the key the server
	// offered.
	KeyType, Fingerprint string
	// Known are the fingerprints known_hosts has for the host; empty when
	// the host is unknown.
	Known []string
	// Revoked is set when known_hosts marks the offered key @revoked.
	Revoked bool
}

// Error names the host, the offered key and what known_hosts says.
func (e *HostKeyError) Error() string {
	switch {
	case e.Revoked:
		return fmt.Sprintf("host key of %s (%s %s) is marked @revoked in known_hosts", e.Host, e.KeyType, e.Fingerprint)
	case len(e.Known) == 0:
		return fmt.Sprintf("host key of %s (%s %s) is not in known_hosts "+
			"(add it to the clientSecretName Secret's known_hosts or --ssh-known-hosts)", e.Host, e.KeyType, e.Fingerprint)
	default:
		return fmt.Sprintf("host key of %s changed: the server offers %s, known_hosts has %s for it; "+
			"a man-in-the-middle, or the host's key was replaced", e.Host, e.Fingerprint, strings.Join(e.Known, ", "))
	}
}

// Is makes errors.Is(err, ErrHostKey) true.
func (e *HostKeyError) Is(target error) bool { return target == ErrHostKey }

// sshEndpoint prepares an ssh://, git+ssh:// or scp-like remote: the URL
// without userinfo (scp-like stays scp-like, its path being relative to the
// user's home) and a public key authentication whose host key check uses
// r.SSH.KnownHosts.
func (r Remote) sshEndpoint() (endpoint, error) {
	redacted := api.RedactURL(r.URL)
	te, err := transport.NewEndpoint(r.URL)
	if err != nil || te.Protocol != "ssh" && te.Protocol != "git+ssh" && te.Protocol != "ssh+git" || te.Host == "" {
		return endpoint{}, fmt.Errorf("%w: %s", ErrInvalidURL, redacted)
	}
	cleaned, err := sshURL(r.URL)
	if err != nil {
		return endpoint{}, err
	}
	a := r.SSH
	if a == nil {
		a = &SSHAuth{}
	}
	user := a.User
	if user == "" {
		user = te.User
	}
	if user == "" {
		user = DefaultSSHUser
	}
	auth, err := newSSHKeyAuth(user, a, cleaned)
	if err != nil {
		return endpoint{}, err
	}
	return endpoint{url: cleaned, auth: auth, ssh: auth}, nil
}

// sshURL is raw without userinfo, with git+ssh:// and ssh+git:// spelled
// ssh:// (go-git knows only that scheme).
func sshURL(raw string) (string, error) {
	i := strings.Index(raw, "://")
	if i < 0 { // scp-like: [user@]host:path
		if at := strings.Index(raw, "@"); at >= 0 && at < strings.Index(raw, ":") {
			return raw[at+1:], nil
		}
		return raw, nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		// url.Error quotes the whole URL, a password included.
		return "", fmt.Errorf("%w: %s", ErrInvalidURL, api.RedactURL(raw))
	}
	u.Scheme, u.User = "ssh", nil
	return u.String(), nil
}

// sshKeyAuth is go-git's SSH AuthMethod for one private key. It records
// how far the last handshake got, so that classify can tell a refused key
// from a broken connection without reading messages.
type sshKeyAuth struct {
	user   string
	url    string
	signer ssh.AlgorithmSigner
	// hostKeys checks the server's key; algorithms lists the key types
	// known_hosts has for the host, so the server offers one of those.
	hostKeys   ssh.HostKeyCallback
	algorithms func(hostWithPort string) []string

	offered atomic.Bool // the key was offered to the server
	signed  atomic.Bool // the server accepted it and asked for a signature
}

func newSSHKeyAuth(user string, a *SSHAuth, cleaned string) (*sshKeyAuth, error) {
	if len(a.PrivateKey) == 0 {
		return nil, fmt.Errorf("%w: %s: no SSH private key (ssh-privatekey in the clientSecretName Secret)", ErrAuth, cleaned)
	}
	signer, err := parsePrivateKey(a.PrivateKey, a.Passphrase)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrAuth, cleaned, err)
	}
	algSigner, ok := signer.(ssh.AlgorithmSigner)
	if !ok {
		return nil, fmt.Errorf("%w: %s: unsupported SSH private key type %s", ErrAuth, cleaned, signer.PublicKey().Type())
	}
	k := &sshKeyAuth{user: user, url: cleaned, signer: algSigner}
	switch {
	case a.InsecureIgnoreHostKey:
		k.hostKeys = ssh.InsecureIgnoreHostKey() // asked for: insecureSkipHostKeyChecks
	case len(strings.TrimSpace(string(a.KnownHosts))) == 0:
		return nil, fmt.Errorf("%w: %s: no known_hosts to check the host key against: add the host's line to the "+
			"clientSecretName Secret's known_hosts or to the worker's --ssh-known-hosts file "+
			"(or set insecureSkipHostKeyChecks)", ErrHostKey, cleaned)
	default:
		db, err := knownHostsDB(a.KnownHosts)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrHostKey, cleaned, err)
		}
		k.hostKeys, k.algorithms = checkHostKey(db.HostKeyCallback()), db.HostKeyAlgorithms
	}
	return k, nil
}

// parsePrivateKey reads a PEM or OpenSSH private key. Its errors never
// quote the key.
func parsePrivateKey(key, passphrase []byte) (ssh.Signer, error) {
	var (
		signer ssh.Signer
		err    error
	)
	if len(passphrase) > 0 {
		signer, err = ssh.ParsePrivateKeyWithPassphrase(key, passphrase)
	} else {
		signer, err = ssh.ParsePrivateKey(key)
	}
	var missing *ssh.PassphraseMissingError
	switch {
	case err == nil:
		return signer, nil
	case errors.As(err, &missing):
		return nil, errors.New("the SSH private key is encrypted and no passphrase was given")
	case len(passphrase) > 0:
		return nil, errors.New("the SSH private key cannot be read with the passphrase given (wrong passphrase, or not a PEM or OpenSSH private key)")
	default:
		return nil, errors.New("the SSH private key cannot be read (not a PEM or OpenSSH private key)")
	}
}

// knownHostsDB parses known_hosts lines; the libraries read files only, so
// they go through a temporary file that is removed at once.
func knownHostsDB(lines []byte) (*knownhosts.HostKeyDB, error) {
	f, err := os.CreateTemp("", "flotilla-known-hosts-*")
	if err != nil {
		return nil, fmt.Errorf("known_hosts: %w", err)
	}
	defer os.Remove(f.Name())
	_, werr := f.Write(lines)
	if err := errors.Join(werr, f.Close()); err != nil {
		return nil, fmt.Errorf("known_hosts: %w", err)
	}
	db, err := knownhosts.NewDB(f.Name())
	if err != nil {
		return nil, fmt.Errorf("known_hosts: %w", err)
	}
	return db, nil
}

// checkHostKey turns knownhosts' errors into *HostKeyError.
func checkHostKey(cb ssh.HostKeyCallback) ssh.HostKeyCallback {
	return func(hostname string, remote net.Addr, key ssh.PublicKey) error {
		err := cb(hostname, remote, key)
		if err == nil {
			return nil
		}
		hk := &HostKeyError{Host: xknownhosts.Normalize(hostname), KeyType: key.Type(), Fingerprint: ssh.FingerprintSHA256(key)}
		var keyErr *xknownhosts.KeyError
		var revoked *xknownhosts.RevokedError
		switch {
		case errors.As(err, &revoked):
			hk.Revoked = true
		case errors.As(err, &keyErr):
			for _, k := range keyErr.Want {
				hk.Known = append(hk.Known, ssh.FingerprintSHA256(k.Key))
			}
		default:
			return err
		}
		return hk
	}
}

// Name is go-git's name of public key authentication.
func (k *sshKeyAuth) Name() string { return gitssh.PublicKeysName }

// String names the user, never the key.
func (k *sshKeyAuth) String() string {
	return fmt.Sprintf("user: %s, name: %s (key redacted)", k.user, k.Name())
}

// ClientConfig is called by go-git once per connection.
func (k *sshKeyAuth) ClientConfig() (*ssh.ClientConfig, error) {
	k.offered.Store(false)
	k.signed.Store(false)
	signers := func() ([]ssh.Signer, error) {
		k.offered.Store(true)
		return []ssh.Signer{recordingSigner{AlgorithmSigner: k.signer, signed: &k.signed}}, nil
	}
	cfg := &ssh.ClientConfig{User: k.user, Auth: []ssh.AuthMethod{ssh.PublicKeysCallback(signers)},
		HostKeyCallback: k.hostKeys, Timeout: sshDialTimeout}
	if k.algorithms != nil {
		if te, err := transport.NewEndpoint(k.url); err == nil {
			port := te.Port
			if port <= 0 {
				port = gitssh.DefaultPort
			}
			cfg.HostKeyAlgorithms = preferAlgorithms(k.algorithms(net.JoinHostPort(te.Host, fmt.Sprint(port))))
		}
	}
	return cfg, nil
}

// preferAlgorithms lists the host key algorithms known_hosts has for the
// host first, then every other one x/crypto supports: a server with a
// known key type uses it, and one without is refused as a changed key
// (naming the known fingerprints) rather than failing to agree on an
// algorithm.
func preferAlgorithms(known []string) []string {
	out := slices.Clone(known)
	for _, a := range ssh.SupportedAlgorithms().HostKeys {
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// recordingSigner notes that the server accepted the key: it asks for a
// signature only then.
type recordingSigner struct {
	ssh.AlgorithmSigner
	signed *atomic.Bool
}

func (s recordingSigner) Sign(rand io.Reader, data []byte) (*ssh.Signature, error) {
	s.signed.Store(true)
	return s.AlgorithmSigner.Sign(rand, data)
}

func (s recordingSigner) SignWithAlgorithm(rand io.Reader, data []byte, algorithm string) (*ssh.Signature, error) {
	s.signed.Store(true)
	return s.AlgorithmSigner.SignWithAlgorithm(rand, data, algorithm)
}

// refused reports whether the last handshake failed because the server
// refused the key: it was offered and never accepted, and the connection
// did not just break.
func (k *sshKeyAuth) refused(err error) bool {
	var netErr net.Error
	broken := errors.As(err, &netErr) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
	return k.offered.Load() && !k.signed.Load() && !broken
}
