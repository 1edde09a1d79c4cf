package testenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

const (
	// logTailLines is how many log lines a failure report carries.
	logTailLines = 80
	// logTailBytes bounds how much of a log file is read to find its tail.
	logTailBytes = 256 << 10
	// defaultStopGrace is ProcessOptions.StopGrace's default.
	defaultStopGrace = 5 * time.Second
	// readyPollInterval is how often WaitReady runs its check.
	readyPollInterval = 100 * time.Millisecond
)

// ProcessOptions describes a server process for StartProcess.
type ProcessOptions struct {
	// Name identifies the process in logs and errors, e.g.
	// "kube-apiserver-cluster-1", and names its log file. Required.
	Name string
	// Path is the executable to run. Required.
	Path string
	// Args are the command-line arguments after the executable.
	// Optional: default none.
	Args []string
	// Env is appended to the test process's environment.
	// Optional: default none.
	Env []string
	// Dir is the working directory and holds the log file <Name>.log.
	// Optional for StartProcess: default a new t.TempDir().
	Dir string
	// StopGrace is how long Stop waits after SIGTERM before it sends SIGKILL.
	// Optional: default 5s.
	StopGrace time.Duration
}

// Process is a child process started by StartProcess. Its stdout and stderr
// go to a log file; it runs in its own process group, which Stop signals as a
// whole.
type Process struct {
	name      string
	logPath   string
	stopGrace time.Duration
	cmd       *exec.Cmd
	done      chan struct{}
	waitErr   error // set before done is closed
}

// StartProcess starts opts.Path and registers a t.Cleanup that stops its
// whole process group (SIGTERM, then SIGKILL after opts.StopGrace) even when
// the test fails. If the test has failed by then, the cleanup logs the last
// 80 lines of the process's log first. StartProcess does not wait for the
// process to become ready; use WaitReady. It fails the test if the process
// cannot be started.
func StartProcess(t testing.TB, opts ProcessOptions) *Process {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	p, err := startProcess(t, opts)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return p
}

// startProcess is StartProcess for use from other goroutines: it reports
// errors instead of failing the test, and opts.Dir is required.
func startProcess(t testing.TB, opts ProcessOptions) (*Process, error) {
	if opts.Name == "" || opts.Path == "" || opts.Dir == "" {
		return nil, fmt.Errorf("starting process %q: Name, Path and Dir are required", opts.Name)
	}
	if opts.StopGrace <= 0 {
		opts.StopGrace = defaultStopGrace
	}
	logPath := filepath.Join(opts.Dir, opts.Name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("creating log file for %s: %w", opts.Name, err)
	}

	cmd := exec.Command(opts.Path, opts.Args...)
	cmd.Dir = opts.Dir
	cmd.Env = append(os.Environ(), opts.Env...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	setParentDeathSignal(cmd.SysProcAttr)
	if err := cmd.Start(); err != nil {
		_ = logFile.Close() // Nothing was written; the start error is what matters.
		return nil, fmt.Errorf("starting %s (%s): %w", opts.Name, opts.Path, err)
	}

	p := &Process{
		name:      opts.Name,
		logPath:   logPath,
		stopGrace: opts.StopGrace,
		cmd:       cmd,
		done:      make(chan struct{}),
	}
	go func() {
		p.waitErr = cmd.Wait()
		_ = logFile.Close() // The child has exited; the file is complete.
		close(p.done)
	}()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("testenv: last %d lines of %s (%s):\n%s", logTailLines, p.name, p.logPath, p.LogTail(logTailLines))
		}
		p.Stop()
	})
	return p, nil
}

// Name returns the name given in ProcessOptions.Name.
func (p *Process) Name() string { return p.name }

// LogPath returns the path of the file that receives the process's stdout
// and stderr.
func (p *Process) LogPath() string { return p.logPath }

// PID returns the process ID, which is also its process group ID.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Done returns a channel that is closed once the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// ExitErr returns the result of waiting for the process. It must only be
// called after Done is closed.
func (p *Process) ExitErr() error { return p.waitErr }

// Stop sends SIGTERM to the process group, waits up to the stop grace period,
// then sends SIGKILL to the group and waits for the process to be reaped. It
// is safe to call more than once and after the process has exited.
func (p *Process) Stop() {
	pgid := p.cmd.Process.Pid
	select {
	case <-p.done:
		// The leader is gone, but children it left in the group may not be.
		_ = syscall.Kill(-pgid, syscall.SIGKILL) // ESRCH when the group is empty.
		return
	default:
	}
	_ = syscall.Kill(-pgid, syscall.SIGTERM) // ESRCH if it exited meanwhile.
	timer := time.NewTimer(p.stopGrace)
	defer timer.Stop()
	select {
	case <-p.done:
	case <-timer.C:
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL) // ESRCH when everything has exited.
	<-p.done
}

// LogTail returns the last n lines of the process's log, or a note saying why
// it could not be read.
func (p *Process) LogTail(n int) string {
	tail, err := fileTail(p.logPath, n)
	if err != nil {
		return fmt.Sprintf("(log unavailable: %v)", err)
	}
	return tail
}

// WaitReady calls check every 100ms until it returns nil, the process exits,
// or ctx ends. The caller bounds the wait through ctx's deadline; check
// should bound each attempt itself. The error names the process, carries the
// last check error and the tail of the log.
func (p *Process) WaitReady(ctx context.Context, check func(context.Context) error) error {
	start := time.Now()
	ticker := time.NewTicker(readyPollInterval)
	defer ticker.Stop()
	var lastErr error
	for {
		if lastErr = check(ctx); lastErr == nil {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s exited before it was ready (%w); last check: %w\n--- last %d lines of %s ---\n%s",
				p.name, p.waitErr, lastErr, logTailLines, p.logPath, p.LogTail(logTailLines))
		case <-ctx.Done():
			return fmt.Errorf("%s not ready after %s (%w); last check: %w\n--- last %d lines of %s ---\n%s",
				p.name, time.Since(start).Round(time.Millisecond), ctx.Err(), lastErr, logTailLines, p.logPath, p.LogTail(logTailLines))
		case <-ticker.C:
		}
	}
}

// fileTail returns the last n lines of the file at path, reading at most
// logTailBytes from its end.
func fileTail(path string, n int) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("opening log: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("reading log size: %w", err)
	}
	offset := max(info.Size()-logTailBytes, 0)
	data, err := io.ReadAll(io.NewSectionReader(f, offset, info.Size()-offset))
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("reading log: %w", err)
	}
	return lastLines(string(data), n), nil
}
