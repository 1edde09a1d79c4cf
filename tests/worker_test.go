package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/flotilla-gitops/flotilla/internal/temporalx"
	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

// devWorker is a running `flotilla-worker --dev`.
type devWorker struct {
	proc     *testenv.Process
	frontend string
	uiURL    string
	stateDir string
}

// startDevWorker runs the real worker binary with an embedded server on free
// ports and waits until the frontend answers.
func startDevWorker(t testing.TB, stateDir string, extra ...string) *devWorker {
	t.Helper()
	// The embedded server opens more ports than the two picked here; one of
	// its own may take a picked port first. Such a start is tried again on
	// new ports (the failed process has exited).
	for attempt := 1; ; attempt++ {
		w, err := tryDevWorker(t, stateDir, extra...)
		if err == nil {
			return w
		}
		if attempt == 3 || !strings.Contains(w.proc.LogTail(80), "address already in use") {
			require.NoError(t, err)
		}
		t.Logf("dev worker start %d lost a port race; trying new ports: %v", attempt, err)
	}
}

// tryDevWorker starts a dev worker on two free ports and waits until it
// runs.
func tryDevWorker(t testing.TB, stateDir string, extra ...string) (*devWorker, error) {
	ports := testenv.FreePorts(t, 2)
	w := &devWorker{
		frontend: fmt.Sprintf("127.0.0.1:%d", ports[0]),
		uiURL:    fmt.Sprintf("http://127.0.0.1:%d", ports[1]),
		stateDir: stateDir,
	}
	args := append([]string{"--dev", "--state-dir", stateDir,
		"--dev-listen", w.frontend, "--ui-listen", strings.TrimPrefix(w.uiURL, "http://"), "--webhook-listen", "127.0.0.1:0"}, extra...)
	w.proc = testenv.StartProcess(t, testenv.ProcessOptions{Name: "flotilla-worker", Path: bins.worker, Args: args})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return w, w.proc.WaitReady(ctx, func(context.Context) error {
		if !strings.Contains(w.proc.LogTail(50), `"msg":"Worker started"`) {
			return errors.New("worker not started yet")
		}
		return nil
	})
}

func (w *devWorker) client(t testing.TB) client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := temporalx.ClientOptions{Address: w.frontend}.Dial(ctx, nil)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

// TestWorkerDev_ServesUIAndCLIReportsServer: the one-command dev stack serves
// the Temporal UI within 5 s, and `flotilla version` reports the CLI version
// and the server it reached.
func TestWorkerDev_ServesUIAndCLIReportsServer(t *testing.T) {
	start := time.Now()
	w := startDevWorker(t, t.TempDir())

	var body string
	require.Eventually(t, func() bool {
		resp, err := http.Get(w.uiURL + "/")
		if err != nil {
			return false
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		return resp.StatusCode == http.StatusOK
	}, 5*time.Second, 50*time.Millisecond, "UI did not serve / within 5 s")
	elapsed := time.Since(start)
	t.Logf("UI served HTML %s after the worker was launched", elapsed.Round(time.Millisecond))
	assert.Less(t, elapsed, 5*time.Second, "UI must serve within 5 s of launch")
	assert.Contains(t, strings.ToLower(body), "<html")

	out, err := exec.Command(bins.cli, "--temporal-address", w.frontend, "version", "-o", "json").Output()
	require.NoError(t, err, "flotilla version: %s", exitStderr(err))
	var v struct {
		Client struct{ Version string }
		Server struct{ Address, TemporalVersion, Error string }
	}
	require.NoError(t, json.Unmarshal(out, &v), string(out))
	assert.Equal(t, "v0.0.0-e2e", v.Client.Version)
	assert.Equal(t, w.frontend, v.Server.Address)
	assert.Regexp(t, `^\d+\.\d+\.\d+`, v.Server.TemporalVersion)
	assert.Empty(t, v.Server.Error)

	table, err := exec.Command(bins.cli, "--temporal-address", w.frontend, "version").Output()
	require.NoError(t, err)
	assert.Contains(t, string(table), "temporal server")
	assert.Contains(t, string(table), v.Server.TemporalVersion)
}

// TestWorkerDev_HistorySurvivesKill9: a kill -9 of the whole dev process
// loses nothing; on restart the same workflow and its history are there, and
// the search attributes are still registered.
func TestWorkerDev_HistorySurvivesKill9(t *testing.T) {
	stateDir := t.TempDir()
	w := startDevWorker(t, stateDir)
	c := w.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// No worker polls this queue yet: the workflow stays open, its history
	// is what the server persisted.
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "kill9-probe", TaskQueue: "probe"}, "Probe", "input")
	require.NoError(t, err)
	require.NoError(t, c.SignalWorkflow(ctx, run.GetID(), run.GetRunID(), "ping", 1))
	before := historyLength(ctx, t, c, run.GetID())

	require.NoError(t, syscall.Kill(w.proc.PID(), syscall.SIGKILL))
	<-w.proc.Done()

	w2 := startDevWorker(t, stateDir)
	c2 := w2.client(t)
	desc, err := c2.DescribeWorkflowExecution(ctx, run.GetID(), "")
	require.NoError(t, err)
	assert.Equal(t, enums.WORKFLOW_EXECUTION_STATUS_RUNNING, desc.GetWorkflowExecutionInfo().GetStatus())
	assert.Equal(t, before, historyLength(ctx, t, c2, run.GetID()))

	attrs, err := c2.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: "default"})
	require.NoError(t, err)
	for name, typ := range temporalx.SearchAttributes() {
		assert.Equal(t, typ, attrs.GetCustomAttributes()[name], "search attribute %s", name)
	}

	// The restarted server is fully working: a worker picks the workflow up,
	// sees the signal sent before the kill, and completes it.
	w3 := worker.New(c2, "probe", worker.Options{})
	w3.RegisterWorkflowWithOptions(func(ctx workflow.Context, in string) (string, error) {
		var n int
		workflow.GetSignalChannel(ctx, "ping").Receive(ctx, &n)
		return fmt.Sprintf("%s/%d", in, n), nil
	}, workflow.RegisterOptions{Name: "Probe"})
	require.NoError(t, w3.Start())
	defer w3.Stop()
	var got string
	require.NoError(t, c2.GetWorkflow(ctx, run.GetID(), "").Get(ctx, &got))
	assert.Equal(t, "input/1", got)
}

