package testenv

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

const (
	// temporalServerPackage is the server command's package, relative to
	// the repository root.
	temporalServerPackage = "./internal/testenv/pgtemporal/server"
	// temporalServerBinary is the file name BuildTemporalServer writes.
	temporalServerBinary = "temporal-postgres"
	// temporalReadyLine starts the line the server prints once clients can
	// use it (the server command's readyMessage), before the frontend address.
	temporalReadyLine = "Temporal server ready "
	// temporalReadyTimeout bounds a start: schema set-up on a new database
	// plus the services joining, a few seconds on 2 cores.
	temporalReadyTimeout = 2 * time.Minute
	// temporalStopGrace is how long Stop waits for a graceful stop (about
	// 3 s) before SIGKILL.
	temporalStopGrace = 20 * time.Second
	// temporalBuildTimeout bounds `go build` of the server, about 7 minutes
	// on a cold cache.
	temporalBuildTimeout = 30 * time.Minute
)

// BuildTemporalServer builds the Temporal-on-PostgreSQL server command
// (internal/testenv/pgtemporal/server) into dir and returns the binary's
// path. It runs `go build` from the repository root, found by walking up
// from the working directory. Call it once per test binary, e.g. in
// TestMain: the binary links the whole Temporal server, so even with a warm
// build cache the link takes about a minute.
func BuildTemporalServer(dir string) (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("getting working directory: %w", err)
	}
	root, err := findRepoRoot(wd)
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, temporalServerBinary)
	ctx, cancel := context.WithTimeout(context.Background(), temporalBuildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, temporalServerPackage)
	cmd.Dir = root
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", temporalServerPackage, err, lastLines(output.String(), logTailLines))
	}
	return out, nil
}

// TemporalServerOptions configure StartTemporalServer.
type TemporalServerOptions struct {
	// Binary is the server command built by BuildTemporalServer. Required.
	Binary string
	// Postgres holds the server's databases. Required.
	Postgres *Postgres
	// Database and VisibilityDatabase name the databases, created if
	// missing; distinct names let several servers share one Postgres.
	// Optional: default "temporal" and "temporal_visibility".
	Database           string
	VisibilityDatabase string
	// LogLevel filters the server's log (debug, info, warn, error).
	// Optional: default "warn".
	LogLevel string
}

// TemporalServer is a Temporal server running as a process of its own on
// PostgreSQL, started by StartTemporalServer. It can be stopped, killed and
// started again on the same ports and databases.
type TemporalServer struct {
	t        testing.TB
	binary   string
	args     []string
	frontend string
	dir      string
	starts   int
	proc     *Process
}

// StartTemporalServer starts a Temporal server process (frontend, history,
// matching and worker services) on opts.Postgres with the "default"
// namespace and Flotilla's search attributes, and returns once it prints
// that it is ready. Every port is chosen once, on 127.0.0.1, and reused by
// Start and Restart. t.Cleanup stops the process; the databases stay until
// Postgres is stopped. It fails the test if the server does not become
// ready within 2 minutes.
func StartTemporalServer(t testing.TB, opts TemporalServerOptions) *TemporalServer {
	t.Helper()
	if opts.Binary == "" || opts.Postgres == nil {
		t.Fatalf("testenv: StartTemporalServer needs Binary and Postgres")
	}
	if opts.Database == "" {
		opts.Database = "temporal"
	}
	if opts.VisibilityDatabase == "" {
		opts.VisibilityDatabase = "temporal_visibility"
	}
	if opts.LogLevel == "" {
		opts.LogLevel = "warn"
	}
	// The frontend's gRPC port, then the other services' gRPC ports and
	// every service's membership port.
	ports := FreePorts(t, 8)
	frontend := "127.0.0.1:" + strconv.Itoa(ports[0])
	args := []string{
		"--postgres=" + opts.Postgres.Addr(),
		"--postgres-user=" + opts.Postgres.User(),
		"--database=" + opts.Database,
		"--visibility-database=" + opts.VisibilityDatabase,
		"--frontend=" + frontend,
		"--log-level=" + opts.LogLevel,
	}
	for i, flag := range []string{
		"history-port", "matching-port", "worker-port",
		"frontend-membership-port", "history-membership-port", "matching-membership-port", "worker-membership-port",
	} {
		args = append(args, "--"+flag+"="+strconv.Itoa(ports[i+1]))
	}
	s := &TemporalServer{t: t, binary: opts.Binary, args: args, frontend: frontend, dir: t.TempDir()}
	s.Start()
	return s
}

// FrontendAddress returns the host:port that clients dial.
func (s *TemporalServer) FrontendAddress() string { return s.frontend }

// LogPath returns the log of the current (or last) process. Each start
// writes a new log, temporal-server-<n>.log, beside the earlier ones.
func (s *TemporalServer) LogPath() string { return s.proc.LogPath() }

// PID returns the current (or last) process's ID.
func (s *TemporalServer) PID() int { return s.proc.PID() }

// Start starts the server process again after Stop or Kill, on the same
// ports and databases, and waits until it is ready. It fails the test if
// the server is running or does not become ready.
func (s *TemporalServer) Start() {
	s.t.Helper()
	if s.proc != nil {
		select {
		case <-s.proc.Done():
		default:
			s.t.Fatalf("testenv: Temporal server %s is already running", s.frontend)
		}
	}
	s.starts++
	s.proc = StartProcess(s.t, ProcessOptions{
		Name:      "temporal-server-" + strconv.Itoa(s.starts),
		Path:      s.binary,
		Args:      s.args,
		Dir:       s.dir,
		StopGrace: temporalStopGrace,
	})
	ctx, cancel := context.WithTimeout(context.Background(), temporalReadyTimeout)
	defer cancel()
	var seen logScanner
	err := s.proc.WaitReady(ctx, func(context.Context) error {
		return seen.find(s.proc.LogPath(), temporalReadyLine+s.frontend)
	})
	if err != nil {
		s.t.Fatalf("testenv: start Temporal server: %v", err)
	}
}

// Stop stops the server gracefully (SIGTERM, SIGKILL after 20 s) and waits
// for it to exit. It is safe to call on a stopped server.
func (s *TemporalServer) Stop() { s.proc.Stop() }

// Kill kills the server's process group with SIGKILL, as a crash would, and
// waits for it to exit.
func (s *TemporalServer) Kill() {
	_ = syscall.Kill(-s.proc.PID(), syscall.SIGKILL) // ESRCH if it already exited
	<-s.proc.Done()
}

// Restart is Stop followed by Start.
func (s *TemporalServer) Restart() {
	s.t.Helper()
	s.Stop()
	s.Start()
}

// logScanner finds a line in a growing log file, reading each byte once.
type logScanner struct {
	offset  int64
	partial []byte // an unfinished last line
}

// find returns nil once a line of the file at path starts with prefix.
func (l *logScanner) find(path, prefix string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open log: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.NewSectionReader(f, l.offset, 1<<62))
	if err != nil {
		return fmt.Errorf("read log: %w", err)
	}
	l.offset += int64(len(data))
	data = append(l.partial, data...)
	lines := bytes.Split(data, []byte("\n"))
	l.partial = append([]byte(nil), lines[len(lines)-1]...)
	for _, line := range lines[:len(lines)-1] {
		if bytes.HasPrefix(line, []byte(prefix)) {
			return nil
		}
	}
	return fmt.Errorf("no line starting %q in the log yet", prefix)
}
