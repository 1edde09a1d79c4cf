package devserver

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/flotilla-gitops/flotilla/internal/freeport"
)

// stateLock is an exclusive flock on StateDir/lock, so two dev servers never
// share (and corrupt) one SQLite file. The kernel drops the lock when the
// process dies, so a kill -9 never leaves a stale lock behind.
type stateLock struct{ f *os.File }

func prepareStateDir(dir string) (*stateLock, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("state dir %s cannot be created: %w", dir, err)
	}
	probe, err := os.CreateTemp(dir, ".probe-*")
	if err != nil {
		return nil, fmt.Errorf("state dir %s is not writable: %w", dir, err)
	}
	_ = probe.Close()           // empty file, nothing to flush
	_ = os.Remove(probe.Name()) // best effort; a leftover probe is harmless

	path := filepath.Join(dir, "lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path) // only used to improve the message
		_ = f.Close()
		msg := fmt.Sprintf("state dir %s is in use by another flotilla-worker --dev", dir)
		if pid := strings.TrimSpace(string(holder)); pid != "" {
			msg += " (pid " + pid + ")"
		}
		return nil, errors.New(msg)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0) // informational only
	}
	return &stateLock{f: f}, nil
}

func (l *stateLock) release() {
	_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN) // closing releases it anyway
	_ = l.f.Close()
}

// reserve checks that addr can be listened on and returns it with a concrete
// port (port 0 is replaced by a free one). The check closes its listener, so
// a race with another process remains possible; it exists to turn the common
// case, a second dev server on the default port, into a clear error.
func reserve(addr, what string) (string, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return "", fmt.Errorf("%s address %s: %w (is another flotilla-worker --dev or Temporal server running?)", what, addr, ErrAddressInUse)
		}
		return "", fmt.Errorf("%s address %s cannot be listened on: %w", what, addr, err)
	}
	got := l.Addr().String()
	_ = l.Close() // the real server binds it next
	return got, nil
}

// freePort picks a port for one of Temporal's internal services (see
// freeport.Pick for why not simply port 0).
func freePort(host string) (int, error) {
	ports, err := freeport.Pick(host, 1)
	if err != nil {
		return 0, fmt.Errorf("internal service: %w", err)
	}
	return ports[0], nil
}
