package tests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/codec"
	"github.com/flotilla-gitops/flotilla/internal/keyring"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/status"
	"github.com/flotilla-gitops/flotilla/internal/temporalx"
	"github.com/flotilla-gitops/flotilla/internal/testenv"
	"github.com/flotilla-gitops/flotilla/internal/testenv/history"
)

// codecLabel is a value that must be readable only through the keys.
const codecLabel = "sealed-7f3q"

// TestWorkerDev_PayloadEncryption: with --payload-keys, every payload of
// a ClusterGroup's history is stored encrypted; the CLI with the same keys
// reads it, without them says what is missing; the worker's codec endpoint
// decrypts for a caller with the token and refuses others; update errors
// reach a client with the keys readable and others as "Encoded failure".
func TestWorkerDev_PayloadEncryption(t *testing.T) {
	keys := newKeyring(t)
	const token = "codec-e2e-token-Zr41"
	tokenFile := writeTemp(t, "codec-token", token+"\n")
	w := startDevWorker(t, t.TempDir(), "--payload-keys", keys, "--codec-token-file", tokenFile, "--http-listen", "127.0.0.1:0")
	endpoint := codecEndpoint(t, w)
	assert.NotContains(t, readFile(t, w.proc.LogPath()), token, "the token is never logged")

	cli := func(env []string, args ...string) (string, string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bins.cli, append([]string{"--temporal-address", w.frontend}, args...)...)
		cmd.Env = append(os.Environ(), env...)
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		return o.String(), e.String(), err
	}
	doc := writeTemp(t, "group.yaml", "apiVersion: flotilla.dev/v1alpha1\nkind: ClusterGroup\nmetadata:\n  name: sealed\n"+
		"spec:\n  selector:\n    matchLabels:\n      tier: "+codecLabel+"\n")
	out, stderr, err := cli(nil, "--payload-keys", keys, "apply", "-f", doc)
	require.NoError(t, err, stderr)
	assert.Contains(t, out, "clustergroup/sealed")

	// The environment variable is derived from the flag.
	out, stderr, err = cli([]string{"FLOTILLA_PAYLOAD_KEYS=" + keys}, "get", "clustergroups")
	require.NoError(t, err, stderr)
	assert.Contains(t, out, "sealed")
	assert.Contains(t, out, codecLabel)

	_, stderr, err = cli(nil, "get", "clustergroups")
	require.Error(t, err)
	assert.Contains(t, stderr, "encrypted")
	assert.Contains(t, stderr, "--payload-keys")

	// A GitRepo that targets no cluster: activities, a child rollout,
	// timers, queries, all through the codec.
	git := testenv.NewGitServer(t, testenv.GitServerOptions{})
	repo := git.CreateRepo(t, "sealed", map[string]string{"fleet.yaml": fleetYAML("sealed-ns"), "cm.yaml": configMapDoc("sealed", codecLabel)})
	_, stderr, err = cli(nil, "--payload-keys", keys, "apply", "-f", writeTemp(t, "repo.yaml", gitRepoDoc("sealed-repo", repo.URL(), selectorTarget("tier", codecLabel))))
	require.NoError(t, err, stderr)
	head := repo.Head(t)
	var st status.GitRepo
	require.Eventually(t, func() bool {
		out, _, err := cli(nil, "--payload-keys", keys, "status", "sealed-repo", "-o", "json")
		return err == nil && json.Unmarshal([]byte(out), &st) == nil && st.Commit == head && st.Settled
	}, 2*time.Minute, 500*time.Millisecond, "GitRepo did not settle at %s: %+v\n%s", head, st, w.proc.LogTail(20))
	_, stderr, err = cli(nil, "status", "sealed-repo")
	require.Error(t, err)
	assert.Contains(t, stderr, "--payload-keys")

	// The raw history, read by a client without keys.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	plain := w.client(t)
	id := protocol.ClusterGroupID("sealed")
	payloads := storedPayloads(t, rawHistory(ctx, t, plain, id, ""))
	require.NotEmpty(t, payloads)
	t.Logf("%d payloads in the history of %s", len(payloads), id)
	for i, p := range payloads {
		assert.True(t, codec.Encrypted(p), "payload %d of %s is stored as %s", i, id, p.GetMetadata()["encoding"])
		assert.NotContains(t, string(p.GetData()), codecLabel)
	}
	text, err := history.RunText(ctx, plain, id, "")
	require.NoError(t, err)
	assert.NotContains(t, text, codecLabel)
	// So is every other history the worker and CLI wrote.
	histories := 0
	total := 0
	require.NoError(t, temporalx.EachExecution(ctx, plain, "", func(e *commonpb.WorkflowExecution) error {
		histories++
		ps := storedPayloads(t, rawHistory(ctx, t, plain, e.GetWorkflowId(), e.GetRunId()))
		total += len(ps)
		for i, p := range ps {
			assert.True(t, codec.Encrypted(p), "payload %d of %s is stored as %s", i, e.GetWorkflowId(), p.GetMetadata()["encoding"])
		}
		text, err := history.RunText(ctx, plain, e.GetWorkflowId(), e.GetRunId())
		require.NoError(t, err)
		assert.NotContains(t, text, codecLabel, "plaintext in the history of %s", e.GetWorkflowId())
		return nil
	}))
	t.Logf("%d payloads in %d histories checked", total, histories)
	assert.GreaterOrEqual(t, histories, 3, "cluster group, GitRepo and rollout")

	// The audit helper reads the plaintext through the codec.
	ring, err := keyring.LoadDir(keys)
	require.NoError(t, err)
	c, err := codec.New(ring)
	require.NoError(t, err)
	text, err = history.RunText(ctx, plain, id, "", history.WithCodec(c))
	require.NoError(t, err)
	assert.Contains(t, text, codecLabel)

	// The codec endpoint decrypts for the token holder only.
	body, err := protojson.Marshal(&commonpb.Payloads{Payloads: payloads})
	require.NoError(t, err)
	status, resp := postCodec(t, endpoint+"/decode", string(body), map[string]string{"Authorization": "Bearer " + token})
	require.Equal(t, http.StatusOK, status, resp)
	var decoded commonpb.Payloads
	require.NoError(t, protojson.Unmarshal([]byte(resp), &decoded))
	require.Len(t, decoded.Payloads, len(payloads))
	var all strings.Builder
	for _, p := range decoded.Payloads {
		assert.False(t, codec.Encrypted(p))
		all.Write(p.GetData())
	}
	assert.Contains(t, all.String(), codecLabel)

	status, resp = postCodec(t, endpoint+"/decode", string(body), nil)
	assert.Equal(t, http.StatusUnauthorized, status, resp)
	assert.NotContains(t, resp, codecLabel)
	status, _ = postCodec(t, endpoint+"/decode", string(body), map[string]string{"Authorization": "Bearer wrong"})
	assert.Equal(t, http.StatusUnauthorized, status)

	// Failure messages are encrypted too, and decoded for the keys' holder.
	keyed, err := temporalx.ClientOptions{Address: w.frontend, PayloadKeys: keys}.Dial(ctx, nil)
	require.NoError(t, err)
	defer keyed.Close()
	misdirected := api.ClusterGroup{TypeMeta: api.TypeMeta{APIVersion: api.Version, Kind: api.KindClusterGroup},
		Metadata: api.ObjectMeta{Name: "other"},
		Spec:     api.ClusterGroupSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "x"}}}}
	sendMisdirected := func(c client.Client) error {
		var rec protocol.GroupRecord
		return temporalx.UpdateWithStart(ctx, c, protocol.DefaultTaskQueue, id, protocol.UpdateApply, misdirected, &rec,
			protocol.ClusterGroupWorkflow, protocol.GroupStart{Record: protocol.GroupRecord{Name: "sealed"}})
	}
	err = sendMisdirected(keyed)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "ClusterGroup other sent to the workflow of sealed")
	err = sendMisdirected(plain)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Encoded failure")
	assert.NotContains(t, err.Error(), "sent to the workflow")
}

