package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/codec"
	"github.com/flotilla-gitops/flotilla/internal/keyring"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/status"
	"github.com/flotilla-gitops/flotilla/internal/temporalx"
	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

// TestWorkerDev_RequireEncryption: with --payload-keys and
// --require-encryption the controller runs its own work (a ClusterGroup,
// a GitRepo with its rollout, activities, timers and queries) and the CLI
// with the same flags reads it; a client without the keys is refused: its
// plaintext update is rejected naming the payload's encoding and changes
// nothing, and the workflow it starts with a plaintext input never runs.
func TestWorkerDev_RequireEncryption(t *testing.T) {
	keys := newKeyring(t)
	w := startDevWorker(t, t.TempDir(), "--payload-keys", keys, "--require-encryption")
	cli := func(args ...string) (string, string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		base := []string{"--temporal-address", w.frontend, "--payload-keys", keys, "--require-encryption"}
		cmd := exec.CommandContext(ctx, bins.cli, append(base, args...)...)
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		return o.String(), e.String(), err
	}
	group := writeTemp(t, "group.yaml", "apiVersion: flotilla.dev/v1alpha1\nkind: ClusterGroup\nmetadata:\n  name: sealed\n"+
		"spec:\n  selector:\n    matchLabels:\n      tier: "+codecLabel+"\n")
	_, stderr, err := cli("apply", "-f", group)
	require.NoError(t, err, stderr)
	git := testenv.NewGitServer(t, testenv.GitServerOptions{})
	repo := git.CreateRepo(t, "sealed", map[string]string{"fleet.yaml": fleetYAML("sealed-ns"), "cm.yaml": configMapDoc("sealed", codecLabel)})
	_, stderr, err = cli("apply", "-f", writeTemp(t, "repo.yaml", gitRepoDoc("sealed-repo", repo.URL(), selectorTarget("tier", codecLabel))))
	require.NoError(t, err, stderr)
	head := repo.Head(t)
	var st status.GitRepo
	require.Eventually(t, func() bool {
		out, _, err := cli("status", "sealed-repo", "-o", "json")
		return err == nil && json.Unmarshal([]byte(out), &st) == nil && st.Commit == head && st.Settled
	}, 2*time.Minute, 500*time.Millisecond, "GitRepo did not settle at %s: %+v\n%s", head, st, w.proc.LogTail(20))

	// A client without the keys writes plain payloads; it reads failures
	// with the keys here only so that the test can read the refusal.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ring, err := keyring.LoadDir(keys)
	require.NoError(t, err)
	keyed, err := codec.NewDataConverter(ring, codec.Options{})
	require.NoError(t, err)
	plain, err := client.Dial(client.Options{HostPort: w.frontend, DataConverter: codec.NewKeylessDataConverter(),
		FailureConverter: codec.NewFailureConverter(keyed)})
	require.NoError(t, err)
	defer plain.Close()

	forged := api.ClusterGroup{TypeMeta: api.TypeMeta{APIVersion: api.Version, Kind: api.KindClusterGroup},
		Metadata: api.ObjectMeta{Name: "sealed"},
		Spec:     api.ClusterGroupSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "forged"}}}}
	var rec protocol.GroupRecord
	err = temporalx.UpdateWithStart(ctx, plain, protocol.DefaultTaskQueue, protocol.ClusterGroupID("sealed"), protocol.UpdateApply,
		forged, &rec, protocol.ClusterGroupWorkflow, protocol.GroupStart{Record: protocol.GroupRecord{Name: "sealed"}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "payload with encoding json/plain is not encrypted")
	out, stderr, err := cli("get", "clustergroups")
	require.NoError(t, err, stderr)
	assert.Contains(t, out, codecLabel, "the ClusterGroup is unchanged")
	assert.NotContains(t, out, "forged")

	// A workflow started with a plaintext input fails without running.
	id := protocol.ClusterGroupID("forged")
	_, err = plain.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: protocol.DefaultTaskQueue},
		protocol.ClusterGroupWorkflow, protocol.GroupStart{Record: protocol.GroupRecord{Name: "forged"}})
	require.NoError(t, err, "the server accepts the start; the worker refuses its input")
	fc := codec.NewFailureConverter(keyed)
	var why string
	require.Eventually(t, func() bool {
		for _, ev := range rawHistory(ctx, t, plain, id, "") {
			switch ev.GetEventType() {
			case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED:
				why = fc.FailureToError(ev.GetWorkflowExecutionFailedEventAttributes().GetFailure()).Error()
				return true
			case enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED:
				why = fc.FailureToError(ev.GetWorkflowTaskFailedEventAttributes().GetFailure()).Error()
				return true
			}
		}
		return false
	}, time.Minute, 200*time.Millisecond, "%s neither failed nor failed a task\n%s", id, w.proc.LogTail(20))
	assert.Contains(t, why, "payload with encoding json/plain is not encrypted")
}
