package workflows

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/flotilla-gitops/flotilla/internal/temporalx"
)

// TestReplay_HistoriesOfEarlierReleases replays workflow histories that
// earlier releases recorded (testdata/replay/<workflow>-<commit>-*.json,
// exported from a real Temporal server) on the current code.
//
// It guards upgrades: workflows still running when a new controller
// starts are replayed by it, and any difference in the commands the code
// issues (a timer more or less, an activity moved, a search attribute
// upsert added...) fails them with a nondeterminism error. A change to a
// workflow's commands must be gated by workflow.GetVersion (change IDs in
// options.go) so that runs recorded before it keep taking the old path.
//
// Every workflow type the controller registers is registered here. When a
// release changes a workflow, record new histories from it with
// tests/replay_record_test.go (see docs/development.md) and add them here;
// keep the old ones as long as runs they represent may exist.
func TestReplay_HistoriesOfEarlierReleases(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "replay", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no histories in testdata/replay")
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			r.RegisterWorkflow(GitRepoWorkflow)
			r.RegisterWorkflow(RolloutWorkflow)
			r.RegisterWorkflow(RolloutBatchWorkflow)
			r.RegisterWorkflow(ClusterWorkflow)
			r.RegisterWorkflow(ClusterGroupWorkflow)
			r.RegisterWorkflow(ClusterTokenWorkflow)
			data, err := os.ReadFile(file)
			require.NoError(t, err)
			hist, err := client.HistoryFromJSON(bytes.NewReader(data), client.HistoryJSONOptions{})
			require.NoError(t, err)
			// Under the recorded workflow ID, not the replayer's default: a
			// rollout names its batches after its own ID.
			id := hist.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes().GetWorkflowId()
			logger := temporalx.NewLogger(zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)))
			require.NoError(t, r.ReplayWorkflowHistoryWithOptions(logger, hist,
				worker.ReplayWorkflowHistoryOptions{OriginalExecution: workflow.Execution{ID: id}}))
		})
	}
}
