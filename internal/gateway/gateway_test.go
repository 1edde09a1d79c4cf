package gateway

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	updatepb "go.temporal.io/api/update/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"

	"github.com/flotilla-gitops/flotilla/internal/codec"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

// testKeys is a MACer with named keys.
type testKeys struct {
	keys   map[string][]byte
	newest string
}

func (k testKeys) MAC(id string, msg []byte) ([]byte, error) {
	key, ok := k.keys[id]
	if !ok {
		return nil, errors.New("unknown key")
	}
	m := hmac.New(sha256.New, key)
	m.Write(msg)
	return m.Sum(nil), nil
}

func (k testKeys) NewestKeyID() string { return k.newest }

func keys(newest string, ids ...string) testKeys {
	k := testKeys{keys: map[string][]byte{}, newest: newest}
	for _, id := range ids {
		k.keys[id] = []byte("key material of " + id)
	}
	return k
}

func TestCredential(t *testing.T) {
	k := keys("k1", "k1", "k2")
	cred, err := Issue(k, "cluster-1", "epoch-a")
	require.NoError(t, err)
	c, err := parseCredential(cred)
	require.NoError(t, err)
	assert.Equal(t, "cluster-1", c.cluster)
	require.NoError(t, c.verify(k, "epoch-a"))

	for name, tc := range map[string]struct {
		cred  string
		epoch string
		keys  MACer
	}{
		"re-registered (new epoch)": {cred, "epoch-b", k},
		"key not held":              {cred, "epoch-a", keys("k2", "k2")},
		"other cluster's name":      {swapCluster(t, cred, "cluster-2"), "epoch-a", k},
	} {
		t.Run(name, func(t *testing.T) {
			c, err := parseCredential(tc.cred)
			if err == nil {
				err = c.verify(tc.keys, tc.epoch)
			}
			require.ErrorIs(t, err, ErrCredential)
			assert.NotContains(t, err.Error(), tc.cred, "errors never carry the credential")
		})
	}
	for _, bad := range []string{"", "flga1", "flga1.a.b", "flga2.Y2x1c3Rlcg.azE.dGFn", "flga1.!!.azE.dGFn", "flga1..azE.dGFn"} {
		_, err := parseCredential(bad)
		require.ErrorIs(t, err, ErrCredential, bad)
	}
}

// swapCluster replaces the cluster of a credential, keeping its MAC.
func swapCluster(t *testing.T, cred, cluster string) string {
	c, err := parseCredential(cred)
	require.NoError(t, err)
	other, err := Issue(keys("k1", "k1"), cluster, "x")
	require.NoError(t, err)
	o, err := parseCredential(other)
	require.NoError(t, err)
	enc := base64.RawURLEncoding.EncodeToString
	return fmt.Sprintf("%s.%s.%s.%s", credentialPrefix, enc([]byte(o.cluster)), enc([]byte(o.keyID)), enc(c.tag))
}

func TestTaskToken(t *testing.T) {
	k := keys("k1", "k1")
	tok := []byte("temporal task token")
	w, err := wrapToken(k, "cluster-1", tok)
	require.NoError(t, err)
	got, err := unwrapToken(k, "cluster-1", w)
	require.NoError(t, err)
	assert.Equal(t, tok, got)

	_, err = unwrapToken(k, "cluster-2", w)
	require.ErrorIs(t, err, errTaskToken, "another cluster's token")
	assert.Contains(t, err.Error(), "issued to cluster cluster-1")
	_, err = unwrapToken(k, "cluster-1", tok)
	require.ErrorIs(t, err, errTaskToken, "a raw Temporal token")
	tampered := append([]byte(nil), w...)
	tampered[len(tampered)-1] ^= 1
	_, err = unwrapToken(k, "cluster-1", tampered)
	require.ErrorIs(t, err, errTaskToken, "a token changed after wrapping")
	forged, err := wrapToken(keys("k1", "k1x"), "cluster-1", tok)
	if err == nil {
		_, err = unwrapToken(k, "cluster-1", forged)
	}
	require.Error(t, err, "a token wrapped with another key")
	for n := range len(w) {
		_, err := unwrapToken(k, "cluster-1", w[:n])
		require.Error(t, err, "truncated at %d", n)
	}
}

func payloads(t *testing.T, v any) *commonpb.Payloads {
	p, err := converter.GetDefaultDataConverter().ToPayloads(v)
	require.NoError(t, err)
	return p
}

