// Package history turns Temporal workflow histories into text a test can
// search, for instance for secrets that must never reach Temporal.
//
// Searching the protobuf text or JSON of an event is not enough: a
// payload's data (activity inputs and results, signal and update
// arguments, memo, search attributes, headers, failure details) is bytes,
// which protojson writes in base64 and the text format escapes, so a token
// inside an activity input would not be found. Text decodes every payload
// as well, through a payload codec first when given one (WithCodec), so
// the text of an encrypted history is its plaintext. The package is for
// tests only.
package history

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/flotilla-gitops/flotilla/internal/codec"
)

// payloadName is the full name of common.v1.Payload.
var payloadName = (&commonpb.Payload{}).ProtoReflect().Descriptor().FullName()

// Option configures Text and RunText.
type Option func(*writer)

// WithCodec decodes every payload with c (e.g. package codec's decryption)
// before reading it. A payload c fails to decode makes Text fail: an
// audit must not skip what it cannot read.
func WithCodec(c converter.PayloadCodec) Option {
	return func(w *writer) { w.codec = c }
}

// Text returns events as searchable text. For each event it holds:
//   - the event as protojson (every string field);
//   - every bytes field anywhere in the event, raw (a JSON payload's data
//     is then its plain JSON);
//   - every common.v1.Payload anywhere in the event, decoded with the
//     codec of WithCodec, if any, and then with the SDK's default data
//     converter: the decoded data raw, its ToString form, and the decoded
//     value with each string written unescaped; a string that is valid
//     standard base64 (how encoding/json writes a []byte) is written
//     decoded as well.
//
// Payloads are found by walking each event's fields, so no event type or
// field is left out, including ones added to Temporal's API later.
func Text(events []*historypb.HistoryEvent, opts ...Option) (string, error) {
	w := &writer{dc: converter.GetDefaultDataConverter()}
	for _, o := range opts {
		o(w)
	}
	for _, ev := range events {
		js, err := protojson.Marshal(ev)
		if err != nil {
			return "", fmt.Errorf("event %d: %w", ev.GetEventId(), err)
		}
		w.line(string(js))
		w.message(ev.ProtoReflect())
		if w.err != nil {
			return "", fmt.Errorf("event %d: %w", ev.GetEventId(), w.err)
		}
	}
	return w.b.String(), nil
}

// RunText is Text of the history of one run of workflow id (runID empty:
// the latest run).
func RunText(ctx context.Context, c client.Client, id, runID string, opts ...Option) (string, error) {
	var events []*historypb.HistoryEvent
	it := c.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return "", fmt.Errorf("history of %s (run %q): %w", id, runID, err)
		}
		events = append(events, ev)
	}
	text, err := Text(events, opts...)
	if err != nil {
		return "", fmt.Errorf("history of %s (run %q): %w", id, runID, err)
	}
	return text, nil
}

// writer accumulates the text of events.
type writer struct {
	dc    converter.DataConverter
	codec converter.PayloadCodec // nil: payloads are read as stored
	b     strings.Builder
	err   error // the first payload the codec failed to decode
}

func (w *writer) line(s string) {
	w.b.WriteString(s)
	w.b.WriteByte('\n')
}

// message writes m's bytes fields and decoded payloads, recursively.
func (w *writer) message(m protoreflect.Message) {
	if p, ok := m.Interface().(*commonpb.Payload); ok && m.Descriptor().FullName() == payloadName {
		w.payload(p)
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList():
			l := v.List()
			for i := range l.Len() {
				w.field(fd, l.Get(i))
			}
		case fd.IsMap():
			v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
				w.field(fd.MapValue(), mv)
				return true
			})
		default:
			w.field(fd, v)
		}
		return true
	})
}

// field writes one value of field fd: a message recursively, bytes raw.
func (w *writer) field(fd protoreflect.FieldDescriptor, v protoreflect.Value) {
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		w.message(v.Message())
	case protoreflect.BytesKind:
		w.line(string(v.Bytes()))
	}
}

// payload writes p as the codec, if any, and the default data converter
// decode it.
func (w *writer) payload(p *commonpb.Payload) {
	if w.codec != nil {
		dec, err := w.codec.Decode([]*commonpb.Payload{p})
		if err == nil && len(dec) != 1 {
			err = fmt.Errorf("codec returned %d payloads for 1", len(dec))
		}
		if err != nil {
			if w.err == nil {
				w.err = fmt.Errorf("decode payload: %w", err)
			}
			return
		}
		// The walk wrote the stored bytes; these are the decoded ones.
		p = dec[0]
		w.line(string(p.GetData()))
	}
	// Large payloads are compressed under any encryption: what they say
	// is in the plain text only.
	dec, err := codec.Compression.Decode([]*commonpb.Payload{p})
	if err != nil {
		if w.err == nil {
			w.err = fmt.Errorf("decompress payload: %w", err)
		}
		return
	}
	if dec[0] != p {
		p = dec[0]
		w.line(string(p.GetData()))
	}
	w.line(w.dc.ToString(p))
	var v any
	if err := w.dc.FromPayload(p, &v); err == nil {
		w.value(v)
	}
}

// value writes a decoded payload value, strings unescaped.
func (w *writer) value(v any) {
	switch x := v.(type) {
	case string:
		w.line(x)
		if d, err := base64.StdEncoding.DecodeString(x); err == nil && len(d) > 0 {
			w.line(string(d))
		}
	case []byte:
		w.line(string(x))
	case []any:
		for _, e := range x {
			w.value(e)
		}
	case map[string]any:
		for k, e := range x {
			w.line(k)
			w.value(e)
		}
	default:
		w.line(fmt.Sprint(x))
	}
}
