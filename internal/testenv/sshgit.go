package testenv

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// sshdPrivsepDir is the privilege separation directory Debian's sshd is
// built with; it refuses to start without it (the package's service
// creates it at boot, which a container never does).
const sshdPrivsepDir = "/run/sshd"

// SSHGitServer is Debian's OpenSSH server on a loopback port serving Git
// repositories through git-shell, as a Git host serves them to deploy
// keys. It runs with its own sshd_config, host key and authorized_keys
// under a test directory: public key authentication only, no PAM, and
// every session forced through `git-shell -c "$SSH_ORIGINAL_COMMAND"`, so
// a client can ls-remote, fetch and push but gets no shell.
//
// The login user is the test's own user (root in CI: the config permits
// root login with keys only, PermitRootLogin prohibit-password); a user
// named git does not exist on the test machines. Repositories are served by
// absolute path: RepoURL(dir) is ssh://USER@127.0.0.1:PORT/DIR, so a
// GitServer's repository (GitRepo.Dir) is reachable over HTTP and SSH at
// once. RepoURL gives no scp-like form: git itself cannot put a port in
// one (go-git reads USER@HOST:PORT:/DIR as a port, which TestGitSSH uses).
type SSHGitServer struct {
	sshd string
	dir  string
	port int
	user string

	mu      sync.Mutex
	hostKey ssh.Signer
	proc    *Process
}

// SSHDPath returns the sshd binary for SSH tests (FLOTILLA_SSHD, else
// /usr/sbin/sshd) or skips the test saying how to get one.
func SSHDPath(t testing.TB) string {
	t.Helper()
	path := os.Getenv("FLOTILLA_SSHD")
	if path == "" {
		path = "/usr/sbin/sshd"
	}
	if _, err := os.Stat(path); err != nil {
		t.Skipf("testenv: no sshd at %s (%v): export FLOTILLA_SSHD=$(bash hack/sshd.sh) to run the SSH tests", path, err)
	}
	return path
}

// StartSSHGitServer starts sshd on a free 127.0.0.1 port with a new
// ed25519 host key, and stops it (by its process group) when the test
// ends. It skips the test when there is no sshd (see SSHDPath) and fails
// it when sshd does not come up.
func StartSSHGitServer(t testing.TB) *SSHGitServer {
	t.Helper()
	s := &SSHGitServer{sshd: SSHDPath(t), dir: t.TempDir(), port: FreePort(t)}
	if _, err := exec.LookPath("git-shell"); err != nil {
		t.Skipf("testenv: git-shell is missing (%v): install git", err)
	}
	u, err := user.Current()
	if err != nil {
		t.Fatalf("testenv: current user: %v", err)
	}
	s.user = u.Username
	if err := os.MkdirAll(sshdPrivsepDir, 0o755); err != nil {
		t.Skipf("testenv: sshd needs %s: %v", sshdPrivsepDir, err)
	}
	if err := os.WriteFile(s.authorizedKeys(), nil, 0o600); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	s.start(t)
	return s
}

// User is the login user of the repository URLs.
func (s *SSHGitServer) User() string { return s.user }

// Port is the server's port on 127.0.0.1.
func (s *SSHGitServer) Port() int { return s.port }

// RepoURL is the ssh:// URL of the bare repository at the absolute path dir.
func (s *SSHGitServer) RepoURL(dir string) string {
	return fmt.Sprintf("ssh://%s@127.0.0.1:%d%s", s.user, s.port, filepath.ToSlash(dir))
}

// KnownHostsLine is the known_hosts line of the current host key:
// "[127.0.0.1]:PORT ssh-ed25519 AAAA…".
func (s *SSHGitServer) KnownHostsLine() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprintf("[127.0.0.1]:%d %s", s.port, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(s.hostKey.PublicKey()))))
}

// HostKeyFingerprint is the SHA256 fingerprint of the current host key.
func (s *SSHGitServer) HostKeyFingerprint() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return ssh.FingerprintSHA256(s.hostKey.PublicKey())
}

// Authorize lets the holder of the private key of authorizedKey (an
// authorized_keys line, as NewSSHKey returns) log in.
func (s *SSHGitServer) Authorize(t testing.TB, authorizedKey string) {
	t.Helper()
	f, err := os.OpenFile(s.authorizedKeys(), os.O_APPEND|os.O_WRONLY, 0o600)
	if err == nil {
		_, err = fmt.Fprintln(f, strings.TrimSpace(authorizedKey))
		err = errors.Join(err, f.Close())
	}
	if err != nil {
		t.Fatalf("testenv: authorize key: %v", err)
	}
}

// RotateHostKey restarts sshd on the same port with a new host key: the
// old known_hosts line no longer matches.
func (s *SSHGitServer) RotateHostKey(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	proc := s.proc
	s.mu.Unlock()
	proc.Stop()
	s.start(t)
}

// NewSSHKey generates an ed25519 key pair: the private key in OpenSSH PEM
// format (a Secret's ssh-privatekey) and its authorized_keys line.
func NewSSHKey(t testing.TB) (privatePEM []byte, authorizedKey string) {
	t.Helper()
	signer, block := newEd25519(t)
	return pem.EncodeToMemory(block), strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey())))
}

func newEd25519(t testing.TB) (ssh.Signer, *pem.Block) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatalf("testenv: generate key: %v", err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "flotilla test key")
	if err != nil {
		t.Fatalf("testenv: marshal key: %v", err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatalf("testenv: signer: %v", err)
	}
	return signer, block
}

func (s *SSHGitServer) authorizedKeys() string { return filepath.Join(s.dir, "authorized_keys") }

// start writes a new host key and the config, starts sshd and waits for
// its banner.
func (s *SSHGitServer) start(t testing.TB) {
	t.Helper()
	signer, block := newEd25519(t)
	hostKey := filepath.Join(s.dir, "ssh_host_ed25519_key")
	config := filepath.Join(s.dir, "sshd_config")
	cfg := strings.Join([]string{
		"Port " + strconv.Itoa(s.port),
		"ListenAddress 127.0.0.1",
		"HostKey " + hostKey,
		"AuthorizedKeysFile " + s.authorizedKeys(),
		"PidFile " + filepath.Join(s.dir, "sshd.pid"),
		"PasswordAuthentication no",
		"KbdInteractiveAuthentication no",
		"UsePAM no",
		"StrictModes no",
		"PermitRootLogin prohibit-password",
		"AllowTcpForwarding no",
		"X11Forwarding no",
		"PermitTTY no",
		`ForceCommand git-shell -c "$SSH_ORIGINAL_COMMAND"`,
		"",
	}, "\n")
	if err := os.WriteFile(hostKey, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	if err := os.WriteFile(config, []byte(cfg), 0o600); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	proc := StartProcess(t, ProcessOptions{
		Name: "sshd-" + strconv.Itoa(s.port), Path: s.sshd, Dir: s.dir,
		Args: []string{"-D", "-e", "-f", config}, StopGrace: 2 * time.Second,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := proc.WaitReady(ctx, s.banner); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	s.mu.Lock()
	s.hostKey, s.proc = signer, proc
	s.mu.Unlock()
	t.Cleanup(proc.Stop)
}

// banner reads sshd's version line.
func (s *SSHGitServer) banner(ctx context.Context) error {
	d := net.Dialer{Timeout: time.Second}
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)))
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(time.Second))
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "SSH-2.0-") {
		return fmt.Errorf("not an SSH server: %q", line)
	}
	return nil
}