// TestWorkerDev_CodecEndpointForEmbeddedUI: with --payload-keys and no
// token file, --dev points the embedded UI at the codec endpoint, which
// serves the UI's exact origin from loopback without a token and nobody
// else.
func TestWorkerDev_CodecEndpointForEmbeddedUI(t *testing.T) {
	keys := newKeyring(t)
	w := startDevWorker(t, t.TempDir(), "--payload-keys", keys, "--http-listen", "127.0.0.1:0")
	endpoint := codecEndpoint(t, w)

	resp, err := http.Get(w.uiURL + "/api/v1/settings")
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	var settings struct{ Codec struct{ Endpoint string } }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&settings))
	assert.Equal(t, endpoint, settings.Codec.Endpoint)

	// The browser's preflight, then its request, as the UI sends them.
	status, _ := doCodec(t, http.MethodOptions, endpoint+"/decode", "", map[string]string{
		"Origin": w.uiURL, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type,x-namespace"})
	assert.Equal(t, http.StatusNoContent, status)

	ring, err := keyring.LoadDir(keys)
	require.NoError(t, err)
	c, err := codec.New(ring)
	require.NoError(t, err)
	p := &commonpb.Payload{Metadata: map[string][]byte{"encoding": []byte("json/plain")}, Data: []byte(`"` + codecLabel + `"`)}
	enc, err := c.Encode([]*commonpb.Payload{p})
	require.NoError(t, err)
	body, err := protojson.Marshal(&commonpb.Payloads{Payloads: enc})
	require.NoError(t, err)
	ui := map[string]string{"Origin": w.uiURL, "Content-Type": "application/json", "X-Namespace": "default"}
	status, out := postCodec(t, endpoint+"/decode?preserveStorageRefs=true", string(body), ui)
	require.Equal(t, http.StatusOK, status, out)
	var decoded commonpb.Payloads
	require.NoError(t, protojson.Unmarshal([]byte(out), &decoded))
	assert.Equal(t, `"`+codecLabel+`"`, string(decoded.Payloads[0].GetData()))

	status, _ = postCodec(t, endpoint+"/decode", string(body), nil)
	assert.Equal(t, http.StatusUnauthorized, status, "no Origin: not the UI")
	status, _ = postCodec(t, endpoint+"/decode", string(body), map[string]string{"Origin": "http://127.0.0.1:1"})
	assert.Equal(t, http.StatusForbidden, status, "another origin")
}

// TestWorker_PayloadKeyErrors: misconfigured payload encryption stops the
// worker with one line naming what to fix.
func TestWorker_PayloadKeyErrors(t *testing.T) {
	keys := newKeyring(t)
	missing := filepath.Join(t.TempDir(), "no-such-keys")
	tests := []struct {
		name string
		args []string
		want string // substring of the error line
	}{
		{"missing keyring", []string{"--temporal-address", "127.0.0.1:1", "--payload-keys", missing}, missing},
		{"origins without keys", []string{"--temporal-address", "127.0.0.1:1", "--codec-cors-origin", "http://ui:8080", "--http-listen", "127.0.0.1:0"},
			"needs --payload-keys"},
		{"token without keys", []string{"--temporal-address", "127.0.0.1:1", "--codec-token-file", keys, "--http-listen", "127.0.0.1:0"},
			"needs --payload-keys"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			cmd := exec.Command(bins.worker, tt.args...)
			cmd.Stderr = &stderr
			require.Error(t, cmd.Run())
			lines := nonLogLines(stderr.String())
			require.Len(t, lines, 1, stderr.String())
			assert.Contains(t, lines[0], tt.want)
		})
	}
	var stderr bytes.Buffer
	cmd := exec.Command(bins.cli, "--temporal-address", "127.0.0.1:1", "--payload-keys", missing, "get", "clustergroups")
	cmd.Stderr = &stderr
	require.Error(t, cmd.Run())
	assert.Contains(t, stderr.String(), "--payload-keys")
	assert.Contains(t, stderr.String(), missing)
}

