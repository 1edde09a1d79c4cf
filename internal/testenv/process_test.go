package testenv_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

func TestFreePorts_Distinct(t *testing.T) {
	ports := testenv.FreePorts(t, 20)
	seen := make(map[int]bool, len(ports))
	for _, p := range ports {
		assert.False(t, seen[p], "port %d repeated", p)
		assert.Positive(t, p)
		seen[p] = true
	}
	assert.Positive(t, testenv.FreePort(t))
}

func TestStartProcess_StopKillsGroup(t *testing.T) {
	// The shell ignores SIGTERM and its child sleeps, so only SIGKILL to the
	// whole group ends both within the grace period.
	p := testenv.StartProcess(t, testenv.ProcessOptions{
		Name:      "stubborn",
		Path:      "/bin/sh",
		Args:      []string{"-c", `trap "" TERM; echo started; sleep 300 & wait`},
		StopGrace: 200 * time.Millisecond,
	})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	require.NoError(t, p.WaitReady(ctx, logContains(p, "started")))

	start := time.Now()
	p.Stop()
	assert.Less(t, time.Since(start), 5*time.Second)
	select {
	case <-p.Done():
	default:
		t.Fatal("process still running after Stop")
	}
	p.Stop() // A second Stop is harmless.
}

func TestWaitReady_ReportsExitWithLogTail(t *testing.T) {
	p := testenv.StartProcess(t, testenv.ProcessOptions{
		Name: "crasher",
		Path: "/bin/sh",
		Args: []string{"-c", "echo fatal: bad flag >&2; exit 3"},
	})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	err := p.WaitReady(ctx, func(context.Context) error { return errors.New("not yet") })
	require.Error(t, err)
	assert.Contains(t, err.Error(), "crasher exited before it was ready")
	assert.Contains(t, err.Error(), "fatal: bad flag")
}

func TestWaitReady_HonoursDeadline(t *testing.T) {
	p := testenv.StartProcess(t, testenv.ProcessOptions{
		Name: "sleeper",
		Path: "/bin/sh",
		Args: []string{"-c", "echo waiting; sleep 300"},
	})
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	err := p.WaitReady(ctx, func(context.Context) error { return errors.New("never ready") })
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "never ready")
}

// logContains returns a readiness check that wants s in p's log.
func logContains(p *testenv.Process, s string) func(context.Context) error {
	return func(context.Context) error {
		data, err := os.ReadFile(p.LogPath())
		if err != nil {
			return err
		}
		if !strings.Contains(string(data), s) {
			return errors.New("log does not contain " + s)
		}
		return nil
	}
}
