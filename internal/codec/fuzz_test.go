package codec_test

import (
	"bytes"
	"errors"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"

	"github.com/flotilla-gitops/flotilla/internal/codec"
	"github.com/flotilla-gitops/flotilla/internal/keyring"
)

// fuzzKey is fixed, so that a saved failing input replays: seeds sealed
// with it open, and mutations of them reach the code past the tag check
// only if they keep it intact.
var fuzzKey = keyring.Key{ID: "fk-fuzz", Bytes: [32]byte{1, 2, 3, 4, 5, 6, 7, 8, 9}}

// fuzzConverters are the data converters a payload from Temporal goes
// through: with the key (lax and strict) and without.
type fuzzConverters struct {
	codec          *codec.Codec
	lax, strict    converter.DataConverter
	keyless        converter.DataConverter
	encodedSamples []*commonpb.Payload
}

func newFuzzConverters(f *testing.F) fuzzConverters {
	ring, err := keyring.New(fuzzKey)
	if err != nil {
		f.Fatal(err)
	}
	c, err := codec.New(ring)
	if err != nil {
		f.Fatal(err)
	}
	fc := fuzzConverters{codec: c, keyless: codec.NewKeylessDataConverter()}
	if fc.lax, err = codec.NewDataConverter(ring, codec.Options{}); err != nil {
		f.Fatal(err)
	}
	if fc.strict, err = codec.NewDataConverter(ring, codec.Options{RequireEncryption: true}); err != nil {
		f.Fatal(err)
	}
	// The fixtures: what the converters write for the values the tests
	// use, small, compressed and sealed.
	for _, v := range []any{"value", deployInput{Cluster: "c1", Token: "t"}, nil, []byte{0, 1}, fleetStatus(600)} {
		for _, dc := range []converter.DataConverter{fc.lax, fc.keyless} {
			p, err := dc.ToPayload(v)
			if err != nil {
				f.Fatal(err)
			}
			fc.encodedSamples = append(fc.encodedSamples, p)
		}
	}
	return fc
}

// FuzzDecode: any payload, however made up, decodes or fails with an
// error; never a panic, never a plain payload past RequireEncryption.
// The input is a marshalled Payload, or, when it is not one, the payload
// of that encoding, key ID and data.
func FuzzDecode(f *testing.F) {
	fc := newFuzzConverters(f)
	for _, p := range fc.encodedSamples {
		raw, err := proto.Marshal(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw, string(p.GetMetadata()[converter.MetadataEncoding]), string(p.GetMetadata()[codec.MetadataKeyID]), p.GetData())
	}
	f.Add([]byte{}, codec.EncodingEncrypted, "fk-other", []byte("short"))
	f.Add([]byte{}, codec.EncodingZlib, "", []byte{0x78, 0x9c, 0x03, 0x00})
	f.Fuzz(func(t *testing.T, raw []byte, encoding, keyID string, data []byte) {
		p := &commonpb.Payload{}
		if proto.Unmarshal(raw, p) != nil || len(raw) == 0 {
			p = &commonpb.Payload{Metadata: map[string][]byte{converter.MetadataEncoding: []byte(encoding),
				codec.MetadataKeyID: []byte(keyID)}, Data: data}
		}
		in := proto.Clone(p).(*commonpb.Payload)
		_, _ = fc.codec.Decode([]*commonpb.Payload{p})          // only panics matter
		_, _ = codec.Compression.Decode([]*commonpb.Payload{p}) // only panics matter
		var v any
		_ = fc.lax.FromPayload(p, &v)     // only panics matter
		_ = fc.keyless.FromPayload(p, &v) // only panics matter
		err := fc.strict.FromPayload(p, &v)
		var plain *codec.PlaintextError
		if !codec.Encrypted(p) && !errors.As(err, &plain) {
			t.Fatalf("a payload of encoding %q passed RequireEncryption: %v", p.GetMetadata()[converter.MetadataEncoding], err)
		}
		if !proto.Equal(in, p) {
			t.Fatal("decoding modified its input")
		}
	})
}

// FuzzRoundTrip: whatever payload the SDK's converter hands the codecs,
// they encode it sealed and decode it back to the same payload. (The
// fuzzer's inputs stay under the 256 KiB that Compression compresses;
// TestCompression_FleetPayloadFits round-trips compressed ones.) Payloads
// already in a codec's own encoding (binary/zlib, binary/encrypted) are
// codec output, never converter output, and are skipped.
func FuzzRoundTrip(f *testing.F) {
	fc := newFuzzConverters(f)
	for _, v := range []any{"value", deployInput{Cluster: "c1", Token: "t"}, nil, []byte{0, 1}} {
		p, err := converter.GetDefaultDataConverter().ToPayload(v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(p.GetMetadata()[converter.MetadataEncoding]), p.GetData())
	}
	f.Fuzz(func(t *testing.T, encoding string, data []byte) {
		if encoding == codec.EncodingZlib || encoding == codec.EncodingEncrypted {
			t.Skip("a codec's own encoding")
		}
		p := &commonpb.Payload{Metadata: map[string][]byte{converter.MetadataEncoding: []byte(encoding)}, Data: data}
		// The data converter's chain: compress, then seal.
		small, err := codec.Compression.Encode([]*commonpb.Payload{p})
		if err != nil {
			t.Fatal(err)
		}
		sealed, err := fc.codec.Encode(small)
		if err != nil {
			t.Fatal(err)
		}
		if !codec.Encrypted(sealed[0]) {
			t.Fatal("encoded payload is not encrypted")
		}
		if len(data) >= 8 && bytes.Contains(sealed[0].GetData(), data) {
			t.Fatal("the sealed payload holds the plain data")
		}
		opened, err := fc.codec.Decode(sealed)
		if err != nil {
			t.Fatal(err)
		}
		back, err := codec.Compression.Decode(opened)
		if err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(p, back[0]) {
			t.Fatalf("round trip changed a payload of encoding %q and %d bytes", encoding, len(data))
		}
	})
}