// newKeyring writes a keyring of one new key and returns its directory.
func newKeyring(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "payload-keys")
	k, err := keyring.Generate()
	require.NoError(t, err)
	require.NoError(t, keyring.WriteKey(dir, k))
	return dir
}

// codecEndpoint returns the endpoint the worker logged "Serving payload
// codec" with.
func codecEndpoint(t *testing.T, w *devWorker) string {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(readFile(t, w.proc.LogPath())))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line struct{ Msg, Endpoint string }
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "Serving payload codec" {
			require.NotEmpty(t, line.Endpoint)
			return line.Endpoint
		}
	}
	require.FailNow(t, "the worker did not log its codec endpoint", w.proc.LogTail(30))
	return ""
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

func rawHistory(ctx context.Context, t *testing.T, c client.Client, id, runID string) []*historypb.HistoryEvent {
	t.Helper()
	var events []*historypb.HistoryEvent
	it := c.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		events = append(events, ev)
	}
	return events
}

// storedPayloads returns every payload of events but those of search
// attributes, which the SDK writes plain for the server to index.
func storedPayloads(t *testing.T, events []*historypb.HistoryEvent) []*commonpb.Payload {
	t.Helper()
	searchAttrs := (&commonpb.SearchAttributes{}).ProtoReflect().Descriptor().FullName()
	var out []*commonpb.Payload
	var walk func(m protoreflect.Message)
	walk = func(m protoreflect.Message) {
		if m.Descriptor().FullName() == searchAttrs {
			return
		}
		if p, ok := m.Interface().(*commonpb.Payload); ok {
			out = append(out, p)
			return
		}
		m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			switch {
			case fd.IsList() && fd.Message() != nil:
				for i := range v.List().Len() {
					walk(v.List().Get(i).Message())
				}
			case fd.IsMap() && fd.MapValue().Message() != nil:
				v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
					walk(mv.Message())
					return true
				})
			case !fd.IsList() && !fd.IsMap() && fd.Message() != nil:
				walk(v.Message())
			}
			return true
		})
	}
	for _, ev := range events {
		walk(ev.ProtoReflect())
	}
	return out
}

func postCodec(t *testing.T, url, body string, header map[string]string) (int, string) {
	t.Helper()
	return doCodec(t, http.MethodPost, url, body, header)
}

func doCodec(t *testing.T, method, url, body string, header map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}