func TestAuthorize(t *testing.T) {
	s := &Server{opts: Options{Namespace: "default", Keys: keys("k1", "k1")}}
	own, other := "cluster-1", "cluster-2"
	wrapped, err := wrapToken(s.opts.Keys, own, []byte("t"))
	require.NoError(t, err)
	othersToken, err := wrapToken(s.opts.Keys, other, []byte("t"))
	require.NoError(t, err)
	exec := func(id string) *commonpb.WorkflowExecution { return &commonpb.WorkflowExecution{WorkflowId: id} }
	signal := func(id, name string, arg any) *workflowservice.SignalWorkflowExecutionRequest {
		return &workflowservice.SignalWorkflowExecutionRequest{Namespace: "default", WorkflowExecution: exec(id), SignalName: name, Input: payloads(t, arg)}
	}
	update := func(id, name string) *workflowservice.UpdateWorkflowExecutionRequest {
		return &workflowservice.UpdateWorkflowExecutionRequest{Namespace: "default", WorkflowExecution: exec(id),
			Request: &updatepb.Request{Input: &updatepb.Input{Name: name}}}
	}
	gitrepo := protocol.GitRepoID("default", "app")
	for name, tc := range map[string]struct {
		req   any
		allow bool
	}{
		"system info":                {&workflowservice.GetSystemInfoRequest{}, true},
		"poll own queue":             {&workflowservice.PollActivityTaskQueueRequest{Namespace: "default", TaskQueue: &taskqueuepb.TaskQueue{Name: protocol.ClusterQueue(own)}}, true},
		"poll other queue":           {&workflowservice.PollActivityTaskQueueRequest{Namespace: "default", TaskQueue: &taskqueuepb.TaskQueue{Name: protocol.ClusterQueue(other)}}, false},
		"poll in another namespace":  {&workflowservice.PollActivityTaskQueueRequest{Namespace: "other", TaskQueue: &taskqueuepb.TaskQueue{Name: protocol.ClusterQueue(own)}}, false},
		"poll workflow tasks":        {&workflowservice.PollWorkflowTaskQueueRequest{Namespace: "default", TaskQueue: &taskqueuepb.TaskQueue{Name: protocol.ClusterQueue(own)}}, false},
		"complete own task":          {&workflowservice.RespondActivityTaskCompletedRequest{Namespace: "default", TaskToken: wrapped}, true},
		"complete other's task":      {&workflowservice.RespondActivityTaskCompletedRequest{Namespace: "default", TaskToken: othersToken}, false},
		"heartbeat other's task":     {&workflowservice.RecordActivityTaskHeartbeatRequest{Namespace: "default", TaskToken: othersToken}, false},
		"complete by ID":             {&workflowservice.RespondActivityTaskCompletedByIdRequest{Namespace: "default", WorkflowId: protocol.ClusterID(own)}, false},
		"own heartbeat":              {signal(protocol.ClusterID(own), protocol.SignalHeartbeat, protocol.Heartbeat{}), true},
		"other's heartbeat":          {signal(protocol.ClusterID(other), protocol.SignalHeartbeat, protocol.Heartbeat{}), false},
		"own workflow, other signal": {signal(protocol.ClusterID(own), protocol.SignalAgentDefaults, nil), false},
		"live about itself":          {signal(gitrepo, protocol.SignalLive, status.LiveSignal{Cluster: own}), true},
		"live about another":         {signal(gitrepo, protocol.SignalLive, status.LiveSignal{Cluster: other}), false},
		"live batching another":      {signal(gitrepo, protocol.SignalLive, status.LiveSignal{Cluster: own, More: []status.LiveSignal{{Cluster: other}}}), false},
		"live claiming contact":      {signal(gitrepo, protocol.SignalLive, status.LiveSignal{Cluster: own, Contact: &status.ClusterContact{Cluster: own}}), false},
		"live to a cluster":          {signal(protocol.ClusterID(other), protocol.SignalLive, status.LiveSignal{Cluster: own}), false},
		"own downstream":             {update(protocol.ClusterID(own), protocol.UpdateDownstream), true},
		"other's downstream":         {update(protocol.ClusterID(other), protocol.UpdateDownstream), false},
		"publish keys":               {update(protocol.KeysID, protocol.UpdatePublishKeys), false},
		"start workflow":             {&workflowservice.StartWorkflowExecutionRequest{Namespace: "default", WorkflowId: protocol.ClusterID(own)}, false},
		"history":                    {&workflowservice.GetWorkflowExecutionHistoryRequest{Namespace: "default", Execution: exec(protocol.ClusterID(own))}, false},
		"query own":                  {&workflowservice.QueryWorkflowRequest{Namespace: "default", Execution: exec(protocol.ClusterID(own))}, false},
		"terminate":                  {&workflowservice.TerminateWorkflowExecutionRequest{Namespace: "default", WorkflowExecution: exec(protocol.ClusterID(own))}, false},
	} {
		t.Run(name, func(t *testing.T) {
			err := s.authorize(own, tc.req)
			if tc.allow {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, errDenied)
		})
	}
	// An allowed answer carries Temporal's token on.
	req := &workflowservice.RespondActivityTaskFailedRequest{Namespace: "default", TaskToken: wrapped}
	require.NoError(t, s.authorize(own, req))
	assert.Equal(t, []byte("t"), req.TaskToken)
}

func TestGrants(t *testing.T) {
	g := newGrants()
	in := payloads(t, map[string]any{"cluster": "cluster-1", "bundles": []any{
		map[string]any{"manifestID": "s-abc", "optionsHash": "h1"}, map[string]any{"manifestID": "s-def"}}})
	big, err := codec.Compression.Encode(in.Payloads)
	require.NoError(t, err)
	g.add("cluster-1", &commonpb.Payloads{Payloads: big})
	assert.True(t, g.allowed("cluster-1", "manifest/s-abc"))
	assert.True(t, g.allowed("cluster-1", "manifest/s-def"))
	assert.True(t, g.allowed("cluster-1", "options/h1"))
	assert.False(t, g.allowed("cluster-2", "manifest/s-abc"), "another cluster")
	assert.False(t, g.allowed("cluster-1", "options/s-abc"), "another kind")
	g.add("cluster-1", payloads(t, map[string]any{"sets": []any{map[string]any{"releases": []any{map[string]any{"optionsKey": "h9"}}}}}))
	assert.True(t, g.allowed("cluster-1", "options/h9"), "a watch's options")
}