func historyLength(ctx context.Context, t *testing.T, c client.Client, id string) int {
	t.Helper()
	it := c.GetWorkflowHistory(ctx, id, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	n := 0
	for it.HasNext() {
		_, err := it.Next()
		require.NoError(t, err)
		n++
	}
	require.Positive(t, n)
	return n
}

// TestWorker_StartupErrorsAreOneLine: common mistakes give one clear line on
// stderr and exit 1, never a stack trace.
func TestWorker_StartupErrorsAreOneLine(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = taken.Close() })
	notADir := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(notADir, nil, 0o600))
	closed := testenv.FreePort(t)

	tests := []struct {
		name string
		args []string
		want string // substring of the one-line error
	}{
		{"port taken", []string{"--dev", "--state-dir", t.TempDir(), "--dev-listen", taken.Addr().String(), "--ui-listen", ""}, "address already in use"},
		{"webhook port taken", []string{"--dev", "--state-dir", t.TempDir(), "--dev-listen", "127.0.0.1:0", "--ui-listen", "", "--webhook-listen", taken.Addr().String()}, "--webhook-listen " + taken.Addr().String()},
		{"UI port taken", []string{"--dev", "--state-dir", t.TempDir(), "--dev-listen", "127.0.0.1:0", "--ui-listen", taken.Addr().String()}, "Temporal UI address"},
		{"state dir unwritable", []string{"--dev", "--state-dir", filepath.Join(notADir, "state"), "--dev-listen", "127.0.0.1:0"}, "cannot be created"},
		{"address unreachable", []string{"--temporal-address", fmt.Sprintf("127.0.0.1:%d", closed), "--dial-timeout", "2s"}, "unreachable"},
		{"bad log level", []string{"--log-level", "loud"}, "invalid --log-level"},
		{"dev and address", []string{"--dev", "--temporal-address", "127.0.0.1:7233"}, "mutually exclusive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			cmd := exec.Command(bins.worker, tt.args...)
			cmd.Stderr = &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			require.ErrorAs(t, err, &exit, "worker must fail: %s", stderr.String())
			assert.Equal(t, 1, exit.ExitCode())
			lines := nonLogLines(stderr.String())
			require.Len(t, lines, 1, "want exactly one error line, got:\n%s", stderr.String())
			assert.True(t, strings.HasPrefix(lines[0], "flotilla-worker: "), lines[0])
			assert.Contains(t, lines[0], tt.want)
			assert.NotContains(t, stderr.String(), "goroutine ")
			assert.NotContains(t, stderr.String(), "panic")
		})
	}
}

// TestWorker_EnvironmentConfiguresFlags: FLOTILLA_* variables set flags.
func TestWorker_EnvironmentConfiguresFlags(t *testing.T) {
	var stderr bytes.Buffer
	cmd := exec.Command(bins.worker)
	cmd.Env = append(os.Environ(), "FLOTILLA_LOG_FORMAT=xml")
	cmd.Stderr = &stderr
	require.Error(t, cmd.Run())
	assert.Contains(t, stderr.String(), `invalid --log-format "xml"`)
}

// TestWorkerDev_CleanShutdownOnSIGTERM: SIGTERM stops the worker and the
// embedded server and the process exits 0.
func TestWorkerDev_CleanShutdownOnSIGTERM(t *testing.T) {
	w := startDevWorker(t, t.TempDir())
	require.NoError(t, syscall.Kill(w.proc.PID(), syscall.SIGTERM))
	select {
	case <-w.proc.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("worker did not stop within 20 s of SIGTERM")
	}
	require.NoError(t, w.proc.ExitErr(), w.proc.LogTail(20))
}

// nonLogLines drops JSON log lines, leaving what the CLI printed itself.
func nonLogLines(s string) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		if l != "" && !strings.HasPrefix(l, "{") {
			out = append(out, l)
		}
	}
	return out
}

func exitStderr(err error) string {
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return string(exit.Stderr)
	}
	return ""
}

// TestWorkerDev_StateDirIsExclusive: a second dev server on the same state
// dir is refused with the first one's pid, instead of corrupting SQLite.
func TestWorkerDev_StateDirIsExclusive(t *testing.T) {
	dir := t.TempDir()
	first := startDevWorker(t, dir)
	var stderr bytes.Buffer
	cmd := exec.Command(bins.worker, "--dev", "--state-dir", dir, "--dev-listen", "127.0.0.1:0", "--ui-listen", "", "--webhook-listen", "")
	cmd.Stderr = &stderr
	require.Error(t, cmd.Run())
	lines := nonLogLines(stderr.String())
	require.Len(t, lines, 1, stderr.String())
	assert.Contains(t, lines[0], fmt.Sprintf("state dir %s is in use by another flotilla-worker --dev (pid %d)", dir, first.proc.PID()))
}
