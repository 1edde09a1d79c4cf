package history

import (
	"crypto/rand"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	failurepb "go.temporal.io/api/failure/v1"
	historypb "go.temporal.io/api/history/v1"
	updatepb "go.temporal.io/api/update/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/flotilla-gitops/flotilla/internal/codec"
	"github.com/flotilla-gitops/flotilla/internal/keyring"
)

// A token in any payload of a history is found by Text, though the
// event's protojson (what a grep of the history used to search) hides it.
func TestTextFindsSecretsInPayloads(t *testing.T) {
	const token = "tok-7Qx2mZ9aLk3vB8wR"
	dc := converter.GetDefaultDataConverter()
	payload := func(v any) *commonpb.Payload {
		p, err := dc.ToPayload(v)
		require.NoError(t, err)
		return p
	}
	payloads := func(v any) *commonpb.Payloads { return &commonpb.Payloads{Payloads: []*commonpb.Payload{payload(v)}} }
	// An activity input the way a leak would look: a string field, and a
	// kubeconfig as []byte (base64 inside the JSON, inside the payload).
	type deployInput struct {
		Cluster    string
		Token      string
		Kubeconfig []byte
	}
	fields := map[string]*commonpb.Payload{"k": payload("bearer " + token)}
	tests := map[string]*historypb.HistoryEvent{
		"activity input string": {Attributes: &historypb.HistoryEvent_ActivityTaskScheduledEventAttributes{
			ActivityTaskScheduledEventAttributes: &historypb.ActivityTaskScheduledEventAttributes{
				Input: payloads(deployInput{Cluster: "c1", Token: token})}}},
		"activity input []byte": {Attributes: &historypb.HistoryEvent_ActivityTaskScheduledEventAttributes{
			ActivityTaskScheduledEventAttributes: &historypb.ActivityTaskScheduledEventAttributes{
				Input: payloads(deployInput{Cluster: "c1", Kubeconfig: []byte("users:\n- user:\n    token: " + token + "\n")})}}},
		"activity header": {Attributes: &historypb.HistoryEvent_ActivityTaskScheduledEventAttributes{
			ActivityTaskScheduledEventAttributes: &historypb.ActivityTaskScheduledEventAttributes{
				Header: &commonpb.Header{Fields: fields}}}},
		"activity result": {Attributes: &historypb.HistoryEvent_ActivityTaskCompletedEventAttributes{
			ActivityTaskCompletedEventAttributes: &historypb.ActivityTaskCompletedEventAttributes{Result: payloads(token)}}},
		"activity failure details": {Attributes: &historypb.HistoryEvent_ActivityTaskFailedEventAttributes{
			ActivityTaskFailedEventAttributes: &historypb.ActivityTaskFailedEventAttributes{Failure: &failurepb.Failure{
				Message: "deploy failed",
				FailureInfo: &failurepb.Failure_ApplicationFailureInfo{ApplicationFailureInfo: &failurepb.ApplicationFailureInfo{
					Details: payloads(map[string]string{"auth": token})}}}}}},
		"signal": {Attributes: &historypb.HistoryEvent_WorkflowExecutionSignaledEventAttributes{
			WorkflowExecutionSignaledEventAttributes: &historypb.WorkflowExecutionSignaledEventAttributes{
				SignalName: "push", Input: payloads([]string{"x", token})}}},
		"update": {Attributes: &historypb.HistoryEvent_WorkflowExecutionUpdateAcceptedEventAttributes{
			WorkflowExecutionUpdateAcceptedEventAttributes: &historypb.WorkflowExecutionUpdateAcceptedEventAttributes{
				AcceptedRequest: &updatepb.Request{Input: &updatepb.Input{Name: "register", Args: payloads(token)}}}}},
		"memo": {Attributes: &historypb.HistoryEvent_WorkflowExecutionStartedEventAttributes{
			WorkflowExecutionStartedEventAttributes: &historypb.WorkflowExecutionStartedEventAttributes{
				Memo: &commonpb.Memo{Fields: fields}}}},
		"search attributes": {Attributes: &historypb.HistoryEvent_UpsertWorkflowSearchAttributesEventAttributes{
			UpsertWorkflowSearchAttributesEventAttributes: &historypb.UpsertWorkflowSearchAttributesEventAttributes{
				SearchAttributes: &commonpb.SearchAttributes{IndexedFields: fields}}}},
		"workflow result": {Attributes: &historypb.HistoryEvent_WorkflowExecutionCompletedEventAttributes{
			WorkflowExecutionCompletedEventAttributes: &historypb.WorkflowExecutionCompletedEventAttributes{Result: payloads(token)}}},
	}
	for name, ev := range tests {
		t.Run(name, func(t *testing.T) {
			js, err := protojson.Marshal(ev)
			require.NoError(t, err)
			require.NotContains(t, string(js), token, "protojson hides payload data")

			text, err := Text([]*historypb.HistoryEvent{ev})
			require.NoError(t, err)
			assert.Contains(t, text, token)
		})
	}

	clean, err := Text([]*historypb.HistoryEvent{{Attributes: &historypb.HistoryEvent_ActivityTaskScheduledEventAttributes{
		ActivityTaskScheduledEventAttributes: &historypb.ActivityTaskScheduledEventAttributes{Input: payloads(deployInput{Cluster: "c1"})}}}})
	require.NoError(t, err)
	assert.NotContains(t, clean, token)
	assert.Contains(t, clean, "c1")
}

// With the keys' codec, Text reads the plaintext of an encrypted history;
// without it, the token stays hidden; with a codec that lacks the key,
// Text fails rather than skip the payload.
func TestTextWithCodec(t *testing.T) {
	const token = "tok-Vb81xQ0pLm"
	newCodec := func(id string) *codec.Codec {
		k := keyring.Key{ID: id}
		_, err := rand.Read(k.Bytes[:])
		require.NoError(t, err)
		ring, err := keyring.New(k)
		require.NoError(t, err)
		c, err := codec.New(ring)
		require.NoError(t, err)
		return c
	}
	c := newCodec("fk-1")
	dc, err := converter.GetDefaultDataConverter().ToPayloads(map[string]string{"token": token}, "plain-"+token)
	require.NoError(t, err)
	enc, err := c.Encode(dc.Payloads[:1])
	require.NoError(t, err)
	// An encrypted payload next to a plain one, as after turning
	// encryption on mid-history.
	events := []*historypb.HistoryEvent{{EventId: 5, Attributes: &historypb.HistoryEvent_ActivityTaskScheduledEventAttributes{
		ActivityTaskScheduledEventAttributes: &historypb.ActivityTaskScheduledEventAttributes{
			Input: &commonpb.Payloads{Payloads: []*commonpb.Payload{enc[0], dc.Payloads[1]}}}}}}

	text, err := Text(events)
	require.NoError(t, err)
	assert.NotContains(t, text, `"token":"`+token)
	assert.Contains(t, text, "plain-"+token)

	text, err = Text(events, WithCodec(c))
	require.NoError(t, err)
	assert.Contains(t, text, `"token":"`+token)
	assert.Contains(t, text, "plain-"+token)

	_, err = Text(events, WithCodec(newCodec("fk-2")))
	require.ErrorIs(t, err, codec.ErrUnknownKey)
	assert.ErrorContains(t, err, "event 5")
}
